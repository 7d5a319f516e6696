// The depthwise forward pass (depth multiplier 1) with AVX-512, chosen at run time on a CPU that has
// it (depthwise_conv2d_cpu.cpp). MobileNetV2's depthwise layers at batch 1 took twice ONNX Runtime's
// time with the AVX2 kernel (bench/engine_layers.py, bench/RESULTS.md issue 39), whose two outputs a
// step make three loads per two 8-lane multiply-adds.
//
// Here: channel blocks of up to 64 (NV <= 4 vectors of 16 lanes, the last one masked) and four
// neighbouring outputs of a row at a time (OX = 4): per tap, one kernel load per vector serves the
// four outputs, whose accumulators (4 x NV <= 16 of the 32 zmm registers) stay in registers over
// the kh * kw taps. Outputs near the edges, whose taps fall outside the image, and the row's last
// outputs run one at a time with the same per-tap checks as the AVX2 kernel.
//
// Each output is the bias (or zero), then one fused multiply-add per tap inside the image, in
// (ky, kx) order: the AVX2 kernel's chain, so the results are its bits
// (tests/core/ops/test_small_gemm_isa.py runs both).
//
// Only intrinsics and this file's own functions follow the target pragma (as in
// small_gemm_avx512_cpu.cpp): a standard-library template instantiated under it could be merged
// with the portable build's copy by the linker.
#include "ops/depthwise_conv2d_avx512_cpu.h"

#if defined(__AVX2__) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HPCNN_DEPTHWISE_AVX512 1
#include <immintrin.h>
#endif

namespace hpcnn::cpu {

#if defined(HPCNN_DEPTHWISE_AVX512)

#pragma GCC push_options
#pragma GCC target("avx512f,fma")

namespace {

constexpr int kOutputs = 4;  // neighbouring outputs of a row computed together

// Vector v of a block of NV (the last one's lanes by `mask`).
template <int NV>
inline __m512 load_v(const float* p, int v, __mmask16 mask) {
  return v < NV - 1 ? _mm512_loadu_ps(p + 16 * v) : _mm512_maskz_loadu_ps(mask, p + 16 * v);
}
template <int NV>
inline void store_v(float* p, int v, __m512 value, __mmask16 mask) {
  if (v < NV - 1) _mm512_storeu_ps(p + 16 * v, value);
  else _mm512_mask_storeu_ps(p + 16 * v, mask, value);
}

// Outputs ox .. ox + OX - 1 of row oy, channels [k0, k0 + 16 NV): every tap of every output inside
// the image along x (the caller checked); rows outside are skipped as for one output.
template <int NV>
void outputs_inside(const DepthwiseGeometry& g, const float* xn, const float* w, const float* b, float* yrow, int oy,
                    int ox, int k0, __mmask16 mask) {
  const int c = g.c;
  __m512 acc[kOutputs][NV];
  for (int v = 0; v < NV; ++v) {
    const __m512 init = b ? load_v<NV>(b + k0, v, mask) : _mm512_setzero_ps();
    for (int o = 0; o < kOutputs; ++o) acc[o][v] = init;
  }
  const long long step = (long long)g.sw * c;  // from one output's input column to the next one's
  for (int ky = 0; ky < g.kh; ++ky) {
    const int iy = oy * g.sh + ky * g.dh - g.pad_top;
    if (iy < 0 || iy >= g.h) continue;
    const float* xrow = xn + (long long)iy * g.w * c + k0;
    const float* wrow = w + (long long)ky * g.kw * c + k0;
    for (int kx = 0; kx < g.kw; ++kx) {
      const float* x0 = xrow + (long long)(ox * g.sw + kx * g.dw - g.pad_left) * c;
      const float* wp = wrow + (long long)kx * c;
      for (int v = 0; v < NV; ++v) {
        const __m512 wv = load_v<NV>(wp, v, mask);
        for (int o = 0; o < kOutputs; ++o) acc[o][v] = _mm512_fmadd_ps(load_v<NV>(x0 + o * step, v, mask), wv, acc[o][v]);
      }
    }
  }
  for (int o = 0; o < kOutputs; ++o)
    for (int v = 0; v < NV; ++v) store_v<NV>(yrow + (long long)(ox + o) * c + k0, v, acc[o][v], mask);
}

// Output ox of row oy alone, channels [k0, k0 + 16 NV), each tap checked. Apart from
// outputs_inside on purpose: one template with a per-output tap check (tried) computed and tested
// each output's column inside the tap loop and ran slower than the AVX2 kernel (1.7 against 1.45 ms
// over MobileNetV2's depthwise shapes at batch 1, where these two give 1.09).
template <int NV>
void output_checked(const DepthwiseGeometry& g, const float* xn, const float* w, const float* b, float* yrow, int oy,
                    int ox, int k0, __mmask16 mask) {
  const int c = g.c;
  __m512 acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = b ? load_v<NV>(b + k0, v, mask) : _mm512_setzero_ps();
  for (int ky = 0; ky < g.kh; ++ky) {
    const int iy = oy * g.sh + ky * g.dh - g.pad_top;
    if (iy < 0 || iy >= g.h) continue;
    const float* xrow = xn + (long long)iy * g.w * c + k0;
    const float* wrow = w + (long long)ky * g.kw * c + k0;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int ix = ox * g.sw + kx * g.dw - g.pad_left;
      if (ix < 0 || ix >= g.w) continue;
      for (int v = 0; v < NV; ++v)
        acc[v] = _mm512_fmadd_ps(load_v<NV>(xrow + (long long)ix * c, v, mask), load_v<NV>(wrow + (long long)kx * c, v, mask),
                                 acc[v]);
    }
  }
  for (int v = 0; v < NV; ++v) store_v<NV>(yrow + (long long)ox * c + k0, v, acc[v], mask);
}

// Row oy, channels [k0, k0 + 16 NV): the outputs whose taps all lie inside along x in groups of
// kOutputs, the others (the edges, the last few) alone.
template <int NV>
void row_block(const DepthwiseGeometry& g, const float* xn, const float* w, const float* b, float* yrow, int oy, int k0,
               __mmask16 mask) {
  // Output ox has every tap inside along x when ox*sw - pad_left >= 0 and
  // ox*sw - pad_left + (kw - 1)*dw < w.
  const int first = (g.pad_left + g.sw - 1) / g.sw;
  const int span = (g.kw - 1) * g.dw;
  const int last = g.w - 1 - span + g.pad_left < 0 ? -1 : (g.w - 1 - span + g.pad_left) / g.sw;  // inclusive
  int ox = 0;
  for (; ox < g.ow && ox < first; ++ox) output_checked<NV>(g, xn, w, b, yrow, oy, ox, k0, mask);
  for (; ox + kOutputs - 1 <= last && ox + kOutputs <= g.ow; ox += kOutputs)
    outputs_inside<NV>(g, xn, w, b, yrow, oy, ox, k0, mask);
  for (; ox < g.ow; ++ox) output_checked<NV>(g, xn, w, b, yrow, oy, ox, k0, mask);
}

}  // namespace

bool depthwise_forward_row_avx512(const DepthwiseGeometry& g, const float* xn, const float* w, const float* b,
                                  float* yrow, int oy) {
  if (g.m != 1) return false;
  for (int k0 = 0; k0 < g.c; k0 += 64) {
    const int left = g.c - k0 < 64 ? g.c - k0 : 64, nv = (left + 15) / 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << (left - 16 * (nv - 1))) - 1u);
    switch (nv) {
      case 4: row_block<4>(g, xn, w, b, yrow, oy, k0, mask); break;
      case 3: row_block<3>(g, xn, w, b, yrow, oy, k0, mask); break;
      case 2: row_block<2>(g, xn, w, b, yrow, oy, k0, mask); break;
      default: row_block<1>(g, xn, w, b, yrow, oy, k0, mask); break;
    }
  }
  return true;
}

#pragma GCC pop_options

#else

bool depthwise_forward_row_avx512(const DepthwiseGeometry&, const float*, const float*, const float*, float*, int) {
  return false;
}

#endif

}  // namespace hpcnn::cpu
