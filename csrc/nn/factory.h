// The model's pieces built from configuration (config.h): layers by Keras class name, the
// optimizer by name, the loss by Keras' string. Unknown names and bad values are ValueErrors.
//   layer     class_name: Conv2D (filters, kernel_size, strides, padding, activation),
//             MaxPooling2D (pool_size, strides, padding), Flatten, Dense (units, activation),
//             Dropout (rate), Activation (activation); of several inputs: Add, Concatenate (axis)
//   optimizer name: Adam (learning_rate, beta_1, beta_2, epsilon),
//             SGD (learning_rate, momentum, nesterov)
//   loss      "categorical_crossentropy" | "sparse_categorical_crossentropy"
#pragma once

#include <memory>
#include <string>

#include "nn/config.h"
#include "nn/layer.h"
#include "nn/optimizer.h"
#include "nn/loss.h"

namespace hpcnn::nn {

LayerPtr make_layer(const Config& cfg);
std::unique_ptr<Optimizer> make_optimizer(const Config& cfg);
Loss parse_loss(const std::string& name);

}  // namespace hpcnn::nn
