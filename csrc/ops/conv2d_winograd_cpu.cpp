// Winograd F(2x2, 3x3) convolution on the CPU (see conv2d_winograd_cpu.h).
//
// Transforms (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]     V = B^T d B   (d: 4x4 input tile)
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]  U = G g G^T   (g: 3x3 kernel)
//   A^T = [1 1 1 0; 0 1 -1 -1]                        y = A^T m A   (m = U .* V, 2x2 output)
// Output tile (ty, tx) covers output rows 2ty, 2ty+1 and columns 2tx, 2tx+1; its input tile
// starts at row 2ty - pad_top, column 2tx - pad_left. Input outside the image reads as zero (this
// is the padding, also the asymmetric bottom/right one); output outside the image is not written.
//
// Per thread (a static slice of the batch), per group of images:
//   V[xi][tile][c]  <- input transform   (channels innermost: 8-wide vectors over c)
//   M[xi] = V[xi] * U[xi]                 16 single-threaded sgemms (tiles x C) * (C x F)
//   y <- A^T M A (+ bias, ReLU)           (8-wide vectors over f)
// Every output element depends only on its image, the geometry and the group split, which
// depend on the thread count alone: results are bitwise reproducible for a given thread count.
#include "ops/conv2d_winograd_cpu.h"

#include <algorithm>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/scratch.h"
#include "core/thread_pool.h"
#include "ops/blas.h"
#include "ops/elementwise.h"

namespace hpcnn::cpu::winograd {

namespace {

constexpr int L = 8;  // channel chunk: one AVX register of floats

// One 3x3 stride-1 convolution as the Winograd routine sees it (forward or backward-data).
struct Problem {
  int h, w, c;             // input (height, width, channels)
  int oh, ow, f;           // output
  int pad_top, pad_left;   // input row/column of output (0, 0) is (-pad_top, -pad_left)
  int th() const { return (oh + 1) / 2; }
  int tw() const { return (ow + 1) / 2; }
  long long tiles() const { return (long long)th() * tw(); }
};

// Images per group: enough tiles for efficient sgemms, V and M small enough to stay in L2/L3.
int images_per_group(const Problem& p) {
  const long long target_tiles = 512;
  const long long bytes_per_image = 16LL * p.tiles() * (p.c + p.f) * 4;
  long long by_tiles = std::max(1LL, target_tiles / std::max(1LL, p.tiles()));
  long long by_bytes = std::max(1LL, (6LL << 20) / std::max(1LL, bytes_per_image));
  return static_cast<int>(std::max(1LL, std::min(by_tiles, by_bytes)));
}

// U[xi][ci][fo] = (G g G^T)[xi] with g[a][b] = kernel value at (a, b) for input ci, output fo;
// `at(a, b, ci, fo)` reads it. Loops over fo innermost for the forward layout.
template <class At>
void kernel_transform(int c, int f, float* u, At at) {
  const long long plane = (long long)c * f;
  for (int ci = 0; ci < c; ++ci) {
    for (int fo = 0; fo < f; ++fo) {
      float g[3][3];
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b) g[a][b] = at(a, b, ci, fo);
      float t[4][3];  // G g
      for (int b = 0; b < 3; ++b) {
        t[0][b] = g[0][b];
        t[1][b] = 0.5f * (g[0][b] + g[1][b] + g[2][b]);
        t[2][b] = 0.5f * (g[0][b] - g[1][b] + g[2][b]);
        t[3][b] = g[2][b];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) G^T
        float* ui = u + (long long)(4 * i) * plane + (long long)ci * f + fo;
        ui[0] = t[i][0];
        ui[plane] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
        ui[2 * plane] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
        ui[3 * plane] = t[i][2];
      }
    }
  }
}

// Eight floats (one AVX register where the build has AVX2, a plain array otherwise): the
// transforms are written once over 8 channels at a time; GCC does not vectorize them by itself
// (measured: scalar code, the transforms then cost more than the GEMMs).
#if defined(__AVX2__)
struct V8 {
  __m256 v;
  static V8 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static V8 zero() { return {_mm256_setzero_ps()}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  V8 relu() const { return {_mm256_max_ps(v, _mm256_setzero_ps())}; }  // NaN -> 0, as ew::relu
  friend V8 operator+(V8 a, V8 b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend V8 operator-(V8 a, V8 b) { return {_mm256_sub_ps(a.v, b.v)}; }
};
#else
struct V8 {
  float v[L];
  static V8 load(const float* p) { V8 r; for (int l = 0; l < L; ++l) r.v[l] = p[l]; return r; }
  static V8 zero() { V8 r; for (int l = 0; l < L; ++l) r.v[l] = 0.f; return r; }
  void store(float* p) const { for (int l = 0; l < L; ++l) p[l] = v[l]; }
  V8 relu() const { V8 r; for (int l = 0; l < L; ++l) r.v[l] = ew::relu(v[l]); return r; }
  friend V8 operator+(V8 a, V8 b) { for (int l = 0; l < L; ++l) a.v[l] += b.v[l]; return a; }
  friend V8 operator-(V8 a, V8 b) { for (int l = 0; l < L; ++l) a.v[l] -= b.v[l]; return a; }
};
#endif

// n < L floats through a zero-padded buffer (the channel tail).
V8 load_part(const float* p, int n) {
  alignas(32) float t[L] = {};
  for (int l = 0; l < n; ++l) t[l] = p[l];
  return V8::load(t);
}
void store_part(V8 a, float* p, int n) {
  alignas(32) float t[L];
  a.store(t);
  for (int l = 0; l < n; ++l) p[l] = t[l];
}

// V[xi][r][:] for the tiles of images [n0, n0 + count), r = img * tiles + ty * tw + tx.
void input_transform(const Problem& p, const float* x, int n0, int count, float* v) {
  const long long rows = count * p.tiles();
  const long long plane = rows * p.c;
  const int th = p.th(), tw = p.tw();
  long long r = 0;
  for (int img = 0; img < count; ++img) {
    const float* xi = x + (long long)(n0 + img) * p.h * p.w * p.c;
    for (int ty = 0; ty < th; ++ty) {
      for (int tx = 0; tx < tw; ++tx, ++r) {
        const float* src[4][4];  // nullptr: outside the image (zero)
        for (int i = 0; i < 4; ++i) {
          int iy = 2 * ty - p.pad_top + i;
          for (int j = 0; j < 4; ++j) {
            int ix = 2 * tx - p.pad_left + j;
            src[i][j] = (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w) ? xi + ((long long)iy * p.w + ix) * p.c
                                                                        : nullptr;
          }
        }
        float* dst = v + r * p.c;
        for (int c0 = 0; c0 < p.c; c0 += L) {
          const int nc = std::min(L, p.c - c0);
          V8 d[4][4];
          for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 4; ++j)
              d[i][j] = !src[i][j] ? V8::zero() : nc == L ? V8::load(src[i][j] + c0) : load_part(src[i][j] + c0, nc);
          V8 t[4][4];  // B^T d
          for (int j = 0; j < 4; ++j) {
            t[0][j] = d[0][j] - d[2][j];
            t[1][j] = d[1][j] + d[2][j];
            t[2][j] = d[2][j] - d[1][j];
            t[3][j] = d[1][j] - d[3][j];
          }
          for (int i = 0; i < 4; ++i) {  // (B^T d) B
            V8 o[4] = {t[i][0] - t[i][2], t[i][1] + t[i][2], t[i][2] - t[i][1], t[i][1] - t[i][3]};
            for (int j = 0; j < 4; ++j) {
              float* out = dst + (long long)(4 * i + j) * plane + c0;
              if (nc == L) o[j].store(out);
              else store_part(o[j], out, nc);
            }
          }
        }
      }
    }
  }
}

// y (images [n0, n0 + count)) <- act(A^T M A + bias); bias may be null.
void output_transform(const Problem& p, const float* m, const float* bias, bool relu, int n0, int count, float* y) {
  const long long rows = count * p.tiles();
  const long long plane = rows * p.f;
  const int th = p.th(), tw = p.tw();
  long long r = 0;
  for (int img = 0; img < count; ++img) {
    float* yi = y + (long long)(n0 + img) * p.oh * p.ow * p.f;
    for (int ty = 0; ty < th; ++ty) {
      for (int tx = 0; tx < tw; ++tx, ++r) {
        const float* src = m + r * p.f;
        const int oy = 2 * ty, ox = 2 * tx;
        const bool row1 = oy + 1 < p.oh, col1 = ox + 1 < p.ow;
        float* dst[2][2] = {{yi + ((long long)oy * p.ow + ox) * p.f, col1 ? yi + ((long long)oy * p.ow + ox + 1) * p.f : nullptr},
                            {row1 ? yi + ((long long)(oy + 1) * p.ow + ox) * p.f : nullptr,
                             row1 && col1 ? yi + ((long long)(oy + 1) * p.ow + ox + 1) * p.f : nullptr}};
        for (int f0 = 0; f0 < p.f; f0 += L) {
          const int nf = std::min(L, p.f - f0);
          V8 t[2][4];  // A^T m
          for (int j = 0; j < 4; ++j) {
            V8 mm[4];
            for (int i = 0; i < 4; ++i) {
              const float* s = src + (long long)(4 * i + j) * plane + f0;
              mm[i] = nf == L ? V8::load(s) : load_part(s, nf);
            }
            t[0][j] = mm[0] + mm[1] + mm[2];
            t[1][j] = mm[1] - mm[2] - mm[3];
          }
          const V8 bv = !bias ? V8::zero() : nf == L ? V8::load(bias + f0) : load_part(bias + f0, nf);
          for (int i = 0; i < 2; ++i) {  // (A^T m) A + bias
            V8 o[2] = {t[i][0] + t[i][1] + t[i][2] + bv, t[i][1] - t[i][2] - t[i][3] + bv};
            for (int j = 0; j < 2; ++j) {
              if (!dst[i][j]) continue;
              V8 out = relu ? o[j].relu() : o[j];
              if (nf == L) out.store(dst[i][j] + f0);
              else store_part(out, dst[i][j] + f0, nf);
            }
          }
        }
      }
    }
  }
}

// dM[xi][r][:] = (A dY A^T)[xi] for the output-gradient tiles dY (2x2, zero outside the output)
// of images [n0, n0 + count): the gradient of the 4x4 Winograd-domain product m = U .* V.
void grad_output_transform(const Problem& p, const float* dy, int n0, int count, float* dm) {
  const long long rows = count * p.tiles();
  const long long plane = rows * p.f;
  const int th = p.th(), tw = p.tw();
  long long r = 0;
  for (int img = 0; img < count; ++img) {
    const float* di = dy + (long long)(n0 + img) * p.oh * p.ow * p.f;
    for (int ty = 0; ty < th; ++ty) {
      for (int tx = 0; tx < tw; ++tx, ++r) {
        const int oy = 2 * ty, ox = 2 * tx;
        const bool row1 = oy + 1 < p.oh, col1 = ox + 1 < p.ow;
        const float* src[2][2] = {{di + ((long long)oy * p.ow + ox) * p.f, col1 ? di + ((long long)oy * p.ow + ox + 1) * p.f : nullptr},
                                  {row1 ? di + ((long long)(oy + 1) * p.ow + ox) * p.f : nullptr,
                                   row1 && col1 ? di + ((long long)(oy + 1) * p.ow + ox + 1) * p.f : nullptr}};
        float* dst = dm + r * p.f;
        for (int f0 = 0; f0 < p.f; f0 += L) {
          const int nf = std::min(L, p.f - f0);
          V8 d[2][2];
          for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b)
              d[a][b] = !src[a][b] ? V8::zero() : nf == L ? V8::load(src[a][b] + f0) : load_part(src[a][b] + f0, nf);
          // A = [1 0; 1 1; 1 -1; 0 -1]: rows s[i] = A[i] dY, then columns (s A^T)
          const V8 z = V8::zero();
          V8 s[4][2];
          for (int b = 0; b < 2; ++b) {
            s[0][b] = d[0][b];
            s[1][b] = d[0][b] + d[1][b];
            s[2][b] = d[0][b] - d[1][b];
            s[3][b] = z - d[1][b];
          }
          for (int i = 0; i < 4; ++i) {
            V8 o[4] = {s[i][0], s[i][0] + s[i][1], s[i][0] - s[i][1], z - s[i][1]};
            for (int j = 0; j < 4; ++j) {
              float* out = dst + (long long)(4 * i + j) * plane + f0;
              if (nf == L) o[j].store(out);
              else store_part(o[j], out, nf);
            }
          }
        }
      }
    }
  }
}

// y (images [n0, n0 + count)) = act(conv(x, U) + bias), in groups; scratch slots 0 (V), 1 (M).
void run(const Problem& p, const float* x, const float* u, const float* bias, bool relu, float* y, int n0, int count) {
  const int group = images_per_group(p);
  const long long tiles = p.tiles();
  for (int g0 = n0; g0 < n0 + count; g0 += group) {
    const int cnt = std::min(group, n0 + count - g0);
    const long long rows = cnt * tiles;
    float* v = thread_scratch().floats(16 * rows * p.c, 0);
    float* m = thread_scratch().floats(16 * rows * p.f, 1);
    input_transform(p, x, g0, cnt, v);
    for (int xi = 0; xi < 16; ++xi)
      blas::sgemm(false, false, static_cast<int>(rows), p.f, p.c, 1.f, v + xi * rows * p.c, p.c,
                  u + (long long)xi * p.c * p.f, p.f, 0.f, m + xi * rows * p.f, p.f);
    output_transform(p, m, bias, relu, g0, cnt, y);
  }
}

// The calling thread's buffer for the transformed kernel (grows only: no allocation per step).
float* kernel_buffer(long long count) {
  static thread_local std::vector<float> buf;
  if ((long long)buf.size() < count) buf.resize(count);
  return buf.data();
}

}  // namespace

bool applies(const Conv2dGeometry& g) {
  // Measured (bench/RESULTS.md "Winograd convolution"): with fewer channels the thin GEMMs and
  // the transforms cost more than the saved multiplications.
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.c >= 16 && g.f >= 16;
}

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu) {
  const Problem p{g.h, g.w, g.c, g.oh, g.ow, g.f, g.pad_top, g.pad_left};
  float* u = kernel_buffer(16LL * g.c * g.f);
  const long long cf = (long long)g.c * g.f;
  kernel_transform(g.c, g.f, u, [&](int a, int bb, int ci, int fo) { return w[(a * 3 + bb) * cf + (long long)ci * g.f + fo]; });
  parallel_for(g.n, [&](long long b0, long long b1, int) {
    run(p, x, u, b, relu, y, static_cast<int>(b0), static_cast<int>(b1 - b0));
  });
}

const float* backward_kernel(const Conv2dGeometry& g, const float* w) {
  float* u = kernel_buffer(16LL * g.c * g.f);
  // dx[iy, ix, ci] = sum dy[iy + pad_top - ky, ix + pad_left - kx, fo] * w[ky, kx, ci, fo]
  //               = sum dy[iy - (2 - pad_top) + a, ...] * w[2 - a, 2 - b, ci, fo]:
  // input channels fo, output channels ci, kernel value at (a, b) = w[2 - a, 2 - b, ci, fo].
  const long long cf = (long long)g.c * g.f;
  kernel_transform(g.f, g.c, u, [&](int a, int bb, int fo, int ci) {
    return w[((2 - a) * 3 + (2 - bb)) * cf + (long long)ci * g.f + fo];
  });
  return u;
}

void filter_grad(const Conv2dGeometry& g, const float* x, const float* dy, int n0, int count, float* du_acc) {
  const Problem p{g.h, g.w, g.c, g.oh, g.ow, g.f, g.pad_top, g.pad_left};
  const int group = images_per_group(p);
  const long long tiles = p.tiles();
  for (int g0 = n0; g0 < n0 + count; g0 += group) {
    const int cnt = std::min(group, n0 + count - g0);
    const long long rows = cnt * tiles;
    float* v = thread_scratch().floats(16 * rows * p.c, 0);
    float* dm = thread_scratch().floats(16 * rows * p.f, 1);
    input_transform(p, x, g0, cnt, v);
    grad_output_transform(p, dy, g0, cnt, dm);
    for (int xi = 0; xi < 16; ++xi)  // dU[xi] (C x F) += V[xi]^T (C x rows) * dM[xi] (rows x F)
      blas::sgemm(true, false, p.c, p.f, static_cast<int>(rows), 1.f, v + xi * rows * p.c, p.c,
                  dm + xi * rows * p.f, p.f, 1.f, du_acc + (long long)xi * p.c * p.f, p.f);
  }
}

void filter_grad_finish(const Conv2dGeometry& g, const float* du, float* dw) {
  // dW = G^T dU G per (c, f); G^T = [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1].
  const long long plane = (long long)g.c * g.f;
  parallel_for(plane, [&](long long e0, long long e1, int) {
    for (long long e = e0; e < e1; ++e) {
      float d[4][4];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) d[i][j] = du[(4 * i + j) * plane + e];
      float t[3][4];  // G^T dU
      for (int j = 0; j < 4; ++j) {
        t[0][j] = d[0][j] + 0.5f * (d[1][j] + d[2][j]);
        t[1][j] = 0.5f * (d[1][j] - d[2][j]);
        t[2][j] = 0.5f * (d[1][j] + d[2][j]) + d[3][j];
      }
      for (int a = 0; a < 3; ++a) {  // (G^T dU) G
        dw[(a * 3 + 0) * plane + e] = t[a][0] + 0.5f * (t[a][1] + t[a][2]);
        dw[(a * 3 + 1) * plane + e] = 0.5f * (t[a][1] - t[a][2]);
        dw[(a * 3 + 2) * plane + e] = 0.5f * (t[a][1] + t[a][2]) + t[a][3];
      }
    }
  }, 1024);
}

void backward_data(const Conv2dGeometry& g, const float* u, const float* dy, float* dx, int n0, int count) {
  const Problem p{g.oh, g.ow, g.f, g.h, g.w, g.c, 2 - g.pad_top, 2 - g.pad_left};
  run(p, dy, u, nullptr, false, dx, n0, count);
}

}  // namespace hpcnn::cpu::winograd
