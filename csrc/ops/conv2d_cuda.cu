// conv2d on the GPU: cuDNN (cudnn_ops.cu) for the convolutions, our kernels for the rest.
//   forward : wT = transpose(w) [Keras RSCK -> cuDNN KRSC]; y = conv(x, wT) with bias+ReLU fused
//             by cuDNN where it can, else y = act(y + b) by bias_act.
//   backward: dy <- dy * (y > 0) when relu (in place, as the CPU); db = column sums of dy
//             (deterministic); dWT = cuDNN backward-filter, dw = transpose(dWT);
//             dx = cuDNN backward-data with wT.
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

void conv2d_forward(int device, const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y,
                    bool relu) {
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  const long long K = (long long)g.kh * g.kw * g.c;
  const cudnn::ConvShape cs = conv_shape(g);
  ScratchPlan plan;
  size_t o_wt = plan.add<float>(K * g.f);
  size_t o_xp = plan.add<float>(symmetric(g) ? 0 : (long long)cs.n * cs.h * cs.w * cs.c);
  char* base = plan.reserve(*ctx, "conv2d forward");
  float* wt = ScratchPlan::at<float>(base, o_wt);
  kernels::transpose(s, w, K, g.f, wt);
  const float* xin = x;
  if (!symmetric(g)) {
    float* xp = ScratchPlan::at<float>(base, o_xp);
    kernels::pad_nhwc(s, x, g.n, g.h, g.w, g.c, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, xp);
    xin = xp;
  }
  bool fused = cudnn::conv_forward(*ctx, cs, xin, wt, b, relu, y);
  if (!fused) kernels::bias_act(s, y, (long long)g.n * g.oh * g.ow, g.f, b, relu);
}

void conv2d_backward(int device, const Conv2dGeometry& g, const float* x, const float* w, const float* y, float* dy,
                     float* dx, float* dw, float* db, bool relu) {
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  const long long K = (long long)g.kh * g.kw * g.c;
  const long long out_rows = (long long)g.n * g.oh * g.ow;
  const cudnn::ConvShape cs = conv_shape(g);
  const long long padded = symmetric(g) ? 0 : (long long)cs.n * cs.h * cs.w * cs.c;
  ScratchPlan plan;
  size_t o_wt = plan.add<float>(dx ? K * g.f : 0);
  size_t o_dwt = plan.add<float>(K * g.f);
  size_t o_part = plan.add<float>(kernels::column_sum_partials(g.f));
  size_t o_xp = plan.add<float>(padded);
  size_t o_dxp = plan.add<float>(dx ? padded : 0);
  char* base = plan.reserve(*ctx, "conv2d backward");

  if (relu) kernels::relu_mask(s, dy, y, out_rows * g.f);
  kernels::column_sum(s, dy, out_rows, g.f, ScratchPlan::at<float>(base, o_part), db);

  const float* xin = x;
  if (padded) {
    float* xp = ScratchPlan::at<float>(base, o_xp);
    kernels::pad_nhwc(s, x, g.n, g.h, g.w, g.c, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, xp);
    xin = xp;
  }
  float* dwt = ScratchPlan::at<float>(base, o_dwt);
  cudnn::conv_backward_filter(*ctx, cs, xin, dy, dwt);
  kernels::transpose(s, dwt, g.f, K, dw);  // KRSC (F x K) -> Keras RSCK (K x F)

  if (dx) {
    float* wt = ScratchPlan::at<float>(base, o_wt);
    kernels::transpose(s, w, K, g.f, wt);
    if (padded) {
      float* dxp = ScratchPlan::at<float>(base, o_dxp);
      cudnn::conv_backward_data(*ctx, cs, dy, wt, dxp);
      kernels::crop_nhwc(s, dxp, g.n, g.h, g.w, g.c, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, dx);
    } else {
      cudnn::conv_backward_data(*ctx, cs, dy, wt, dx);
    }
  }
}

}  // namespace hpcnn::cuda
