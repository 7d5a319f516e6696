// dense_cuda.cu's cuBLAS calls as data: each GEMM's arguments (transposes, sizes, pointers, leading
// dimensions) in plain C++, so that the host self-test (diagnostics/cuda_kernel_selftest.cpp) feeds
// the very same arguments to a reference column-major GEMM written from the cuBLAS documentation.
#pragma once

#include "ops/dense.h"

namespace hpcnn::cuda::body {

// One cublasSgemm call: C (m x n) = op(A) (m x k) * op(B) (k x n), column-major, with leading
// dimensions; a row-major (r x c) array is the column-major (c x r) array of its transpose.
struct Gemm {
  bool trans_a, trans_b;
  int m, n, k;
  const float* a;
  int lda;
  const float* b;
  int ldb;
  float* c;
  int ldc;
};

// y^T (out x N) = w^T (out x in) * x^T (in x N)
inline Gemm dense_forward_gemm(const DenseGeometry& g, const float* x, const float* w, float* y) {
  return {false, false, g.out, g.n, g.in, w, g.out, x, g.in, y, g.out};
}
// dW^T (out x in) = dy^T (out x N) * x (N x in)
inline Gemm dense_dw_gemm(const DenseGeometry& g, const float* x, const float* dy, float* dw) {
  return {false, true, g.out, g.in, g.n, dy, g.out, x, g.in, dw, g.out};
}
// dx^T (in x N) = w (in x out) * dy^T (out x N)
inline Gemm dense_dx_gemm(const DenseGeometry& g, const float* w, const float* dy, float* dx) {
  return {true, false, g.in, g.n, g.out, w, g.out, dy, g.out, dx, g.in};
}

}  // namespace hpcnn::cuda::body
