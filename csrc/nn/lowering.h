// Keras layers lowered to core layers: what Python sends (one config per Keras layer, a
// "position" of the model's graph, class_name = the Keras class) becomes the configs of the core
// layers factory.h builds, and everything the user sees per position (output shape, weights with
// their names and kinds, parameter counts, trainable flags) is read back through the same map.
//
// The rules (each position keeps its number of core layers whatever its neighbours are, so the
// core node of a position's first layer, which keys its random draws, depends on the model only):
//   Conv2D, Dense     activation 'relu' fused into the layer; 'linear' (or none): the layer alone;
//                     any other activation (softmax included) a following core Activation with
//                     Keras' default parameter of that name (leaky_relu 0.2, elu 1.0)
//   DepthwiseConv2D   the core layer, then a core Activation unless 'linear' (no fused ReLU)
//   SeparableConv2D   a DepthwiseConv2D (no bias, kernel "depthwise_kernel"), then a 1x1 Conv2D
//                     (kernel "pointwise_kernel", the bias, the activation as Conv2D's): Keras'
//                     three weights in Keras' order
//   Normalization     mean/variance given: a Rescaling by 1/max(sqrt(variance), epsilon) and
//                     -mean times that; else the core Normalization (weights mean, variance, count)
//   Activation        a core Activation (the same default parameter)
//   ReLU              max_value 6 (no slope, no threshold): Activation relu6; only negative_slope
//                     > 0: leaky_relu with that slope; defaults: relu; any other combination of
//                     max_value, negative_slope and threshold: the core ReLUClip (ops/relu_clip.h)
//   LeakyReLU, ELU    Activation leaky_relu (negative_slope, default 0.3), elu (alpha, default 1)
//   Softmax           Activation softmax (axis -1 only)
//   BatchNormalization  computes a following ReLU itself when that ReLU is plain (Activation
//                     'relu', or ReLU() with its defaults), reads only this layer, and is this
//                     layer's only reader; the ReLU's position is then an identity (a view, core
//                     name "Identity"): one pass over the activations instead of two
//   anything else     the core layer of the same class and config (factory.h)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/config.h"
#include "nn/model.h"

namespace hpcnn::nn {

// Per position, the positions it reads (kModelInput: the model's input); none: a chain.
using PositionInputs = std::optional<std::vector<std::vector<int>>>;

struct Lowering {
  std::vector<Config> core;                    // the core layers' configs, in node order
  std::vector<std::vector<int>> core_inputs;   // per core node, the core nodes it reads
  std::vector<int> begin;                      // per position its first core node; one more: core.size()
  std::vector<std::vector<std::string>> names; // per position, its core layers ("Conv2D+relu", "Identity")
  bool chain = true;                           // built without inputs (a Sequential)

  int positions() const { return static_cast<int>(names.size()); }
  int end(int position) const { return begin.at(static_cast<size_t>(position) + 1); }
};

// ValueError for an input that is not -1 or an earlier position, or a count of inputs that is
// not one list per layer (the graph's other rules are checked when the model is built, nn/graph.h).
Lowering lower(const std::vector<Config>& layers, const PositionInputs& inputs);

// The model of a lowering (its core layers built by factory.h).
std::unique_ptr<Model> build_model(const Shape& input_shape, const Lowering& lowering, uint64_t seed);

// Per position, read from a model built from `lowering`:
std::vector<Shape> position_output_shapes(const Model& model, const Lowering& lowering);
std::vector<std::vector<ParamSpec>> position_weights(const Model& model, const Lowering& lowering);
// Per core node, from one flag per position (Model::set_trainable's argument).
std::vector<bool> core_trainable(const std::vector<bool>& per_position, const Lowering& lowering);

// One Keras layer on its own (a layer called on symbolic tensors): its output shape and its
// weights for inputs of these per-sample shapes (a merge layer takes them all). ValueError when
// they do not fit.
Shape layer_output_shape(const Config& layer, const std::vector<Shape>& input_shapes);
std::vector<ParamSpec> layer_weights(const Config& layer, const std::vector<Shape>& input_shapes);

long long param_count(const std::vector<ParamSpec>& specs);

}  // namespace hpcnn::nn
