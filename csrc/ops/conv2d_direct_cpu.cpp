// Direct convolution kernels for few input channels (see conv2d_direct_cpu.h).
//
// Each image is first copied into a zero-padded buffer (pad_top/left/bottom/right around it),
// so the inner loops have no bounds checks. Filters are NV vectors of 8 (F = 8*NV, NV <= 4).
//   forward:  P output pixels x NV filter vectors of accumulators; for each (ky, kx, ci) one
//             broadcast of each pixel's input and one FMA per accumulator with the weight row.
//   dW:       KB kernel rows x NV filter vectors of accumulators, streamed over one output row's
//             pixels (that row's dy stays in L1 across the K/KB blocks; a tail of fewer than
//             KB kernel rows is one block of its own size).
// Summation order is fixed by the geometry: results are deterministic.
#include "ops/conv2d_direct_cpu.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/elementwise.h"

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

// dw_acc rows [k0, k0 + KB) += sum over output row oy's pixels of x_col[pix, k] * dy[pix, :].
template <int NV, int KB>
inline void bwd_row(const Conv2dGeometry& g, const float* xp, int wp, const long long* koff, const float* dyrow,
                    float* dw_acc, int k0, int oy) {
  const int F = g.f;
  __m256 acc[KB][NV];
  #pragma GCC unroll 16
  for (int kk = 0; kk < KB; ++kk)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[kk][v] = _mm256_loadu_ps(dw_acc + (long long)(k0 + kk) * F + 8 * v);
  long long off[KB];
  #pragma GCC unroll 16
  for (int kk = 0; kk < KB; ++kk) off[kk] = koff[k0 + kk];
  const float* xrow = xp + (long long)oy * g.sh * wp * g.c;
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
  #pragma GCC unroll 16
  for (int kk = 0; kk < KB; ++kk)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(dw_acc + (long long)(k0 + kk) * F + 8 * v, acc[kk][v]);
}

// The last r (1 <= r <= R) kernel rows of output row oy, in one block of r rows (K = 27 with
// blocks of 6 leaves 3: one pass of 3 rows instead of three passes of one).
template <int NV, int R>
inline void bwd_row_tail(int r, const Conv2dGeometry& g, const float* xp, int wp, const long long* koff,
                         const float* dyrow, float* dw_acc, int k0, int oy) {
  if constexpr (R >= 1) {
    if (r == R) bwd_row<NV, R>(g, xp, wp, koff, dyrow, dw_acc, k0, oy);
    else bwd_row_tail<NV, R - 1>(r, g, xp, wp, koff, dyrow, dw_acc, k0, oy);
  }
}

// row = dy's output row with the ReLU's mask applied (where y is given), and db_acc += its column
// sums (where given), in the pixel order of the separate pass this replaces (conv2d_cpu.cpp's
// mask_and_sum): the same bits.
void mask_row(const float* dyrow, const float* yrow, int pixels, int f, float* row, float* db_acc) {
  for (int p = 0; p < pixels; ++p) {
    const float* d = dyrow + (long long)p * f;
    float* out = row + (long long)p * f;
    if (yrow) {
      const float* yr = yrow + (long long)p * f;
      for (int j = 0; j < f; ++j) out[j] = ew::relu_grad(yr[j], d[j]);
    } else {
      std::memcpy(out, d, sizeof(float) * f);
    }
    if (db_acc)
      for (int j = 0; j < f; ++j) db_acc[j] += out[j];
  }
}

template <int NV>
void backward_nv(const Conv2dGeometry& g, const float* x, const float* dy, float* dw_acc, int n0, int count,
                 float* xp, const float* y, float* db_acc) {
  constexpr int KB = 12 / NV;
  const int wp = padded_w(g);
  const int K = g.kh * g.kw * g.c;
  // Offset of kernel row k = (ky, kx, ci) from a pixel's top-left input in the padded image.
  std::vector<long long> koff(K);
  for (int ky = 0; ky < g.kh; ++ky)
    for (int kx = 0; kx < g.kw; ++kx)
      for (int ci = 0; ci < g.c; ++ci) koff[(ky * g.kw + kx) * g.c + ci] = ((long long)ky * wp + kx) * g.c + ci;
  const bool fused = y || db_acc;
  std::vector<float> masked(fused ? (size_t)g.ow * g.f : 0);
  for (int n = n0; n < n0 + count; ++n) {
    pad_image(g, x, n, xp);
    const long long image = (long long)n * g.oh * g.ow * g.f;
    // Output row by output row, every block of kernel rows over it: the row's dy (ow x F floats,
    // 11.5 KB for 180 pixels x 16 filters) and its kh input rows stay in L1 across the K / KB
    // blocks. Block by block over the whole image instead read an image's dy (2 MB at 180x180)
    // from memory once per block. Each dW element is still one chain over the pixels in (oy, ox)
    // order: the same bits as before.
    for (int oy = 0; oy < g.oh; ++oy) {
      const long long at = image + (long long)oy * g.ow * g.f;
      const float* dyrow = dy + at;
      if (fused) {  // the ReLU mask and db here, while the row is in L1 (no pass of its own over dy)
        mask_row(dyrow, y ? y + at : nullptr, g.ow, g.f, masked.data(), db_acc);
        dyrow = masked.data();
      }
      int k = 0;
      for (; k + KB <= K; k += KB) bwd_row<NV, KB>(g, xp, wp, koff.data(), dyrow, dw_acc, k, oy);
      if (k < K) bwd_row_tail<NV, KB - 1>(K - k, g, xp, wp, koff.data(), dyrow, dw_acc, k, oy);
    }
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
                     float* xpad, const float* y, float* db_acc) {
  switch (g.f / 8) {
    case 1: return backward_nv<1>(g, x, dy, dw_acc, n0, count, xpad, y, db_acc);
    case 2: return backward_nv<2>(g, x, dy, dw_acc, n0, count, xpad, y, db_acc);
    case 3: return backward_nv<3>(g, x, dy, dw_acc, n0, count, xpad, y, db_acc);
    default: return backward_nv<4>(g, x, dy, dw_acc, n0, count, xpad, y, db_acc);
  }
}

#else  // no AVX2+FMA at compile time: the im2col path handles every layer

bool applies(const Conv2dGeometry&) { return false; }
void forward(const Conv2dGeometry&, const float*, const float*, const float*, float*, bool, int, int, float*, int, int) {}
void backward_filter(const Conv2dGeometry&, const float*, const float*, float*, int, int, float*, const float*,
                     float*) {}

#endif

}  // namespace hpcnn::cpu::direct
