#include "nn/layers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "ops/conv_algo_choice.h"
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

// On a GPU, names the convolution's layer ("layer 3 (Conv2D)", as nn/graph.h names a node) in the
// messages of a cuDNN refusal or failure for the scope of one call (ops/conv_algo_choice.h). The
// CPU backend has no such refusals: nothing is made there.
class ConvLabel {
 public:
  ConvLabel(const Layer& layer, const StepContext& ctx, const Tensor& x) {
    if (x.device().is_cuda()) label_.emplace(cat("layer ", ctx.layer_index, " (", layer.kind(), ")"));
  }

 private:
  std::optional<conv_algo::LayerLabel> label_;
};
}  // namespace

ActivationSpec parse_activation(const std::string& s, float alpha) {
  ActivationSpec a;
  a.alpha = alpha;
  if (s.empty() || s == "None") return a;
  if (s == "softmax") {
    a.softmax = true;
    return a;
  }
  a.act = parse_act(s);
  if (a.act == Act::LeakyReLU)
    HPCNN_CHECK_ARG(alpha >= 0.f, "leaky_relu: the negative slope must be >= 0, got ", alpha);
  return a;
}

bool parse_fused_relu(const std::string& s, const char* layer) {
  if (s == "relu") return true;
  if (s.empty() || s == "linear" || s == "None") return false;
  throw ValueError(cat(layer, ": activation '", s, "' is not computed inside the layer (only 'relu' or 'linear'): "
                       "follow it with an Activation layer"));
}

// ------------------------------------------------------------------ Conv2D
Conv2DLayer::Conv2DLayer(int filters, int kh, int kw, int sh, int sw, Padding padding, bool relu, bool use_bias)
    : filters_(filters), kh_(kh), kw_(kw), sh_(sh), sw_(sw), padding_(padding), relu_(relu), use_bias_(use_bias) {
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
  std::vector<ParamSpec> specs{
      {kernel_name_, {kh_, kw_, c, filters_}, Init::GlorotUniform, rf * c, rf * filters_, ParamKind::Conv2DKernel}};
  if (use_bias_) specs.push_back({"bias", {filters_}, Init::Zeros, 0, 0});
  return specs;
}

void Conv2DLayer::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  const ConvLabel label(*this, ctx, x);
  ops::conv2d_forward(x, params_[0], use_bias_ ? params_[1] : Tensor(), y, sh_, sw_, padding_, relu_);
}

void Conv2DLayer::make_fold_buffers() {
  const Tensor& w = params_[0];
  if (!folded_kernel_.defined() || folded_kernel_.device() != w.device() || folded_kernel_.shape() != w.shape()) {
    folded_kernel_ = Tensor::empty(w.shape(), DType::F32, w.device());
    folded_bias_ = Tensor::empty({filters_}, DType::F32, w.device());
    fold_current_ = false;
  }
}

void Conv2DLayer::fold(const StepContext& ctx, BatchNormLayer& bn) {
  make_fold_buffers();
  // A later chunk has the first chunk's rows or fewer: where it folds, the first chunk folded too
  // (forward_folded runs apart only below a size), so the buffers hold this step's fold, and chunks
  // running side by side only read them.
  if (ctx.later_chunk && fold_current_) return;
  // Folded at every step: the weights may have changed since (a training step, set_weights).
  bn.fold_into(params_[0], use_bias_ ? params_[1] : Tensor(), folded_kernel_, folded_bias_);
  fold_current_ = true;
}

void Conv2DLayer::forward_folded(const Tensor& x, Tensor& y, const StepContext& ctx, BatchNormLayer& bn,
                                 float relu_max) {
  const ConvLabel label(*this, ctx, x);
  const Tensor& w = params_[0];
  make_fold_buffers();
  // The fold reads and writes the kernel (kh * kw * c values per filter); what it saves is the
  // normalization's pass over the output (n * oh * ow values per filter). Where the output is the
  // smaller (the last stages at batch 1) the two run apart on the CPU, as the layers would: the
  // convolution into the folded kernel's buffer (large enough, then), the normalization from there
  // into y. A GPU always folds (its fold is one small kernel launch).
  if (x.device().is_cpu() && y.numel() < folded_kernel_.numel()) {
    // The convolution's output in the calling thread's own buffer (smaller than the kernel):
    // chunks of one step run this layer on several threads at once (nn/chunked_inference.h).
    static thread_local std::vector<float> apart;
    if ((long long)apart.size() < y.numel()) apart.resize(y.numel());
    Tensor conv_out = Tensor::borrow(apart.data(), y.shape(), DType::F32, Device::cpu(), nullptr);
    ops::conv2d_forward(x, w, use_bias_ ? params_[1] : Tensor(), conv_out, sh_, sw_, padding_, false);
    bn.forward(conv_out, y, ctx);
    if (relu_max < kNoReluCap) ops::activation_forward(Act::ReLU6, 0.f, y, y);  // in place: y is small here
    return;
  }
  fold(ctx, bn);
  const bool capped = relu_max < kNoReluCap;
  ops::conv2d_forward(x, folded_kernel_, folded_bias_, y, sh_, sw_, padding_, bn.fused_relu() || capped, Tensor(),
                      relu_max);
}

void Conv2DLayer::forward_residual(const Tensor& x, const Tensor& shortcut, Tensor& y, const StepContext& ctx,
                                   BatchNormLayer* bn) {
  const ConvLabel label(*this, ctx, x);
  const Tensor& w = params_[0];
  const Tensor b = use_bias_ ? params_[1] : Tensor();
  if (!bn) {
    ops::conv2d_forward(x, w, b, y, sh_, sw_, padding_, true, shortcut);
    return;
  }
  // Always folded here (unlike forward_folded's small outputs): the normalization has no buffer
  // of its own to run apart into, and the fold is small beside the three passes it saves.
  fold(ctx, *bn);
  ops::conv2d_forward(x, folded_kernel_, folded_bias_, y, sh_, sw_, padding_, true, shortcut);
}

void Conv2DLayer::backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) {
  const ConvLabel label(*this, ctx, x);
  Tensor db = use_bias_ ? grads_[1] : Tensor();
  ops::conv2d_backward(x, params_[0], y, dy, dx, grads_[0], db, sh_, sw_, padding_, relu_);
}

void Conv2DLayer::backward_adding(const Tensor& x, const Tensor& y, Tensor& dy, Tensor& dx, const StepContext& ctx) {
  const ConvLabel label(*this, ctx, x);
  Tensor db = use_bias_ ? grads_[1] : Tensor();
  ops::conv2d_backward(x, params_[0], y, dy, &dx, grads_[0], db, sh_, sw_, padding_, relu_, true);
}

// ------------------------------------------------------------------ MaxPooling2D, AveragePooling2D
Pool2DLayer::Pool2DLayer(bool max, int ph, int pw, int sh, int sw, Padding padding)
    : max_(max), ph_(ph), pw_(pw), sh_(sh), sw_(sw), padding_(padding) {
  HPCNN_CHECK_ARG(ph > 0 && pw > 0 && sh > 0 && sw > 0, kind(), ": pool_size and strides must be positive");
}

Shape Pool2DLayer::output_shape(const Shape& in) const {
  const std::string k = kind();
  HPCNN_CHECK_ARG(in.size() == 3, k, " expects inputs of shape (height, width, channels), got ", shape_str(in));
  check_int_dims(in, k.c_str());
  Pool2dGeometry g =
      Pool2dGeometry::make(1, (int)in[0], (int)in[1], (int)in[2], ph_, pw_, sh_, sw_, padding_, k.c_str());
  return {g.oh, g.ow, in[2]};
}

void Pool2DLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  if (max_) ops::maxpool2d_forward(x, y, ph_, pw_, sh_, sw_, padding_);
  else ops::avgpool2d_forward(x, y, ph_, pw_, sh_, sw_, padding_);
}

void Pool2DLayer::backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  if (!dx) return;
  if (max_) ops::maxpool2d_backward(x, y, dy, *dx, ph_, pw_, sh_, sw_, padding_);
  else ops::avgpool2d_backward(dy, *dx, ph_, pw_, sh_, sw_, padding_);
}

// ------------------------------------------------------------------ Flatten
Shape FlattenLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(!in.empty(), "Flatten needs an input with at least one axis");
  return {shape_numel(in)};
}

// ------------------------------------------------------------------ Dense
DenseLayer::DenseLayer(int units, bool relu, bool use_bias) : units_(units), relu_(relu), use_bias_(use_bias) {
  HPCNN_CHECK_ARG(units > 0, "Dense: units must be positive, got ", units);
}

Shape DenseLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(in.size() == 1, "Dense expects a flat input (features,), got ", shape_str(in),
                  ": add a Flatten() layer before it");
  check_int_dims(in, "Dense");
  return {units_};
}

std::vector<ParamSpec> DenseLayer::param_specs(const Shape& in) const {
  std::vector<ParamSpec> specs{{"kernel", {in.at(0), units_}, Init::GlorotUniform, in.at(0), units_}};
  if (use_bias_) specs.push_back({"bias", {units_}, Init::Zeros, 0, 0});
  return specs;
}

void DenseLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  ops::dense_forward(x, params_[0], use_bias_ ? params_[1] : Tensor(), y, relu_);
}

void DenseLayer::backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  Tensor db = use_bias_ ? grads_[1] : Tensor();
  ops::dense_backward(x, params_[0], y, dy, dx, grads_[0], db, relu_);
}

// ------------------------------------------------------------------ Dropout
DropoutLayer::DropoutLayer(float rate, std::vector<long long> noise_shape) : rate_(rate), noise_(std::move(noise_shape)) {
  HPCNN_CHECK_ARG(rate >= 0.f && rate < 1.f, "Dropout: rate must be in [0, 1), got ", rate);
  for (long long d : noise_) HPCNN_CHECK_ARG(d >= 0, "Dropout: noise_shape sizes must be positive, got ", d);
}

Shape DropoutLayer::output_shape(const Shape& in) const {
  if (noise_.empty()) return in;
  HPCNN_CHECK_ARG(noise_.size() == in.size(), "Dropout: noise_shape has ", noise_.size() + 1, " axes (with the "
                  "batch's) but the input (None, ...", shape_str(in), ") has ", in.size() + 1);
  for (size_t d = 0; d < in.size(); ++d)
    HPCNN_CHECK_ARG(noise_[d] == 0 || noise_[d] == 1 || noise_[d] == in[d], "Dropout: noise_shape axis ", d + 1,
                    " is ", noise_[d], " but the input's is ", in[d], " (use 1 to share the mask along it, or None)");
  return in;
}

void DropoutLayer::draw_mask(const Tensor& x, const StepContext& ctx) {
  Shape m{x.dim(0)};
  for (size_t d = 0; d < noise_.size(); ++d) m.push_back(noise_[d] == 0 ? x.dim(static_cast<int>(d) + 1) : noise_[d]);
  if (!mask_.defined() || mask_.shape() != m || mask_.device() != x.device()) {
    Tensor ones = Tensor::empty(m);
    std::fill(ones.f32(), ones.f32() + ones.numel(), 1.f);
    ones_ = x.device().is_cpu() ? ones : ones.to(x.device());
    mask_ = Tensor::empty(m, DType::F32, x.device());
  }
  ops::dropout_forward(ones_, mask_, rate_, ctx.seed, ctx.dropout_stream(), ctx.element_offset(mask_));
}

// The mask of a sample is keyed by its row in the global batch (ctx.first_row + local row), so a
// data-parallel replica draws exactly the masks one device would draw for the same rows.
void DropoutLayer::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  if (noise_.empty()) return ops::dropout_forward(x, y, rate_, ctx.seed, ctx.dropout_stream(), ctx.element_offset(x));
  draw_mask(x, ctx);
  ops::multiply_forward(x, mask_, y);
}

void DropoutLayer::backward(const Tensor&, const Tensor&, Tensor& dy, Tensor* dx, const StepContext& ctx) {
  if (!dx) return;
  if (noise_.empty()) return ops::dropout_backward(dy, *dx, rate_, ctx.seed, ctx.dropout_stream(), ctx.element_offset(dy));
  draw_mask(dy, ctx);  // the forward's mask again (the same keys)
  ops::multiply_forward(dy, mask_, *dx);
}

// ------------------------------------------------------------------ Activation
ActivationLayer::ActivationLayer(ActivationSpec a) : spec_(a) {}

void ActivationLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  if (spec_.softmax) ops::softmax_forward(x, y);
  else if (spec_.act == Act::ReLU) ops::relu_forward(x, y);
  else ops::activation_forward(spec_.act, spec_.alpha, x, y);
}

void ActivationLayer::backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  if (!dx) return;
  if (spec_.softmax) ops::softmax_backward(y, dy, *dx);
  else if (spec_.act == Act::ReLU) ops::relu_backward(y, dy, *dx);
  else ops::activation_backward(spec_.act, spec_.alpha, x, y, dy, *dx);
}

// ------------------------------------------------------------------ GlobalAveragePooling2D / GlobalMaxPooling2D
GlobalPool2DLayer::GlobalPool2DLayer(bool max, bool keepdims) : max_(max), keepdims_(keepdims) {}

Shape GlobalPool2DLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(in.size() == 3, kind(), " expects inputs of shape (height, width, channels), got ", shape_str(in));
  check_int_dims(in, kind().c_str());
  return keepdims_ ? Shape{1, 1, in[2]} : Shape{in[2]};
}

void GlobalPool2DLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  if (max_) ops::global_maxpool2d_forward(x, y);
  else ops::global_avgpool2d_forward(x, y);
}

void GlobalPool2DLayer::backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  if (!dx) return;
  if (max_) ops::global_maxpool2d_backward(x, y, dy, *dx);
  else ops::global_avgpool2d_backward(dy, *dx);
}

// ------------------------------------------------------------------ ZeroPadding2D
ZeroPadding2DLayer::ZeroPadding2DLayer(int top, int bottom, int left, int right)
    : top_(top), bottom_(bottom), left_(left), right_(right) {
  HPCNN_CHECK_ARG(top >= 0 && bottom >= 0 && left >= 0 && right >= 0, "ZeroPadding2D: padding must be >= 0, got ((",
                  top, ", ", bottom, "), (", left, ", ", right, "))");
}

Shape ZeroPadding2DLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(in.size() == 3, "ZeroPadding2D expects inputs of shape (height, width, channels), got ",
                  shape_str(in));
  Shape out{in[0] + top_ + bottom_, in[1] + left_ + right_, in[2]};
  check_int_dims(out, "ZeroPadding2D");
  return out;
}

void ZeroPadding2DLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  ops::zero_pad2d_forward(x, y, top_, bottom_, left_, right_);
}

void ZeroPadding2DLayer::backward(const Tensor&, const Tensor&, Tensor& dy, Tensor* dx, const StepContext&) {
  if (dx) ops::zero_pad2d_backward(dy, *dx, top_, bottom_, left_, right_);
}

// ------------------------------------------------------------------ Rescaling
RescalingLayer::RescalingLayer(std::vector<float> scale, std::vector<float> offset)
    : scale_(std::move(scale)), offset_(std::move(offset)) {
  HPCNN_CHECK_ARG(!scale_.empty() && !offset_.empty(), "Rescaling: scale and offset need at least one value");
  for (float v : scale_) HPCNN_CHECK_ARG(std::isfinite(v), "Rescaling: scale must be finite, got ", v);
  for (float v : offset_) HPCNN_CHECK_ARG(std::isfinite(v), "Rescaling: offset must be finite, got ", v);
}

Shape RescalingLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(!in.empty(), "Rescaling needs an input with at least one axis");
  check_int_dims(in, "Rescaling");
  const long long c = in.back();
  HPCNN_CHECK_ARG(scale_.size() == 1 || (long long)scale_.size() == c, "Rescaling: ", scale_.size(),
                  " scale values for ", c, " channels (input ", shape_str(in), "): give one value or one per channel");
  HPCNN_CHECK_ARG(offset_.size() == 1 || (long long)offset_.size() == c, "Rescaling: ", offset_.size(),
                  " offset values for ", c, " channels (input ", shape_str(in), "): give one value or one per channel");
  return in;
}

void RescalingLayer::upload(Device d, int c) {
  if (scale_dev_.defined() && scale_dev_.device() == d && scale_dev_.dim(0) == c) return;
  Tensor s = Tensor::empty({c}), o = Tensor::empty({c});
  for (int j = 0; j < c; ++j) {
    s.f32()[j] = scale_.size() == 1 ? scale_[0] : scale_[j];
    o.f32()[j] = offset_.size() == 1 ? offset_[0] : offset_[j];
  }
  scale_dev_ = d.is_cpu() ? s : s.to(d);
  offset_dev_ = d.is_cpu() ? o : o.to(d);
}

void RescalingLayer::forward(const Tensor& x, Tensor& y, const StepContext&) {
  upload(x.device(), static_cast<int>(x.dim(-1)));
  ops::scale_shift_forward(x, scale_dev_, offset_dev_, y);
}

void RescalingLayer::backward(const Tensor&, const Tensor&, Tensor& dy, Tensor* dx, const StepContext&) {
  if (!dx) return;
  upload(dy.device(), static_cast<int>(dy.dim(-1)));
  ops::scale_shift_backward(dy, scale_dev_, *dx);
}

// ------------------------------------------------------------------ BatchNormalization
BatchNormLayer::BatchNormLayer(int axis, float momentum, float epsilon, bool center, bool scale, bool relu)
    : axis_(axis), momentum_(momentum), epsilon_(epsilon), center_(center), scale_(scale), relu_(relu) {
  HPCNN_CHECK_ARG(std::isfinite(momentum) && momentum >= 0.f && momentum <= 1.f,
                  "BatchNormalization: momentum must be in [0, 1], got ", momentum);
  HPCNN_CHECK_ARG(std::isfinite(epsilon) && epsilon > 0.f, "BatchNormalization: epsilon must be positive, got ",
                  epsilon);
}

Shape BatchNormLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(!in.empty(), "BatchNormalization needs an input with a channel axis, got ", shape_str(in));
  check_int_dims(in, "BatchNormalization");
  // Axes counted with the batch axis (Keras): the channels are axis in.size(), or -1.
  const int last = static_cast<int>(in.size());
  HPCNN_CHECK_ARG(axis_ == -1 || axis_ == last, "BatchNormalization: axis=", axis_,
                  " is not supported: hpcnn normalizes the last (channels) axis, axis=-1 (or ", last,
                  ", counting the batch axis, for samples of shape ", shape_str(in), ")");
  return in;
}

std::vector<ParamSpec> BatchNormLayer::param_specs(const Shape& in) const {
  const long long c = in.back();
  std::vector<ParamSpec> specs;
  if (scale_) specs.push_back({"gamma", {c}, Init::Ones, 0, 0});
  if (center_) specs.push_back({"beta", {c}, Init::Zeros, 0, 0});
  specs.push_back({"moving_mean", {c}, Init::Zeros, 0, 0, ParamKind::Plain, false});
  specs.push_back({"moving_variance", {c}, Init::Ones, 0, 0, ParamKind::Plain, false});
  return specs;
}

void BatchNormLayer::ensure_batch_stats(Device d, int c) {
  if (batch_stats_.defined() && batch_stats_.device() == d && batch_stats_.numel() == batchnorm_stats_floats(c))
    return;
  batch_stats_ = Tensor::zeros({batchnorm_stats_floats(c)}, DType::F32, d);
}

// Statistics array k (0 mean, 1 var, 2 invstd) of the last training forward: each at a 256-byte
// boundary (ops/batchnorm.h), whatever c is.
Tensor BatchNormLayer::batch_stat(int k, int c) const {
  return batch_stats_.view(batchnorm_stats_offset(c, k), {c});
}

void BatchNormLayer::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  forward_with(x, Tensor(), relu_, y, ctx);
}

void BatchNormLayer::forward_residual(const Tensor& x, const Tensor& shortcut, Tensor& y, const StepContext& ctx) {
  HPCNN_CHECK_BACKEND(!relu_, kind(), ": a residual block's tail on a layer with a ReLU of its own");
  forward_with(x, shortcut, true, y, ctx);
}

void BatchNormLayer::forward_with(const Tensor& x, const Tensor& residual, bool relu, Tensor& y,
                                  const StepContext& ctx) {
  // Keras: batch statistics only when training AND trainable (a frozen layer runs in inference
  // mode), and not inside a nested model called with training=False (inference_only).
  // Written only when they change: an inference step's chunks run this on several threads at
  // once (nn/chunked_inference.h), after its first chunk set them.
  const bool batch_stats = training(ctx) && trainable();
  if (used_batch_stats_ != batch_stats) used_batch_stats_ = batch_stats;
  if (uncommitted_) uncommitted_ = false;
  if (!used_batch_stats_) {
    ops::batchnorm_forward_inference(x, gamma(), beta(), moving_mean(), moving_var(), y, epsilon_, relu, residual);
    return;
  }
  const int c = static_cast<int>(x.dim(-1));
  ensure_batch_stats(x.device(), c);
  Tensor mean = batch_stat(0, c), var = batch_stat(1, c), invstd = batch_stat(2, c);
  ops::batchnorm_forward_training(x, gamma(), beta(), y, epsilon_, relu, mean, var, invstd, residual);
  uncommitted_ = true;
}

void BatchNormLayer::backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  backward_with(x, y, dy, dx, relu_);
}

void BatchNormLayer::backward_residual(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext&) {
  // The ReLU's mask is the fused one's: y > 0. The ops leave the masked gradient in dy.
  backward_with(x, y, dy, dx, true);
}

void BatchNormLayer::backward_with(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, bool relu) {
  if (!used_batch_stats_) {  // inference mode: the statistics are constants
    // A frozen layer has no gradients to write; a trainable one in inference mode has (gamma, beta):
    // dgamma = sum g * xhat and dbeta = sum g with xhat = (x - moving_mean) * invstd(moving_var).
    // The op masks dy by the fused ReLU in place, which the inference backward after it does
    // again with the same result.
    if (trainable() && (scale_ || center_)) {
      Tensor dgamma, dbeta;
      if (scale_) dgamma = grads_[0];
      if (center_) dbeta = grads_[scale_ ? 1 : 0];
      ops::batchnorm_inference_param_gradients(x, y, dy, moving_mean(), moving_var(), epsilon_, relu,
                                               scale_ ? &dgamma : nullptr, center_ ? &dbeta : nullptr);
    }
    // Without dx (the first layer), with relu the masked gradient in dy all the same (a residual
    // block's shortcut reads it); nothing is allocated here.
    ops::batchnorm_backward_inference(y, dy, gamma(), moving_var(), epsilon_, relu, dx);
    return;
  }
  const int c = static_cast<int>(x.dim(-1));
  Tensor mean = batch_stat(0, c), invstd = batch_stat(2, c);
  Tensor dgamma, dbeta;
  if (scale_) dgamma = grads_[0];
  if (center_) dbeta = grads_[scale_ ? 1 : 0];
  ops::batchnorm_backward_training(x, y, dy, gamma(), mean, invstd, epsilon_, relu, dx, scale_ ? &dgamma : nullptr,
                                   center_ ? &dbeta : nullptr);
}

void BatchNormLayer::fold_into(const Tensor& w, const Tensor& b, Tensor& w_out, Tensor& b_out,
                               std::optional<KernelLayout> layout) const {
  ops::conv_bn_fold(w, b, gamma(), beta(), moving_mean(), moving_var(), epsilon_, w_out, b_out, layout);
}

void BatchNormLayer::commit_training_step(const StepContext&) {
  if (!uncommitted_) return;
  const int c = static_cast<int>(moving_mean().numel());
  Tensor mm = moving_mean(), mv = moving_var();
  ops::batchnorm_update_moving(mm, mv, batch_stat(0, c), batch_stat(1, c), momentum_);
  uncommitted_ = false;
}

}  // namespace hpcnn::nn
