#include "nn/factory.h"

#include <cmath>
#include <optional>
#include <tuple>

#include "core/errors.h"
#include "nn/augmentation.h"
#include "nn/depthwise_layer.h"
#include "nn/layers.h"
#include "nn/merge_layers.h"
#include "nn/normalization_layer.h"
#include "nn/relu_clip_layer.h"
#include "nn/reshape_layer.h"

namespace hpcnn::nn {

namespace {

FillMode parse_fill_mode(const std::string& m, const std::string& layer) {
  if (m == "constant") return FillMode::Constant;
  if (m == "reflect") return FillMode::Reflect;
  if (m == "wrap") return FillMode::Wrap;
  if (m == "nearest") return FillMode::Nearest;
  throw ValueError(cat(layer, ": unknown fill_mode '", m, "': use 'constant', 'reflect', 'wrap' or 'nearest'"));
}

Interpolation parse_interpolation(const std::string& m, const std::string& layer) {
  if (m == "nearest") return Interpolation::Nearest;
  if (m == "bilinear") return Interpolation::Bilinear;
  throw ValueError(cat(layer, ": unknown interpolation '", m, "': use 'nearest' or 'bilinear'"));
}

// An augmentation layer's own seed (Keras' seed=): an integer, absent or None for the model's.
std::optional<uint64_t> layer_seed(const Config& cfg) {
  if (!cfg.has("seed")) return std::nullopt;
  return static_cast<uint64_t>(cfg.get_int64("seed"));  // Python sends seeds >= 2^63 as negatives
}

bool is_linear_activation(const std::string& a) { return a.empty() || a == "linear" || a == "None"; }

bool is_augmentation(const std::string& kind) {
  return kind == "RandomFlip" || kind == "RandomTranslation" || kind == "RandomRotation" || kind == "RandomZoom" ||
         kind == "RandomCrop";
}

LayerPtr make_layer_of_kind(const Config& cfg) {
  const std::string kind = cfg.get_string("class_name");
  if (kind == "Conv2D") {
    auto [kh, kw] = cfg.get_int_pair("kernel_size");
    auto [sh, sw] = cfg.get_int_pair("strides");
    auto conv = std::make_unique<Conv2DLayer>(cfg.get_int("filters"), kh, kw, sh, sw,
                                              parse_padding(cfg.get_string("padding")),
                                              parse_fused_relu(cfg.get_string("activation"), "Conv2D"),
                                              cfg.get_bool_or("use_bias", true));
    // A SeparableConv2D's pointwise half names its kernel as Keras does (nn/lowering.h).
    if (cfg.has("kernel_name")) conv->set_kernel_name(cfg.get_string("kernel_name"));
    return conv;
  }
  if (kind == "DepthwiseConv2D") {
    DepthwiseSpec d;
    d.depth_multiplier = cfg.get_int("depth_multiplier");
    std::tie(d.kh, d.kw) = cfg.get_int_pair("kernel_size");
    std::tie(d.sh, d.sw) = cfg.get_int_pair("strides");
    if (cfg.has("dilation_rate")) std::tie(d.dh, d.dw) = cfg.get_int_pair("dilation_rate");
    d.padding = parse_padding(cfg.get_string("padding"));
    d.use_bias = cfg.get_bool_or("use_bias", true);
    d.kernel_name = cfg.get_string_or("kernel_name", "kernel");
    HPCNN_CHECK_ARG(is_linear_activation(cfg.get_string_or("activation", "linear")),
                    "DepthwiseConv2D: the core layer computes no activation (nn/lowering.h adds one after it)");
    return std::make_unique<DepthwiseConv2DLayer>(std::move(d));
  }
  if (kind == "MaxPooling2D" || kind == "AveragePooling2D") {
    auto [ph, pw] = cfg.get_int_pair("pool_size");
    auto [sh, sw] = cfg.get_int_pair("strides");
    const Padding pad = parse_padding(cfg.get_string("padding"));
    if (kind == "MaxPooling2D") return std::make_unique<MaxPool2DLayer>(ph, pw, sh, sw, pad);
    return std::make_unique<AvgPool2DLayer>(ph, pw, sh, sw, pad);
  }
  if (kind == "GlobalAveragePooling2D" || kind == "GlobalMaxPooling2D")
    return std::make_unique<GlobalPool2DLayer>(kind == "GlobalMaxPooling2D", cfg.get_bool_or("keepdims", false));
  if (kind == "ZeroPadding2D") {
    const std::vector<int> p = cfg.get_int_list("padding", 4);  // top, bottom, left, right
    return std::make_unique<ZeroPadding2DLayer>(p[0], p[1], p[2], p[3]);
  }
  if (kind == "Flatten") return std::make_unique<FlattenLayer>();
  if (kind == "ReLUClip") {
    ReluClipParams p;
    p.negative_slope = cfg.get_float_or("negative_slope", 0.f);
    p.threshold = cfg.get_float_or("threshold", 0.f);
    p.has_max = cfg.has("max_value");
    p.max_value = cfg.get_float_or("max_value", 0.f);
    return std::make_unique<ReluClipLayer>(p);
  }
  if (kind == "Normalization") return std::make_unique<NormalizationLayer>(cfg.get_float_or("epsilon", 1e-7f));
  if (kind == "Reshape") {
    std::vector<long long> target;
    for (double d : cfg.get_floats("target_shape")) {
      HPCNN_CHECK_ARG(d == std::floor(d), "Reshape: target_shape must hold integers, got ", d);
      target.push_back(static_cast<long long>(d));
    }
    return std::make_unique<ReshapeLayer>(std::move(target));
  }
  if (kind == "Dense")
    return std::make_unique<DenseLayer>(cfg.get_int("units"), parse_fused_relu(cfg.get_string("activation"), "Dense"),
                                        cfg.get_bool_or("use_bias", true));
  if (kind == "Dropout") {
    std::vector<long long> noise;  // per sample; 0: the input's size
    if (cfg.has("noise_shape"))
      for (double d : cfg.get_floats("noise_shape")) noise.push_back(static_cast<long long>(d));
    return std::make_unique<DropoutLayer>(cfg.get_float("rate"), std::move(noise));
  }
  if (kind == "Activation")
    return std::make_unique<ActivationLayer>(
        parse_activation(cfg.get_string("activation"), cfg.get_float_or("alpha", 0.f)));
  if (kind == "Rescaling")
    return std::make_unique<RescalingLayer>(cfg.get_float_list("scale"), cfg.get_float_list("offset"));
  if (kind == "BatchNormalization")
    return std::make_unique<BatchNormLayer>(cfg.get_int("axis"), cfg.get_float("momentum"), cfg.get_float("epsilon"),
                                            cfg.get_bool("center"), cfg.get_bool("scale"),
                                            parse_fused_relu(cfg.get_string_or("activation", "linear"),
                                                             "BatchNormalization"));
  if (is_augmentation(kind)) return std::make_unique<AugmentationLayer>(kind, make_augment_spec(cfg), layer_seed(cfg));
  if (kind == "Add") return std::make_unique<AddLayer>();
  if (kind == "Multiply") return std::make_unique<MultiplyLayer>();
  if (kind == "Concatenate") return std::make_unique<ConcatenateLayer>(cfg.get_int("axis"));
  throw ValueError(cat("unknown layer class '", kind, "'"));
}

// "<param>_l1" / "<param>_l2": the regularizer of the layer's parameter <param> (kernel, bias).
void add_regularizers(Layer& layer, const Config& cfg) {
  for (const char* param : {"kernel", "bias"}) {
    const std::string l1 = std::string(param) + "_l1", l2 = std::string(param) + "_l2";
    if (!cfg.has(l1) && !cfg.has(l2)) continue;
    Regularizer r;
    if (cfg.has(l1)) r.l1 = cfg.get_float(l1);
    if (cfg.has(l2)) r.l2 = cfg.get_float(l2);
    HPCNN_CHECK_ARG(r.l1 >= 0 && r.l2 >= 0 && std::isfinite(r.l1) && std::isfinite(r.l2), "layer config: the ", param,
                    " regularizer's factors must be >= 0 and finite, got l1=", r.l1, ", l2=", r.l2);
    if (r.active()) layer.set_regularizer(param, r);
  }
}

double optional(const Config& cfg, const char* key, double fallback) {
  return cfg.has(key) ? cfg.get_double(key) : fallback;
}

bool flag(const Config& cfg, const char* key) { return cfg.has(key) && cfg.get_bool(key); }

std::unique_ptr<LearningRateSchedule> make_schedule(const Config& cfg) {
  const std::string name = cfg.get_string("class_name");
  if (name == "ExponentialDecay")
    return std::make_unique<ExponentialDecay>(cfg.get_double("initial_learning_rate"), cfg.get_double("decay_steps"),
                                              cfg.get_double("decay_rate"), flag(cfg, "staircase"));
  if (name == "PiecewiseConstantDecay")
    return std::make_unique<PiecewiseConstantDecay>(cfg.get_floats("boundaries"), cfg.get_floats("values"));
  if (name == "PolynomialDecay")
    return std::make_unique<PolynomialDecay>(cfg.get_double("initial_learning_rate"), cfg.get_double("decay_steps"),
                                             optional(cfg, "end_learning_rate", 0.0001), optional(cfg, "power", 1.0),
                                             flag(cfg, "cycle"));
  if (name == "InverseTimeDecay")
    return std::make_unique<InverseTimeDecay>(cfg.get_double("initial_learning_rate"), cfg.get_double("decay_steps"),
                                              cfg.get_double("decay_rate"), flag(cfg, "staircase"));
  if (name == "CosineDecay")
    return std::make_unique<CosineDecay>(cfg.get_double("initial_learning_rate"), cfg.get_double("decay_steps"),
                                         optional(cfg, "alpha", 0.0), cfg.has("warmup_target"),
                                         optional(cfg, "warmup_target", 0.0), optional(cfg, "warmup_steps", 0.0));
  if (name == "CosineDecayRestarts")
    return std::make_unique<CosineDecayRestarts>(cfg.get_double("initial_learning_rate"),
                                                 cfg.get_double("first_decay_steps"), optional(cfg, "t_mul", 2.0),
                                                 optional(cfg, "m_mul", 1.0), optional(cfg, "alpha", 0.0));
  throw ValueError(cat("unknown learning rate schedule '", name, "'"));
}

OptimizerOptions options_of(const Config& cfg) {
  OptimizerOptions o;
  o.weight_decay = optional(cfg, "weight_decay", 0.0);
  o.clipnorm = optional(cfg, "clipnorm", 0.0);
  o.global_clipnorm = optional(cfg, "global_clipnorm", 0.0);
  o.clipvalue = optional(cfg, "clipvalue", 0.0);
  if (cfg.has("no_decay")) {
    for (double k : cfg.get_floats("no_decay")) {
      HPCNN_CHECK_ARG(k >= 0 && k == static_cast<double>(static_cast<long long>(k)),
                      "optimizer config: 'no_decay' must hold weight indices");
      o.no_decay.push_back(static_cast<long long>(k));
    }
  }
  return o;
}

}  // namespace

AugmentSpec make_augment_spec(const Config& cfg) {
  const std::string kind = cfg.get_string("class_name");
  AugmentSpec s;
  if (kind == "RandomFlip") {
    s.kind = AugmentKind::Flip;
    const std::string mode = cfg.get_string("mode");
    HPCNN_CHECK_ARG(mode == "horizontal" || mode == "vertical" || mode == "horizontal_and_vertical",
                    "RandomFlip: unknown mode '", mode, "': use 'horizontal', 'vertical' or 'horizontal_and_vertical'");
    s.flip_cols = mode != "vertical";
    s.flip_rows = mode != "horizontal";
  } else if (kind == "RandomTranslation") {
    s.kind = AugmentKind::Translate;
    s.height_lo = cfg.get_float("height_lo");
    s.height_hi = cfg.get_float("height_hi");
    s.width_lo = cfg.get_float("width_lo");
    s.width_hi = cfg.get_float("width_hi");
    s.fill_mode = parse_fill_mode(cfg.get_string("fill_mode"), kind);
    s.fill_value = cfg.get_float_or("fill_value", 0.f);
    s.interpolation = parse_interpolation(cfg.get_string("interpolation"), kind);
  } else if (kind == "RandomRotation") {
    s.kind = AugmentKind::Rotate;
    s.rotation_lo = cfg.get_float("factor_lo");
    s.rotation_hi = cfg.get_float("factor_hi");
    s.fill_mode = parse_fill_mode(cfg.get_string("fill_mode"), kind);
    s.fill_value = cfg.get_float_or("fill_value", 0.f);
    s.interpolation = parse_interpolation(cfg.get_string("interpolation"), kind);
  } else if (kind == "RandomZoom") {
    s.kind = AugmentKind::Zoom;
    s.height_lo = cfg.get_float("height_lo");
    s.height_hi = cfg.get_float("height_hi");
    // No width range: the width zooms as the height (Keras' width_factor=None keeps the aspect).
    s.zoom_keep_aspect = !cfg.has("width_lo");
    s.width_lo = s.zoom_keep_aspect ? s.height_lo : cfg.get_float("width_lo");
    s.width_hi = s.zoom_keep_aspect ? s.height_hi : cfg.get_float("width_hi");
    s.fill_mode = parse_fill_mode(cfg.get_string("fill_mode"), kind);
    s.fill_value = cfg.get_float_or("fill_value", 0.f);
    s.interpolation = parse_interpolation(cfg.get_string("interpolation"), kind);
  } else if (kind == "RandomCrop") {
    s.kind = AugmentKind::Crop;
    s.crop_h = cfg.get_int("height");
    s.crop_w = cfg.get_int("width");
  } else {
    throw ValueError(cat("unknown augmentation layer class '", kind, "'"));
  }
  check_augment_spec(s);
  return s;
}

LayerPtr make_layer(const Config& cfg) {
  LayerPtr layer = make_layer_of_kind(cfg);
  add_regularizers(*layer, cfg);
  // A layer of a nested model called with training=False (Layer::set_inference_only).
  layer->set_inference_only(cfg.get_bool_or("inference_only", false));
  return layer;
}

std::unique_ptr<Optimizer> make_optimizer(const Config& cfg) {
  const std::string name = cfg.get_string("name");
  const OptimizerOptions o = options_of(cfg);
  // With a schedule the rate is the schedule's (at every step); the fixed rate is then unused.
  const bool scheduled = cfg.has("schedule_class_name");
  const double lr = scheduled && !cfg.has("learning_rate") ? 1.0 : cfg.get_double("learning_rate");
  std::unique_ptr<Optimizer> opt;
  if (name == "Adam") {
    opt = std::make_unique<Adam>(lr, cfg.get_float("beta_1"), cfg.get_float("beta_2"), cfg.get_float("epsilon"), o);
  } else if (name == "AdamW") {
    HPCNN_CHECK_ARG(cfg.has("weight_decay"), "optimizer config is missing 'weight_decay' (AdamW needs it)");
    opt = std::make_unique<AdamW>(lr, cfg.get_float("beta_1"), cfg.get_float("beta_2"), cfg.get_float("epsilon"), o);
  } else if (name == "SGD") {
    opt = std::make_unique<SGD>(lr, cfg.get_float("momentum"), cfg.get_bool("nesterov"), o);
  } else if (name == "RMSprop") {
    opt = std::make_unique<RMSprop>(lr, cfg.get_float("rho"), cfg.get_float("momentum"), cfg.get_float("epsilon"),
                                    cfg.get_bool("centered"), o);
  } else {
    throw ValueError(cat("unknown optimizer '", name, "'"));
  }
  if (scheduled) opt->set_schedule(make_schedule(cfg.prefixed("schedule_", "schedule config")));
  return opt;
}

std::unique_ptr<LearningRateSchedule> make_learning_rate_schedule(const Config& cfg) { return make_schedule(cfg); }

Loss parse_loss(const std::string& name) {
  if (name == "categorical_crossentropy") return Loss::CategoricalCrossentropy;
  if (name == "sparse_categorical_crossentropy") return Loss::SparseCategoricalCrossentropy;
  if (name == "binary_crossentropy") return Loss::BinaryCrossentropy;
  if (name == "mean_squared_error") return Loss::MeanSquaredError;
  if (name == "mean_absolute_error") return Loss::MeanAbsoluteError;
  throw ValueError(cat("unknown loss '", name, "': use 'categorical_crossentropy', 'sparse_categorical_crossentropy', "
                       "'binary_crossentropy', 'mean_squared_error' or 'mean_absolute_error'"));
}

RowMetric parse_metric(const std::string& name) {
  if (name == "categorical_accuracy") return RowMetric::CategoricalAccuracy;
  if (name == "sparse_categorical_accuracy") return RowMetric::SparseCategoricalAccuracy;
  if (name == "binary_accuracy") return RowMetric::BinaryAccuracy;
  if (name == "top_k_categorical_accuracy") return RowMetric::TopKCategoricalAccuracy;
  if (name == "mean_squared_error") return RowMetric::MeanSquaredError;
  if (name == "mean_absolute_error") return RowMetric::MeanAbsoluteError;
  throw ValueError(cat("unknown metric '", name, "': use 'categorical_accuracy', 'sparse_categorical_accuracy', "
                       "'binary_accuracy', 'top_k_categorical_accuracy', 'mean_squared_error' or "
                       "'mean_absolute_error'"));
}

}  // namespace hpcnn::nn
