// The index arithmetic of hpcnn's CUDA kernels, as HPCNN_HD functions of (block, thread) or of
// one element. The kernels in *_cuda.cu / cuda_kernels.cu are thin loops around these; the host
// can run the same functions (cuda_kernel_selftest.cpp emulates the grids on the CPU), so CI
// checks the GPU's indexing against the CPU ops on machines without a GPU.
// Plain C++ under g++ (HPCNN_HD = inline), __host__ __device__ under nvcc.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "ops/conv2d.h"
#include "ops/dense.h"
#include "ops/elementwise.h"

namespace hpcnn::cuda::body {

HPCNN_HD int imin(int a, int b) { return a < b ? a : b; }
HPCNN_HD int imax(int a, int b) { return a > b ? a : b; }

// ------------------------------------------------------------------ max pooling (NHWC)
struct PoolArgs {
  int n, h, w, c, ph, pw, sh, sw, oh, ow, pt, pl;
};

// The in-bounds window of output (oy, ox): [y0, y1) x [x0, x1).
HPCNN_HD void pool_window(const PoolArgs& a, int oy, int ox, int& y0, int& y1, int& x0, int& x1) {
  y0 = oy * a.sh - a.pt;
  x0 = ox * a.sw - a.pl;
  y1 = imin(y0 + a.ph, a.h);
  x1 = imin(x0 + a.pw, a.w);
  y0 = imax(y0, 0);
  x0 = imax(x0, 0);
}

// Output element i (flat NHWC index into y): the window's max, padded positions never win.
HPCNN_HD float maxpool_forward_at(const PoolArgs& a, const float* x, long long i) {
  long long t = i;
  int ci = static_cast<int>(t % a.c); t /= a.c;
  int ox = static_cast<int>(t % a.ow); t /= a.ow;
  int oy = static_cast<int>(t % a.oh);
  long long n = t / a.oh;
  int y0, y1, x0, x1;
  pool_window(a, oy, ox, y0, y1, x0, x1);
  const float* xn = x + n * a.h * a.w * a.c + ci;
  float best = -INFINITY;
  for (int iy = y0; iy < y1; ++iy)
    for (int ix = x0; ix < x1; ++ix) {
      float v = xn[((long long)iy * a.w + ix) * a.c];
      best = v > best ? v : best;
    }
  return best;
}

// Input element i (flat NHWC index into x): the sum, in (oy, ox) order, of dy over the windows
// whose FIRST maximal position (row-major) is this element -- the CPU's rule and order.
HPCNN_HD float maxpool_backward_at(const PoolArgs& a, const float* x, const float* y, const float* dy, long long i) {
  long long t = i;
  int ci = static_cast<int>(t % a.c); t /= a.c;
  int ix = static_cast<int>(t % a.w); t /= a.w;
  int iy = static_cast<int>(t % a.h);
  long long n = t / a.h;
  // Outputs whose window covers iy: oy*sh - pt <= iy <= oy*sh - pt + ph - 1.
  int oy_lo = iy + a.pt - a.ph + 1;
  oy_lo = oy_lo <= 0 ? 0 : (oy_lo + a.sh - 1) / a.sh;
  int oy_hi = imin((iy + a.pt) / a.sh, a.oh - 1);
  int ox_lo = ix + a.pl - a.pw + 1;
  ox_lo = ox_lo <= 0 ? 0 : (ox_lo + a.sw - 1) / a.sw;
  int ox_hi = imin((ix + a.pl) / a.sw, a.ow - 1);
  const float* xn = x + n * a.h * a.w * a.c + ci;
  float acc = 0.f;
  for (int oy = oy_lo; oy <= oy_hi; ++oy)
    for (int ox = ox_lo; ox <= ox_hi; ++ox) {
      long long o = ((n * a.oh + oy) * a.ow + ox) * a.c + ci;
      float best = y[o];
      int y0, y1, x0, x1;
      pool_window(a, oy, ox, y0, y1, x0, x1);
      int wy = -1, wx = -1;
      for (int py = y0; py < y1 && wy < 0; ++py)
        for (int px = x0; px < x1; ++px)
          if (xn[((long long)py * a.w + px) * a.c] == best) {
            wy = py;
            wx = px;
            break;
          }
      if (wy == iy && wx == ix) acc += dy[o];
    }
  return acc;
}

// ------------------------------------------------------------------ zero padding / crop (NHWC)
// Padded output element i of (n, h+pt+pb, w+pl+pr, c).
HPCNN_HD float pad_at(const float* in, int h, int w, int c, int pt, int pl, int oh, int ow, long long i) {
  long long t = i;
  int ci = static_cast<int>(t % c); t /= c;
  int ox = static_cast<int>(t % ow); t /= ow;
  int oy = static_cast<int>(t % oh);
  long long b = t / oh;
  int iy = oy - pt, ix = ox - pl;
  return (iy >= 0 && iy < h && ix >= 0 && ix < w) ? in[((b * h + iy) * w + ix) * c + ci] : 0.f;
}

// Cropped output element i of (n, h, w, c) from a padded (n, ih, iw, c).
HPCNN_HD float crop_at(const float* in, int h, int w, int c, int pt, int pl, int ih, int iw, long long i) {
  long long t = i;
  int ci = static_cast<int>(t % c); t /= c;
  int x = static_cast<int>(t % w); t /= w;
  int y = static_cast<int>(t % h);
  long long b = t / h;
  return in[((b * ih + y + pt) * iw + x + pl) * c + ci];
}

// ------------------------------------------------------------------ deterministic column sums
// m (rows x f) row-major. Grid (ceil(f/32), kSlices), block (32, 8): lane (tx, ty) of block
// (bx, slice) sums rows slice*chunk + ty, +8, ... of column bx*32 + tx; then lane ty == 0 adds
// the 8 lane sums in order into partials[slice, j]; finally out[j] = sum over slices in order.
constexpr int kColumnSumSlices = 64;

HPCNN_HD float column_sum_lane(const float* m, long long rows, int f, unsigned bx, unsigned slice, unsigned tx,
                               unsigned ty) {
  const int j = static_cast<int>(bx * 32 + tx);
  const long long chunk = (rows + kColumnSumSlices - 1) / kColumnSumSlices;
  const long long r0 = slice * chunk;
  long long r1 = r0 + chunk;
  if (r1 > rows) r1 = rows;
  float s = 0.f;
  if (j < f)
    for (long long r = r0 + ty; r < r1; r += 8) s += m[r * f + j];
  return s;
}

// ------------------------------------------------------------------ softmax cross-entropy row
HPCNN_HD int argmax_row(const float* r, int cols) {
  int best = 0;
  for (int j = 1; j < cols; ++j)
    if (r[best] < r[j]) best = j;  // std::max_element: the first maximum
  return best;
}

// One row: hit (argmax == target), and when wanted the loss and the gradient row. A class index
// outside [0, cols) gives a NaN loss and gradient (device labels are not range-checked).
HPCNN_HD void xent_row(int r, int cols, const float* logits, const float* onehot, const int32_t* labels,
                       float* dlogits, float grad_scale, double* loss_out, double* hit_out) {
  const float* lr = logits + (long long)r * cols;
  const float* t = onehot ? onehot + (long long)r * cols : nullptr;
  int target = labels ? labels[r] : argmax_row(t, cols);
  bool bad = labels && (target < 0 || target >= cols);
  int am = argmax_row(lr, cols);
  hit_out[r] = (!bad && am == target) ? 1.0 : 0.0;
  if (!loss_out && !dlogits) return;
  float mx = lr[am];
  float sum = 0.f;
  for (int j = 0; j < cols; ++j) sum += expf(lr[j] - mx);
  float lse = logf(sum);
  if (loss_out) {
    double l = 0.0;
    if (bad) {
      l = NAN;
    } else if (labels) {
      l = ew::xent_term(lr[target], mx, lse);
    } else {
      for (int j = 0; j < cols; ++j)
        if (t[j] != 0.f) l += (double)t[j] * ew::xent_term(lr[j], mx, lse);
    }
    loss_out[r] = l;
  }
  if (dlogits) {
    float* d = dlogits + (long long)r * cols;
    for (int j = 0; j < cols; ++j) {
      float tj = labels ? (j == target ? 1.f : 0.f) : t[j];
      d[j] = bad ? NAN : (ew::softmax_prob(lr[j], mx, lse) - tj) * grad_scale;
    }
  }
}

// ------------------------------------------------------------------ conv2d glue
// The convolution cuDNN is asked for: Keras geometry g with symmetric padding as is; with an odd
// total (Keras pads more at the bottom/right) the input is zero-padded explicitly (`padded`) and
// the convolution runs on the padded size with pad 0.
struct ConvGeom {
  int n, h, w, c;  // input (NHWC) as cuDNN sees it
  int f, kh, kw;   // filters, kernel
  int sh, sw;      // strides
  int ph, pw;      // symmetric padding
  int oh, ow;      // output
  bool padded;     // x must be padded by (pad_top, pad_bottom, pad_left, pad_right) first
};

inline ConvGeom conv_geom(const Conv2dGeometry& g) {
  bool sym = g.pad_top == g.pad_bottom && g.pad_left == g.pad_right;
  if (sym) return {g.n, g.h, g.w, g.c, g.f, g.kh, g.kw, g.sh, g.sw, g.pad_top, g.pad_left, g.oh, g.ow, false};
  return {g.n, g.h + g.pad_top + g.pad_bottom, g.w + g.pad_left + g.pad_right, g.c, g.f, g.kh, g.kw, g.sh, g.sw,
          0, 0, g.oh, g.ow, true};
}

// ------------------------------------------------------------------ dense as column-major GEMMs
// One cublasSgemm call: C (m x n) = op(A) (m x k) * op(B) (k x n), column-major, with leading
// dimensions; a row-major (r x c) array is the column-major (c x r) array of its transpose.
struct Gemm {
  bool trans_a, trans_b;
  int m, n, k;
  const float* a;
  int lda;
  const float* b;
  int ldb;
  float* c;
  int ldc;
};

// y^T (out x N) = w^T (out x in) * x^T (in x N)
inline Gemm dense_forward_gemm(const DenseGeometry& g, const float* x, const float* w, float* y) {
  return {false, false, g.out, g.n, g.in, w, g.out, x, g.in, y, g.out};
}
// dW^T (out x in) = dy^T (out x N) * x (N x in)
inline Gemm dense_dw_gemm(const DenseGeometry& g, const float* x, const float* dy, float* dw) {
  return {false, true, g.out, g.in, g.n, dy, g.out, x, g.in, dw, g.out};
}
// dx^T (in x N) = w (in x out) * dy^T (out x N)
inline Gemm dense_dx_gemm(const DenseGeometry& g, const float* w, const float* dy, float* dx) {
  return {true, false, g.in, g.n, g.out, w, g.out, dy, g.out, dx, g.in};
}

}  // namespace hpcnn::cuda::body
