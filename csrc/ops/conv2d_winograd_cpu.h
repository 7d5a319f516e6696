// Winograd F(4x4, 3x3) and F(2x2, 3x3) for 3x3 stride-1 convolutions with enough channels
// (conv2..conv4 of the tutorial CNN). The im2col GEMM there runs near the FMA peak, so the only
// way to go faster is fewer multiplications: F(m x m, 3x3) computes an m x m output tile from an
// a x a input tile (a = m + 2) with a*a products per (c, f) instead of 9*m*m (F(2,3): 16 vs 36,
// F(4,3): 36 vs 144), as a*a independent GEMMs
//   M[xi] (tiles x F) = V[xi] (tiles x C) * U[xi] (C x F),   xi = 0 .. a*a-1,
// with V = B^T d B (input transform), U = G g G^T (kernel transform), y = A^T m A (+ bias, ReLU).
// The tile size is chosen per output size (conv2d_winograd_cpu.cpp, tile_size).
// The same routine computes the input gradient: dx is the 3x3 stride-1 convolution of dy with
// the kernel rotated by 180 degrees, in/out channels swapped, padding 2 - pad_top/left.
// Internal to conv2d_cpu.cpp.
#pragma once

#include "ops/conv2d.h"

namespace hpcnn::cpu::winograd {

// Whether conv2d_cpu.cpp uses Winograd for this geometry (3x3, stride 1, enough channels for the
// GEMMs to pay: measured in bench/bench_ops.py, see bench/RESULTS.md "Winograd convolution").
bool applies(const Conv2dGeometry& g);

// The whole forward pass (splits the batch's tiles over hpcnn's threads itself):
// y = act(conv(x, w) + b (+ residual, y's shape, where not null)).
void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu,
             const float* residual);

// Backward-data in two steps, so that the kernel is transformed once per call (by the calling
// thread, before its parallel region) and dx is computed per thread on its images:
//   u = backward_kernel(g, w): transform of rot180(w) with in/out swapped, in the calling
//       thread's buffer (valid until that thread's next forward/backward_kernel call)
//   dx[n0 .. n0+count) = conv(dy, rot180(w)) (add: += it, else overwritten); dy already masked.
//   Uses the calling thread's scratch slots 0 and 1.
const float* backward_kernel(const Conv2dGeometry& g, const float* w);
void backward_data(const Conv2dGeometry& g, const float* u, const float* dy, float* dx, int n0, int count,
                   bool add = false);

// Backward-filter: the gradient of the Winograd-domain kernel, dU[xi] (C x F, planes C*F + 16
// floats apart) = sum over tiles of V[xi]^T dM[xi] with dM = A dY A^T, accumulated per thread
// into du_acc (filter_grad_size(g) floats) for the images [n0, n0 + count) (dy already masked;
// scratch slots 0 and 1); then, once the per-thread partials are summed, dW = G^T dU G
// (filter_grad_finish, overwrites dw).
long long filter_grad_size(const Conv2dGeometry& g);
void filter_grad(const Conv2dGeometry& g, const float* x, const float* dy, int n0, int count, float* du_acc);
void filter_grad_finish(const Conv2dGeometry& g, const float* du, float* dw);

}  // namespace hpcnn::cpu::winograd
