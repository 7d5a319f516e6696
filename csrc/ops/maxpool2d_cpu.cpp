// Max pooling on the CPU, NHWC: for each output pixel, the max over the window's in-bounds
// positions, computed for all channels at once (channel runs are contiguous).
#include <algorithm>
#include <cstring>
#include <limits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/scratch.h"
#include "core/thread_pool.h"
#include "ops/maxpool2d.h"
#include "ops/pool2d_cpu.h"

namespace hpcnn::cpu {

void maxpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) {
  for_each_pool_window(g, x, y, [&](const float* xn, float* out, int y0, int y1, int x0, int x1) {
    std::fill(out, out + g.c, -std::numeric_limits<float>::infinity());
    for (int iy = y0; iy < y1; ++iy)
      for (int ix = x0; ix < x1; ++ix) {
        const float* in = xn + ((long long)iy * g.w + ix) * g.c;
        for (int ci = 0; ci < g.c; ++ci) out[ci] = in[ci] > out[ci] ? in[ci] : out[ci];
      }
  });
}

// Backward, vectorized across channels: the window's positions are visited in row-major order
// and a per-channel "taken" flag makes only the first position equal to the max receive the
// gradient (the rule both backends follow). The per-channel loops are branch-free selects, so
// the compiler vectorizes them over the contiguous NHWC channel run.
//
// When windows tile the input (stride == pool: the tutorial's 2x2/2), every input position
// belongs to at most one window, so dx is written directly (gradient or 0) and only positions
// no window covers are zeroed; no memset of dx and no read-modify-write. Overlapping or gapped
// windows zero dx first and accumulate.
namespace {

template <bool kAccumulate>
void pool_backward_image(const Pool2dGeometry& g, const float* xn, const float* yn, const float* dyn, float* dxn,
                         float* taken) {
  const int C = g.c;
  for (int oy = 0; oy < g.oh; ++oy)
    for (int ox = 0; ox < g.ow; ++ox) {
      const long long o = ((long long)oy * g.ow + ox) * C;
      const float* yo = yn + o;
      const float* dyo = dyn + o;
      int y0, y1, x0, x1;
      g.window(oy, ox, y0, y1, x0, x1);
      for (int ci = 0; ci < C; ++ci) taken[ci] = 0.f;
      for (int iy = y0; iy < y1; ++iy)
        for (int ix = x0; ix < x1; ++ix) {
          const long long at = ((long long)iy * g.w + ix) * C;
          const float* xi = xn + at;
          float* dxi = dxn + at;
          for (int ci = 0; ci < C; ++ci) {
            const bool win = xi[ci] == yo[ci] && taken[ci] == 0.f;
            const float v = win ? dyo[ci] : 0.f;
            if (kAccumulate) dxi[ci] += v;
            else dxi[ci] = v;
            taken[ci] = win ? 1.f : taken[ci];
          }
        }
    }
}

#if defined(__AVX2__)
// The tiling case with the "taken" flags in registers: per output pixel and 8 channels, the
// window's positions in order, each storing its gradient or 0 (channel tail: scalar, same rule).
void pool_backward_tiles_avx(const Pool2dGeometry& g, const float* xn, const float* yn, const float* dyn,
                             float* dxn) {
  const int C = g.c, C8 = C / 8 * 8;
  for (int oy = 0; oy < g.oh; ++oy)
    for (int ox = 0; ox < g.ow; ++ox) {
      const long long o = ((long long)oy * g.ow + ox) * C;
      int y0, y1, x0, x1;
      g.window(oy, ox, y0, y1, x0, x1);
      for (int c0 = 0; c0 < C8; c0 += 8) {
        const __m256 yv = _mm256_loadu_ps(yn + o + c0), dv = _mm256_loadu_ps(dyn + o + c0);
        __m256 taken = _mm256_setzero_ps();
        for (int iy = y0; iy < y1; ++iy)
          for (int ix = x0; ix < x1; ++ix) {
            const long long at = ((long long)iy * g.w + ix) * C + c0;
            const __m256 win = _mm256_andnot_ps(taken, _mm256_cmp_ps(_mm256_loadu_ps(xn + at), yv, _CMP_EQ_OQ));
            _mm256_storeu_ps(dxn + at, _mm256_and_ps(win, dv));
            taken = _mm256_or_ps(taken, win);
          }
      }
      for (int ci = C8; ci < C; ++ci) {
        bool taken = false;
        for (int iy = y0; iy < y1; ++iy)
          for (int ix = x0; ix < x1; ++ix) {
            const long long at = ((long long)iy * g.w + ix) * C + ci;
            const bool win = !taken && xn[at] == yn[o + ci];
            dxn[at] = win ? dyn[o + ci] : 0.f;
            taken = taken || win;
          }
      }
    }
}
#endif

}  // namespace

void maxpool2d_backward(const Pool2dGeometry& g, const float* x, const float* y, const float* dy, float* dx) {
  const long long img = (long long)g.h * g.w * g.c;
  const long long out_img = (long long)g.oh * g.ow * g.c;
  const bool tiles = g.sh == g.ph && g.sw == g.pw;
  // Rows/columns past the last window (only with 'valid' padding) are never written by the tiling path.
  const int covered_h = std::min(g.h, g.oh * g.sh - g.pad_top);
  const int covered_w = std::min(g.w, g.ow * g.sw - g.pad_left);
  // Threads own whole images, so overlapping windows never race.
  parallel_for(g.n, [&](long long n0, long long n1, int) {
    float* taken = thread_scratch().floats(g.c, 0);
    for (long long n = n0; n < n1; ++n) {
      const float* xn = x + n * img;
      float* dxn = dx + n * img;
      if (tiles) {
#if defined(__AVX2__)
        pool_backward_tiles_avx(g, xn, y + n * out_img, dy + n * out_img, dxn);
#else
        pool_backward_image<false>(g, xn, y + n * out_img, dy + n * out_img, dxn, taken);
#endif
        for (int iy = 0; iy < g.h; ++iy) {
          float* row = dxn + (long long)iy * g.w * g.c;
          if (iy >= covered_h) std::memset(row, 0, sizeof(float) * g.w * g.c);
          else if (covered_w < g.w)
            std::memset(row + (long long)covered_w * g.c, 0, sizeof(float) * (g.w - covered_w) * g.c);
        }
      } else {
        std::memset(dxn, 0, sizeof(float) * img);
        pool_backward_image<true>(g, xn, y + n * out_img, dy + n * out_img, dxn, taken);
      }
    }
  });
}

}  // namespace hpcnn::cpu
