// The one operator interface that layers call. Each function checks its tensors (shapes, dtypes,
// one device for all) and throws ValueError naming the operator and the shapes, then runs the
// CPU or the CUDA implementation according to the tensors' device. Layers never see a backend.
// Each operator's definitions sit beside its backends: conv2d_forward in conv2d.cpp, next to
// conv2d_cpu.cpp and conv2d_cuda.cu (the family's header is named at each group below); the
// checks they share are in dispatch.h.
//
// Layout: activations NHWC (channels innermost). Measured on the CPU (see docs/performance.md, "Why NHWC"):
// im2col for NHWC copies whole channel runs and the GEMM result is already the NHWC output,
// and it is Keras' own layout, so weights and inputs move without transposes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/augment.h"
#include "ops/batchnorm.h"
#include "ops/conv2d.h"
#include "ops/dense.h"
#include "ops/depthwise_conv2d.h"
#include "ops/global_pool2d.h"
#include "ops/loss_metrics.h"
#include "ops/maxpool2d.h"
#include "ops/multiply.h"
#include "ops/optimizer_step.h"
#include "ops/param_segments.h"
#include "ops/pad2d.h"
#include "ops/relu_clip.h"

namespace hpcnn::ops {

// x (N,H,W,C), w (kh,kw,C,F) or (F,kh,kw,C), b (F,) -> y (N,OH,OW,F).
// The kernel (and dw) is in the layout the backend of its device takes (ops/conv2d_layout.h):
// HWIO (kh,kw,C,F) on the CPU, OHWI (F,kh,kw,C) on a GPU. Shapes are checked against that layout
// (a ValueError names the op, the layout and the shapes); a model keeps its kernels so, and
// converts to and from Keras' HWIO only where weights cross its boundary.
// No bias (use_bias=False): b undefined in forward, db undefined in backward.
// `residual` (y's shape; undefined: none) is added before the ReLU: y = act(conv + b + residual),
// a residual block's Add and ReLU in the convolution's output stage (inference, nn/step_plan.h).
// relu_max caps the ReLU (ReLU6: 6; kNoReluCap: none).
KernelLayout conv2d_kernel_layout(const Device& d);
Conv2dGeometry conv2d_geometry(const Tensor& x, const Tensor& w, int sh, int sw, Padding pad);
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, int sh, int sw, Padding pad,
                    bool relu, const Tensor& residual = Tensor(), float relu_max = kNoReluCap);
// dx may be undefined (not computed). dy is masked in place when relu. add_to_dx: dx += the input
// gradient (a tensor read by several layers gathers its gradient in place, nn/step_plan.h AddInto)
// instead of dx = it.
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& y, Tensor& dy, Tensor* dx, Tensor& dw,
                     Tensor& db, int sh, int sw, Padding pad, bool relu, bool add_to_dx = false);

// A BatchNormalization in inference mode folded into the convolution before it (conv_bn_fold.h):
// w_out (w's shape and layout), b_out (F,) such that conv2d_forward(x, w_out, b_out) is the
// convolution (w, b; b undefined: none) followed by the normalization with the moving statistics
// (gamma/beta undefined: 1/0). `layout`: the kernel's, where it is not the device's conv2d layout
// (a depthwise kernel, Keras' (kh, kw, c, m) on every device, folds as HWIO viewed (kh, kw, 1, c*m)).
void conv_bn_fold(const Tensor& w, const Tensor& b, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                  const Tensor& moving_var, float eps, Tensor& w_out, Tensor& b_out,
                  std::optional<KernelLayout> layout = std::nullopt);

// Depthwise convolution (depthwise_conv2d.h): x (N,H,W,C), w (kh,kw,C,m) Keras' layout on every
// device, b (C*m,) or undefined -> y (N,OH,OW,C*m). Backward: dx (may be null), dw, db (undefined:
// no bias) overwritten. relu: y = min(max(y, 0), relu_max) in the output stage (a ReLU6 after a
// folded BatchNormalization, nn/step_plan.h).
DepthwiseGeometry depthwise_conv2d_geometry(const Tensor& x, const Tensor& w, int sh, int sw, int dh, int dw,
                                            Padding pad);
void depthwise_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, int sh, int sw, int dh,
                              int dw, Padding pad, bool relu = false, float relu_max = kNoReluCap);
void depthwise_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx, Tensor& dw_out,
                               Tensor& db, int sh, int sw, int dh, int dw, Padding pad);

// x (N,H,W,C) -> y (N,OH,OW,C)
Pool2dGeometry maxpool2d_geometry(const Tensor& x, int ph, int pw, int sh, int sw, Padding pad);
void maxpool2d_forward(const Tensor& x, Tensor& y, int ph, int pw, int sh, int sw, Padding pad);
void maxpool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx, int ph, int pw, int sh,
                        int sw, Padding pad);

// x (N,in), w (in,out), b (out,) -> y (N,out); b / db undefined: no bias (use_bias=False).
void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, bool relu);
void dense_backward(const Tensor& x, const Tensor& w, const Tensor& y, Tensor& dy, Tensor* dx, Tensor& dw,
                    Tensor& db, bool relu);

// x (N,H,W,C) -> y (N,OH,OW,C): the mean of each window's in-bounds positions (avgpool2d.h).
Pool2dGeometry avgpool2d_geometry(const Tensor& x, int ph, int pw, int sh, int sw, Padding pad);
void avgpool2d_forward(const Tensor& x, Tensor& y, int ph, int pw, int sh, int sw, Padding pad);
void avgpool2d_backward(const Tensor& dy, Tensor& dx, int ph, int pw, int sh, int sw, Padding pad);

// x (N,H,W,C) -> y (N,C) (or (N,1,1,C): the same memory) (global_pool2d.h).
void global_avgpool2d_forward(const Tensor& x, Tensor& y);
void global_avgpool2d_backward(const Tensor& dy, Tensor& dx);
void global_maxpool2d_forward(const Tensor& x, Tensor& y);
void global_maxpool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx);

// x (N,H,W,C) -> y (N,H+top+bottom,W+left+right,C), zeros around; backward crops (pad2d.h).
void zero_pad2d_forward(const Tensor& x, Tensor& y, int top, int bottom, int left, int right);
void zero_pad2d_backward(const Tensor& dy, Tensor& dx, int top, int bottom, int left, int right);

// Batch normalization over the last axis (batchnorm.h): x (N, ..., C); gamma, beta, the moving
// statistics and mean/var/invstd are (C,); gamma/beta undefined = 1/0 (scale/center=False).
// residual (x's shape) or undefined: y = act(normalized + residual).
void batchnorm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, float eps,
                                bool relu, Tensor& mean, Tensor& var, Tensor& invstd,
                                const Tensor& residual = Tensor());
void batchnorm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                                 const Tensor& moving_var, Tensor& y, float eps, bool relu,
                                 const Tensor& residual = Tensor());
// With relu, dy is overwritten with the masked gradient; dx, dgamma, dbeta may be null (not computed).
void batchnorm_backward_training(const Tensor& x, const Tensor& y, Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                 const Tensor& invstd, float eps, bool relu, Tensor* dx, Tensor* dgamma, Tensor* dbeta);
// dx null: with relu, only the masked gradient left in dy (a residual block's shortcut reads it).
void batchnorm_backward_inference(const Tensor& y, Tensor& dy, const Tensor& gamma, const Tensor& moving_var, float eps,
                                  bool relu, Tensor* dx);
// A trainable layer run in inference mode: its gamma/beta gradients with the moving statistics as
// the constants (batchnorm.h); with relu, dy is overwritten with the masked gradient. dgamma or
// dbeta may be null, not both.
void batchnorm_inference_param_gradients(const Tensor& x, const Tensor& y, Tensor& dy, const Tensor& moving_mean,
                                         const Tensor& moving_var, float eps, bool relu, Tensor* dgamma, Tensor* dbeta);
void batchnorm_update_moving(Tensor& moving_mean, Tensor& moving_var, const Tensor& mean, const Tensor& var,
                             float momentum);

// x (..., C): y = x * scale + offset per channel; scale, offset (C,) (scale_shift.h).
void scale_shift_forward(const Tensor& x, const Tensor& scale, const Tensor& offset, Tensor& y);
void scale_shift_backward(const Tensor& dy, const Tensor& scale, Tensor& dx);
// Keras' Normalization as a scale_shift: scale = 1 / max(sqrt(var), eps), offset = -mean * scale;
// all (C,) on one device.
void normalization_constants(const Tensor& mean, const Tensor& var, float eps, Tensor& scale, Tensor& offset);

void relu_forward(const Tensor& x, Tensor& y);
void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx);
// Keras' ReLU(max_value, negative_slope, threshold) in any combination (relu_clip.h); the
// parameters are checked (finite, slope and max_value >= 0).
void relu_clip_forward(const ReluClipParams& p, const Tensor& x, Tensor& y);
void relu_clip_backward(const ReluClipParams& p, const Tensor& x, const Tensor& dy, Tensor& dx);
// over the last axis
void softmax_forward(const Tensor& x, Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);
// The element-wise activations of ops/activation.h (alpha: LeakyReLU's slope, ELU's alpha).
// Backward takes the forward's input and output (each kind's derivative reads what it needs).
void activation_forward(Act a, float alpha, const Tensor& x, Tensor& y);
void activation_backward(Act a, float alpha, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx);

// The mask of element i is the draw of counter offset + i (ops/dropout.h): a data-parallel replica
// passes its first global row times the elements per row, so a sample's mask is the same on any
// number of replicas.
void dropout_forward(const Tensor& x, Tensor& y, float rate, uint64_t seed, uint64_t stream, uint64_t offset = 0);
void dropout_backward(const Tensor& dy, Tensor& dx, float rate, uint64_t seed, uint64_t stream, uint64_t offset = 0);

// logits (N,K); target: float (N,K) one-hot or int32 (N,) class indices (range-checked here when
// on the host). stats: 2 doubles owned by the caller on the logits' device, accumulated into:
// [loss_sum, correct]. dlogits may be null. row_w (may be null): float32 (N,) per-row weights of
// the loss and gradient (not of `correct`); label_smoothing: one-hot targets only.
void softmax_xent(const Tensor& logits, const Tensor& target, Tensor* dlogits, float grad_scale, double* stats,
                  const Tensor* row_w = nullptr, float label_smoothing = 0.f);

// The other losses and the metrics (ops/loss_metrics.h). pred (N,K) float32; target float32 (N,K)
// (row_loss, and the metrics) or int32 (N,) class indices (the accuracies, row_weights).
// w, sample_weight: float32 (N,) or null; class_weight: float32 (C,) or null; stats / out: a
// double on pred's device, accumulated into; dpred may be null.
void row_loss(const RowLossParams& p, const Tensor& pred, const Tensor& target, const Tensor* w, Tensor* dpred,
              float grad_scale, double* stats);
void row_weights(const Tensor& target, const Tensor* sample_weight, const Tensor* class_weight, Tensor& w);
void metric_rows(const RowMetricParams& p, const Tensor& pred, const Tensor& target, double* out);

// ---- over a model's variables: a segment table (ops/param_segments.h) on the tensors' device names
// the elements of the flat buffers each op touches (the trainable variables) and groups them into
// variables; elements outside it are never read or written.
// Fixed-order sums (ops/param_norms.h): sums = 2 * segs.variables() doubles on x's device.
void variable_sums(const Tensor& x, const SegmentTable& segs, double* sums);
// Keras' clip factor per variable (PerVariable: clipnorm; Global: global_clipnorm) into scales
// (float32, one per variable), for the update ops' UpdateOptions.
enum class ClipMode { PerVariable, Global };
void clip_scales(const Tensor& grads, const SegmentTable& segs, ClipMode mode, double clipnorm, Tensor& scales);
// The weight regularizers' penalty added to *penalty (a double on params' device; may be null) and,
// grads given, its gradient added to grads. Factors: the table's l1 and l2.
void weight_penalty(const Tensor& params, Tensor* grads, const SegmentTable& segs, double* penalty);

// Optimizer updates (ops/optimizer_step.h). State buffers have the parameters' shape; an unused
// state (SGD's velocity without momentum, RMSprop's momentum without momentum, its average
// gradient when not centered) may be null.
struct UpdateOptions {
  const Tensor* clip_scales = nullptr;  // from clip_scales(), or null
  float clipvalue = 0.f;                // > 0: clamp gradients to [-clipvalue, clipvalue]
  float decay = 0.f;                    // weight_decay * learning_rate (variables with decay set)
};
void sgd_step(Tensor& params, const Tensor& grads, Tensor* velocity, const SegmentTable& segs, const SgdParams& s,
              const UpdateOptions& o = {});
void adam_step(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, const SegmentTable& segs,
               const AdamParams& a, const UpdateOptions& o = {});
void rmsprop_step(Tensor& params, const Tensor& grads, Tensor& velocity, Tensor* momentum, Tensor* average_gradient,
                  const SegmentTable& segs, const RmspropParams& r, const UpdateOptions& o = {});

// Element-wise sums (ops/add.h): y = xs[0] + xs[1] + ... (two or more float32 tensors of one
// shape, summed left to right), and dst += src. An output may be one of the inputs.
void add_n(const std::vector<Tensor>& xs, Tensor& y);
void accumulate(Tensor& dst, const Tensor& src);

// Concatenation (ops/concat.h) of tensors along `axis` of the full shape (0 is the batch axis and
// is refused; negative counts from the end): all dimensions but `axis` must agree, and y's `axis`
// is their sum. split is its backward: dxs[i] (null: not needed) gets the part of dy that input i
// gave, `sizes[i]` long along the axis.
void concat(const std::vector<Tensor>& xs, Tensor& y, int axis);
void split(const Tensor& dy, const std::vector<long long>& sizes, const std::vector<Tensor*>& dxs, int axis);
// Element-wise product with Keras' broadcasting (multiply.h): each axis of a and b equal or 1, the
// same rank, the batch axis never broadcast; y has the broadcast shape (broadcast_shape: a
// ValueError naming both shapes when they do not fit). Backward: da, db (null: not computed) of
// the operands' shapes, a broadcast operand's gradient summed over its broadcast axes.
Shape broadcast_shape(const Shape& a, const Shape& b, const char* op);
BroadcastGeometry multiply_geometry(const Tensor& a, const Tensor& b, const char* op);
void multiply_forward(const Tensor& a, const Tensor& b, Tensor& y);
void multiply_backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da, Tensor* db);
// dst = src (the same element count, one device), on the device's compute stream.
void copy(const Tensor& src, Tensor& dst);

// uint8 (N, ..., C) -> float32 same shape; scale/shift: `C` host floats each.
void decode_u8(const Tensor& x, Tensor& y, const float* scale, const float* shift);

// Image augmentation (augment.h: Keras' RandomFlip, RandomTranslation, RandomRotation, RandomZoom,
// RandomCrop):
// x (n, h, w, c) float32 -> y (n, oh, ow, c) float32 on x's device.
void augment(const Tensor& x, Tensor& y, const AugmentSpec& s, const AugmentDraw& d);
// The batch stager's pass on the host: sample i is row rows[i] of x (N, h, w, c) (rows null: row
// i), float32, or uint8 decoded with scale/shift (one host float per channel each) -> y (n, oh,
// ow, c) float32 host. Gather, decode and augmentation in one pass.
void augment_rows(const Tensor& x, const long long* rows, const float* scale, const float* shift, Tensor& y,
                  const AugmentSpec& s, const AugmentDraw& d);

// Throws ValueError when a float tensor holds NaN or inf (CPU tensors only; a no-op on the GPU).
void check_finite(const Tensor& t, const char* what);

}  // namespace hpcnn::ops
