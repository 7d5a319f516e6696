// conv2d, NHWC activations, bias (out), the kernel in the layout its backend takes (below):
//   y[n, oy, ox, f] = b[f] + sum_{ky, kx, c} x[n, oy*sh + ky - pad_top, ox*sw + kx - pad_left, c] * w[ky, kx, c, f]
// with w indexed as Keras' HWIO kernel (the CUDA backend's OHWI kernel holds w[ky, kx, c, f] at
// [f, ky, kx, c]), optionally followed by ReLU (fused; a residual, where given, is added before it). Padding follows Keras: 'valid' none; 'same' makes
// out = ceil(in / stride) and pads total = max((out - 1) * stride + k - in, 0), top/left getting
// total / 2 (the extra row/column, when odd, goes to the bottom/right).
// The bias is optional (Keras' use_bias=False): b null means none, and db null is not computed.
// CPU: conv2d_cpu.cpp; CUDA: conv2d_cuda.cu (cuDNN calls live in cudnn_ops.cu).
#pragma once

#include <limits>
#include <string>

#include "ops/conv2d_layout.h"

namespace hpcnn {

// A convolution's ReLU capped at relu_max (ReLU6: 6), where the inference plan gives it a ReLU6
// that follows its folded BatchNormalization (nn/step_plan.h, `capped`); this: no cap.
constexpr float kNoReluCap = std::numeric_limits<float>::infinity();

enum class Padding { Valid, Same };
Padding parse_padding(const std::string& s);  // "valid" | "same", ValueError otherwise

struct Conv2dGeometry {
  int n, h, w, c;    // input
  int f, kh, kw;     // filters, kernel
  int sh, sw;        // strides
  int oh, ow;        // output
  int pad_top, pad_left, pad_bottom, pad_right;
  // ValueError when the output would be empty or arguments are non-positive.
  static Conv2dGeometry make(int n, int h, int w, int c, int f, int kh, int kw, int sh, int sw, Padding pad);
  double forward_flops() const { return 2.0 * n * oh * ow * f * (double)kh * kw * c; }
};

// Output size and leading padding of one spatial axis under Keras rules.
void keras_padding(int in, int k, int stride, Padding pad, int& out, int& pad_before, int& pad_after);

// Each backend declares the kernel layout it takes (w, and dw in backward); ops::conv2d_kernel_layout
// answers it per device, and ops.h checks kernels' shapes against it.
namespace cpu {
constexpr KernelLayout kConv2dKernelLayout = KernelLayout::HWIO;  // im2col GEMM with Keras' kernel as is
// w and dw in HWIO. residual: null, or y's shape, added before the ReLU. relu_max: the ReLU's cap.
void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu,
                    const float* residual = nullptr, float relu_max = kNoReluCap);
// y is the forward output (used for the ReLU mask when relu); dy is overwritten with the masked
// gradient when relu. dx may be null (first layer); add_to_dx: dx += the input gradient, else dx =
// it. dw, db are overwritten (not accumulated).
void conv2d_backward(const Conv2dGeometry& g, const float* x, const float* w, const float* y, float* dy, float* dx,
                     float* dw, float* db, bool relu, bool add_to_dx = false);
}  // namespace cpu

namespace cuda {
constexpr KernelLayout kConv2dKernelLayout = KernelLayout::OHWI;  // cuDNN's NHWC filter layout (KRSC)
// As the CPU functions, with w and dw in OHWI.
void conv2d_forward(int device, const Conv2dGeometry& g, const float* x, const float* w_ohwi, const float* b, float* y,
                    bool relu, const float* residual = nullptr, float relu_max = kNoReluCap);
void conv2d_backward(int device, const Conv2dGeometry& g, const float* x, const float* w_ohwi, const float* y,
                     float* dy, float* dx, float* dw_ohwi, float* db, bool relu, bool add_to_dx = false);
}  // namespace cuda

}  // namespace hpcnn
