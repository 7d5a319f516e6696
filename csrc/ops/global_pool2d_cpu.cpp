// Global pooling on the CPU: threads own whole images; per image, each position's channel run is
// folded into a vector of c accumulators (vectorized over channels), in position order -- the
// order of global_pool2d_body.h, so the GPU's results are the same bits.
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/scratch.h"
#include "core/thread_pool.h"
#include "ops/global_pool2d.h"

namespace hpcnn::cpu {

void global_avgpool_forward(const GlobalPoolGeometry& g, const float* x, float* y) {
  const float count = static_cast<float>(g.hw);
  parallel_for(g.n, [&](long long n0, long long n1, int) {
    for (long long n = n0; n < n1; ++n) {
      float* out = y + n * g.c;
      std::fill(out, out + g.c, 0.f);
      const float* xn = x + n * g.hw * g.c;
      for (long long q = 0; q < g.hw; ++q) {
        const float* in = xn + q * g.c;
        for (int ci = 0; ci < g.c; ++ci) out[ci] += in[ci];
      }
      for (int ci = 0; ci < g.c; ++ci) out[ci] /= count;
    }
  });
}

void global_avgpool_backward(const GlobalPoolGeometry& g, const float* dy, float* dx) {
  const float count = static_cast<float>(g.hw);
  parallel_for(g.n, [&](long long n0, long long n1, int) {
    float* share = thread_scratch().floats(g.c, 0);
    for (long long n = n0; n < n1; ++n) {
      for (int ci = 0; ci < g.c; ++ci) share[ci] = dy[n * g.c + ci] / count;
      float* dxn = dx + n * g.hw * g.c;
      for (long long q = 0; q < g.hw; ++q) std::memcpy(dxn + q * g.c, share, sizeof(float) * g.c);
    }
  });
}

void global_maxpool_forward(const GlobalPoolGeometry& g, const float* x, float* y) {
  parallel_for(g.n, [&](long long n0, long long n1, int) {
    for (long long n = n0; n < n1; ++n) {
      float* out = y + n * g.c;
      std::fill(out, out + g.c, -std::numeric_limits<float>::infinity());
      const float* xn = x + n * g.hw * g.c;
      for (long long q = 0; q < g.hw; ++q) {
        const float* in = xn + q * g.c;
        for (int ci = 0; ci < g.c; ++ci) out[ci] = in[ci] > out[ci] ? in[ci] : out[ci];
      }
    }
  });
}

// Positions in order; a per-channel "taken" flag gives the gradient to the first maximal one.
void global_maxpool_backward(const GlobalPoolGeometry& g, const float* x, const float* y, const float* dy,
                             float* dx) {
  parallel_for(g.n, [&](long long n0, long long n1, int) {
    float* taken = thread_scratch().floats(g.c, 0);
    for (long long n = n0; n < n1; ++n) {
      const float* yn = y + n * g.c;
      const float* dyn = dy + n * g.c;
      std::fill(taken, taken + g.c, 0.f);
      for (long long q = 0; q < g.hw; ++q) {
        const long long at = (n * g.hw + q) * g.c;
        for (int ci = 0; ci < g.c; ++ci) {
          const bool win = x[at + ci] == yn[ci] && taken[ci] == 0.f;
          dx[at + ci] = win ? dyn[ci] : 0.f;
          taken[ci] = win ? 1.f : taken[ci];
        }
      }
    }
  });
}

}  // namespace hpcnn::cpu
