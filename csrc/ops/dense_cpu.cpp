// Dense on the CPU: CBLAS sgemm with hpcnn's threads splitting rows (forward, dx) or kernel
// rows (dW), so no thread needs another's partial results and the split is deterministic; a
// forward pass of a few rows splits the columns instead (small_gemm).
#include <algorithm>

#include "core/thread_pool.h"
#include "ops/blas.h"
#include "ops/dense.h"
#include "ops/elementwise.h"
#include "ops/small_gemm_cpu.h"

namespace hpcnn::cpu {

namespace {

// Fewer rows than this: small_gemm_by_columns (ops/small_gemm_cpu.h).
constexpr int kFewRows = 16;

}  // namespace

void dense_forward(const DenseGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu) {
  if (g.n < kFewRows) {
    small_gemm_by_columns(g.n, g.out, g.in, x, w, y, b, relu, nullptr);
    return;
  }
  parallel_for(g.n, [&](long long r0, long long r1, int) {
    int rows = static_cast<int>(r1 - r0);
    float* yr = y + r0 * g.out;
    blas::sgemm(false, false, rows, g.out, g.in, 1.f, x + r0 * g.in, g.in, w, g.out, 0.f, yr, g.out);
    bias_act(yr, rows, g.out, 0, g.out, b, relu, nullptr);
  }, 16);
}

void dense_backward(const DenseGeometry& g, const float* x, const float* w, const float* y, float* dy, float* dx,
                    float* dw, float* db, bool relu) {
  if (relu) {
    parallel_for((long long)g.n * g.out, [&](long long e0, long long e1, int) {
      for (long long e = e0; e < e1; ++e) dy[e] = ew::relu_grad(y[e], dy[e]);
    }, 4096);
  }
  // db[j] = sum_n dy[n, j], split over columns; each column summed in row order.
  if (db) parallel_for(g.out, [&](long long j0, long long j1, int) {
    for (long long j = j0; j < j1; ++j) db[j] = 0.f;
    for (int n = 0; n < g.n; ++n) {
      const float* d = dy + (long long)n * g.out;
      for (long long j = j0; j < j1; ++j) db[j] += d[j];
    }
  }, 8);
  // dW[i0:i1, :] = x[:, i0:i1]^T * dy
  parallel_for(g.in, [&](long long i0, long long i1, int) {
    blas::sgemm(true, false, static_cast<int>(i1 - i0), g.out, g.n, 1.f, x + i0, g.in, dy, g.out, 0.f,
                dw + i0 * g.out, g.out);
  }, 16);
  if (dx) {
    // dx[r0:r1, :] = dy[r0:r1, :] * W^T
    parallel_for(g.n, [&](long long r0, long long r1, int) {
      blas::sgemm(false, true, static_cast<int>(r1 - r0), g.in, g.out, 1.f, dy + r0 * g.out, g.out, w, g.out, 0.f,
                  dx + r0 * g.in, g.in);
    }, 16);
  }
}

}  // namespace hpcnn::cpu
