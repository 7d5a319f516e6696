// Register-blocked products for ops/small_gemm_cpu.h. With AVX2: blocks of R rows x NV*8 columns
// of C held in R*NV registers (6 x 16: 12 accumulators, 2 rows of B, 1 broadcast of A: 15 of the
// 16 ymm registers), B's row loaded once per p for the R rows, A's elements broadcast from memory.
// A column tail of fewer than 8 goes through masked loads and stores. Without AVX2: plain loops.
#include "ops/small_gemm_cpu.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/thread_pool.h"
#include "ops/elementwise.h"

namespace hpcnn::cpu {

namespace {

#if defined(__AVX2__)

// The lanes [0, valid) of a vector: a mask for _mm256_maskload_ps / _mm256_maskstore_ps.
__m256i lane_mask(int valid) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// C[0 .. R) x [0 .. NV*8) (the last vector's lanes limited to `tail` lanes when TAIL).
template <int R, int NV, bool TAIL>
void block(int k, const float* a, long long a_row, long long a_col, const float* b, long long ldb, float* c,
           long long ldc, bool accumulate, __m256i mask) {
  __m256 acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) {
      const float* ci = c + i * ldc + 8 * j;
      const bool masked = TAIL && j == NV - 1;
      acc[i][j] = !accumulate ? _mm256_setzero_ps() : masked ? _mm256_maskload_ps(ci, mask) : _mm256_loadu_ps(ci);
    }
  for (int p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    __m256 bv[NV];
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j)
      bv[j] = (TAIL && j == NV - 1) ? _mm256_maskload_ps(bp + 8 * j, mask) : _mm256_loadu_ps(bp + 8 * j);
    const float* ap = a + p * a_col;
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(ap + i * a_row);
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) {
      float* ci = c + i * ldc + 8 * j;
      if (TAIL && j == NV - 1) _mm256_maskstore_ps(ci, mask, acc[i][j]);
      else _mm256_storeu_ps(ci, acc[i][j]);
    }
}

// Every row of one column strip of NV vectors: blocks of 6 rows, then the remaining 1-5.
template <int NV, bool TAIL>
void strip(int m, int k, const float* a, long long a_row, long long a_col, const float* b, long long ldb, float* c,
           long long ldc, bool accumulate, __m256i mask) {
  constexpr int R = 6;
  int i = 0;
  for (; i + R <= m; i += R)
    block<R, NV, TAIL>(k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, accumulate, mask);
  const float* ai = a + i * a_row;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 5: block<5, NV, TAIL>(k, ai, a_row, a_col, b, ldb, ci, ldc, accumulate, mask); break;
    case 4: block<4, NV, TAIL>(k, ai, a_row, a_col, b, ldb, ci, ldc, accumulate, mask); break;
    case 3: block<3, NV, TAIL>(k, ai, a_row, a_col, b, ldb, ci, ldc, accumulate, mask); break;
    case 2: block<2, NV, TAIL>(k, ai, a_row, a_col, b, ldb, ci, ldc, accumulate, mask); break;
    case 1: block<1, NV, TAIL>(k, ai, a_row, a_col, b, ldb, ci, ldc, accumulate, mask); break;
    default: break;
  }
}

#endif

}  // namespace

const char* small_gemm_isa() {
  static const char* const isa = [] {
    const char* off = std::getenv("HPCNN_AVX512");
    if (small_gemm_avx512_usable() && !(off && std::string(off) == "0")) return "avx512";
#if defined(__AVX2__)
    return "avx2";
#else
    return "scalar";
#endif
  }();
  return isa;
}

void small_gemm(int m, int n, int k, const float* a, long long a_row, long long a_col, const float* b, long long ldb,
                float* c, long long ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  static const bool wide = std::string(small_gemm_isa()) == "avx512";
  if (wide) {
    small_gemm_avx512(m, n, k, a, a_row, a_col, b, ldb, c, ldc, accumulate);
    return;
  }
#if defined(__AVX2__)
  const __m256i full = lane_mask(8);
  int j = 0;
  for (; j + 16 <= n; j += 16) strip<2, false>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate, full);
  const int left = n - j;
  if (left == 16 || left == 0) return;
  if (left > 8) strip<2, true>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate, lane_mask(left - 8));
  else if (left == 8) strip<1, false>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate, full);
  else strip<1, true>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc, accumulate, lane_mask(left));
#else
  for (int i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    if (!accumulate)
      for (int j = 0; j < n; ++j) ci[j] = 0.f;
    for (int p = 0; p < k; ++p) {
      const float aip = a[i * a_row + p * a_col];
      const float* bp = b + p * ldb;
      for (int j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
#endif
}

void bias_act(float* y, long long rows, long long ld, long long j0, long long j1, const float* b, bool relu,
              const float* res, float relu_max) {
  const bool capped = relu && relu_max < std::numeric_limits<float>::infinity();
  for (long long r = 0; r < rows; ++r) {
    float* yr = y + r * ld;
    if (res) {
      const float* rr = res + r * ld;
      for (long long j = j0; j < j1; ++j) yr[j] += rr[j];
    }
    if (b)
      for (long long j = j0; j < j1; ++j) yr[j] += b[j];
    if (capped)
      for (long long j = j0; j < j1; ++j) yr[j] = std::min(ew::relu(yr[j]), relu_max);
    else if (relu)
      for (long long j = j0; j < j1; ++j) yr[j] = ew::relu(yr[j]);
  }
}

void cap_outputs(float* y, long long count, float relu_max) {
  parallel_for(count, [&](long long i0, long long i1, int) {
    for (long long i = i0; i < i1; ++i) y[i] = std::min(y[i], relu_max);
  }, 4096);
}

void small_gemm_by_columns(int m, int n, int k, const float* a, const float* b, float* y, const float* bias, bool relu,
                           const float* res) {
  // k in chunks of kChunk terms, every column strip of this thread per chunk: the chunk of a
  // (m x 256 floats: 32 KB for 32 rows) stays in cache while the thread's strips pass over it,
  // and each strip's chunk of b (256 x 16 floats, 16 KB) while the row blocks do. Over the whole
  // of k at once, a wide input (a Dense after Flatten at 180x180: k = 30,976) re-read b's strip
  // from memory once per block of 6 rows. The chunks continue each element's chain in order
  // (accumulate): the same bits as one pass.
  constexpr int kChunk = 256;
  parallel_for((n + 15) / 16, [&](long long s0, long long s1, int) {
    const long long j0 = s0 * 16, j1 = std::min<long long>(n, s1 * 16);
    for (int p0 = 0; p0 < k || p0 == 0; p0 += kChunk) {
      const int kc = std::min(kChunk, k - p0);
      small_gemm(m, static_cast<int>(j1 - j0), kc, a + p0, k, 1, b + (long long)p0 * n + j0, n, y + j0, n, p0 > 0);
    }
    bias_act(y, m, n, j0, j1, bias, relu, res);
  }, 2);
}

}  // namespace hpcnn::cpu
