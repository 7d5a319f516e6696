// The memory layouts of a conv2d kernel, and the conversion between them.
//
//   HWIO (kh, kw, in, out): Keras' layout, hence what get_weights/set_weights, model files and the
//        Python ops entry points (hpcnn._core.ops.conv2d_*) use on every device; also the layout
//        the CPU backend computes with (im2col: the kernel is a (kh*kw*in) x out matrix).
//   OHWI (out, kh, kw, in): cuDNN's filter layout for NHWC data (cudnnSetFilter4dDescriptor with
//        CUDNN_TENSOR_NHWC, dims k, c, h, w: memory K x R x S x C, C innermost, "KRSC"); the layout
//        the CUDA backend computes with, so that no step transposes a kernel.
// Which backend takes which layout is declared in conv2d.h (cpu::kConv2dKernelLayout,
// cuda::kConv2dKernelLayout) and asked through ops::conv2d_kernel_layout(device). A model keeps its
// kernels in its device's layout and converts only when weights cross its boundary (nn/param_layout.h).
//
// The two layouts are one 2-D transpose apart: HWIO is a row-major (kh*kw*in) x out matrix and
// OHWI is its transpose, out x (kh*kw*in).
#pragma once

#include "core/tensor.h"

namespace hpcnn {

enum class KernelLayout { HWIO, OHWI };

// "HWIO (kh, kw, in, out)" / "OHWI (out, kh, kw, in)": for error messages.
const char* kernel_layout_name(KernelLayout l);

// A conv2d kernel's sizes, whatever its layout.
struct KernelDims {
  long long kh = 0, kw = 0, in = 0, out = 0;
  long long numel() const { return kh * kw * in * out; }
};

// The shape of a kernel with dimensions `d` in layout `l`.
Shape kernel_shape(KernelLayout l, const KernelDims& d);
// The dimensions a 4-D `shape` has when read in layout `l` (ValueError naming `what` when not 4-D).
KernelDims kernel_dims(KernelLayout l, const Shape& shape, const char* what = "conv2d kernel");

// Host arrays: `dst` = the kernel `src` (dimensions `d`, layout `from`) in layout `to`. A plain copy
// when the layouts are equal. src and dst must not overlap.
void convert_kernel_layout(const float* src, KernelLayout from, float* dst, KernelLayout to, const KernelDims& d);

// A new tensor on `device` holding kernel `w` (any device, layout `from`) in layout `to`. The
// conversion runs on the host (weights cross a device boundary here anyway); ValueError when w is
// not a 4-D float32 tensor.
Tensor convert_kernel(const Tensor& w, KernelLayout from, KernelLayout to, Device device);

}  // namespace hpcnn
