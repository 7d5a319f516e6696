// Direct convolution for layers with few input channels (an RGB or grey first layer): there
// the im2col GEMM has K = kh*kw*c = 27 or 25, too thin for the BLAS (measured: 40 GFLOP/s of
// 100 on one core); and for strided kernels (a ResNet's 3x3 stride-2 downsampling), where the
// im2col copy and a GEMM with few filters cost more than computing in place. These kernels keep a
// block of output pixels x filters in AVX registers instead. Internal to conv2d_cpu.cpp.
#pragma once

#include "ops/conv2d.h"

namespace hpcnn::cpu::direct {

// Whether the direct kernels handle this geometry (and were compiled: AVX2+FMA).
bool applies(const Conv2dGeometry& g);

// y (count images from n0; of each, the output rows [oy0, oy1), oy1 < 0: to the last) =
// act(conv(x) + b). xpad: scratch of padded_size(g) floats. A pixel's result does not depend on
// the rows or images computed with it.
void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu, int n0,
             int count, float* xpad, int oy0 = 0, int oy1 = -1);
// dw_acc (K x F) += col^T * dy for the images [n0, n0 + count). dy is already masked, unless y
// is given: then the kernel applies the fused ReLU's mask (y > 0) itself, row by row, without
// changing dy; db_acc (F), when given, += dy's (masked) column sums.
void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw_acc, int n0, int count,
                     float* xpad, const float* y = nullptr, float* db_acc = nullptr);
long long padded_size(const Conv2dGeometry& g);

}  // namespace hpcnn::cpu::direct
