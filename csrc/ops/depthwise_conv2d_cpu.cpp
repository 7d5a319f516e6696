// Depthwise convolution on the CPU (depthwise_conv2d.h): direct loops over NHWC data, written for
// memory bandwidth. Channels are innermost in x, y and the kernel (Keras' (kh, kw, c, m) is, per
// tap, one contiguous run of c*m values), so every tap is a multiply-add over a block of kBlock
// consecutive channels: vector loads of x, w and dy, no gather, no im2col copy. Each output (and
// each input gradient) is accumulated in a block of registers over all its taps and stored once.
//   forward      threads over output rows (n, oy)
//   input grad   gathered per input row (n, iy): the taps whose stride lands on it, no scatter, so
//                rows are independent and each dx is written once
//   kernel grad  rows summed in a fixed number of groups, each into its own partial (kh*kw*c*m
//                values, cache resident), then the partials added in group order: the same bits
//                on any thread count
// depth_multiplier 1 (MobileNet, EfficientNet) takes the unit-stride loops; m > 1 reads x[k / m]
// for output channel k.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "ops/depthwise_conv2d.h"

namespace hpcnn::cpu {

namespace {

constexpr int kBlock = 32;  // channels per register block: 4 AVX2 accumulators

// Taps: the output position o of an axis reads input o*s + k*d - pad; valid when inside [0, in).
inline int tap_in(int o, int s, int k, int d, int pad) { return o * s + k * d - pad; }

// acc[0..kb) += a[0..kb) * b[0..kb) (kb == kBlock: a fixed trip count the compiler unrolls into
// vector FMAs).
template <int KB>
inline void fma_block(float* __restrict__ acc, const float* __restrict__ a, const float* __restrict__ b, int kb) {
  if constexpr (KB > 0) {
    for (int k = 0; k < KB; ++k) acc[k] += a[k] * b[k];
  } else {
    for (int k = 0; k < kb; ++k) acc[k] += a[k] * b[k];
  }
}

// One output row (n, oy) of the forward pass, channels in blocks [k0, k0 + kb).
template <int KB>
void forward_block(const DepthwiseGeometry& g, const float* xn, const float* w, const float* b, float* yrow, int oy,
                   int k0, int kb) {
  const int oc = g.oc(), m = g.m;
  alignas(64) float acc[kBlock];
  alignas(64) float xs[kBlock];  // m > 1: x broadcast to the block's output channels
  for (int ox = 0; ox < g.ow; ++ox) {
    if (b) std::memcpy(acc, b + k0, sizeof(float) * kb);
    else std::fill(acc, acc + kb, 0.f);
    for (int ky = 0; ky < g.kh; ++ky) {
      const int iy = tap_in(oy, g.sh, ky, g.dh, g.pad_top);
      if (iy < 0 || iy >= g.h) continue;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ix = tap_in(ox, g.sw, kx, g.dw, g.pad_left);
        if (ix < 0 || ix >= g.w) continue;
        const float* xp = xn + ((long long)iy * g.w + ix) * g.c;
        const float* wp = w + (long long)(ky * g.kw + kx) * oc + k0;
        if (m == 1) {
          fma_block<KB>(acc, xp + k0, wp, kb);
        } else {
          for (int k = 0; k < kb; ++k) xs[k] = xp[(k0 + k) / m];
          fma_block<KB>(acc, xs, wp, kb);
        }
      }
    }
    std::memcpy(yrow + (long long)ox * oc + k0, acc, sizeof(float) * kb);
  }
}

// One input row (n, iy) of the input gradient, input channels [c0, c0 + cb).
template <int KB>
void backward_data_block(const DepthwiseGeometry& g, const float* dyn, const float* w, float* dxrow, int iy, int c0,
                         int cb) {
  const int oc = g.oc(), m = g.m;
  alignas(64) float acc[kBlock];
  for (int ix = 0; ix < g.w; ++ix) {
    std::fill(acc, acc + cb, 0.f);
    for (int ky = 0; ky < g.kh; ++ky) {
      const int ty = iy + g.pad_top - ky * g.dh;  // = oy * sh
      if (ty < 0 || ty % g.sh) continue;
      const int oy = ty / g.sh;
      if (oy >= g.oh) continue;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int tx = ix + g.pad_left - kx * g.dw;
        if (tx < 0 || tx % g.sw) continue;
        const int ox = tx / g.sw;
        if (ox >= g.ow) continue;
        const float* dyp = dyn + ((long long)oy * g.ow + ox) * oc;
        const float* wp = w + (long long)(ky * g.kw + kx) * oc;
        if (m == 1) {
          fma_block<KB>(acc, dyp + c0, wp + c0, cb);
        } else {
          for (int k = 0; k < cb; ++k)
            for (int j = 0; j < m; ++j) acc[k] += dyp[(long long)(c0 + k) * m + j] * wp[(long long)(c0 + k) * m + j];
        }
      }
    }
    std::memcpy(dxrow + (long long)ix * g.c + c0, acc, sizeof(float) * cb);
  }
}

// dst[0..len) += a[0..len) * b[k / m] (m == 1: b[k]).
inline void axpy_channels(float* __restrict__ dst, const float* __restrict__ a, const float* __restrict__ b, int len,
                          int m) {
  if (m == 1) {
    for (int k = 0; k < len; ++k) dst[k] += a[k] * b[k];
  } else {
    for (int k = 0; k < len; ++k) dst[k] += a[k] * b[k / m];
  }
}

}  // namespace

void depthwise_conv2d_forward(const DepthwiseGeometry& g, const float* x, const float* w, const float* b, float* y) {
  const int oc = g.oc();
  const long long rows = (long long)g.n * g.oh;
  parallel_for(rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const long long n = r / g.oh;
      const int oy = static_cast<int>(r % g.oh);
      const float* xn = x + n * g.h * (long long)g.w * g.c;
      float* yrow = y + r * g.ow * (long long)oc;
      int k0 = 0;
      for (; k0 + kBlock <= oc; k0 += kBlock) forward_block<kBlock>(g, xn, w, b, yrow, oy, k0, kBlock);
      if (k0 < oc) forward_block<0>(g, xn, w, b, yrow, oy, k0, oc - k0);
    }
  });
}

void depthwise_conv2d_backward(const DepthwiseGeometry& g, const float* x, const float* w, const float* dy, float* dx,
                               float* dw, float* db) {
  const int oc = g.oc();
  if (dx) {
    parallel_for((long long)g.n * g.h, [&](long long r0, long long r1, int) {
      for (long long r = r0; r < r1; ++r) {
        const long long n = r / g.h;
        const int iy = static_cast<int>(r % g.h);
        const float* dyn = dy + n * g.oh * (long long)g.ow * oc;
        float* dxrow = dx + r * g.w * (long long)g.c;
        int c0 = 0;
        for (; c0 + kBlock <= g.c; c0 += kBlock) backward_data_block<kBlock>(g, dyn, w, dxrow, iy, c0, kBlock);
        if (c0 < g.c) backward_data_block<0>(g, dyn, w, dxrow, iy, c0, g.c - c0);
      }
    });
  }

  // Kernel (and bias) gradient: output rows in `groups` fixed groups, a partial each.
  const long long rows = (long long)g.n * g.oh;
  const int taps = g.kh * g.kw;
  const long long part_size = (long long)(taps + 1) * oc;  // the kernel's, then the bias's
  const long long groups = std::min<long long>(rows, 32);
  std::vector<float> parts(static_cast<size_t>(groups * part_size), 0.f);
  parallel_for(groups, [&](long long g0, long long g1, int) {
    for (long long gi = g0; gi < g1; ++gi) {
      float* part = parts.data() + gi * part_size;
      float* pdb = part + (long long)taps * oc;
      const long long rb = rows * gi / groups, re = rows * (gi + 1) / groups;
      for (long long r = rb; r < re; ++r) {
        const long long n = r / g.oh;
        const int oy = static_cast<int>(r % g.oh);
        const float* xn = x + n * g.h * (long long)g.w * g.c;
        const float* dyrow = dy + r * g.ow * (long long)oc;
        for (int ox = 0; ox < g.ow; ++ox) {
          const float* dyp = dyrow + (long long)ox * oc;
          if (db)
            for (int k = 0; k < oc; ++k) pdb[k] += dyp[k];
          for (int ky = 0; ky < g.kh; ++ky) {
            const int iy = tap_in(oy, g.sh, ky, g.dh, g.pad_top);
            if (iy < 0 || iy >= g.h) continue;
            for (int kx = 0; kx < g.kw; ++kx) {
              const int ix = tap_in(ox, g.sw, kx, g.dw, g.pad_left);
              if (ix < 0 || ix >= g.w) continue;
              axpy_channels(part + (long long)(ky * g.kw + kx) * oc, dyp,
                            xn + ((long long)iy * g.w + ix) * g.c, oc, g.m);
            }
          }
        }
      }
    }
  });
  parallel_for(part_size, [&](long long i0, long long i1, int) {
    for (long long i = i0; i < i1; ++i) {
      float s = 0.f;
      for (long long gi = 0; gi < groups; ++gi) s += parts[static_cast<size_t>(gi * part_size + i)];
      if (i < (long long)taps * oc) dw[i] = s;
      else if (db) db[i - (long long)taps * oc] = s;
    }
  }, 4096);
}

}  // namespace hpcnn::cpu
