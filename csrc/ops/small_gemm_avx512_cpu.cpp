// ops/small_gemm_cpu.h's products with AVX-512, chosen at run time (small_gemm_cpu.cpp) on a CPU
// that has it: the build stays portable (AVX2), and on an AVX-512 machine the Winograd products
// and the few-row layer products at batch 1 run 16 lanes wide. Blocks of R = 12 rows x NV*16
// columns of C in R*NV of the 32 zmm registers (12 x 32: 24 accumulators, 2 rows of B, 1
// broadcast of A), B's row loaded once per p for the R rows, A's elements broadcast from memory;
// a column tail of fewer than 16 through a lane mask.
//
// Each element of C is the same fused multiply-add chain over p = 0 .. k-1 as in the AVX2 kernel
// (the first product added to zero, or to C when accumulating): the results are the AVX2 kernel's,
// bit for bit (tests/core/ops/test_small_gemm_isa.py).
//
// Only intrinsics and this file's own functions follow the target pragma: a standard-library
// template instantiated under it could be merged with the portable build's copy by the linker.
#include "ops/small_gemm_cpu.h"

#if defined(__AVX2__) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HPCNN_SMALL_GEMM_AVX512 1
#include <immintrin.h>
#endif

namespace hpcnn::cpu {

#if defined(HPCNN_SMALL_GEMM_AVX512)

bool small_gemm_avx512_usable() {
  // libgcc's check covers the CPU's flag and the OS saving the zmm registers (XCR0).
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

#pragma GCC push_options
#pragma GCC target("avx512f,fma")

namespace {

// C[0 .. R) x [0 .. NV*16) (the last vector's lanes limited by `mask` when TAIL).
template <int R, int NV, bool TAIL>
void block512(int k, const float* a, long long a_row, long long a_col, const float* b, long long ldb, float* c,
              long long ldc, bool accumulate, __mmask16 mask) {
  __m512 acc[R][NV];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) {
      const float* ci = c + i * ldc + 16 * j;
      const bool masked = TAIL && j == NV - 1;
      acc[i][j] = !accumulate ? _mm512_setzero_ps() : masked ? _mm512_maskz_loadu_ps(mask, ci) : _mm512_loadu_ps(ci);
    }
  for (int p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    __m512 bv[NV];
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j)
      bv[j] = (TAIL && j == NV - 1) ? _mm512_maskz_loadu_ps(mask, bp + 16 * j) : _mm512_loadu_ps(bp + 16 * j);
    const float* ap = a + p * a_col;
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(ap[i * a_row]);
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) {
      float* ci = c + i * ldc + 16 * j;
      if (TAIL && j == NV - 1) _mm512_mask_storeu_ps(ci, mask, acc[i][j]);
      else _mm512_storeu_ps(ci, acc[i][j]);
    }
}

// Every row of one column strip of NV vectors: blocks of 12 rows, then the remaining 1-11.
template <int NV, bool TAIL>
void strip512(int m, int k, const float* a, long long a_row, long long a_col, const float* b, long long ldb, float* c,
              long long ldc, bool accumulate, __mmask16 mask) {
  constexpr int R = 12;
  int i = 0;
  for (; i + R <= m; i += R)
    block512<R, NV, TAIL>(k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, accumulate, mask);
  const float* ai = a + i * a_row;
  float* ci = c + i * ldc;
  switch (m - i) {
#define HPCNN_ROWS(r) \
  case r: block512<r, NV, TAIL>(k, ai, a_row, a_col, b, ldb, ci, ldc, accumulate, mask); break;
    HPCNN_ROWS(11) HPCNN_ROWS(10) HPCNN_ROWS(9) HPCNN_ROWS(8) HPCNN_ROWS(7) HPCNN_ROWS(6)
    HPCNN_ROWS(5) HPCNN_ROWS(4) HPCNN_ROWS(3) HPCNN_ROWS(2) HPCNN_ROWS(1)
#undef HPCNN_ROWS
    default: break;
  }
}

}  // namespace

void small_gemm_avx512(int m, int n, int k, const float* a, long long a_row, long long a_col, const float* b,
                       long long ldb, float* c, long long ldc, bool accumulate) {
  const __mmask16 full = 0xFFFF;
  int j = 0;
  for (; j + 32 <= n; j += 32) strip512<2, false>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate, full);
  const int left = n - j;
  if (left == 0) return;
  if (left > 16) {
    strip512<2, true>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate,
                      static_cast<__mmask16>((1u << (left - 16)) - 1));
  } else if (left == 16) {
    strip512<1, false>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate, full);
  } else {
    strip512<1, true>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate,
                      static_cast<__mmask16>((1u << left) - 1));
  }
}

#pragma GCC pop_options

#else

bool small_gemm_avx512_usable() { return false; }

void small_gemm_avx512(int, int, int, const float*, long long, long long, const float*, long long, float*, long long,
                       bool) {}

#endif

}  // namespace hpcnn::cpu
