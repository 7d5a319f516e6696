// See cuda_kernel_selftest.h. Plain C++: built with and without the CUDA backend.
#include "diagnostics/cuda_kernel_selftest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "core/errors.h"
#include "ops/augment.h"
#include "ops/augment_body.h"
#include "ops/avgpool2d.h"
#include "ops/avgpool2d_body.h"
#include "ops/batchnorm.h"
#include "ops/batchnorm_body.h"
#include "ops/concat.h"
#include "ops/concat_body.h"
#include "ops/conv2d.h"
#include "ops/conv_algo_choice.h"
#include "ops/conv2d_body.h"
#include "ops/cuda_kernels_body.h"
#include "ops/dense.h"
#include "ops/dense_body.h"
#include "ops/global_pool2d.h"
#include "ops/global_pool2d_body.h"
#include "ops/maxpool2d.h"
#include "ops/maxpool2d_body.h"
#include "ops/param_norms.h"
#include "ops/param_norms_body.h"
#include "ops/softmax_xent.h"
#include "ops/softmax_xent_body.h"

namespace hpcnn::cuda {

namespace {

using Vec = std::vector<float>;

Vec random_vec(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

double rel_err(const Vec& a, const Vec& ref) {
  if (a.size() != ref.size()) return INFINITY;
  double mx = 1e-30, err = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    mx = std::max(mx, (double)std::fabs(ref[i]));
    double d = std::fabs((double)a[i] - ref[i]);
    if (std::isnan(d)) return INFINITY;
    err = std::max(err, d);
  }
  return err / mx;
}

double mismatches(const Vec& a, const Vec& ref) {
  if (a.size() != ref.size()) return INFINITY;
  double n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += (a[i] == ref[i] || (std::isnan(a[i]) && std::isnan(ref[i]))) ? 0 : 1;
  return n;
}

// ---- emulated grids of our kernels (the same bodies the GPU runs)
Vec emu_column_sum(const Vec& m, long long rows, int f) {
  Vec partials((size_t)body::kColumnSumSlices * f), out(f);
  for (unsigned bx = 0; bx < (unsigned)(f + 31) / 32; ++bx)
    for (unsigned slice = 0; slice < (unsigned)body::kColumnSumSlices; ++slice) {
      float acc[8][33];
      for (unsigned ty = 0; ty < 8; ++ty)
        for (unsigned tx = 0; tx < 32; ++tx) acc[ty][tx] = body::column_sum_lane(m.data(), rows, f, bx, slice, tx, ty);
      for (unsigned tx = 0; tx < 32; ++tx) {
        int j = bx * 32 + tx;
        if (j >= f) continue;
        float t = 0.f;
        for (int k = 0; k < 8; ++k) t += acc[k][tx];
        partials[(size_t)slice * f + j] = t;
      }
    }
  for (int j = 0; j < f; ++j) {
    float t = 0.f;
    for (int p = 0; p < body::kColumnSumSlices; ++p) t += partials[(size_t)p * f + j];
    out[j] = t;
  }
  return out;
}

// ---- references written from the libraries' documentation
// cublasSgemm: C = alpha op(A) op(B) + beta C, column-major; op(A) is m x k, op(B) k x n;
// element (i, j) of a column-major X with leading dimension ld is X[i + j * ld].
void ref_sgemm(const body::Gemm& g) {
  for (int j = 0; j < g.n; ++j)
    for (int i = 0; i < g.m; ++i) {
      double s = 0;
      for (int p = 0; p < g.k; ++p) {
        float a = g.trans_a ? g.a[p + (long long)i * g.lda] : g.a[i + (long long)p * g.lda];
        float b = g.trans_b ? g.b[j + (long long)p * g.ldb] : g.b[p + (long long)j * g.ldb];
        s += (double)a * b;
      }
      g.c[i + (long long)j * g.ldc] = static_cast<float>(s);
    }
}

// cuDNN cross-correlation, NHWC data, KRSC filter (CUDNN_TENSOR_NHWC filter format), symmetric
// padding, dilation 1: y[n,p,q,k] = sum_{r,s,c} x[n, p*u - pad_h + r, q*v - pad_w + s, c] * w[k,r,s,c].
float x_at(const body::ConvGeom& s, const Vec& x, int n, int iy, int ix, int c) {
  if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) return 0.f;
  return x[(((size_t)n * s.h + iy) * s.w + ix) * s.c + c];
}

Vec ref_conv_forward(const body::ConvGeom& s, const Vec& x, const Vec& w) {
  Vec y((size_t)s.n * s.oh * s.ow * s.f);
  for (int n = 0; n < s.n; ++n)
    for (int p = 0; p < s.oh; ++p)
      for (int q = 0; q < s.ow; ++q)
        for (int k = 0; k < s.f; ++k) {
          double acc = 0;
          for (int r = 0; r < s.kh; ++r)
            for (int t = 0; t < s.kw; ++t)
              for (int c = 0; c < s.c; ++c)
                acc += (double)x_at(s, x, n, p * s.sh - s.ph + r, q * s.sw - s.pw + t, c) *
                       w[(((size_t)k * s.kh + r) * s.kw + t) * s.c + c];
          y[(((size_t)n * s.oh + p) * s.ow + q) * s.f + k] = static_cast<float>(acc);
        }
  return y;
}

// backward data: dx = sum over the outputs each input feeds; backward filter: dw[k,r,s,c].
void ref_conv_backward(const body::ConvGeom& s, const Vec& x, const Vec& w, const Vec& dy, Vec& dx, Vec& dw) {
  std::vector<double> dxd((size_t)s.n * s.h * s.w * s.c, 0.0), dwd((size_t)s.f * s.kh * s.kw * s.c, 0.0);
  for (int n = 0; n < s.n; ++n)
    for (int p = 0; p < s.oh; ++p)
      for (int q = 0; q < s.ow; ++q)
        for (int k = 0; k < s.f; ++k) {
          double g = dy[(((size_t)n * s.oh + p) * s.ow + q) * s.f + k];
          for (int r = 0; r < s.kh; ++r)
            for (int t = 0; t < s.kw; ++t) {
              int iy = p * s.sh - s.ph + r, ix = q * s.sw - s.pw + t;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              for (int c = 0; c < s.c; ++c) {
                size_t xi = (((size_t)n * s.h + iy) * s.w + ix) * s.c + c;
                size_t wi = (((size_t)k * s.kh + r) * s.kw + t) * s.c + c;
                dxd[xi] += g * w[wi];
                dwd[wi] += g * x[xi];
              }
            }
        }
  dx.assign(dxd.begin(), dxd.end());
  dw.assign(dwd.begin(), dwd.end());
}

// ---- the checks
void check_maxpool(std::vector<SelftestResult>& out) {
  struct Case { int n, h, w, c, p, s; Padding pad; bool ties; };
  const Case cases[] = {{2, 8, 8, 4, 2, 2, Padding::Valid, false}, {2, 7, 9, 3, 2, 2, Padding::Same, true},
                        {1, 9, 9, 5, 3, 2, Padding::Same, true},   {2, 6, 5, 2, 3, 1, Padding::Same, false},
                        {1, 11, 7, 2, 3, 2, Padding::Valid, true}};
  double fwd_bad = 0, bwd_bad = 0;
  for (const Case& k : cases) {
    Pool2dGeometry g = Pool2dGeometry::make(k.n, k.h, k.w, k.c, k.p, k.p, k.s, k.s, k.pad);
    Vec x = random_vec((size_t)g.input_count(), 7);
    if (k.ties)
      for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0) ? 0.f : std::max(x[i], 0.f);
    Vec y_cpu((size_t)g.output_count()), y_emu(y_cpu.size());
    cpu::maxpool2d_forward(g, x.data(), y_cpu.data());
    for (size_t i = 0; i < y_emu.size(); ++i) y_emu[i] = body::maxpool_forward_at(g, x.data(), i);
    fwd_bad += mismatches(y_emu, y_cpu);
    Vec dy = random_vec(y_cpu.size(), 8), dx_cpu(x.size()), dx_emu(x.size());
    cpu::maxpool2d_backward(g, x.data(), y_cpu.data(), dy.data(), dx_cpu.data());
    for (size_t i = 0; i < dx_emu.size(); ++i) dx_emu[i] = body::maxpool_backward_at(g, x.data(), y_cpu.data(), dy.data(), i);
    bwd_bad += mismatches(dx_emu, dx_cpu);
  }
  out.push_back({"maxpool forward (bitwise mismatches)", fwd_bad, 0});
  out.push_back({"maxpool backward (bitwise mismatches)", bwd_bad, 0});
}

void check_avgpool(std::vector<SelftestResult>& out) {
  struct Case { int n, h, w, c, p, s; Padding pad; };
  const Case cases[] = {{2, 8, 8, 4, 2, 2, Padding::Valid}, {2, 7, 9, 3, 2, 2, Padding::Same},
                        {1, 9, 9, 5, 3, 2, Padding::Same},  {2, 6, 5, 2, 3, 1, Padding::Same},
                        {1, 11, 7, 2, 3, 2, Padding::Valid}, {1, 1, 1, 3, 2, 2, Padding::Same}};
  double fwd_bad = 0, bwd_bad = 0;
  for (const Case& k : cases) {
    Pool2dGeometry g = Pool2dGeometry::make(k.n, k.h, k.w, k.c, k.p, k.p, k.s, k.s, k.pad, "avg_pool2d");
    Vec x = random_vec((size_t)g.input_count(), 17);
    Vec y_cpu((size_t)g.output_count()), y_emu(y_cpu.size());
    cpu::avgpool2d_forward(g, x.data(), y_cpu.data());
    for (size_t i = 0; i < y_emu.size(); ++i) y_emu[i] = body::avgpool_forward_at(g, x.data(), i);
    fwd_bad += mismatches(y_emu, y_cpu);
    Vec dy = random_vec(y_cpu.size(), 18), dx_cpu(x.size()), dx_emu(x.size());
    cpu::avgpool2d_backward(g, dy.data(), dx_cpu.data());
    for (size_t i = 0; i < dx_emu.size(); ++i) dx_emu[i] = body::avgpool_backward_at(g, dy.data(), i);
    bwd_bad += mismatches(dx_emu, dx_cpu);
  }
  out.push_back({"avgpool forward (bitwise mismatches)", fwd_bad, 0});
  out.push_back({"avgpool backward (bitwise mismatches)", bwd_bad, 0});
}

void check_global_pools(std::vector<SelftestResult>& out) {
  double avg_bad = 0, max_bad = 0, winner_bad = 0;
  for (const GlobalPoolGeometry g : {GlobalPoolGeometry{3, 64, 16}, GlobalPoolGeometry{2, 1, 5},
                                     GlobalPoolGeometry{4, 49, 3}}) {
    Vec x = random_vec((size_t)g.n * g.hw * g.c, 19);
    for (size_t i = 0; i < x.size(); i += 5) x[i] = 1.f;  // ties for the max: the first must win
    Vec y_cpu((size_t)g.n * g.c), y_emu(y_cpu.size());
    cpu::global_avgpool_forward(g, x.data(), y_cpu.data());
    for (size_t o = 0; o < y_emu.size(); ++o) y_emu[o] = body::global_avg_at(x.data(), g.hw, g.c, o);
    avg_bad += mismatches(y_emu, y_cpu);
    cpu::global_maxpool_forward(g, x.data(), y_cpu.data());
    for (size_t o = 0; o < y_emu.size(); ++o) y_emu[o] = body::global_max_at(x.data(), g.hw, g.c, o);
    max_bad += mismatches(y_emu, y_cpu);
    // Backward: the CPU's dx is dy at exactly the position body::global_max_winner names.
    Vec dy = random_vec(y_cpu.size(), 20), dx_cpu(x.size());
    cpu::global_maxpool_backward(g, x.data(), y_cpu.data(), dy.data(), dx_cpu.data());
    for (size_t o = 0; o < y_cpu.size(); ++o) {
      const long long win = body::global_max_winner(x.data(), y_cpu.data(), g.hw, g.c, o);
      const long long n = o / g.c, ci = o % g.c;
      for (long long q = 0; q < g.hw; ++q)
        winner_bad += dx_cpu[(n * g.hw + q) * g.c + ci] == (q == win ? dy[o] : 0.f) ? 0 : 1;
    }
  }
  out.push_back({"global average pool forward (bitwise mismatches)", avg_bad, 0});
  out.push_back({"global max pool forward (bitwise mismatches)", max_bad, 0});
  out.push_back({"global max pool backward: first maximal position (mismatches)", winner_bad, 0});
}

void check_column_sums(std::vector<SelftestResult>& out) {
  double err = 0;
  const long long sums[][2] = {{4096, 32}, {250, 10}, {7, 70}, {20000, 3}, {1, 5}, {63, 33}};
  for (auto& sh : sums) {
    Vec m = random_vec(sh[0] * sh[1], 4);
    Vec ref(sh[1]);
    for (long long j = 0; j < sh[1]; ++j) {
      double s = 0;
      for (long long r = 0; r < sh[0]; ++r) s += m[r * sh[1] + j];
      ref[j] = static_cast<float>(s);
    }
    Vec got = emu_column_sum(m, sh[0], static_cast<int>(sh[1]));
    // absolute error against the number of terms: float sums of +-1 values
    for (long long j = 0; j < sh[1]; ++j) err = std::max(err, std::fabs((double)got[j] - ref[j]) / sh[0]);
  }
  out.push_back({"column sums (abs error / rows)", err, 1e-6});
}

void check_pad_crop(std::vector<SelftestResult>& out) {
  const int n = 2, h = 5, w = 4, c = 3, pt = 1, pb = 2, pl = 0, pr = 1, oh = h + pt + pb, ow = w + pl + pr;
  Vec x = random_vec((size_t)n * h * w * c, 5), xp((size_t)n * oh * ow * c), back(x.size());
  for (size_t i = 0; i < xp.size(); ++i) xp[i] = body::pad_at(x.data(), h, w, c, pt, pl, oh, ow, i);
  for (size_t i = 0; i < back.size(); ++i) back[i] = body::crop_at(xp.data(), h, w, c, pt, pl, oh, ow, i);
  double zeros_ok = 0;
  double sum_x = 0, sum_p = 0;
  for (float v : x) sum_x += v;
  for (float v : xp) sum_p += v;
  zeros_ok = std::fabs(sum_x - sum_p) > 1e-4 ? 1 : 0;  // the padding added only zeros
  out.push_back({"pad + crop round trip (mismatches)", mismatches(back, x) + zeros_ok, 0});
}

// The augmentation kernel's element function against the CPU op (tables, copies, the gather
// from rows) bit for bit: every kind, fill mode and interpolation, training and inference.
void check_augment(std::vector<SelftestResult>& out) {
  const int n = 5, h = 7, w = 6, c = 3;
  Vec x = random_vec((size_t)n * h * w * c, 21);
  std::vector<AugmentSpec> specs;
  AugmentSpec flip;
  flip.kind = AugmentKind::Flip;
  flip.flip_cols = flip.flip_rows = true;
  specs.push_back(flip);
  for (FillMode m : {FillMode::Constant, FillMode::Reflect, FillMode::Wrap, FillMode::Nearest})
    for (Interpolation in : {Interpolation::Nearest, Interpolation::Bilinear}) {
      AugmentSpec t;
      t.kind = AugmentKind::Translate;
      t.height_lo = -0.9f, t.height_hi = 0.6f, t.width_lo = -0.3f, t.width_hi = 1.f;
      t.fill_mode = m, t.fill_value = 0.25f, t.interpolation = in;
      specs.push_back(t);
      AugmentSpec r = t;  // a rotation: taps per pixel on the CPU
      r.kind = AugmentKind::Rotate;
      r.rotation_lo = -0.7f, r.rotation_hi = 0.4f;
      specs.push_back(r);
      AugmentSpec z = t;  // a zoom: per-axis tables on the CPU
      z.kind = AugmentKind::Zoom;
      z.height_lo = -0.6f, z.height_hi = 0.5f, z.width_lo = -0.3f, z.width_hi = 0.8f;
      specs.push_back(z);
    }
  AugmentSpec crop;
  crop.kind = AugmentKind::Crop;
  crop.crop_h = 6, crop.crop_w = 5, crop.pad_top = 2, crop.pad_bottom = 1, crop.pad_left = 0, crop.pad_right = 3;
  specs.push_back(crop);
  double bad = 0;
  for (const AugmentSpec& s : specs)
    for (bool training : {true, false}) {
      body::AugmentArgs a;
      a.s = s;
      a.d = AugmentDraw{training, 0x1234567890ull, 77, 1000};
      a.g.n = n, a.g.h = h, a.g.w = w, a.g.c = c;
      augment_output_hw(s, h, w, a.g.oh, a.g.ow);
      Vec cpu_y((size_t)n * a.g.oh * a.g.ow * c), emu(cpu_y.size());
      cpu::AugmentSource src;
      src.f32 = x.data();
      cpu::augment(a.g, s, a.d, src, cpu_y.data());
      for (size_t i = 0; i < emu.size(); ++i) emu[i] = body::augment_at(a, x.data(), (long long)i);
      bad += mismatches(emu, cpu_y);
    }
  out.push_back({"augmentation: flip, translation, rotation, zoom (4 fill modes x 2 interpolations), padded crop (mismatches)", bad, 0});
}

// Concatenating three NHWC tensors along channels and splitting them back: the CUDA row copy's
// element body against the CPU's row copies.
void check_concat(std::vector<SelftestResult>& out) {
  const long long pixels = 2 * 5 * 3, widths[3] = {4, 1, 3}, pitch = 8;
  Vec parts[3], emu(pixels * pitch), cpu_y(pixels * pitch);
  long long offset = 0;
  for (int k = 0; k < 3; ++k) {
    parts[k] = random_vec(pixels * widths[k], 40 + k);
    for (long long i = 0; i < pixels * widths[k]; ++i)
      body::copy_rows_element(i, widths[k], parts[k].data(), widths[k], emu.data() + offset, pitch);
    cpu::copy_rows(pixels, widths[k], parts[k].data(), widths[k], cpu_y.data() + offset, pitch);
    offset += widths[k];
  }
  out.push_back({"concatenate (channels of NHWC): row copy body", mismatches(emu, cpu_y), 0});
  Vec back(pixels * widths[1]);
  for (long long i = 0; i < pixels * widths[1]; ++i)
    body::copy_rows_element(i, widths[1], emu.data() + widths[0], pitch, back.data(), widths[1]);
  out.push_back({"split (channels of NHWC): row copy body", mismatches(back, parts[1]), 0});
}

void check_dense(std::vector<SelftestResult>& out) {
  DenseGeometry g{7, 33, 10};
  Vec x = random_vec((size_t)g.n * g.in, 11), w = random_vec((size_t)g.in * g.out, 12), b(g.out, 0.f);
  Vec y_cpu((size_t)g.n * g.out), y_emu(y_cpu.size());
  cpu::dense_forward(g, x.data(), w.data(), b.data(), y_cpu.data(), false);
  ref_sgemm(body::dense_forward_gemm(g, x.data(), w.data(), y_emu.data()));
  out.push_back({"dense forward via the cuBLAS call's arguments", rel_err(y_emu, y_cpu), 1e-5});
  Vec dy = random_vec(y_cpu.size(), 13), dy_cpu = dy, dx_cpu(x.size()), dw_cpu(w.size()), db_cpu(g.out);
  cpu::dense_backward(g, x.data(), w.data(), nullptr, dy_cpu.data(), dx_cpu.data(), dw_cpu.data(), db_cpu.data(), false);
  Vec dx_emu(x.size()), dw_emu(w.size());
  ref_sgemm(body::dense_dw_gemm(g, x.data(), dy.data(), dw_emu.data()));
  ref_sgemm(body::dense_dx_gemm(g, w.data(), dy.data(), dx_emu.data()));
  out.push_back({"dense dW via the cuBLAS call's arguments", rel_err(dw_emu, dw_cpu), 1e-5});
  out.push_back({"dense dx via the cuBLAS call's arguments", rel_err(dx_emu, dx_cpu), 1e-5});
  out.push_back({"dense db via the column-sum kernel", rel_err(emu_column_sum(dy, g.n, g.out), db_cpu), 1e-5});
}

// The kernel layout conversion (ops/conv2d_layout.h) that set_weights, get_weights and moves
// between devices use: every OHWI element [o, ky, kx, c] is the HWIO element [ky, kx, c, o]
// (indexed here independently of the conversion's own loops), the round trip is exact, the shapes
// are as documented, and the CUDA backend declares OHWI.
void check_kernel_layouts(std::vector<SelftestResult>& out) {
  const KernelDims cases[] = {{3, 3, 3, 32}, {5, 5, 1, 32}, {3, 3, 64, 64}, {1, 1, 7, 5}, {2, 3, 4, 5}, {1, 1, 1, 1}};
  double bad = 0;
  for (const KernelDims& d : cases) {
    Vec hwio = random_vec((size_t)d.numel(), 41), ohwi(hwio.size()), back(hwio.size());
    convert_kernel_layout(hwio.data(), KernelLayout::HWIO, ohwi.data(), KernelLayout::OHWI, d);
    for (long long ky = 0; ky < d.kh; ++ky)
      for (long long kx = 0; kx < d.kw; ++kx)
        for (long long c = 0; c < d.in; ++c)
          for (long long o = 0; o < d.out; ++o) {
            float a = hwio[(((size_t)ky * d.kw + kx) * d.in + c) * d.out + o];
            float b = ohwi[(((size_t)o * d.kh + ky) * d.kw + kx) * d.in + c];
            bad += a == b ? 0 : 1;
          }
    convert_kernel_layout(ohwi.data(), KernelLayout::OHWI, back.data(), KernelLayout::HWIO, d);
    bad += mismatches(back, hwio);
    convert_kernel_layout(hwio.data(), KernelLayout::HWIO, back.data(), KernelLayout::HWIO, d);  // a copy
    bad += mismatches(back, hwio);
    bad += kernel_shape(KernelLayout::HWIO, d) == Shape{d.kh, d.kw, d.in, d.out} ? 0 : 1;
    bad += kernel_shape(KernelLayout::OHWI, d) == Shape{d.out, d.kh, d.kw, d.in} ? 0 : 1;
    for (KernelLayout l : {KernelLayout::HWIO, KernelLayout::OHWI}) {
      KernelDims r = kernel_dims(l, kernel_shape(l, d));
      bad += (r.kh == d.kh && r.kw == d.kw && r.in == d.in && r.out == d.out) ? 0 : 1;
    }
  }
  out.push_back({"conv2d kernel layout HWIO <-> OHWI: elements, round trip, shapes (mismatches)", bad, 0});
  const bool declared = cpu::kConv2dKernelLayout == KernelLayout::HWIO && kConv2dKernelLayout == KernelLayout::OHWI;
  out.push_back({"conv2d backends declare CPU HWIO, CUDA OHWI = cuDNN KRSC (0 = yes)", declared ? 0.0 : 1.0, 0});
}

void check_conv(std::vector<SelftestResult>& out) {
  struct Case { int n, h, w, c, f, k, s; Padding pad; };
  const Case cases[] = {{2, 8, 8, 3, 4, 3, 1, Padding::Same},  {2, 9, 7, 2, 3, 3, 1, Padding::Valid},
                        {2, 8, 8, 3, 5, 3, 2, Padding::Same},  // odd total padding: explicit-pad path
                        {1, 7, 6, 2, 3, 2, 1, Padding::Same},  // even kernel: explicit-pad path
                        {2, 9, 9, 2, 2, 5, 2, Padding::Valid}, {1, 5, 5, 4, 3, 1, 1, Padding::Valid}};
  double ef = 0, ed = 0, ew_ = 0, eb = 0;
  for (const Case& k : cases) {
    Conv2dGeometry g = Conv2dGeometry::make(k.n, k.h, k.w, k.c, k.f, k.k, k.k, k.s, k.s, k.pad);
    body::ConvGeom s = body::conv_geom(g);
    const KernelDims kd{g.kh, g.kw, g.c, g.f};
    Vec x = random_vec((size_t)g.n * g.h * g.w * g.c, 21), w = random_vec((size_t)kd.numel(), 22), b(g.f, 0.f);
    // The CUDA backend holds the kernel as OHWI = cuDNN's KRSC, converted from Keras' HWIO by the
    // same function set_weights uses; x is padded explicitly if needed (conv2d_cuda.cu)
    Vec wt(w.size());
    convert_kernel_layout(w.data(), KernelLayout::HWIO, wt.data(), kConv2dKernelLayout, kd);
    Vec xin = x;
    if (s.padded) {
      xin.assign((size_t)s.n * s.h * s.w * s.c, 0.f);
      for (size_t i = 0; i < xin.size(); ++i)
        xin[i] = body::pad_at(x.data(), g.h, g.w, g.c, g.pad_top, g.pad_left, s.h, s.w, i);
    }
    Vec y_cpu((size_t)g.n * g.oh * g.ow * g.f);
    cpu::conv2d_forward(g, x.data(), w.data(), b.data(), y_cpu.data(), false);
    ef = std::max(ef, rel_err(ref_conv_forward(s, xin, wt), y_cpu));

    Vec dy = random_vec(y_cpu.size(), 23), dy_cpu = dy, dx_cpu(x.size()), dw_cpu(w.size()), db_cpu(g.f);
    cpu::conv2d_backward(g, x.data(), w.data(), nullptr, dy_cpu.data(), dx_cpu.data(), dw_cpu.data(), db_cpu.data(),
                         false);
    Vec dx_ref, dwt_ref;
    ref_conv_backward(s, xin, wt, dy, dx_ref, dwt_ref);
    Vec dx_emu = dx_ref;
    if (s.padded) {
      dx_emu.assign(x.size(), 0.f);
      for (size_t i = 0; i < dx_emu.size(); ++i)
        dx_emu[i] = body::crop_at(dx_ref.data(), g.h, g.w, g.c, g.pad_top, g.pad_left, s.h, s.w, i);
    }
    ed = std::max(ed, rel_err(dx_emu, dx_cpu));
    // dW comes out of cuDNN as KRSC = OHWI and stays so in the model; get_weights converts it back
    Vec dw_keras(dwt_ref.size());
    convert_kernel_layout(dwt_ref.data(), kConv2dKernelLayout, dw_keras.data(), KernelLayout::HWIO, kd);
    ew_ = std::max(ew_, rel_err(dw_keras, dw_cpu));
    eb = std::max(eb, rel_err(emu_column_sum(dy, (long long)g.n * g.oh * g.ow, g.f), db_cpu));
  }
  out.push_back({"conv2d forward via cuDNN's NHWC/KRSC contract", ef, 1e-5});
  out.push_back({"conv2d dx via cuDNN's NHWC/KRSC contract", ed, 1e-5});
  out.push_back({"conv2d dW via cuDNN's NHWC/KRSC contract", ew_, 1e-5});
  out.push_back({"conv2d db via the column-sum kernel", eb, 1e-5});
}

void check_xent(std::vector<SelftestResult>& out) {
  const int rows = 50, cols = 10;
  Vec logits = random_vec((size_t)rows * cols, 31, -4.f, 4.f);
  std::vector<int32_t> labels(rows);
  Vec onehot((size_t)rows * cols, 0.f);
  for (int r = 0; r < rows; ++r) {
    labels[r] = (r * 7) % cols;
    onehot[(size_t)r * cols + labels[r]] = 1.f;
  }
  double err = 0;
  for (int sparse = 0; sparse < 2; ++sparse) {
    const int32_t* lb = sparse ? labels.data() : nullptr;
    const float* oh = sparse ? nullptr : onehot.data();
    double st[2] = {0, 0};
    Vec d_cpu(logits.size()), d_emu(logits.size());
    cpu::softmax_xent(rows, cols, logits.data(), oh, lb, d_cpu.data(), 1.f / rows, st);
    std::vector<double> loss(rows), hit(rows);
    for (int r = 0; r < rows; ++r)
      body::xent_row(r, cols, logits.data(), oh, lb, d_emu.data(), 1.f / rows, loss.data(), hit.data());
    double l = 0, h = 0;
    for (int r = 0; r < rows; ++r) {
      l += loss[r];
      h += hit[r];
    }
    err = std::max({err, std::fabs(l - st[0]) / std::max(1e-30, std::fabs(st[0])), std::fabs(h - st[1]),
                    rel_err(d_emu, d_cpu)});
  }
  out.push_back({"softmax cross-entropy rows (loss, hits, gradient)", err, 1e-5});
  // a class index out of range on the device: NaN loss and gradient for that row, no hit
  std::vector<int32_t> bad = labels;
  bad[3] = cols;
  std::vector<double> loss(rows), hit(rows);
  Vec d(logits.size());
  body::xent_row(3, cols, logits.data(), nullptr, bad.data(), d.data(), 1.f, loss.data(), hit.data());
  bool flagged = std::isnan(loss[3]) && std::isnan(d[3 * cols]) && hit[3] == 0.0;
  out.push_back({"out-of-range class index gives NaN (0 = yes)", flagged ? 0.0 : 1.0, 0});
}

// The fixed-order sums of param_norms_cuda.cu: each block's lanes (threads) and their tree, run as
// the GPU runs them (all lanes, then one tree level at a time), against the CPU op, bit for bit.
void check_variable_sums(std::vector<SelftestResult>& out) {
  const long long sizes[] = {3 * 3 * 2 * 4, 4, 5000, 1, 9000, 257};
  std::vector<VariableSpan> spans;
  long long at = 0;
  for (long long n : sizes) {
    spans.push_back({at, at + n, true, 0.f, 0.f});
    at += n;
  }
  Vec x = random_vec(static_cast<size_t>(at), 21, -3.f, 3.f);
  const SegmentTable table(spans, Device::cpu());
  const auto& segs = table.host();
  std::vector<double> partial(2 * segs.size());
  for (size_t b = 0; b < segs.size(); ++b) {  // one block per segment
    double la[kSegmentLanes], lq[kSegmentLanes];
    for (int l = 0; l < kSegmentLanes; ++l) ::hpcnn::body::segment_lane_sums(x.data(), segs[b], l, la[l], lq[l]);
    for (int half = kSegmentLanes / 2; half > 0; half /= 2)
      for (int l = 0; l < half; ++l) ::hpcnn::body::tree_level(la, lq, l, half);
    partial[2 * b] = la[0];
    partial[2 * b + 1] = lq[0];
  }
  std::vector<double> emu(2 * table.variables()), cpu_sums(2 * table.variables());
  ::hpcnn::body::variable_sums_from_segments(segs.data(), table.size(), partial.data(), table.variables(), emu.data());
  cpu::variable_sums(segs.data(), table.size(), table.variables(), x.data(), cpu_sums.data());
  double bad = 0;
  for (size_t i = 0; i < emu.size(); ++i) bad += emu[i] == cpu_sums[i] ? 0 : 1;
  out.push_back({"variable sums, fixed order (bitwise mismatches)", bad, 0});
}

// The decisions of the cuDNN path (ops/conv_algo_choice.h) on made-up offers: no cuDNN needed.
void check_conv_algo_choice(std::vector<SelftestResult>& out) {
  using conv_algo::Offer;
  using D = Determinism;
  auto offer = [](const char* name, bool det, size_t ws) {
    Offer o;
    o.name = name;
    o.usable = true;
    o.deterministic = det;
    o.workspace = ws;
    return o;
  };
  // cuDNN's order: a fast non-deterministic one, a deterministic one with a big workspace, a
  // small deterministic one, one cuDNN cannot run here.
  std::vector<Offer> offers = {offer("NONDET_FAST", false, 100), offer("DET_BIG", true, 5000),
                               offer("DET_SMALL", true, 10), offer("UNUSABLE", true, 0)};
  offers[3].usable = false;
  using Order = std::vector<size_t>;
  double bad = 0;
  auto expect = [&](D d, size_t limit, Order order, size_t replan_at, std::vector<size_t> failed = {}) {
    conv_algo::Choice c = conv_algo::choose(offers, d, limit, failed);
    bad += (c.order == order && c.replan_at == replan_at && c.refusal.empty() == !order.empty()) ? 0 : 1;
  };
  const size_t never = conv_algo::kNever;
  expect(D::Required, 5000, {1, 2}, never);  // deterministic only, cuDNN's order among them
  expect(D::Required, 100, {2}, 5000);       // DET_BIG skipped for its size: re-plan once it fits
  expect(D::Warn, 100, {2, 0}, 5000);        // deterministic first, then the rest
  expect(D::Warn, 5000, {1, 2, 0}, never);
  expect(D::Any, 100, {0, 2}, never);        // cuDNN's order
  expect(D::Any, 10, {2}, 100);
  expect(D::Required, 5000, {2}, never, {1});  // failed at run time: never again, not even on re-plan
  expect(D::Required, 5, {}, never);           // nothing fits
  // Only a non-deterministic algorithm fits: refused under Required (for want of memory), taken under Warn.
  std::vector<Offer> pressure = {offer("NONDET", false, 10), offer("DET", true, 1000)};
  conv_algo::Choice r = conv_algo::choose(pressure, D::Required, 100, {});
  bad += (r.order.empty() && r.refusal_is_memory && r.refusal.find("set_deterministic") != std::string::npos) ? 0 : 1;
  conv_algo::Choice w = conv_algo::choose(pressure, D::Warn, 100, {});
  bad += (w.order == Order{0} && w.replan_at == 1000) ? 0 : 1;
  // No deterministic algorithm at all: a policy refusal (RuntimeError), not a memory one.
  conv_algo::Choice none = conv_algo::choose({offer("NONDET", false, 0)}, D::Required, 100, {});
  bad += (none.order.empty() && !none.refusal_is_memory && none.refusal.find("no deterministic") != std::string::npos)
             ? 0 : 1;
  out.push_back({"cuDNN algorithm choice: determinism setting, workspace limit, order, refusals (mismatches)", bad, 0});

  // Re-plan: exactly when the limit reaches the smallest skipped preferred workspace.
  conv_algo::Choice c = conv_algo::choose(offers, D::Required, 100, {});
  double replan_bad = 0;
  replan_bad += conv_algo::should_replan(c, 4999) ? 1 : 0;
  replan_bad += conv_algo::should_replan(c, 5000) ? 0 : 1;
  replan_bad += conv_algo::should_replan(conv_algo::choose(offers, D::Required, 5000, {}), size_t(1) << 40) ? 1 : 0;
  out.push_back({"cuDNN re-plan when the workspace limit grows (mismatches)", replan_bad, 0});

  // Run-time fallback: the first two fail, the third runs; the next call starts at the third; when
  // every one fails, the error names them all.
  double run_bad = 0;
  std::vector<Offer> three = {offer("FIRST", true, 0), offer("SECOND", true, 0), offer("THIRD", true, 0)};
  Order order = {0, 1, 2};
  size_t pos = 0;
  std::vector<conv_algo::Failure> failures;
  int calls = 0;
  auto fail_two = [&](const Offer& o, std::string* why) {
    ++calls;
    *why = "NOT_SUPPORTED";
    return o.name == "THIRD";
  };
  conv_algo::run_with_fallback(three, order, &pos, &failures, fail_two, "test");
  run_bad += (pos == 2 && failures.size() == 2 && calls == 3) ? 0 : 1;
  conv_algo::run_with_fallback(three, order, &pos, &failures, fail_two, "test");
  run_bad += (pos == 2 && failures.size() == 2 && calls == 4) ? 0 : 1;
  std::string message;
  try {
    conv_algo::run_with_fallback(three, order, &pos, &failures, [](const Offer&, std::string* why) {
      *why = "EXECUTION_FAILED";
      return false;
    }, "conv2d test");
  } catch (const BackendError& e) {
    message = e.what();
  }
  for (const char* name : {"conv2d test", "FIRST (NOT_SUPPORTED)", "SECOND (NOT_SUPPORTED)", "THIRD (EXECUTION_FAILED)"})
    run_bad += message.find(name) != std::string::npos ? 0 : 1;
  out.push_back({"cuDNN run-time fallback along the candidates, error naming every one tried (mismatches)", run_bad, 0});

  // Which cuDNN 9 statuses move a plan to its next algorithm: "not supported" and "execution
  // failed" with their sub-codes, and a misaligned pointer; nothing else. The fused call gives
  // way to the plain convolution on "not supported".
  double status_bad = 0;
  for (int code : {2003, 3000, 3002, 3004, 3011, 5000, 5001, 5003})
    status_bad += conv_algo::try_next_algorithm(code) ? 0 : 1;
  for (int code : {0, 1001, 2000, 2002, 2004, 2005, 4000, 4004})
    status_bad += conv_algo::try_next_algorithm(code) ? 1 : 0;
  for (int code : {3000, 3002, 3004, 3011}) status_bad += conv_algo::is_not_supported(code) ? 0 : 1;
  for (int code : {0, 2000, 2003, 4000, 5000}) status_bad += conv_algo::is_not_supported(code) ? 1 : 0;
  out.push_back({"cuDNN statuses that move a plan to its next algorithm, misaligned pointers included (misread "
                 "statuses)", status_bad, 0});
}

// Batch norm over a single row per channel (batchnorm_body.h, what the GPU runs instead of cuDNN
// then) against the CPU op: channel counts of the CPU's vector path (16) and its generic one (5),
// with and without gamma/beta and ReLU. The statistics, y, dgamma and dbeta bitwise; dx (about 0:
// a sum of terms that cancel, which a compiler may contract differently) to float rounding of
// its terms.
void check_batchnorm_one_row(std::vector<SelftestResult>& out) {
  double bad = 0, dx_err = 0;
  for (int c : {5, 16})
    for (bool affine : {true, false})
      for (bool relu : {false, true}) {
        const size_t n = static_cast<size_t>(c);
        const Vec x = random_vec(n, 61 + c, -3.f, 3.f), gamma = random_vec(n, 62), beta = random_vec(n, 63),
                  dy = random_vec(n, 64);
        const float* g = affine ? gamma.data() : nullptr;
        const float* b = affine ? beta.data() : nullptr;
        const float eps = 1e-3f;
        const BatchNormGeometry geo{1, 1, c};
        Vec y(n), mean(n), var(n), invstd(n), dx(n), dg(n), db(n);
        cpu::batchnorm_forward_training(geo, x.data(), g, b, eps, relu, y.data(), mean.data(), var.data(),
                                        invstd.data(), nullptr);
        Vec dy_cpu = dy;
        cpu::batchnorm_backward_training(geo, x.data(), y.data(), dy_cpu.data(), g, mean.data(), invstd.data(), eps,
                                         relu, dx.data(), dg.data(), db.data());
        Vec ey(n), emean(n), evar(n), einv(n), edx(n), edg(n), edb(n);
        for (int j = 0; j < c; ++j)
          ::hpcnn::body::batchnorm_one_row_forward(x[j], g, b, j, eps, relu, ey.data(), emean.data(), evar.data(),
                                                   einv.data());
        for (int j = 0; j < c; ++j)
          ::hpcnn::body::batchnorm_one_row_backward(x[j], ey[j], dy[j], g, emean.data(), einv.data(), j, relu,
                                                    edx.data(), edg.data(), edb.data());
        bad += mismatches(ey, y) + mismatches(emean, mean) + mismatches(evar, var) + mismatches(einv, invstd) +
               mismatches(edg, dg) + mismatches(edb, db);
        for (int j = 0; j < c; ++j) {  // relative to the size of the terms k1 * g that cancel
          const double term = std::fabs((affine ? gamma[j] : 1.0) * invstd[j] * dy[j]) + 1e-30;
          dx_err = std::max(dx_err, std::fabs(static_cast<double>(edx[j]) - dx[j]) / term);
        }
      }
  out.push_back({"batch norm over one row per channel vs the CPU: statistics, y, dgamma, dbeta (bitwise mismatches)",
                 bad, 0});
  out.push_back({"batch norm over one row per channel vs the CPU: dx (error relative to its terms)", dx_err, 1e-6});
}

// A trainable layer run in inference mode: the CUDA backend's gamma/beta gradients (its kernels'
// bodies in an emulated grid, then the column sums the GPU runs) against the CPU op's.
void check_batchnorm_inference_param_gradients(std::vector<SelftestResult>& out) {
  double err = 0, g_bad = 0;
  for (int c : {3, 16, 37})
    for (bool relu : {false, true}) {
      const long long rows = 2 * 7 * 5;
      const size_t count = static_cast<size_t>(rows) * c;
      const Vec x = random_vec(count, 71 + c, -2.f, 2.f), y = random_vec(count, 72), dy = random_vec(count, 73),
                mm = random_vec(c, 74), mv = random_vec(c, 75, 0.1f, 2.f);
      const float eps = 1e-3f;
      Vec dg(c), db(c), dy_cpu = dy;
      cpu::batchnorm_inference_param_gradients(BatchNormGeometry{2, 35, c}, x.data(), relu ? y.data() : nullptr,
                                               dy_cpu.data(), mm.data(), mv.data(), eps, relu, dg.data(), db.data());
      Vec dy_gpu = dy, term(count);
      for (size_t i = 0; i < count; ++i)
        ::hpcnn::body::batchnorm_inference_param_term(static_cast<long long>(i), c, x.data(),
                                                      relu ? y.data() : nullptr, dy_gpu.data(), mm.data(), term.data());
      Vec edb = emu_column_sum(dy_gpu, rows, c), edg = emu_column_sum(term, rows, c);
      for (int j = 0; j < c; ++j) ::hpcnn::body::batchnorm_inference_dgamma(j, mv.data(), eps, edg.data());
      err = std::max({err, rel_err(edg, dg), rel_err(edb, db)});
      g_bad += mismatches(dy_gpu, dy_cpu);
    }
  out.push_back({"batch norm gamma/beta gradients in inference mode vs the CPU (column sums of the terms)", err, 1e-5});
  out.push_back({"batch norm gradient in inference mode: g = dy masked by the ReLU vs the CPU (mismatches)", g_bad, 0});
}

// The batch statistics' layout (ops/batchnorm.h): every array at a 256-byte boundary of its buffer
// (cudaMalloc aligns the buffer itself to 256 bytes), apart, whatever the channel count.
void check_batchnorm_stats_layout(std::vector<SelftestResult>& out) {
  double bad = 0;
  for (long long c = 1; c <= 300; ++c) {
    for (int k = 0; k < 3; ++k) {
      const long long off = batchnorm_stats_offset(c, k);
      if ((off * static_cast<long long>(sizeof(float))) % 256 != 0) bad += 1;
      if (k > 0 && off < batchnorm_stats_offset(c, k - 1) + c) bad += 1;  // overlaps the previous array
    }
    if (batchnorm_stats_floats(c) < batchnorm_stats_offset(c, 2) + c) bad += 1;
  }
  out.push_back({"batch norm statistics: mean, var, invstd at 256-byte offsets, apart, c = 1..300 (violations)", bad,
                 0});
}

}  // namespace

std::vector<SelftestResult> kernel_selftest() {
  std::vector<SelftestResult> out;
  check_maxpool(out);
  check_avgpool(out);
  check_global_pools(out);
  check_column_sums(out);
  check_kernel_layouts(out);
  check_pad_crop(out);
  check_augment(out);
  check_concat(out);
  check_dense(out);
  check_conv(out);
  check_xent(out);
  check_variable_sums(out);
  check_conv_algo_choice(out);
  check_batchnorm_one_row(out);
  check_batchnorm_inference_param_gradients(out);
  check_batchnorm_stats_layout(out);
  for (auto& r : cudnn_descriptor_selftest()) out.push_back(r);
  return out;
}

}  // namespace hpcnn::cuda
