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
// depth_multiplier 1 (MobileNet, EfficientNet) takes the unit-stride loops (with AVX2: up to four
// 8-lane accumulators held in registers across the taps, the block's last vector masked); m > 1
// reads x[k / m] for output channel k.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/thread_pool.h"
#include "ops/depthwise_conv2d.h"
#include "ops/depthwise_conv2d_avx512_cpu.h"
#include "ops/small_gemm_cpu.h"

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

#if defined(__AVX2__)
// The lanes [0, valid) of a vector: a mask for _mm256_maskload_ps / _mm256_maskstore_ps.
inline __m256i lane_mask(int valid) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// acc[v] += a[8v..] * b[8v..] for NV vectors, the last one's lanes limited by `mask`.
template <int NV>
inline void fma_vectors(__m256* acc, const float* a, const float* b, __m256i mask) {
  for (int v = 0; v < NV - 1; ++v)
    acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(a + 8 * v), _mm256_loadu_ps(b + 8 * v), acc[v]);
  acc[NV - 1] = _mm256_fmadd_ps(_mm256_maskload_ps(a + 8 * (NV - 1), mask), _mm256_maskload_ps(b + 8 * (NV - 1), mask),
                                acc[NV - 1]);
}

template <int NV>
inline void store_vectors(float* out, const __m256* acc, __m256i mask) {
  for (int v = 0; v < NV - 1; ++v) _mm256_storeu_ps(out + 8 * v, acc[v]);
  _mm256_maskstore_ps(out + 8 * (NV - 1), mask, acc[NV - 1]);
}

inline __m256 load_vector(const float* p, int v, int nv, __m256i mask) {
  return v < nv - 1 ? _mm256_loadu_ps(p + 8 * v) : _mm256_maskload_ps(p + 8 * v, mask);
}

// Forward of one output row (n, oy), depth multiplier 1, channels [k0, k0 + 8 NV) (the last
// vector's lanes by `mask`): the accumulators stay in registers over the kh*kw taps. Two
// neighbouring outputs at a time share each tap's kernel loads (three loads per two FMAs instead
// of four); an odd last output runs alone.
template <int NV>
void forward_vectors(const DepthwiseGeometry& g, const float* xn, const float* w, const float* b, float* yrow, int oy,
                     int k0, __m256i mask) {
  const int c = g.c;
  int ox = 0;
  for (; ox + 1 < g.ow; ox += 2) {
    __m256 a0[NV], a1[NV];
    for (int v = 0; v < NV; ++v) a0[v] = a1[v] = b ? load_vector(b + k0, v, NV, mask) : _mm256_setzero_ps();
    for (int ky = 0; ky < g.kh; ++ky) {
      const int iy = tap_in(oy, g.sh, ky, g.dh, g.pad_top);
      if (iy < 0 || iy >= g.h) continue;
      const float* xrow = xn + (long long)iy * g.w * c + k0;
      const float* wrow = w + (long long)ky * g.kw * c + k0;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ix0 = tap_in(ox, g.sw, kx, g.dw, g.pad_left), ix1 = ix0 + g.sw;
        const bool in0 = ix0 >= 0 && ix0 < g.w, in1 = ix1 >= 0 && ix1 < g.w;
        const float* wp = wrow + (long long)kx * c;
        if (in0 && in1) {
          const float* x0 = xrow + (long long)ix0 * c;
          const float* x1 = xrow + (long long)ix1 * c;
          for (int v = 0; v < NV; ++v) {
            const __m256 wv = load_vector(wp, v, NV, mask);
            a0[v] = _mm256_fmadd_ps(load_vector(x0, v, NV, mask), wv, a0[v]);
            a1[v] = _mm256_fmadd_ps(load_vector(x1, v, NV, mask), wv, a1[v]);
          }
        } else if (in0) {
          fma_vectors<NV>(a0, xrow + (long long)ix0 * c, wp, mask);
        } else if (in1) {
          fma_vectors<NV>(a1, xrow + (long long)ix1 * c, wp, mask);
        }
      }
    }
    store_vectors<NV>(yrow + (long long)ox * c + k0, a0, mask);
    store_vectors<NV>(yrow + (long long)(ox + 1) * c + k0, a1, mask);
  }
  for (; ox < g.ow; ++ox) {
    __m256 acc[NV];
    for (int v = 0; v < NV; ++v)
      acc[v] = !b ? _mm256_setzero_ps()
                  : v < NV - 1 ? _mm256_loadu_ps(b + k0 + 8 * v) : _mm256_maskload_ps(b + k0 + 8 * v, mask);
    for (int ky = 0; ky < g.kh; ++ky) {
      const int iy = tap_in(oy, g.sh, ky, g.dh, g.pad_top);
      if (iy < 0 || iy >= g.h) continue;
      const float* xrow = xn + (long long)iy * g.w * c + k0;
      const float* wrow = w + (long long)ky * g.kw * c + k0;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ix = tap_in(ox, g.sw, kx, g.dw, g.pad_left);
        if (ix < 0 || ix >= g.w) continue;
        fma_vectors<NV>(acc, xrow + (long long)ix * c, wrow + (long long)kx * c, mask);
      }
    }
    store_vectors<NV>(yrow + (long long)ox * c + k0, acc, mask);
  }
}

// Input gradient of one input row (n, iy), depth multiplier 1, channels [c0, c0 + 8 NV).
template <int NV>
void backward_data_vectors(const DepthwiseGeometry& g, const float* dyn, const float* w, float* dxrow, int iy, int c0,
                           __m256i mask) {
  const int c = g.c;
  for (int ix = 0; ix < g.w; ++ix) {
    __m256 acc[NV];
    for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
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
        fma_vectors<NV>(acc, dyn + ((long long)oy * g.ow + ox) * c + c0, w + (long long)(ky * g.kw + kx) * c + c0,
                        mask);
      }
    }
    store_vectors<NV>(dxrow + (long long)ix * c + c0, acc, mask);
  }
}

// Kernel gradient of one output row (n, oy), depth multiplier 1, one vector of channels [c0, c0 +
// 8) (lanes by `mask`), added into part (taps x c): per kernel row ky, its KW tap accumulators stay
// in registers over the row's ox while dy is loaded once per ox.
template <int KW>
void filter_row_vector(const DepthwiseGeometry& g, const float* xn, const float* dyrow, int oy, int c0, __m256i mask,
                       float* part) {
  const int c = g.c;
  for (int ky = 0; ky < g.kh; ++ky) {
    const int iy = tap_in(oy, g.sh, ky, g.dh, g.pad_top);
    if (iy < 0 || iy >= g.h) continue;
    const float* xrow = xn + (long long)iy * g.w * c + c0;
    float* prow = part + (long long)ky * KW * c + c0;
    __m256 acc[KW];
    for (int kx = 0; kx < KW; ++kx) acc[kx] = _mm256_maskload_ps(prow + (long long)kx * c, mask);
    for (int ox = 0; ox < g.ow; ++ox) {
      const __m256 d = _mm256_maskload_ps(dyrow + (long long)ox * c + c0, mask);
      const int ix0 = ox * g.sw - g.pad_left;
      if (ix0 >= 0 && ix0 + (KW - 1) * g.dw < g.w) {  // every tap inside: no checks
        for (int kx = 0; kx < KW; ++kx)
          acc[kx] = _mm256_fmadd_ps(_mm256_maskload_ps(xrow + (long long)(ix0 + kx * g.dw) * c, mask), d, acc[kx]);
      } else {
        for (int kx = 0; kx < KW; ++kx) {
          const int ix = ix0 + kx * g.dw;
          if (ix < 0 || ix >= g.w) continue;
          acc[kx] = _mm256_fmadd_ps(_mm256_maskload_ps(xrow + (long long)ix * c, mask), d, acc[kx]);
        }
      }
    }
    for (int kx = 0; kx < KW; ++kx) _mm256_maskstore_ps(prow + (long long)kx * c, mask, acc[kx]);
  }
}

// The kernel gradient rows [rb, re) into part, depth multiplier 1, kernel width KW.
template <int KW>
void filter_rows(const DepthwiseGeometry& g, const float* x, const float* dy, long long rb, long long re, float* part) {
  for (long long r = rb; r < re; ++r) {
    const long long n = r / g.oh;
    const int oy = static_cast<int>(r % g.oh);
    const float* xn = x + n * g.h * (long long)g.w * g.c;
    const float* dyrow = dy + r * g.ow * (long long)g.c;
    for (int c0 = 0; c0 < g.c; c0 += 8)
      filter_row_vector<KW>(g, xn, dyrow, oy, c0, lane_mask(std::min(8, g.c - c0)), part);
  }
}

// Whether the rows [rb, re) of the kernel gradient ran the vector kernel (depth multiplier 1 and a
// kernel width it is instantiated for).
bool filter_rows_vector(const DepthwiseGeometry& g, const float* x, const float* dy, long long rb, long long re,
                        float* part) {
  if (g.m != 1) return false;
  switch (g.kw) {
    case 1: filter_rows<1>(g, x, dy, rb, re, part); return true;
    case 2: filter_rows<2>(g, x, dy, rb, re, part); return true;
    case 3: filter_rows<3>(g, x, dy, rb, re, part); return true;
    case 5: filter_rows<5>(g, x, dy, rb, re, part); return true;
    case 7: filter_rows<7>(g, x, dy, rb, re, part); return true;
    default: return false;
  }
}

// Runs KERNEL<NV>(..., k0, mask) over the c channels in blocks of up to 32 (four vectors).
template <typename Call>
void over_channel_blocks(int c, Call call) {
  for (int k0 = 0; k0 < c; k0 += 32) {
    const int left = std::min(32, c - k0), nv = (left + 7) / 8;
    const __m256i mask = lane_mask(left - 8 * (nv - 1));
    call(k0, nv, mask);
  }
}
#endif

// One output row (n, oy) of the forward pass into yrow.
void forward_row(const DepthwiseGeometry& g, const float* xn, const float* w, const float* b, float* yrow, int oy,
                 bool wide) {
  if (wide && g.m == 1 && depthwise_forward_row_avx512(g, xn, w, b, yrow, oy)) return;
#if defined(__AVX2__)
  if (g.m == 1) {
    over_channel_blocks(g.oc(), [&](int k0, int nv, __m256i mask) {
      if (nv == 4) forward_vectors<4>(g, xn, w, b, yrow, oy, k0, mask);
      else if (nv == 3) forward_vectors<3>(g, xn, w, b, yrow, oy, k0, mask);
      else if (nv == 2) forward_vectors<2>(g, xn, w, b, yrow, oy, k0, mask);
      else forward_vectors<1>(g, xn, w, b, yrow, oy, k0, mask);
    });
    return;
  }
#endif
  const int oc = g.oc();
  int k0 = 0;
  for (; k0 + kBlock <= oc; k0 += kBlock) forward_block<kBlock>(g, xn, w, b, yrow, oy, k0, kBlock);
  if (k0 < oc) forward_block<0>(g, xn, w, b, yrow, oy, k0, oc - k0);
}

}  // namespace

void depthwise_conv2d_forward(const DepthwiseGeometry& g, const float* x, const float* w, const float* b, float* y,
                              bool relu, float relu_max) {
  const long long rows = (long long)g.n * g.oh, row_size = (long long)g.ow * g.oc();
  // AVX-512 where the CPU has it (the same bits: ops/depthwise_conv2d_avx512_cpu.h).
  static const bool wide = std::string(small_gemm_isa()) == "avx512";
  parallel_for(rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const long long n = r / g.oh;
      const int oy = static_cast<int>(r % g.oh);
      float* yrow = y + r * row_size;
      forward_row(g, x + n * g.h * (long long)g.w * g.c, w, b, yrow, oy, wide);
      // The ReLU (ReLU6: a capped one, after a folded BatchNormalization) while the row is in cache.
      if (relu)
        for (long long i = 0; i < row_size; ++i) yrow[i] = std::min(std::max(yrow[i], 0.f), relu_max);
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
#if defined(__AVX2__)
        if (g.m == 1) {
          over_channel_blocks(g.c, [&](int c0, int nv, __m256i mask) {
            if (nv == 4) backward_data_vectors<4>(g, dyn, w, dxrow, iy, c0, mask);
            else if (nv == 3) backward_data_vectors<3>(g, dyn, w, dxrow, iy, c0, mask);
            else if (nv == 2) backward_data_vectors<2>(g, dyn, w, dxrow, iy, c0, mask);
            else backward_data_vectors<1>(g, dyn, w, dxrow, iy, c0, mask);
          });
          continue;
        }
#endif
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
      if (db)
        for (long long r = rb; r < re; ++r)
          for (int ox = 0; ox < g.ow; ++ox) {
            const float* dyp = dy + (r * g.ow + ox) * (long long)oc;
            for (int k = 0; k < oc; ++k) pdb[k] += dyp[k];
          }
#if defined(__AVX2__)
      if (filter_rows_vector(g, x, dy, rb, re, part)) continue;
#endif
      for (long long r = rb; r < re; ++r) {
        const long long n = r / g.oh;
        const int oy = static_cast<int>(r % g.oh);
        const float* xn = x + n * g.h * (long long)g.w * g.c;
        const float* dyrow = dy + r * g.ow * (long long)oc;
        for (int ox = 0; ox < g.ow; ++ox) {
          const float* dyp = dyrow + (long long)ox * oc;
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
