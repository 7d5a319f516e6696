// The model's pieces built from configuration (config.h): core layers by class name (the configs
// nn/lowering.h makes of Keras layers: Python never sends these itself), the optimizer by name,
// the loss by Keras' string. Unknown names and bad values are ValueErrors.
//   layer     class_name: Conv2D (filters, kernel_size, strides, padding, activation 'relu'|'linear',
//             use_bias = True), MaxPooling2D and AveragePooling2D (pool_size, strides, padding),
//             GlobalAveragePooling2D and GlobalMaxPooling2D (keepdims = False), ZeroPadding2D
//             (padding: [top, bottom, left, right]), Flatten, Dense (units, activation 'relu'|'linear',
//             use_bias = True), Dropout (rate), Activation (activation: 'softmax' or a name of
//             ops/activation.h; alpha = 0: leaky_relu's slope, elu's alpha), Rescaling (scale, offset:
//             a number or one per channel), BatchNormalization (axis, momentum, epsilon, center, scale,
//             activation 'relu'|'linear' = 'linear': a fused ReLU, set by the lowering), RandomFlip (mode),
//             RandomTranslation (height_lo, height_hi, width_lo, width_hi, fill_mode, fill_value,
//             interpolation), RandomRotation (factor_lo, factor_hi: fractions of a turn, fill_mode,
//             fill_value, interpolation), RandomZoom (height_lo, height_hi, and width_lo, width_hi
//             or neither: the height's zoom; fill_mode, fill_value, interpolation), RandomCrop
//             (height, width); every augmentation layer: seed (an integer: its own draws, Keras'
//             seed=; absent: the model's) (nn/augmentation.h); of several inputs (nn/
//             merge_layers.h): Add, Concatenate (axis); any layer: kernel_l1, kernel_l2, bias_l1,
//             bias_l2 (Keras' kernel_regularizer / bias_regularizer factors, nn/regularization.h)
//   optimizer name: Adam (learning_rate, beta_1, beta_2, epsilon), AdamW (the same and
//             weight_decay), SGD (learning_rate, momentum, nesterov), RMSprop (learning_rate, rho,
//             momentum, epsilon, centered); any optimizer: weight_decay, clipnorm,
//             global_clipnorm, clipvalue, no_decay (weight indices); schedule_class_name and
//             schedule_<argument>: a learning-rate schedule (nn/schedule.h) driving the rate
//   schedule  class_name: ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay,
//             InverseTimeDecay, CosineDecay, CosineDecayRestarts, with Keras' arguments
//   loss      "categorical_crossentropy" | "sparse_categorical_crossentropy"
#pragma once

#include <memory>
#include <string>

#include "nn/config.h"
#include "ops/augment.h"
#include "nn/layer.h"
#include "nn/optimizer.h"
#include "nn/loss.h"

namespace hpcnn::nn {

LayerPtr make_layer(const Config& cfg);
// An augmentation layer's spec (class_name RandomFlip, RandomTranslation, RandomRotation, RandomZoom or
// RandomCrop).
AugmentSpec make_augment_spec(const Config& cfg);
std::unique_ptr<Optimizer> make_optimizer(const Config& cfg);
std::unique_ptr<LearningRateSchedule> make_learning_rate_schedule(const Config& cfg);
Loss parse_loss(const std::string& name);
// A metric's core name (Keras' function name: 'categorical_accuracy', ...); ValueError otherwise.
RowMetric parse_metric(const std::string& name);

}  // namespace hpcnn::nn
