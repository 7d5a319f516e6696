// The model's pieces built from configuration (config.h): layers by Keras class name, the
// optimizer by name, the loss by Keras' string. Unknown names and bad values are ValueErrors.
//   layer     class_name: Conv2D (filters, kernel_size, strides, padding, activation 'relu'|'linear',
//             use_bias = True), MaxPooling2D and AveragePooling2D (pool_size, strides, padding),
//             GlobalAveragePooling2D and GlobalMaxPooling2D (keepdims = False), ZeroPadding2D
//             (padding: [top, bottom, left, right]), Flatten, Dense (units, activation 'relu'|'linear',
//             use_bias = True), Dropout (rate), Activation (activation: 'softmax' or a name of
//             ops/activation.h; alpha = 0: leaky_relu's slope, elu's alpha), Rescaling (scale, offset:
//             a number or one per channel), BatchNormalization (axis, momentum, epsilon, center, scale,
//             activation 'relu'|'linear' = 'linear': a fused ReLU)
//   optimizer name: Adam (learning_rate, beta_1, beta_2, epsilon),
//             SGD (learning_rate, momentum, nesterov)
//   loss      "categorical_crossentropy" | "sparse_categorical_crossentropy"
#pragma once

#include <memory>
#include <string>

#include "nn/config.h"
#include "nn/layer.h"
#include "nn/optimizer.h"
#include "nn/sequential.h"

namespace hpcnn::nn {

LayerPtr make_layer(const Config& cfg);
std::unique_ptr<Optimizer> make_optimizer(const Config& cfg);
Loss parse_loss(const std::string& name);

}  // namespace hpcnn::nn
