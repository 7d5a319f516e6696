// conv2d on the CPU: im2col + one sgemm per group of images, NHWC throughout.
//
// Forward, per thread (a contiguous slice of the batch), per group of images:
//   col (rows = images*oh*ow, K = kh*kw*c)  <- im2col(x)         (NHWC: channel runs are contiguous)
//   y   (rows, F)                            = col * W (K, F)     (Keras' (kh,kw,in,out) kernel IS this matrix)
//   y  <- relu(y + b)                                             (fused, one pass while y is in cache)
// Backward recomputes col (cheaper than keeping 70 MB of it per layer):
//   dy <- dy * (y > 0) and db += column sums                      (fused)
//   dW_thread += col^T * dy ;  dcol = dy * W^T ;  dx <- col2im(dcol)
// Each thread owns its images' rows of dx; its dW/db partials are summed in thread order, so the
// result is bitwise reproducible for a given thread count.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/scratch.h"
#include "core/thread_pool.h"
#include "ops/blas.h"
#include "ops/conv2d.h"
#include "ops/conv2d_direct_cpu.h"
#include "ops/conv2d_winograd_cpu.h"
#include "ops/elementwise.h"
#include "ops/small_gemm_cpu.h"

namespace hpcnn::cpu {

namespace {

// Images per GEMM: enough rows for an efficient sgemm, few enough that col stays cache-friendly.
int images_per_group(const Conv2dGeometry& g) {
  long long rows_per_image = (long long)g.oh * g.ow;
  long long k = (long long)g.kh * g.kw * g.c;
  long long by_rows = std::max(1LL, 1024 / std::max(1LL, rows_per_image));
  long long by_bytes = std::max(1LL, (4LL << 20) / std::max(1LL, rows_per_image * k * 4));
  return static_cast<int>(std::max(1LL, std::min(by_rows, by_bytes)));
}

bool is_pointwise(const Conv2dGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 && g.pad_left == 0;
}

// col[r - r0, (ky*kw + kx)*c + ci] = x[img, oy*sh+ky-pt, ox*sw+kx-pl, ci] (0 outside) for the output
// rows r = (img*oh + oy)*ow + ox of [r0, r1): whole images (the per-image groups) or a slice of
// one image's rows (a batch smaller than the thread count).
void im2col_rows(const Conv2dGeometry& g, const float* x, long long r0, long long r1, float* col) {
  const long long K = (long long)g.kh * g.kw * g.c;
  const size_t run = sizeof(float) * g.c;
  const long long per_image = (long long)g.oh * g.ow;
  for (long long r = r0; r < r1; ++r) {
    const long long img = r / per_image, pixel = r - img * per_image;
    const int oy = static_cast<int>(pixel / g.ow), ox = static_cast<int>(pixel % g.ow);
    const float* xi = x + img * g.h * g.w * g.c;
    float* row = col + (r - r0) * K;
    for (int ky = 0; ky < g.kh; ++ky) {
      int iy = oy * g.sh + ky - g.pad_top;
      float* dst = row + (long long)ky * g.kw * g.c;
      if (iy < 0 || iy >= g.h) {
        std::memset(dst, 0, run * g.kw);
        continue;
      }
      int ix0 = ox * g.sw - g.pad_left;
      if (ix0 >= 0 && ix0 + g.kw <= g.w) {  // the whole kernel row is inside: one copy
        std::memcpy(dst, xi + ((long long)iy * g.w + ix0) * g.c, run * g.kw);
        continue;
      }
      for (int kx = 0; kx < g.kw; ++kx) {
        int ix = ix0 + kx;
        if (ix < 0 || ix >= g.w) std::memset(dst + (long long)kx * g.c, 0, run);
        else std::memcpy(dst + (long long)kx * g.c, xi + ((long long)iy * g.w + ix) * g.c, run);
      }
    }
  }
}

// dx[n0+img, iy, ix, :] += dcol[row, (ky*kw+kx)*c ...]; dx rows of these images must be zeroed first.
void col2im_add(const Conv2dGeometry& g, const float* dcol, int n0, int count, float* dx) {
  const long long K = (long long)g.kh * g.kw * g.c;
  for (int img = 0; img < count; ++img) {
    float* dxi = dx + (long long)(n0 + img) * g.h * g.w * g.c;
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        const float* row = dcol + (((long long)img * g.oh + oy) * g.ow + ox) * K;
        for (int ky = 0; ky < g.kh; ++ky) {
          int iy = oy * g.sh + ky - g.pad_top;
          if (iy < 0 || iy >= g.h) continue;
          for (int kx = 0; kx < g.kw; ++kx) {
            int ix = ox * g.sw + kx - g.pad_left;
            if (ix < 0 || ix >= g.w) continue;
            const float* src = row + ((long long)ky * g.kw + kx) * g.c;
            float* dst = dxi + ((long long)iy * g.w + ix) * g.c;
            for (int ci = 0; ci < g.c; ++ci) dst[ci] += src[ci];
          }
        }
      }
    }
  }
}

// The im2col matrix of output rows [r0, r1): x itself for a pointwise convolution, else built in
// this thread's scratch slot 0.
const float* row_columns(const Conv2dGeometry& g, const float* x, long long r0, long long r1) {
  if (is_pointwise(g)) return x + r0 * g.c;  // stride 1, no padding: rows are pixels
  float* buf = thread_scratch().floats((r1 - r0) * g.kh * g.kw * g.c, 0);
  im2col_rows(g, x, r0, r1, buf);
  return buf;
}

// The im2col matrix of images [n0, n0 + count).
const float* columns(const Conv2dGeometry& g, const float* x, int n0, int count) {
  const long long per_image = (long long)g.oh * g.ow;
  return row_columns(g, x, n0 * per_image, (n0 + count) * per_image);
}

// Fewer output pixels than this in a whole forward pass (im2col path): small_gemm_by_columns
// (ops/small_gemm_cpu.h; the tutorial CNN's conv4 at batch 1: 16 rows, a 1152 x 256 kernel).
constexpr long long kFewRows = 64;
// A thread's share of the rows when a batch smaller than the thread count splits its rows.
constexpr long long kMinRowsPerThread = 32;

// dy <- dy * (y > 0) when relu; db_acc[j] += sum of the (masked) column j.
void mask_and_sum(float* dy, const float* y, long long rows, int f, float* db_acc, bool relu) {
  for (long long r = 0; r < rows; ++r) {
    float* d = dy + r * f;
    if (relu) {
      const float* yr = y + r * f;
      for (int j = 0; j < f; ++j) d[j] = ew::relu_grad(yr[j], d[j]);
    }
    for (int j = 0; j < f; ++j) db_acc[j] += d[j];
  }
}

}  // namespace

void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu,
                    const float* residual, float relu_max) {
  // A capped ReLU (ReLU6) is applied in the GEMM paths' output stage; the Winograd, few-row and
  // direct kernels apply the plain ReLU, and the cap follows over their output (capped_after).
  const bool capped = relu && relu_max < kNoReluCap;
  auto capped_after = [&] {
    if (capped) cap_outputs(y, g.n * (long long)g.oh * g.ow * g.f, relu_max);
  };
  std::vector<float> no_bias;  // use_bias=False: the kernels add a bias of zeros
  if (!b) {
    no_bias.assign(g.f, 0.f);
    b = no_bias.data();
  }
  const int K = g.kh * g.kw * g.c;
  const long long rows_per_image = (long long)g.oh * g.ow;
  const int group = images_per_group(g);
  const bool use_direct = direct::applies(g);
  if (!use_direct && winograd::applies(g)) {  // 3x3 stride 1, many channels: 2.25x fewer products
    winograd::forward(g, x, w, b, y, relu, residual);
    capped_after();
    return;
  }
  if (!use_direct && g.n * rows_per_image < kFewRows) {  // a few output pixels in all (deep layers at batch 1)
    const float* col = columns(g, x, 0, g.n);
    small_gemm_by_columns(static_cast<int>(g.n * rows_per_image), g.f, K, col, w, y, b, relu, residual);
    capped_after();
    return;
  }
  if (use_direct && g.n < get_num_threads()) {  // fewer images than threads (batch 1): each image's rows split
    for (long long n = 0; n < g.n; ++n)
      parallel_for(g.oh, [&](long long r0, long long r1, int) {
        float* xpad = thread_scratch().floats(direct::padded_size(g), 2);
        direct::forward(g, x, w, b, y, relu && !residual, static_cast<int>(n), 1, xpad, static_cast<int>(r0),
                        static_cast<int>(r1));
        if (residual) {
          const long long off = (n * g.oh + r0) * g.ow * g.f;
          bias_act(y + off, (r1 - r0) * g.ow, g.f, 0, g.f, nullptr, relu, residual + off);
        }
      }, 2);
    capped_after();
    return;
  }
  if (!use_direct && g.n < get_num_threads()) {  // fewer images than threads (batch 1): the rows split
    // Each thread its slice of the output pixels, whole rows of y: an image alone no longer runs
    // on one thread (ResNet50 at batch 1 ran its 1x1 convolutions, most of its time, on one of
    // two). OpenBLAS may pick another kernel for the shorter GEMM (its small-matrix path), so a
    // pixel can differ from the same image's in a batch in the last bits, as the few-rows path
    // above already does; Winograd's tiles keep their bits (tests/core/ops/test_winograd.py).
    parallel_for(g.n * rows_per_image, [&](long long r0, long long r1, int) {
      const float* col = row_columns(g, x, r0, r1);
      blas::sgemm(false, false, static_cast<int>(r1 - r0), g.f, K, 1.f, col, K, w, g.f, 0.f, y + r0 * g.f, g.f);
      bias_act(y + r0 * g.f, r1 - r0, g.f, 0, g.f, b, relu, residual ? residual + r0 * g.f : nullptr, relu_max);
    }, kMinRowsPerThread);
    return;
  }
  parallel_for(g.n, [&](long long b0, long long b1, int) {
    if (use_direct) {  // few input channels: register-blocked direct kernel, no im2col
      float* xpad = thread_scratch().floats(direct::padded_size(g), 2);
      direct::forward(g, x, w, b, y, relu && !residual, static_cast<int>(b0), static_cast<int>(b1 - b0), xpad);
      if (residual) {  // then y = act(y + residual) over these images
        const long long off = b0 * rows_per_image * g.f;
        bias_act(y + off, (b1 - b0) * rows_per_image, g.f, 0, g.f, nullptr, relu, residual + off);
      }
      return;
    }
    for (long long n0 = b0; n0 < b1; n0 += group) {
      int count = static_cast<int>(std::min<long long>(group, b1 - n0));
      long long rows = count * rows_per_image;
      const float* col = columns(g, x, static_cast<int>(n0), count);
      float* yg = y + n0 * rows_per_image * g.f;
      blas::sgemm(false, false, static_cast<int>(rows), g.f, K, 1.f, col, K, w, g.f, 0.f, yg, g.f);
      bias_act(yg, rows, g.f, 0, g.f, b, relu, residual ? residual + n0 * rows_per_image * g.f : nullptr, relu_max);
    }
  });
  if (use_direct) capped_after();
}

void conv2d_backward(const Conv2dGeometry& g, const float* x, const float* w, const float* y, float* dy, float* dx,
                     float* dw, float* db, bool relu, bool add_to_dx) {
  const int K = g.kh * g.kw * g.c;
  const long long rows_per_image = (long long)g.oh * g.ow;
  const long long wsize = (long long)K * g.f;
  const int group = images_per_group(g);
  const int max_threads = get_num_threads();
  const bool use_direct = direct::applies(g);
  // Winograd (3x3 stride 1, many channels): dx with the kernel transformed once here; dW as the
  // per-thread partials of the Winograd-domain gradient dU, transformed to dW after the sum.
  const bool wino = !use_direct && winograd::applies(g);
  const float* wino_u = (dx && wino) ? winograd::backward_kernel(g, w) : nullptr;
  const long long psize = wino ? winograd::filter_grad_size(g) : wsize;  // dW (or dU) partial
  // One dW (dU) and db partial per thread, summed in thread order below (into du_sum for Winograd).
  float* partials = thread_scratch().floats((psize + g.f) * max_threads + (wino ? psize : 0), 3);
  float* du_sum = partials + (psize + g.f) * max_threads;
  int used_threads = 1;
  parallel_region([&](int tid, int nt) {
    if (tid == 0) used_threads = nt;
    long long b0, b1;
    split_range(g.n, tid, nt, b0, b1);
    float* dw_t = partials + (psize + g.f) * tid;
    float* db_t = dw_t + psize;
    std::fill(dw_t, dw_t + psize + g.f, 0.f);
    for (long long n0 = b0; n0 < b1; n0 += group) {
      int count = static_cast<int>(std::min<long long>(group, b1 - n0));
      long long rows = count * rows_per_image;
      float* dyg = dy + n0 * rows_per_image * g.f;
      // Without a bias and a fused ReLU there is nothing to mask or sum: no pass over dy (a
      // convolution followed by BatchNormalization, use_bias=False: every one of ResNet's). The
      // direct dW kernel masks and sums row by row itself when no dx is wanted (a first layer:
      // at 180x180x16 the pass of its own read and wrote 66 MB of dy once more per batch of 32).
      const bool fused = use_direct && !dx;
      if ((relu || db) && !fused)
        mask_and_sum(dyg, relu ? y + n0 * rows_per_image * g.f : nullptr, rows, g.f, db_t, relu);
      if (use_direct) {
        float* xpad = thread_scratch().floats(direct::padded_size(g), 2);
        direct::backward_filter(g, x, dy, dw_t, static_cast<int>(n0), count, xpad, fused && relu ? y : nullptr,
                                fused && db ? db_t : nullptr);
      } else if (wino) {
        winograd::filter_grad(g, x, dy, static_cast<int>(n0), count, dw_t);
      } else {
        const float* col = columns(g, x, static_cast<int>(n0), count);
        // dW_t (K x F) += col^T (K x rows) * dy (rows x F)
        blas::sgemm(true, false, K, g.f, static_cast<int>(rows), 1.f, col, K, dyg, g.f, 1.f, dw_t, g.f);
      }
      if (dx) {
        float* dxg = dx + n0 * (long long)g.h * g.w * g.c;
        if (wino_u) {
          winograd::backward_data(g, wino_u, dy, dx, static_cast<int>(n0), count, add_to_dx);
        } else if (is_pointwise(g)) {
          blas::sgemm(false, true, static_cast<int>(rows), K, g.f, 1.f, dyg, g.f, w, g.f, add_to_dx ? 1.f : 0.f, dxg, K);
        } else {
          float* dcol = thread_scratch().floats(rows * K, 1);
          blas::sgemm(false, true, static_cast<int>(rows), K, g.f, 1.f, dyg, g.f, w, g.f, 0.f, dcol, K);
          if (!add_to_dx) std::memset(dxg, 0, sizeof(float) * count * (long long)g.h * g.w * g.c);
          col2im_add(g, dcol, static_cast<int>(n0), count, dx);
        }
      }
    }
  }, max_threads);  // the partials above are sized for max_threads (the pool may have grown since)
  // Fixed-order reduction of the partials, split over elements.
  const int nt = used_threads;
  float* dw_sum = wino ? du_sum : dw;
  parallel_for(psize + g.f, [&](long long e0, long long e1, int) {
    for (long long e = e0; e < e1; ++e) {
      float s = partials[e];
      for (int t = 1; t < nt; ++t) s += partials[(psize + g.f) * t + e];
      if (e < psize) dw_sum[e] = s;
      else if (db) db[e - psize] = s;
    }
  }, 4096);
  if (wino) winograd::filter_grad_finish(g, du_sum, dw);
}

}  // namespace hpcnn::cpu
