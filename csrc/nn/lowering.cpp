#include "nn/lowering.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/errors.h"
#include "nn/factory.h"

namespace hpcnn::nn {

namespace {

// A core layer of one position: its config and how core_layers names it.
struct CoreLayer {
  Config config;
  std::string name;
};

Config core_config(const std::string& class_name) {
  Config c("layer config");
  c.set("class_name", class_name);
  return c;
}

// Keras' default parameter of an activation named as a function (keras.activations.<name>).
double default_alpha(const std::string& activation) {
  if (activation == "leaky_relu") return 0.2;
  if (activation == "elu") return 1.0;
  return 0.0;
}

CoreLayer activation_layer(const std::string& activation, double alpha) {
  Config c = core_config("Activation");
  c.set("activation", activation);
  c.set("alpha", alpha);
  return {std::move(c), "Activation:" + activation};
}

// The identity a fused ReLU's position becomes: an Activation 'linear', a view of its input.
CoreLayer identity_layer() {
  Config c = core_config("Activation");
  c.set("activation", std::string("linear"));
  return {std::move(c), "Identity"};
}

bool is_linear(const std::string& activation) {
  return activation.empty() || activation == "linear" || activation == "None";
}

// Conv2D or Dense: the layer with a fused ReLU or none, then any other activation on its own.
std::vector<CoreLayer> with_activation(const Config& layer, const std::string& kind) {
  const std::string activation = layer.get_string_or("activation", "linear");
  const bool relu = activation == "relu";
  Config c = layer;
  c.set("activation", std::string(relu ? "relu" : "linear"));
  std::vector<CoreLayer> out{{std::move(c), relu ? kind + "+relu" : kind}};
  if (!relu && !is_linear(activation)) out.push_back(activation_layer(activation, default_alpha(activation)));
  return out;
}

CoreLayer relu_layer(const Config& layer) {
  const double slope = layer.has("negative_slope") ? layer.get_double("negative_slope") : 0.0;
  const double threshold = layer.has("threshold") ? layer.get_double("threshold") : 0.0;
  HPCNN_CHECK_ARG(slope >= 0, "ReLU: negative_slope must be >= 0, got ", slope);
  const bool has_max = layer.has("max_value");
  const double max_value = has_max ? layer.get_double("max_value") : 0.0;
  HPCNN_CHECK_ARG(!has_max || max_value >= 0, "ReLU: max_value must be >= 0, got ", max_value);
  if (threshold == 0 && !has_max) return slope > 0 ? activation_layer("leaky_relu", slope) : activation_layer("relu", 0.0);
  if (threshold == 0 && max_value == 6 && slope == 0) return activation_layer("relu6", 0.0);
  // Any other combination: the general form (ops/relu_clip.h).
  Config c = core_config("ReLUClip");
  c.set("negative_slope", slope);
  c.set("threshold", threshold);
  if (has_max) c.set("max_value", max_value);
  return {std::move(c), "ReLUClip"};
}

// DepthwiseConv2D: the layer, then its activation (if not linear) on its own.
std::vector<CoreLayer> depthwise_position(const Config& layer) {
  const std::string activation = layer.get_string_or("activation", "linear");
  Config c = layer;
  c.set("activation", std::string("linear"));
  std::vector<CoreLayer> out{{std::move(c), "DepthwiseConv2D"}};
  if (!is_linear(activation)) out.push_back(activation_layer(activation, default_alpha(activation)));
  return out;
}

// SeparableConv2D: a DepthwiseConv2D without bias (its kernel "depthwise_kernel"), then a 1x1
// Conv2D (kernel "pointwise_kernel", the bias, a fused ReLU), then any other activation: Keras'
// weights in Keras' order (depthwise_kernel, pointwise_kernel, bias).
std::vector<CoreLayer> separable_position(const Config& layer) {
  Config d = core_config("DepthwiseConv2D");
  d.set("depth_multiplier", static_cast<long long>(layer.get_int("depth_multiplier")));
  for (const char* key : {"kernel_size", "strides", "dilation_rate"}) {
    if (!layer.has(key)) continue;
    const auto [a, b] = layer.get_int_pair(key);
    d.set(key, std::vector<long long>{a, b});
  }
  d.set("padding", layer.get_string("padding"));
  d.set("use_bias", false);
  d.set("kernel_name", std::string("depthwise_kernel"));
  Config p = core_config("Conv2D");
  p.set("filters", static_cast<long long>(layer.get_int("filters")));
  p.set("kernel_size", std::vector<long long>{1, 1});
  p.set("strides", std::vector<long long>{1, 1});
  p.set("padding", std::string("valid"));
  p.set("use_bias", layer.get_bool_or("use_bias", true));
  p.set("kernel_name", std::string("pointwise_kernel"));
  p.set("activation", layer.get_string_or("activation", "linear"));
  std::vector<CoreLayer> out{{std::move(d), "DepthwiseConv2D"}};
  for (CoreLayer& l : with_activation(p, "Conv2D")) out.push_back(std::move(l));
  return out;
}

// Normalization (axis -1, invert False): with mean= and variance= given, a Rescaling by the
// constants Keras computes with, 1 / max(sqrt(variance), epsilon) and -mean times that (Keras
// then has no weights either); else the core Normalization with its three weights.
std::vector<CoreLayer> normalization_position(const Config& layer) {
  HPCNN_CHECK_ARG(!layer.get_bool_or("invert", false), "Normalization: invert=True is not supported (hpcnn "
                  "normalizes: invert=False)");
  if (!layer.has("mean")) return {{layer, "Normalization"}};
  const std::vector<float> mean = layer.get_float_list("mean"), var = layer.get_float_list("variance");
  HPCNN_CHECK_ARG(mean.size() == var.size(), "Normalization: mean and variance must have the same shape, got ",
                  mean.size(), " and ", var.size(), " values");
  const float eps = layer.get_float_or("epsilon", 1e-7f);
  std::vector<double> scale, offset;
  for (size_t j = 0; j < mean.size(); ++j) {
    HPCNN_CHECK_ARG(std::isfinite(mean[j]) && std::isfinite(var[j]) && var[j] >= 0.f, "Normalization: mean must be "
                    "finite and variance finite and >= 0, got mean ", mean[j], ", variance ", var[j]);
    const float s = 1.f / std::max(std::sqrt(var[j]), eps);
    scale.push_back(s);
    offset.push_back(-mean[j] * s);
  }
  Config c = core_config("Rescaling");
  c.set("scale", scale);
  c.set("offset", offset);
  return {{std::move(c), "Rescaling"}};
}

// One position's core layers, before the fusions across positions.
std::vector<CoreLayer> lower_position(const Config& layer) {
  const std::string kind = layer.get_string("class_name");
  if (kind == "Conv2D" || kind == "Dense") return with_activation(layer, kind);
  if (kind == "DepthwiseConv2D") return depthwise_position(layer);
  if (kind == "Normalization") return normalization_position(layer);
  if (kind == "SeparableConv2D") return separable_position(layer);
  if (kind == "Activation") {
    const std::string activation = layer.get_string("activation");
    return {activation_layer(activation, layer.has("alpha") ? layer.get_double("alpha") : default_alpha(activation))};
  }
  if (kind == "ReLU") return {relu_layer(layer)};
  if (kind == "LeakyReLU")
    return {activation_layer("leaky_relu", layer.has("negative_slope") ? layer.get_double("negative_slope") : 0.3)};
  if (kind == "ELU") return {activation_layer("elu", layer.has("alpha") ? layer.get_double("alpha") : 1.0)};
  if (kind == "Softmax") {
    HPCNN_CHECK_ARG(!layer.has("axis") || layer.get_int("axis") == -1, "Softmax: axis=", layer.get_int("axis"),
                    " is not supported: hpcnn takes the softmax over the last axis (axis=-1)");
    return {activation_layer("softmax", 0.0)};
  }
  if (kind == "BatchNormalization") {
    HPCNN_CHECK_ARG(!layer.has("activation"), "BatchNormalization takes no 'activation' (a ReLU that follows it is "
                    "fused by the core)");
    Config c = layer;
    c.set("activation", std::string("linear"));
    return {{std::move(c), kind}};
  }
  return {{layer, kind}};
}

// Activation 'relu', or ReLU() with its defaults: what a BatchNormalization computes itself.
bool is_plain_relu(const Config& layer) {
  const std::string kind = layer.get_string("class_name");
  if (kind == "Activation") return layer.get_string("activation") == "relu";
  if (kind != "ReLU") return false;
  const auto zero = [&](const char* key) { return !layer.has(key) || layer.get_double(key) == 0; };
  return !layer.has("max_value") && zero("negative_slope") && zero("threshold");
}

std::string position_name(const std::vector<Config>& layers, int i) {
  return cat("layer ", i, " (", layers[static_cast<size_t>(i)].get_string("class_name"), ")");
}

// Per position, the positions it reads, checked: each is the model's input or an earlier position.
std::vector<std::vector<int>> checked_inputs(const std::vector<Config>& layers, const PositionInputs& inputs) {
  const int n = static_cast<int>(layers.size());
  std::vector<std::vector<int>> out;
  if (!inputs) {
    for (int i = 0; i < n; ++i) out.push_back({i - 1});
    return out;
  }
  HPCNN_CHECK_ARG(inputs->size() == layers.size(), "inputs: one list per layer, got ", inputs->size(), " for ", n,
                  " layers");
  for (int i = 0; i < n; ++i) {
    const std::vector<int>& in = (*inputs)[static_cast<size_t>(i)];
    HPCNN_CHECK_ARG(!in.empty(), position_name(layers, i), " has no inputs");
    for (size_t s = 0; s < in.size(); ++s)
      HPCNN_CHECK_ARG(in[s] == kModelInput || (in[s] >= 0 && in[s] < i), position_name(layers, i), ": input ", s,
                      " refers to node ", in[s], ", which does not come before it (nodes must be in topological "
                      "order; a graph with a cycle has none)");
    out.push_back(in);
  }
  return out;
}

// The core layers of a position that reads these input shapes, in a chain: each one's input
// shapes (the first takes the position's), built.
struct PositionChain {
  std::vector<LayerPtr> layers;
  std::vector<std::vector<Shape>> inputs;
  Shape output;
};

PositionChain position_chain(const Config& layer, const std::vector<Shape>& input_shapes) {
  PositionChain c;
  std::vector<Shape> in = input_shapes;
  for (CoreLayer& l : lower_position(layer)) {
    c.layers.push_back(make_layer(l.config));
    Shape out = node_output_shape(*c.layers.back(), in);
    c.inputs.push_back(std::move(in));
    in = {out};
    c.output = std::move(out);
  }
  return c;
}

}  // namespace

Lowering lower(const std::vector<Config>& layers, const PositionInputs& inputs) {
  const std::vector<std::vector<int>> reads = checked_inputs(layers, inputs);
  const size_t n = layers.size();
  std::vector<std::vector<CoreLayer>> per(n);
  for (size_t i = 0; i < n; ++i) per[i] = lower_position(layers[i]);

  // The fusion: a BatchNormalization whose one reader is a plain ReLU that reads only it.
  std::vector<std::vector<int>> readers(n);
  for (size_t j = 0; j < n; ++j)
    for (int p : reads[j])
      if (p != kModelInput) readers[static_cast<size_t>(p)].push_back(static_cast<int>(j));
  for (size_t i = 0; i < n; ++i) {
    if (layers[i].get_string("class_name") != "BatchNormalization" || readers[i].size() != 1) continue;
    const size_t j = static_cast<size_t>(readers[i][0]);
    if (!is_plain_relu(layers[j]) || reads[j] != std::vector<int>{static_cast<int>(i)}) continue;
    per[i][0].config.set("activation", std::string("relu"));
    per[i][0].name = "BatchNormalization+relu";
    per[j] = {identity_layer()};
  }

  Lowering out;
  out.chain = !inputs.has_value();
  std::vector<int> last(n);  // per position, the core node of its output
  for (size_t i = 0; i < n; ++i) {
    out.begin.push_back(static_cast<int>(out.core.size()));
    std::vector<std::string> names;
    for (size_t k = 0; k < per[i].size(); ++k) {
      std::vector<int> in;
      if (k == 0) {
        for (int p : reads[i]) in.push_back(p == kModelInput ? kModelInput : last[static_cast<size_t>(p)]);
      } else {
        in.push_back(static_cast<int>(out.core.size()) - 1);
      }
      out.core.push_back(std::move(per[i][k].config));
      out.core_inputs.push_back(std::move(in));
      names.push_back(std::move(per[i][k].name));
    }
    last[i] = static_cast<int>(out.core.size()) - 1;
    out.names.push_back(std::move(names));
  }
  out.begin.push_back(static_cast<int>(out.core.size()));
  return out;
}

std::unique_ptr<Model> build_model(const Shape& input_shape, const Lowering& lowering, uint64_t seed) {
  std::vector<LayerPtr> layers;
  for (const Config& c : lowering.core) layers.push_back(make_layer(c));
  if (lowering.chain) return std::make_unique<Model>(input_shape, std::move(layers), seed);
  std::vector<Node> nodes;
  for (size_t i = 0; i < layers.size(); ++i) nodes.push_back(Node{std::move(layers[i]), lowering.core_inputs[i]});
  return std::make_unique<Model>(input_shape, std::move(nodes), seed);
}

std::vector<Shape> position_output_shapes(const Model& model, const Lowering& lowering) {
  std::vector<Shape> out;
  for (int p = 0; p < lowering.positions(); ++p)
    out.push_back(model.output_shapes().at(static_cast<size_t>(lowering.end(p) - 1)));
  return out;
}

std::vector<std::vector<ParamSpec>> position_weights(const Model& model, const Lowering& lowering) {
  const std::vector<std::vector<ParamSpec>> specs = model.weight_specs();
  std::vector<std::vector<ParamSpec>> out(static_cast<size_t>(lowering.positions()));
  for (int p = 0; p < lowering.positions(); ++p)
    for (int k = lowering.begin[static_cast<size_t>(p)]; k < lowering.end(p); ++k)
      out[static_cast<size_t>(p)].insert(out[static_cast<size_t>(p)].end(), specs.at(static_cast<size_t>(k)).begin(),
                                         specs.at(static_cast<size_t>(k)).end());
  return out;
}

std::vector<bool> core_trainable(const std::vector<bool>& per_position, const Lowering& lowering) {
  HPCNN_CHECK_ARG(per_position.size() == static_cast<size_t>(lowering.positions()), "set_trainable: the model has ",
                  lowering.positions(), " layers, got ", per_position.size(), " flags");
  std::vector<bool> out;
  for (int p = 0; p < lowering.positions(); ++p)
    out.insert(out.end(), static_cast<size_t>(lowering.end(p) - lowering.begin[static_cast<size_t>(p)]),
               per_position[static_cast<size_t>(p)]);
  return out;
}

Shape layer_output_shape(const Config& layer, const std::vector<Shape>& input_shapes) {
  return position_chain(layer, input_shapes).output;
}

std::vector<ParamSpec> layer_weights(const Config& layer, const std::vector<Shape>& input_shapes) {
  PositionChain c = position_chain(layer, input_shapes);
  std::vector<ParamSpec> out;
  for (size_t k = 0; k < c.layers.size(); ++k) {
    std::vector<ParamSpec> s = c.layers[k]->param_specs(c.inputs[k].at(0));
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

long long param_count(const std::vector<ParamSpec>& specs) {
  long long n = 0;
  for (const ParamSpec& s : specs) n += shape_numel(s.shape);
  return n;
}

}  // namespace hpcnn::nn
