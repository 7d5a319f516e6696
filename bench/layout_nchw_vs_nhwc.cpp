// Why hpcnn's activations are NHWC: im2col + sgemm convolution (forward, backward-filter,
// backward-data) for the tutorial CNN's four conv layers at batch 250, in both layouts, one
// thread, same OpenBLAS, interleaved repetitions; prints ms per layer and the NCHW/NHWC ratio.
//
//   g++ -O3 -mavx2 -mfma -std=c++17 bench/layout_nchw_vs_nhwc.cpp -o /tmp/layout \
//       -I/usr/include/x86_64-linux-gnu -lopenblas && OPENBLAS_NUM_THREADS=1 /tmp/layout
//
// NHWC: col[pixels of G images, (ky,kx,c)] x W[(ky,kx,c), F] = Y[pixels, F]  (Y is NHWC as is)
// NCHW: W[F, (c,ky,kx)] x col[(c,ky,kx), pixels of one image] = Y[F, pixels] (Y is NCHW as is)
// Both are the textbook forms; same FLOPs, same 3x3 'same' padding.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

struct Shape { int n, h, w, c, f; };

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// ---------------------------------------------------------------- NHWC
static void im2col_nhwc(const Shape& s, const float* x, int n0, int cnt, float* col) {
  const int K = 9 * s.c;
  for (int i = 0; i < cnt; ++i)
    for (int oy = 0; oy < s.h; ++oy)
      for (int ox = 0; ox < s.w; ++ox) {
        float* row = col + ((long)(i * s.h + oy) * s.w + ox) * K;
        for (int ky = 0; ky < 3; ++ky) {
          int iy = oy + ky - 1;
          for (int kx = 0; kx < 3; ++kx) {
            int ix = ox + kx - 1;
            float* d = row + (ky * 3 + kx) * s.c;
            if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) std::memset(d, 0, 4 * s.c);
            else std::memcpy(d, x + (((long)(n0 + i) * s.h + iy) * s.w + ix) * s.c, 4 * s.c);
          }
        }
      }
}

static void col2im_nhwc(const Shape& s, const float* col, int n0, int cnt, float* dx) {
  const int K = 9 * s.c;
  std::memset(dx + (long)n0 * s.h * s.w * s.c, 0, 4L * cnt * s.h * s.w * s.c);
  for (int i = 0; i < cnt; ++i)
    for (int oy = 0; oy < s.h; ++oy)
      for (int ox = 0; ox < s.w; ++ox) {
        const float* row = col + ((long)(i * s.h + oy) * s.w + ox) * K;
        for (int ky = 0; ky < 3; ++ky) {
          int iy = oy + ky - 1;
          if (iy < 0 || iy >= s.h) continue;
          for (int kx = 0; kx < 3; ++kx) {
            int ix = ox + kx - 1;
            if (ix < 0 || ix >= s.w) continue;
            float* d = dx + (((long)(n0 + i) * s.h + iy) * s.w + ix) * s.c;
            const float* r = row + (ky * 3 + kx) * s.c;
            for (int c = 0; c < s.c; ++c) d[c] += r[c];
          }
        }
      }
}

static double run_nhwc(const Shape& s, const float* x, const float* w, float* y, float* dy, float* dx, float* dw,
                       std::vector<float>& col, std::vector<float>& dcol) {
  const int K = 9 * s.c, P = s.h * s.w;
  const int group = std::max(1, 1024 / P);
  double t = now();
  for (int n0 = 0; n0 < s.n; n0 += group) {  // forward + bias/ReLU pass
    int cnt = std::min(group, s.n - n0);
    im2col_nhwc(s, x, n0, cnt, col.data());
    float* yg = y + (long)n0 * P * s.f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cnt * P, s.f, K, 1, col.data(), K, w, s.f, 0, yg, s.f);
    for (long i = 0; i < (long)cnt * P * s.f; ++i) yg[i] = std::max(yg[i] + 0.01f, 0.f);
  }
  for (int n0 = 0; n0 < s.n; n0 += group) {  // backward: filter and data
    int cnt = std::min(group, s.n - n0);
    im2col_nhwc(s, x, n0, cnt, col.data());
    const float* dyg = dy + (long)n0 * P * s.f;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, s.f, cnt * P, 1, col.data(), K, dyg, s.f, 1, dw, s.f);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cnt * P, K, s.f, 1, dyg, s.f, w, s.f, 0, dcol.data(), K);
    col2im_nhwc(s, dcol.data(), n0, cnt, dx);
  }
  return now() - t;
}

// ---------------------------------------------------------------- NCHW
static void im2col_nchw(const Shape& s, const float* xi, float* col) {
  const int P = s.h * s.w;
  for (int c = 0; c < s.c; ++c)
    for (int ky = 0; ky < 3; ++ky)
      for (int kx = 0; kx < 3; ++kx) {
        float* row = col + (long)((c * 3 + ky) * 3 + kx) * P;
        for (int oy = 0; oy < s.h; ++oy) {
          int iy = oy + ky - 1;
          float* d = row + oy * s.w;
          if (iy < 0 || iy >= s.h) { std::memset(d, 0, 4 * s.w); continue; }
          const float* src = xi + ((long)c * s.h + iy) * s.w;
          for (int ox = 0; ox < s.w; ++ox) {
            int ix = ox + kx - 1;
            d[ox] = (ix < 0 || ix >= s.w) ? 0.f : src[ix];
          }
        }
      }
}

static void col2im_nchw(const Shape& s, const float* col, float* dxi) {
  const int P = s.h * s.w;
  std::memset(dxi, 0, 4L * s.c * P);
  for (int c = 0; c < s.c; ++c)
    for (int ky = 0; ky < 3; ++ky)
      for (int kx = 0; kx < 3; ++kx) {
        const float* row = col + (long)((c * 3 + ky) * 3 + kx) * P;
        for (int oy = 0; oy < s.h; ++oy) {
          int iy = oy + ky - 1;
          if (iy < 0 || iy >= s.h) continue;
          float* d = dxi + ((long)c * s.h + iy) * s.w;
          for (int ox = 0; ox < s.w; ++ox) {
            int ix = ox + kx - 1;
            if (ix >= 0 && ix < s.w) d[ix] += row[oy * s.w + ox];
          }
        }
      }
}

static double run_nchw(const Shape& s, const float* x, const float* w, float* y, float* dy, float* dx, float* dw,
                       std::vector<float>& col, std::vector<float>& dcol) {
  const int K = 9 * s.c, P = s.h * s.w;
  double t = now();
  for (int n = 0; n < s.n; ++n) {
    im2col_nchw(s, x + (long)n * s.c * P, col.data());
    float* yi = y + (long)n * s.f * P;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.f, P, K, 1, w, K, col.data(), P, 0, yi, P);
    for (long i = 0; i < (long)s.f * P; ++i) yi[i] = std::max(yi[i] + 0.01f, 0.f);
  }
  for (int n = 0; n < s.n; ++n) {
    im2col_nchw(s, x + (long)n * s.c * P, col.data());
    const float* dyi = dy + (long)n * s.f * P;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.f, K, P, 1, dyi, P, col.data(), P, 1, dw, K);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, P, s.f, 1, w, K, dyi, P, 0, dcol.data(), P);
    col2im_nchw(s, dcol.data(), dx + (long)n * s.c * P);
  }
  return now() - t;
}

int main() {
  const Shape layers[] = {{250, 32, 32, 3, 32}, {250, 16, 16, 32, 64}, {250, 8, 8, 64, 128}, {250, 4, 4, 128, 256}};
  const int reps = 5;
  std::printf("# conv 3x3 'same', batch 250, fwd + bwd-filter + bwd-data, 1 thread, best of %d interleaved\n", reps);
  std::printf("%-22s %10s %10s %12s\n", "layer (HxWxC->F)", "NHWC ms", "NCHW ms", "NCHW/NHWC");
  double tot_a = 0, tot_b = 0;
  for (const Shape& s : layers) {
    const long xs = (long)s.n * s.h * s.w * s.c, ys = (long)s.n * s.h * s.w * s.f, K = 9L * s.c;
    std::vector<float> x(xs, 0.5f), dx(xs), y(ys), dy(ys, 0.1f), w(K * s.f, 0.01f), dw(K * s.f);
    std::vector<float> col(std::max(1024L, (long)s.h * s.w) * K * 4), dcol(col.size());
    double best_a = 1e9, best_b = 1e9;
    for (int r = 0; r < reps; ++r) {
      best_a = std::min(best_a, run_nhwc(s, x.data(), w.data(), y.data(), dy.data(), dx.data(), dw.data(), col, dcol));
      best_b = std::min(best_b, run_nchw(s, x.data(), w.data(), y.data(), dy.data(), dx.data(), dw.data(), col, dcol));
    }
    char name[64];
    std::snprintf(name, sizeof name, "%dx%dx%d->%d", s.h, s.w, s.c, s.f);
    std::printf("%-22s %10.1f %10.1f %12.2f\n", name, 1e3 * best_a, 1e3 * best_b, best_b / best_a);
    tot_a += best_a;
    tot_b += best_b;
  }
  std::printf("%-22s %10.1f %10.1f %12.2f\n", "all four", 1e3 * tot_a, 1e3 * tot_b, tot_b / tot_a);
  return 0;
}
