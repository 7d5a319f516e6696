// conv2d on the GPU: cuDNN (cudnn_ops.cu) for the convolutions, our kernels for the rest. The
// kernel w and its gradient dw are in cuDNN's NHWC filter layout OHWI (= KRSC, conv2d_layout.h):
// a model on a GPU keeps its kernels so (nn/param_layout.h), so no step transposes them.
//   forward : y = conv(x, w) with bias+ReLU fused by cuDNN where it can, else y = act(y + b) by
//             bias_act (+ the residual, when one is given, before the ReLU).
//   backward: dy <- dy * (y > 0) when relu (in place, as the CPU); db = column sums of dy
//             (deterministic); dw = cuDNN backward-filter; dx = cuDNN backward-data.
// Keras 'same' padding with an odd total (more at the bottom/right) is not expressible in a
// cuDNN convolution descriptor: x is then zero-padded explicitly into scratch memory and the
// convolution runs with pad 0 (dx is computed padded and cropped).
#include "core/cuda_context.h"
#include "ops/conv2d.h"
#include "ops/cuda_kernels.h"
#include "ops/cudnn_ops.h"

namespace hpcnn::cuda {

namespace {
bool symmetric(const Conv2dGeometry& g) { return !body::conv_geom(g).padded; }
cudnn::ConvShape conv_shape(const Conv2dGeometry& g) { return body::conv_geom(g); }
}  // namespace

void conv2d_forward(int device, const Conv2dGeometry& g, const float* x, const float* w_ohwi, const float* b, float* y,
                    bool relu, const float* residual, float relu_max) {
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  const cudnn::ConvShape cs = conv_shape(g);
  const float* xin = x;
  if (!symmetric(g)) {
    ScratchPlan plan;
    size_t o_xp = plan.add<float>((long long)cs.n * cs.h * cs.w * cs.c);
    float* xp = ScratchPlan::at<float>(plan.reserve(*ctx, "conv2d forward"), o_xp);
    kernels::pad_nhwc(s, x, g.n, g.h, g.w, g.c, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, xp);
    xin = xp;
  }
  // With a residual the ReLU comes after its addition, and a capped ReLU (ReLU6) is bias_act's:
  // cuDNN fuses the bias at most, bias_act the rest.
  const bool capped = relu && relu_max < kNoReluCap;
  bool fused = cudnn::conv_forward(*ctx, cs, xin, w_ohwi, b, relu && !residual && !capped, y);
  if (!fused || residual || capped)
    kernels::bias_act(s, y, (long long)g.n * g.oh * g.ow, g.f, fused ? nullptr : b, relu, residual, relu_max);
}

void conv2d_backward(int device, const Conv2dGeometry& g, const float* x, const float* w_ohwi, const float* y,
                     float* dy, float* dx, float* dw_ohwi, float* db, bool relu, bool add_to_dx) {
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  const long long out_rows = (long long)g.n * g.oh * g.ow;
  const cudnn::ConvShape cs = conv_shape(g);
  const long long padded = symmetric(g) ? 0 : (long long)cs.n * cs.h * cs.w * cs.c;
  ScratchPlan plan;
  size_t o_part = plan.add<float>(kernels::column_sum_partials(g.f));
  size_t o_xp = plan.add<float>(padded);
  size_t o_dxp = plan.add<float>(dx ? padded : 0);
  // add_to_dx: the input gradient goes to a scratch buffer first and bias_act adds it into dx
  // (cuDNN's beta = 1 would add in place, but an algorithm that fails part way and falls back to
  // the next one would then have added twice).
  const long long dx_count = (long long)g.n * g.h * g.w * g.c;
  size_t o_dxsum = plan.add<float>(dx && add_to_dx ? dx_count : 0);
  char* base = plan.reserve(*ctx, "conv2d backward");

  if (relu) kernels::relu_mask(s, dy, y, out_rows * g.f);
  if (db) kernels::column_sum(s, dy, out_rows, g.f, ScratchPlan::at<float>(base, o_part), db);

  const float* xin = x;
  if (padded) {
    float* xp = ScratchPlan::at<float>(base, o_xp);
    kernels::pad_nhwc(s, x, g.n, g.h, g.w, g.c, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, xp);
    xin = xp;
  }
  cudnn::conv_backward_filter(*ctx, cs, xin, dy, dw_ohwi);

  if (dx) {
    float* target = add_to_dx ? ScratchPlan::at<float>(base, o_dxsum) : dx;
    if (padded) {
      float* dxp = ScratchPlan::at<float>(base, o_dxp);
      cudnn::conv_backward_data(*ctx, cs, dy, w_ohwi, dxp);
      kernels::crop_nhwc(s, dxp, g.n, g.h, g.w, g.c, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, target);
    } else {
      cudnn::conv_backward_data(*ctx, cs, dy, w_ohwi, target);
    }
    if (add_to_dx) kernels::bias_act(s, dx, (long long)g.n * g.h * g.w, g.c, nullptr, false, target);
  }
}

}  // namespace hpcnn::cuda
