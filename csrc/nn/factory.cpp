#include "nn/factory.h"

#include "core/errors.h"
#include "nn/layers.h"
#include "nn/merge_layers.h"

namespace hpcnn::nn {

LayerPtr make_layer(const Config& cfg) {
  const std::string kind = cfg.get_string("class_name");
  if (kind == "Conv2D") {
    auto [kh, kw] = cfg.get_int_pair("kernel_size");
    auto [sh, sw] = cfg.get_int_pair("strides");
    return std::make_unique<Conv2DLayer>(cfg.get_int("filters"), kh, kw, sh, sw,
                                         parse_padding(cfg.get_string("padding")),
                                         cfg.get_string("activation") == "relu");
  }
  if (kind == "MaxPooling2D") {
    auto [ph, pw] = cfg.get_int_pair("pool_size");
    auto [sh, sw] = cfg.get_int_pair("strides");
    return std::make_unique<MaxPool2DLayer>(ph, pw, sh, sw, parse_padding(cfg.get_string("padding")));
  }
  if (kind == "Flatten") return std::make_unique<FlattenLayer>();
  if (kind == "Dense")
    return std::make_unique<DenseLayer>(cfg.get_int("units"), cfg.get_string("activation") == "relu");
  if (kind == "Dropout") return std::make_unique<DropoutLayer>(cfg.get_float("rate"));
  if (kind == "Activation")
    return std::make_unique<ActivationLayer>(parse_activation(cfg.get_string("activation")));
  if (kind == "Add") return std::make_unique<AddLayer>();
  if (kind == "Concatenate") return std::make_unique<ConcatenateLayer>(cfg.get_int("axis"));
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
