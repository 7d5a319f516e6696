// Direct convolution kernels for few input channels (see conv2d_direct_cpu.h).
//
// Each image is first copied into a zero-padded buffer (pad_top/left/bottom/right around it),
// so the inner loops have no bounds checks. Filters are NV vectors of 8 (F = 8*NV, NV <= 4).
//   forward:  P output pixels x NV filter vectors of accumulators; for each (ky, kx, ci) one
//             broadcast of each pixel's input and one FMA per accumulator with the weight row.
//   dW:       KB kernel rows x NV filter vectors of accumulators, streamed over the image's
//             output pixels (dy of one image stays in L2 across the K/KB passes).
// Summation order is fixed by the geometry: results are deterministic.
#include "ops/conv2d_direct_cpu.h"

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define HPCNN_DIRECT_CONV 1
#endif

namespace hpcnn::cpu::direct {

namespace {

int padded_h(const Conv2dGeometry& g) { return g.h + g.pad_top + g.pad_bottom; }
int padded_w(const Conv2dGeometry& g) { return g.w + g.pad_left + g.pad_right; }

}  // namespace

long long padded_size(const Conv2dGeometry& g) { return (long long)padded_h(g) * padded_w(g) * g.c; }

#ifdef HPCNN_DIRECT_CONV

namespace {

// The padded copy of image n. Valid padding may leave rows/columns no window reads: harmless.
void pad_image(const Conv2dGeometry& g, const float* x, int n, float* xp) {
  const int hp = padded_h(g), wp = padded_w(g);
  std::memset(xp, 0, sizeof(float) * (size_t)hp * wp * g.c);
  const float* xn = x + (long long)n * g.h * g.w * g.c;
  for (int iy = 0; iy < g.h; ++iy)
    std::memcpy(xp + (((long long)(iy + g.pad_top) * wp) + g.pad_left) * g.c, xn + (long long)iy * g.w * g.c,
                sizeof(float) * g.w * g.c);
}

}  // namespace

// Few input channels (K = kh*kw*c too thin for the BLAS), or a strided kernel wider than 1x1 (a
// ResNet's downsampling 3x3, stride 2): measured on one Zen3 core (CPU time, batch 32, 16 -> 32
// channels, 32x32 -> 16x16) the register-blocked kernel computes the forward pass at 81-84 GFLOP/s
// against im2col + sgemm's 62-65, and dW at 80 against 63 (dx stays with the GEMM and col2im).
// Not for 1x1 strided (a gather and a GEMM are as fast) nor above 32 filters (the kernel keeps all
// filters of a pixel block in registers; 3x3 stride 2 to 64 filters: the GEMM reaches 77-89).
bool applies(const Conv2dGeometry& g) {
  const bool thin = g.c <= 4;
  const bool strided = (g.sh > 1 || g.sw > 1) && g.kh * g.kw > 1;
  return (thin || strided) && g.f % 8 == 0 && g.f <= 32;
}

namespace {

// P consecutive output pixels of row oy starting at ox0.
template <int NV, int P>
inline void fwd_block(const Conv2dGeometry& g, const float* xp, int wp, const float* w, const float* b, float* yrow,
                      int oy, int ox0, bool relu) {
  __m256 acc[P][NV];
  #pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) {
    __m256 bv = _mm256_loadu_ps(b + 8 * v);
    #pragma GCC unroll 16
    for (int p = 0; p < P; ++p) acc[p][v] = bv;
  }
  const int C = g.c, F = g.f;
  const long long pix_step = (long long)g.sw * C;
  // In the padded image the (kx, ci) inputs of one kernel row are contiguous, and so are their
  // weight rows: one flat loop of kw*C steps per ky (no short inner loops to mispredict).
  const int run = g.kw * C;
  for (int ky = 0; ky < g.kh; ++ky) {
    const float* xin = xp + ((long long)(oy * g.sh + ky) * wp + (long long)ox0 * g.sw) * C;
    const float* wr = w + (long long)ky * run * F;
    for (int j = 0; j < run; ++j, wr += F) {
      __m256 wv[NV];
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) wv[v] = _mm256_loadu_ps(wr + 8 * v);
      #pragma GCC unroll 16
      for (int p = 0; p < P; ++p) {
        __m256 xv = _mm256_broadcast_ss(xin + j + p * pix_step);
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[p][v] = _mm256_fmadd_ps(xv, wv[v], acc[p][v]);
      }
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  #pragma GCC unroll 16
  for (int p = 0; p < P; ++p)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v)
      _mm256_storeu_ps(yrow + (long long)(ox0 + p) * F + 8 * v, relu ? _mm256_max_ps(acc[p][v], zero) : acc[p][v]);
}

template <int NV>
void forward_nv(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu, int n0,
                int count, float* xp, int oy0, int oy1) {
  constexpr int P = 12 / NV;
  const int wp = padded_w(g);
  for (int n = n0; n < n0 + count; ++n) {
    pad_image(g, x, n, xp);
    for (int oy = oy0; oy < oy1; ++oy) {
      float* yrow = y + ((long long)n * g.oh + oy) * g.ow * g.f;
      int ox = 0;
      for (; ox + P <= g.ow; ox += P) fwd_block<NV, P>(g, xp, wp, w, b, yrow, oy, ox, relu);
      for (; ox < g.ow; ++ox) fwd_block<NV, 1>(g, xp, wp, w, b, yrow, oy, ox, relu);
    }
  }
}

// dw_acc rows [k0, k0 + KB) += sum over the image's pixels of x_col[pix, k] * dy[pix, :].
template <int NV, int KB>
inline void bwd_block(const Conv2dGeometry& g, const float* xp, int wp, const long long* koff, const float* dyn,
                      float* dw_acc, int k0) {
  const int F = g.f;
  __m256 acc[KB][NV];
  #pragma GCC unroll 16
  for (int kk = 0; kk < KB; ++kk)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[kk][v] = _mm256_loadu_ps(dw_acc + (long long)(k0 + kk) * F + 8 * v);
  long long off[KB];
  #pragma GCC unroll 16
  for (int kk = 0; kk < KB; ++kk) off[kk] = koff[k0 + kk];
  for (int oy = 0; oy < g.oh; ++oy) {
    const float* xrow = xp + (long long)oy * g.sh * wp * g.c;
    const float* dyrow = dyn + (long long)oy * g.ow * F;
    for (int ox = 0; ox < g.ow; ++ox) {
      const float* xpix = xrow + (long long)ox * g.sw * g.c;
      const float* d = dyrow + (long long)ox * F;
      __m256 dv[NV];
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) dv[v] = _mm256_loadu_ps(d + 8 * v);
      #pragma GCC unroll 16
      for (int kk = 0; kk < KB; ++kk) {
        __m256 xv = _mm256_broadcast_ss(xpix + off[kk]);
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[kk][v] = _mm256_fmadd_ps(xv, dv[v], acc[kk][v]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int kk = 0; kk < KB; ++kk)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(dw_acc + (long long)(k0 + kk) * F + 8 * v, acc[kk][v]);
}

template <int NV>
void backward_nv(const Conv2dGeometry& g, const float* x, const float* dy, float* dw_acc, int n0, int count,
                 float* xp) {
  constexpr int KB = 12 / NV;
  const int wp = padded_w(g);
  const int K = g.kh * g.kw * g.c;
  // Offset of kernel row k = (ky, kx, ci) from a pixel's top-left input in the padded image.
  std::vector<long long> koff(K);
  for (int ky = 0; ky < g.kh; ++ky)
    for (int kx = 0; kx < g.kw; ++kx)
      for (int ci = 0; ci < g.c; ++ci) koff[(ky * g.kw + kx) * g.c + ci] = ((long long)ky * wp + kx) * g.c + ci;
  for (int n = n0; n < n0 + count; ++n) {
    pad_image(g, x, n, xp);
    const float* dyn = dy + (long long)n * g.oh * g.ow * g.f;
    int k = 0;
    for (; k + KB <= K; k += KB) bwd_block<NV, KB>(g, xp, wp, koff.data(), dyn, dw_acc, k);
    for (; k < K; ++k) bwd_block<NV, 1>(g, xp, wp, koff.data(), dyn, dw_acc, k);
  }
}

}  // namespace

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu, int n0,
             int count, float* xpad, int oy0, int oy1) {
  if (oy1 < 0) oy1 = g.oh;
  switch (g.f / 8) {
    case 1: return forward_nv<1>(g, x, w, b, y, relu, n0, count, xpad, oy0, oy1);
    case 2: return forward_nv<2>(g, x, w, b, y, relu, n0, count, xpad, oy0, oy1);
    case 3: return forward_nv<3>(g, x, w, b, y, relu, n0, count, xpad, oy0, oy1);
    default: return forward_nv<4>(g, x, w, b, y, relu, n0, count, xpad, oy0, oy1);
  }
}

void backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw_acc, int n0, int count,
                     float* xpad) {
  switch (g.f / 8) {
    case 1: return backward_nv<1>(g, x, dy, dw_acc, n0, count, xpad);
    case 2: return backward_nv<2>(g, x, dy, dw_acc, n0, count, xpad);
    case 3: return backward_nv<3>(g, x, dy, dw_acc, n0, count, xpad);
    default: return backward_nv<4>(g, x, dy, dw_acc, n0, count, xpad);
  }
}

#else  // no AVX2+FMA at compile time: the im2col path handles every layer

bool applies(const Conv2dGeometry&) { return false; }
void forward(const Conv2dGeometry&, const float*, const float*, const float*, float*, bool, int, int, float*, int, int) {}
void backward_filter(const Conv2dGeometry&, const float*, const float*, float*, int, int, float*) {}

#endif

}  // namespace hpcnn::cpu::direct
