#include "nn/normalization_layer.h"

#include <cmath>

#include "core/errors.h"
#include "ops/ops.h"

namespace hpcnn::nn {

NormalizationLayer::NormalizationLayer(float epsilon) : epsilon_(epsilon) {
  HPCNN_CHECK_ARG(std::isfinite(epsilon) && epsilon > 0.f, "Normalization: epsilon must be positive, got ", epsilon);
}

Shape NormalizationLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(!in.empty() && in.back() > 0, "Normalization needs an input with a channel axis, got ",
                  shape_str(in));
  return in;
}

std::vector<ParamSpec> NormalizationLayer::param_specs(const Shape& in) const {
  const long long c = in.back();
  return {{"mean", {c}, Init::Zeros, 0, 0, ParamKind::Plain, false},
          {"variance", {c}, Init::Ones, 0, 0, ParamKind::Plain, false},
          {"count", {}, Init::Zeros, 0, 0, ParamKind::Plain, false}};
}

void NormalizationLayer::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const long long c = x.dim(-1);
  // A later chunk of an inference step uses the constants its first chunk derived (and must not
  // write them: chunks may run side by side).
  if (!ctx.later_chunk || !scale_.defined()) {
    if (!scale_.defined() || scale_.device() != x.device() || scale_.dim(0) != c) {
      scale_ = Tensor::empty({c}, DType::F32, x.device());
      offset_ = Tensor::empty({c}, DType::F32, x.device());
    }
    ops::normalization_constants(params_[0], params_[1], epsilon_, scale_, offset_);
  }
  ops::scale_shift_forward(x, scale_, offset_, y);
}

void NormalizationLayer::backward(const Tensor&, const Tensor&, Tensor& dy, Tensor* dx, const StepContext&) {
  if (dx) ops::scale_shift_backward(dy, scale_, *dx);
}

}  // namespace hpcnn::nn
