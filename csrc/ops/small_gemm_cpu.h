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

#include <limits>

namespace hpcnn::cpu {

// C (m x n, row stride ldc) = A * B, or C += A * B when `accumulate`, where A is m x k with its
// element (i, p) at a[i * a_row + p * a_col] (a_row = lda, a_col = 1: A as stored; a_row = 1,
// a_col = lda: the transpose of a stored k x m matrix) and B is k x n with row stride ldb.
// n need not be a multiple of 8 (the tail goes through a masked load and store).
void small_gemm(int m, int n, int k, const float* a, long long a_row, long long a_col, const float* b, long long ldb,
                float* c, long long ldc, bool accumulate);

// small_gemm on a CPU with AVX-512 (ops/small_gemm_avx512_cpu.cpp): the same results, bit for bit;
// small_gemm calls it where small_gemm_isa() says "avx512". Not for other callers.
bool small_gemm_avx512_usable();
void small_gemm_avx512(int m, int n, int k, const float* a, long long a_row, long long a_col, const float* b,
                       long long ldb, float* c, long long ldc, bool accumulate);

// Which kernel small_gemm runs: "avx512" where the CPU (and the OS) has AVX-512F, unless the
// environment variable HPCNN_AVX512 is 0 when the process first asks; else "avx2" (or "scalar" in
// a build without AVX2). Decided once per process.
const char* small_gemm_isa();

// The epilogue of a layer's product: y[r, j] = act(y[r, j] + res[r, j] + b[j]) for the columns
// [j0, j1) of `rows` rows (row stride ld); b (bias) and res (a residual beside y, same stride) may
// be null; act is ReLU when relu, capped at relu_max (ReLU6: 6; infinity: none).
void bias_act(float* y, long long rows, long long ld, long long j0, long long j1, const float* b, bool relu,
              const float* res, float relu_max = std::numeric_limits<float>::infinity());
// y[i] = min(y[i], relu_max) for i < count, over the threads: the cap of a ReLU another kernel
// applied (a convolution path whose output stage has no cap of its own).
void cap_outputs(float* y, long long count, float relu_max);

// A layer's forward product for a few rows (a prediction of a few samples, a deep layer at batch
// 1): y (m x n, row stride n) = act(a (m x k, row stride k) * b (k x n) + bias (+ res)), the
// threads splitting the columns 16 at a time (a split over rows would leave all but one idle, and
// a BLAS sgemm packs the whole of b first: perf, the tutorial CNN at batch 1, OpenBLAS' copy 15 %
// of the call). Every element is one chain over k: the bits do not depend on the thread count.
void small_gemm_by_columns(int m, int n, int k, const float* a, const float* b, float* y, const float* bias, bool relu,
                           const float* res);

}  // namespace hpcnn::cpu
