#include "nn/merge_layers.h"

#include <string>

#include "ops/ops.h"

namespace hpcnn::nn {

namespace {

// A per-sample shape as Keras prints a batch of it: (None, 8, 8, 4).
std::string batch_shape_str(const Shape& s) {
  std::string out = "(None";
  for (long long d : s) out += cat(", ", d);
  return out + ")";
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string out;
  for (size_t i = 0; i < shapes.size(); ++i) out += (i ? ", " : "") + batch_shape_str(shapes[i]);
  return out;
}

}  // namespace

// ------------------------------------------------------------------ MergeLayer's one-input forms
Shape MergeLayer::output_shape(const Shape& input) const {
  throw ValueError(cat(kind(), " takes a list of at least two inputs, got one input of shape ",
                       batch_shape_str(input)));
}

void MergeLayer::forward(const Tensor&, Tensor&, const StepContext&) {
  throw BackendError(cat(kind(), ": forward called with one input (the model calls forward_merge)"));
}

void MergeLayer::backward(const Tensor&, const Tensor&, Tensor&, Tensor*, const StepContext&) {
  throw BackendError(cat(kind(), ": backward called with one input (the model calls backward_merge)"));
}

// ------------------------------------------------------------------ Add
Shape AddLayer::merged_shape(const std::vector<Shape>& inputs) const {
  HPCNN_CHECK_ARG(inputs.size() >= 2, "Add takes a list of at least two inputs, got ", inputs.size());
  for (const Shape& s : inputs)
    HPCNN_CHECK_ARG(s == inputs[0], "Add: inputs have incompatible shapes: ", shapes_str(inputs),
                    " (every input must have the same shape)");
  return inputs[0];
}

void AddLayer::forward_merge(const std::vector<Tensor>& xs, Tensor& y, const StepContext&) { ops::add_n(xs, y); }

void AddLayer::backward_merge(const std::vector<Tensor>&, const Tensor&, Tensor& dy, const std::vector<Tensor*>& dxs,
                              const StepContext&) {
  for (Tensor* dx : dxs)
    if (dx) ops::copy(dy, *dx);
}

// ------------------------------------------------------------------ Concatenate
ConcatenateLayer::ConcatenateLayer(int axis) : axis_(axis) {}

Shape ConcatenateLayer::merged_shape(const std::vector<Shape>& inputs) const {
  HPCNN_CHECK_ARG(inputs.size() >= 2, "Concatenate takes a list of at least two inputs, got ", inputs.size());
  const int rank = static_cast<int>(inputs[0].size()) + 1;  // Keras counts the batch axis
  const int a = axis_ < 0 ? axis_ + rank : axis_;
  HPCNN_CHECK_ARG(a >= 0 && a < rank, "Concatenate: axis=", axis_, " is out of range for inputs of shape ",
                  batch_shape_str(inputs[0]));
  HPCNN_CHECK_ARG(a != 0, "Concatenate: axis=", axis_, " is the batch axis; concatenate along a per-sample axis "
                  "(axis=-1: channels)");
  Shape out = inputs[0];
  out[a - 1] = 0;
  for (const Shape& s : inputs) {
    bool fits = s.size() == inputs[0].size();
    for (size_t d = 0; fits && d < s.size(); ++d) fits = static_cast<int>(d) == a - 1 || s[d] == inputs[0][d];
    HPCNN_CHECK_ARG(fits, "Concatenate: a Concatenate layer requires inputs with matching shapes except for the "
                    "concatenation axis (axis=", axis_, "); got ", shapes_str(inputs));
    out[a - 1] += s[a - 1];
  }
  return out;
}

void ConcatenateLayer::forward_merge(const std::vector<Tensor>& xs, Tensor& y, const StepContext&) {
  ops::concat(xs, y, axis_);
}

void ConcatenateLayer::backward_merge(const std::vector<Tensor>& xs, const Tensor&, Tensor& dy,
                                      const std::vector<Tensor*>& dxs, const StepContext&) {
  const int a = axis_ < 0 ? axis_ + dy.rank() : axis_;
  std::vector<long long> sizes;
  for (const Tensor& x : xs) sizes.push_back(x.dim(a));
  ops::split(dy, sizes, dxs, axis_);
}

// ------------------------------------------------------------------ Multiply
Shape MultiplyLayer::merged_shape(const std::vector<Shape>& inputs) const {
  HPCNN_CHECK_ARG(inputs.size() == 2, "Multiply: hpcnn multiplies exactly two inputs, got ", inputs.size(), " (",
                  shapes_str(inputs), "): nest Multiply layers for more");
  HPCNN_CHECK_ARG(inputs[0].size() == inputs[1].size(), "Multiply: inputs have incompatible shapes: ",
                  shapes_str(inputs), " (the same number of axes, each equal or 1)");
  Shape out(inputs[0].size());
  for (size_t d = 0; d < out.size(); ++d) {
    const long long a = inputs[0][d], b = inputs[1][d];
    HPCNN_CHECK_ARG(a == b || a == 1 || b == 1, "Multiply: inputs have incompatible shapes: ", shapes_str(inputs),
                    " (each axis must agree or be 1)");
    out[d] = a == 1 ? b : a;
  }
  return out;
}

void MultiplyLayer::forward_merge(const std::vector<Tensor>& xs, Tensor& y, const StepContext&) {
  ops::multiply_forward(xs.at(0), xs.at(1), y);
}

void MultiplyLayer::backward_merge(const std::vector<Tensor>& xs, const Tensor&, Tensor& dy,
                                   const std::vector<Tensor*>& dxs, const StepContext&) {
  ops::multiply_backward(xs.at(0), xs.at(1), dy, dxs.at(0), dxs.at(1));
}

}  // namespace hpcnn::nn
