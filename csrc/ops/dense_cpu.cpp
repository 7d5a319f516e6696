// Dense on the CPU: CBLAS sgemm with hpcnn's threads splitting rows (forward, dx) or kernel
// rows (dW), so no thread needs another's partial results and the split is deterministic; a
// forward pass of a few rows, or of a few dozen rows through a wide kernel, splits the columns
// instead (small_gemm), and so does that wide kernel's backward pass.
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
// Up to this many rows, a kernel of at least kWideKernel elements is multiplied by
// small_gemm_by_columns too: split by rows, every thread's sgemm packed the whole kernel for
// its few rows (the Dense after Flatten of TF's 180x180 image tutorial: 30,976 x 128, 16 MB,
// packed by each thread for 16 rows of a batch of 32).
constexpr int kFewRowsWide = 64;
constexpr long long kWideKernel = 1LL << 20;

bool by_columns(const DenseGeometry& g) {
  return g.n < kFewRows || (g.n <= kFewRowsWide && (long long)g.in * g.out >= kWideKernel);
}

// dW rows per small_gemm call in the wide-kernel backward: that many rows of x^T (x[:, i], 32
// rows of a batch: 24 KB) stay in L1 while the column strips of dW pass over them.
constexpr int kDwRows = 192;
// dx columns (kernel rows) per sgemm call in the wide-kernel backward.
constexpr long long kDxColumns = 512;

}  // namespace

void dense_forward(const DenseGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu) {
  if (by_columns(g)) {
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
  const bool wide = by_columns(g) && g.n >= kFewRows;
  // dW[i0:i1, :] = x[:, i0:i1]^T * dy
  parallel_for(g.in, [&](long long i0, long long i1, int) {
    if (!wide) {
      blas::sgemm(true, false, static_cast<int>(i1 - i0), g.out, g.n, 1.f, x + i0, g.in, dy, g.out, 0.f,
                  dw + i0 * g.out, g.out);
      return;
    }
    // A wide kernel and few rows: k = n is short, dW's 16 MB are the work. The register-blocked
    // product reads x^T and dy where they lie and writes dW once (the BLAS packed this thread's
    // rows of x^T and zeroed dW in a pass of its own first).
    for (long long i = i0; i < i1; i += kDwRows) {
      const int rows = static_cast<int>(std::min<long long>(kDwRows, i1 - i));
      small_gemm(rows, g.out, g.n, x + i, 1, g.in, dy, g.out, dw + i * g.out, g.out, false);
    }
  }, 16);
  if (dx) {
    if (wide) {
      // dx[:, i0:i1] = dy * W[i0:i1, :]^T in blocks of kDxColumns kernel rows, the threads
      // splitting the blocks: each packs its share of W once (split by dx's rows, each thread
      // packed all of W for its few rows). Fixed blocks, one sgemm each: the same calls, so the
      // same bits, for any thread count.
      const long long blocks = (g.in + kDxColumns - 1) / kDxColumns;
      parallel_for(blocks, [&](long long c0, long long c1, int) {
        for (long long c = c0; c < c1; ++c) {
          const long long i0 = c * kDxColumns, cols = std::min<long long>(kDxColumns, g.in - i0);
          blas::sgemm(false, true, g.n, static_cast<int>(cols), g.out, 1.f, dy, g.out, w + i0 * g.out, g.out, 0.f,
                      dx + i0, g.in);
        }
      }, 1);
      return;
    }
    // dx[r0:r1, :] = dy[r0:r1, :] * W^T
    parallel_for(g.n, [&](long long r0, long long r1, int) {
      blas::sgemm(false, true, static_cast<int>(r1 - r0), g.in, g.out, 1.f, dy + r0 * g.out, g.out, w, g.out, 0.f,
                  dx + r0 * g.in, g.in);
    }, 16);
  }
}

}  // namespace hpcnn::cpu
