// The small matrix products of the Winograd convolution (ops/conv2d_winograd_cpu.cpp), on the CPU:
// a few dozen rows by 16-128 columns over 16-128 terms, from and into the caches. A general BLAS
// packs both operands into its own layout before it multiplies and zeroes C in a pass of its own;
// at these sizes that costs as much as the products (measured with perf on ResNet-20's first
// stage, C = F = 16: OpenBLAS' copy and beta passes 14 % of the convolution, its kernel 13 %).
// These kernels read the operands where they lie and write C once.
//
// Every element of C is one fused multiply-add chain over p = 0 .. k-1 in order, whatever the
// shape of the call: the result of a row does not depend on which rows share the call, so the
// convolution's output does not depend on how its tiles are grouped or split over threads.
#pragma once

namespace hpcnn::cpu {

// C (m x n, row stride ldc) = A * B, or C += A * B when `accumulate`, where A is m x k with its
// element (i, p) at a[i * a_row + p * a_col] (a_row = lda, a_col = 1: A as stored; a_row = 1,
// a_col = lda: the transpose of a stored k x m matrix) and B is k x n with row stride ldb.
// n need not be a multiple of 8 (the tail goes through a masked load and store).
void small_gemm(int m, int n, int k, const float* a, long long a_row, long long a_col, const float* b, long long ldb,
                float* c, long long ldc, bool accumulate);

}  // namespace hpcnn::cpu
