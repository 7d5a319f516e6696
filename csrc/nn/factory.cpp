#include "nn/factory.h"

#include "core/errors.h"
#include "nn/layers.h"

namespace hpcnn::nn {

LayerPtr make_layer(const Config& cfg) {
  const std::string kind = cfg.get_string("class_name");
  if (kind == "Conv2D") {
    auto [kh, kw] = cfg.get_int_pair("kernel_size");
    auto [sh, sw] = cfg.get_int_pair("strides");
    return std::make_unique<Conv2DLayer>(cfg.get_int("filters"), kh, kw, sh, sw,
                                         parse_padding(cfg.get_string("padding")),
                                         parse_fused_relu(cfg.get_string("activation"), "Conv2D"),
                                         cfg.get_bool_or("use_bias", true));
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
  if (kind == "Dense")
    return std::make_unique<DenseLayer>(cfg.get_int("units"), parse_fused_relu(cfg.get_string("activation"), "Dense"),
                                        cfg.get_bool_or("use_bias", true));
  if (kind == "Dropout") return std::make_unique<DropoutLayer>(cfg.get_float("rate"));
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
  throw ValueError(cat("unknown layer class '", kind, "'"));
}

std::unique_ptr<Optimizer> make_optimizer(const Config& cfg) {
  const std::string name = cfg.get_string("name");
  if (name == "Adam")
    return std::make_unique<Adam>(cfg.get_float("learning_rate"), cfg.get_float("beta_1"), cfg.get_float("beta_2"),
                                  cfg.get_float("epsilon"));
  if (name == "SGD")
    return std::make_unique<SGD>(cfg.get_float("learning_rate"), cfg.get_float("momentum"), cfg.get_bool("nesterov"));
  throw ValueError(cat("unknown optimizer '", name, "'"));
}

Loss parse_loss(const std::string& name) {
  if (name == "categorical_crossentropy") return Loss::CategoricalCrossentropy;
  if (name == "sparse_categorical_crossentropy") return Loss::SparseCategoricalCrossentropy;
  throw ValueError(
      cat("unknown loss '", name, "': use 'categorical_crossentropy' or 'sparse_categorical_crossentropy'"));
}

}  // namespace hpcnn::nn
