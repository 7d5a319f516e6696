#include "nn/regularization.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"

namespace hpcnn::nn {

std::vector<Regularizer> regularizers_of(const std::vector<const Layer*>& layers,
                                         const std::vector<std::vector<ParamSpec>>& specs) {
  HPCNN_CHECK_ARG(layers.size() == specs.size(), "regularizers: ", layers.size(), " layers but ", specs.size(),
                  " lists of parameters");
  std::vector<Regularizer> out;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& wanted = layers[i]->regularizers();
    for (const auto& [name, r] : wanted) {
      const bool has = std::any_of(specs[i].begin(), specs[i].end(), [&](const ParamSpec& s) { return s.name == name; });
      HPCNN_CHECK_ARG(has, "layer ", i, " (", layers[i]->kind(), ") has no parameter '", name, "' to regularize");
      HPCNN_CHECK_ARG(r.l1 >= 0 && r.l2 >= 0 && std::isfinite(r.l1) && std::isfinite(r.l2), "layer ", i, " (",
                      layers[i]->kind(), "): the ", name, " regularizer's factors must be >= 0 and finite, got l1=",
                      r.l1, ", l2=", r.l2);
    }
    for (const ParamSpec& s : specs[i]) {
      auto it = wanted.find(s.name);
      out.push_back(it == wanted.end() ? Regularizer{} : it->second);
    }
  }
  return out;
}

Regularization::Regularization(const ParamLayout& layout, std::vector<Regularizer> per_array)
    : layout_(layout), per_array_(std::move(per_array)) {
  HPCNN_CHECK_ARG(per_array_.size() == layout_.size(), "regularizers: ", per_array_.size(),
                  " given for a model of ", layout_.size(), " weight arrays");
  any_ = std::any_of(per_array_.begin(), per_array_.end(), [](const Regularizer& r) { return r.active(); });
  trainable_ = {{0, layout_.numel()}};
}

void Regularization::set_trainable(const std::vector<ParamRange>& trainable) {
  trainable_ = trainable;
  table_valid_ = false;
}

const SegmentTable& Regularization::table(Device d) {
  if (table_valid_ && table_.device() == d) return table_;
  std::vector<VariableSpan> vars;
  for (size_t k = 0; k < layout_.size(); ++k) {
    const Regularizer& r = per_array_[k];
    if (!r.active()) continue;
    const long long b = layout_.offset(k), e = b + shape_numel(layout_.spec(k).shape);
    for (const ParamRange& t : trainable_) {
      const long long lo = std::max(b, t.begin), hi = std::min(e, t.end);
      if (lo < hi) vars.push_back({lo, hi, true, r.l1, r.l2});
    }
  }
  table_ = SegmentTable(vars, d);
  table_valid_ = true;
  return table_;
}

void Regularization::add_penalty(const Tensor& params, double* penalty) {
  if (!any_) return;
  ops::weight_penalty(params, nullptr, table(params.device()), penalty);
}

void Regularization::add_gradients(const Tensor& params, Tensor& grads) {
  if (!any_) return;
  ops::weight_penalty(params, &grads, table(params.device()), nullptr);
}

}  // namespace hpcnn::nn
