#include "nn/layers.h"

#include <limits>

#include "ops/ops.h"

namespace hpcnn::nn {

namespace {
// The operators index images with int: a per-sample dimension beyond that is refused when the
// model is built, not truncated into a different, wrong shape.
void check_int_dims(const Shape& in, const char* layer) {
  for (long long d : in)
    HPCNN_CHECK_ARG(d <= std::numeric_limits<int>::max(), layer, ": input shape ", shape_str(in),
                    " has a dimension larger than ", std::numeric_limits<int>::max(), ", the most hpcnn supports");
}
}  // namespace

Activation parse_activation(const std::string& s) {
  if (s.empty() || s == "linear" || s == "None") return Activation::Linear;
  if (s == "relu") return Activation::ReLU;
  if (s == "softmax") return Activation::Softmax;
  throw ValueError(cat("unknown activation '", s, "': use 'relu', 'softmax' or 'linear'"));
}

// ------------------------------------------------------------------ Conv2D
Conv2DLayer::Conv2DLayer(int filters, int kh, int kw, int sh, int sw, Padding padding, bool relu)
    : filters_(filters), kh_(kh), kw_(kw), sh_(sh), sw_(sw), padding_(padding), relu_(relu) {
  HPCNN_CHECK_ARG(filters > 0, "Conv2D: filters must be positive, got ", filters);
  HPCNN_CHECK_ARG(kh > 0 && kw > 0, "Conv2D: kernel_size must be positive, got (", kh, ", ", kw, ")");
  HPCNN_CHECK_ARG(sh > 0 && sw > 0, "Conv2D: strides must be positive, got (", sh, ", ", sw, ")");
}

Shape Conv2DLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(in.size() == 3, "Conv2D expects inputs of shape (height, width, channels), got ", shape_str(in));
  check_int_dims(in, "Conv2D");
  HPCNN_CHECK_ARG((long long)kh_ * kw_ * in[2] <= std::numeric_limits<int>::max(), "Conv2D: a ", kh_, "x", kw_,
                  " kernel over ", in[2], " channels has more than ", std::numeric_limits<int>::max(),
                  " weights per filter, the most hpcnn supports");
  Conv2dGeometry g = Conv2dGeometry::make(1, (int)in[0], (int)in[1], (int)in[2], filters_, kh_, kw_, sh_, sw_, padding_);
  return {g.oh, g.ow, filters_};
}

std::vector<ParamSpec> Conv2DLayer::param_specs(const Shape& in) const {
  long long c = in.at(2);
  long long rf = (long long)kh_ * kw_;
  return {{"kernel", {kh_, kw_, c, filters_}, Init::GlorotUniform, rf * c, rf * filters_, ParamKind::Conv2DKernel},
          {"bias", {filters_}, Init::Zeros, 0, 0}};
}

void Conv2DLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  ops::conv2d_forward(x, params_[0], params_[1], y, sh_, sw_, padding_, relu_);
}

void Conv2DLayer::backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  ops::conv2d_backward(x, params_[0], y, dy, dx, grads_[0], grads_[1], sh_, sw_, padding_, relu_);
}

// ------------------------------------------------------------------ MaxPool2D
MaxPool2DLayer::MaxPool2DLayer(int ph, int pw, int sh, int sw, Padding padding)
    : ph_(ph), pw_(pw), sh_(sh), sw_(sw), padding_(padding) {
  HPCNN_CHECK_ARG(ph > 0 && pw > 0 && sh > 0 && sw > 0, "MaxPooling2D: pool_size and strides must be positive");
}

Shape MaxPool2DLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(in.size() == 3, "MaxPooling2D expects inputs of shape (height, width, channels), got ",
                  shape_str(in));
  check_int_dims(in, "MaxPooling2D");
  Pool2dGeometry g = Pool2dGeometry::make(1, (int)in[0], (int)in[1], (int)in[2], ph_, pw_, sh_, sw_, padding_);
  return {g.oh, g.ow, in[2]};
}

void MaxPool2DLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  ops::maxpool2d_forward(x, y, ph_, pw_, sh_, sw_, padding_);
}

void MaxPool2DLayer::backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  if (dx) ops::maxpool2d_backward(x, y, dy, *dx, ph_, pw_, sh_, sw_, padding_);
}

// ------------------------------------------------------------------ Flatten
Shape FlattenLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(!in.empty(), "Flatten needs an input with at least one axis");
  return {shape_numel(in)};
}

// ------------------------------------------------------------------ Dense
DenseLayer::DenseLayer(int units, bool relu) : units_(units), relu_(relu) {
  HPCNN_CHECK_ARG(units > 0, "Dense: units must be positive, got ", units);
}

Shape DenseLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(in.size() == 1, "Dense expects a flat input (features,), got ", shape_str(in),
                  ": add a Flatten() layer before it");
  check_int_dims(in, "Dense");
  return {units_};
}

std::vector<ParamSpec> DenseLayer::param_specs(const Shape& in) const {
  return {{"kernel", {in.at(0), units_}, Init::GlorotUniform, in.at(0), units_},
          {"bias", {units_}, Init::Zeros, 0, 0}};
}

void DenseLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  ops::dense_forward(x, params_[0], params_[1], y, relu_);
}

void DenseLayer::backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  ops::dense_backward(x, params_[0], y, dy, dx, grads_[0], grads_[1], relu_);
}

// ------------------------------------------------------------------ Dropout
DropoutLayer::DropoutLayer(float rate) : rate_(rate) {
  HPCNN_CHECK_ARG(rate >= 0.f && rate < 1.f, "Dropout: rate must be in [0, 1), got ", rate);
}

// The mask of a sample is keyed by its row in the global batch (ctx.first_row + local row), so a
// data-parallel replica draws exactly the masks one device would draw for the same rows.
void DropoutLayer::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  ops::dropout_forward(x, y, rate_, ctx.seed, ctx.dropout_stream(), ctx.element_offset(x));
}

void DropoutLayer::backward(const Tensor&, const Tensor&, Tensor& dy, Tensor* dx, const StepContext& ctx) {
  if (dx) ops::dropout_backward(dy, *dx, rate_, ctx.seed, ctx.dropout_stream(), ctx.element_offset(dy));
}

// ------------------------------------------------------------------ Activation
ActivationLayer::ActivationLayer(Activation a) : act_(a) {}

void ActivationLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  if (act_ == Activation::ReLU) ops::relu_forward(x, y);
  else if (act_ == Activation::Softmax) ops::softmax_forward(x, y);
}

void ActivationLayer::backward(const Tensor&, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  if (!dx) return;
  if (act_ == Activation::ReLU) ops::relu_backward(y, dy, *dx);
  else if (act_ == Activation::Softmax) ops::softmax_backward(y, dy, *dx);
}

}  // namespace hpcnn::nn
