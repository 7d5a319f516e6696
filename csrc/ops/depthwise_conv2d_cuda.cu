// Depthwise convolution on the GPU: cuDNN's grouped convolution (cudnn_ops.cu; group count = the
// input channels), which has dedicated depthwise kernels. The model keeps the kernel in Keras'
// (kh, kw, c, m) layout on every device (a plain parameter): each call moves it to cuDNN's KRSC
// (c*m, kh, kw, 1) in scratch memory and the kernel gradient back (kh*kw*c*m values: a few
// microseconds, against the convolution's pass over the activations). Bias: our bias kernel and
// column sums (deterministic), as conv2d.
#include "core/cuda_check.h"
#include "core/cuda_context.h"
#include "ops/cuda_kernels.h"
#include "ops/cudnn_ops.h"
#include "ops/depthwise_conv2d.h"
#include "ops/depthwise_conv2d_body.h"

namespace hpcnn::cuda {

namespace {

// to_krsc: dst (oc, taps) = src (taps, oc) transposed; else the way back.
__global__ void kernel_layout_kernel(const float* src, float* dst, int taps, int oc, bool to_krsc) {
  const long long count = (long long)taps * oc;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const long long k = body::depthwise_keras_index(i, taps, oc);
    if (to_krsc) dst[i] = src[k];
    else dst[k] = src[i];
  }
}

void move_kernel(cudaStream_t s, const float* src, float* dst, int taps, int oc, bool to_krsc) {
  const long long count = (long long)taps * oc;
  kernel_layout_kernel<<<blocks_for(count), 256, 0, s>>>(src, dst, taps, oc, to_krsc);
  HPCNN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void depthwise_conv2d_forward(int device, const DepthwiseGeometry& g, const float* x, const float* w, const float* b,
                              float* y, bool relu, float relu_max) {
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  const cudnn::ConvShape cs = body::depthwise_geom(g);
  const int taps = g.kh * g.kw, oc = g.oc();
  ScratchPlan plan;
  const size_t o_w = plan.add<float>((size_t)taps * oc);
  const size_t o_xp = plan.add<float>(cs.padded ? (size_t)cs.n * cs.h * cs.w * cs.c : 0);
  char* base = plan.reserve(*ctx, "depthwise_conv2d forward");
  float* wk = ScratchPlan::at<float>(base, o_w);
  move_kernel(s, w, wk, taps, oc, true);
  const float* xin = x;
  if (cs.padded) {
    float* xp = ScratchPlan::at<float>(base, o_xp);
    kernels::pad_nhwc(s, x, g.n, g.h, g.w, g.c, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, xp);
    xin = xp;
  }
  cudnn::conv_forward(*ctx, cs, xin, wk, nullptr, false, y);  // no bias: never the fused call
  if (b || relu) kernels::bias_act(s, y, (long long)g.n * g.oh * g.ow, oc, b, relu, nullptr, relu_max);
}

void depthwise_conv2d_backward(int device, const DepthwiseGeometry& g, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db) {
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  const cudnn::ConvShape cs = body::depthwise_geom(g);
  const int taps = g.kh * g.kw, oc = g.oc();
  const size_t padded = cs.padded ? (size_t)cs.n * cs.h * cs.w * cs.c : 0;
  ScratchPlan plan;
  const size_t o_w = plan.add<float>((size_t)taps * oc);
  const size_t o_dw = plan.add<float>((size_t)taps * oc);
  const size_t o_part = plan.add<float>(db ? kernels::column_sum_partials(oc) : 0);
  const size_t o_xp = plan.add<float>(padded);
  const size_t o_dxp = plan.add<float>(dx ? padded : 0);
  char* base = plan.reserve(*ctx, "depthwise_conv2d backward");
  if (db) kernels::column_sum(s, dy, (long long)g.n * g.oh * g.ow, oc, ScratchPlan::at<float>(base, o_part), db);

  const float* xin = x;
  if (padded) {
    float* xp = ScratchPlan::at<float>(base, o_xp);
    kernels::pad_nhwc(s, x, g.n, g.h, g.w, g.c, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, xp);
    xin = xp;
  }
  float* dwk = ScratchPlan::at<float>(base, o_dw);
  cudnn::conv_backward_filter(*ctx, cs, xin, dy, dwk);
  move_kernel(s, dwk, dw, taps, oc, false);

  if (dx) {
    float* wk = ScratchPlan::at<float>(base, o_w);
    move_kernel(s, w, wk, taps, oc, true);
    if (padded) {
      float* dxp = ScratchPlan::at<float>(base, o_dxp);
      cudnn::conv_backward_data(*ctx, cs, dy, wk, dxp);
      kernels::crop_nhwc(s, dxp, g.n, g.h, g.w, g.c, g.pad_top, g.pad_bottom, g.pad_left, g.pad_right, dx);
    } else {
      cudnn::conv_backward_data(*ctx, cs, dy, wk, dx);
    }
  }
}

}  // namespace hpcnn::cuda
