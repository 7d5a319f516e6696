// The host self-test's checks of the library calls' layouts (cuda_kernel_selftest.h): the cuBLAS
// calls' arguments fed to a reference column-major GEMM, the cuDNN convolution's NHWC data and
// KRSC filters fed to a reference cross-correlation (grouped and dilated for the depthwise one), both written from the libraries'
// documentation, and the kernel layout conversion HWIO <-> OHWI; all against the CPU ops.
#include "diagnostics/cuda_kernel_selftest_parts.h"

#include "ops/conv2d.h"
#include "ops/conv2d_body.h"
#include "ops/cuda_kernels_body.h"
#include "ops/dense.h"
#include "ops/dense_body.h"
#include "ops/depthwise_conv2d_body.h"

namespace hpcnn::cuda::selftest {

namespace {

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
// padding, dilation (dh, dw), `groups` groups (cudnnSetConvolutionGroupCount: the c channels and
// the f filters split into that many consecutive groups; filter k reads group k / (f / groups),
// and has c / groups input channels): y[n,p,q,k] = sum_{r,s,c'} x[n, p*u - pad_h + r*dh,
// q*v - pad_w + s*dw, grp*cpg + c'] * w[k,r,s,c'].
float x_at(const body::ConvGeom& s, const Vec& x, int n, int iy, int ix, int c) {
  if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) return 0.f;
  return x[(((size_t)n * s.h + iy) * s.w + ix) * s.c + c];
}

Vec ref_conv_forward(const body::ConvGeom& s, const Vec& x, const Vec& w) {
  const int cpg = s.c / s.groups, kpg = s.f / s.groups;
  Vec y((size_t)s.n * s.oh * s.ow * s.f);
  for (int n = 0; n < s.n; ++n)
    for (int p = 0; p < s.oh; ++p)
      for (int q = 0; q < s.ow; ++q)
        for (int k = 0; k < s.f; ++k) {
          double acc = 0;
          for (int r = 0; r < s.kh; ++r)
            for (int t = 0; t < s.kw; ++t)
              for (int c = 0; c < cpg; ++c)
                acc += (double)x_at(s, x, n, p * s.sh - s.ph + r * s.dh, q * s.sw - s.pw + t * s.dw,
                                    k / kpg * cpg + c) *
                       w[(((size_t)k * s.kh + r) * s.kw + t) * cpg + c];
          y[(((size_t)n * s.oh + p) * s.ow + q) * s.f + k] = static_cast<float>(acc);
        }
  return y;
}

// backward data: dx = sum over the outputs each input feeds; backward filter: dw[k,r,s,c'].
void ref_conv_backward(const body::ConvGeom& s, const Vec& x, const Vec& w, const Vec& dy, Vec& dx, Vec& dw) {
  const int cpg = s.c / s.groups, kpg = s.f / s.groups;
  std::vector<double> dxd((size_t)s.n * s.h * s.w * s.c, 0.0), dwd((size_t)s.f * s.kh * s.kw * cpg, 0.0);
  for (int n = 0; n < s.n; ++n)
    for (int p = 0; p < s.oh; ++p)
      for (int q = 0; q < s.ow; ++q)
        for (int k = 0; k < s.f; ++k) {
          double g = dy[(((size_t)n * s.oh + p) * s.ow + q) * s.f + k];
          for (int r = 0; r < s.kh; ++r)
            for (int t = 0; t < s.kw; ++t) {
              int iy = p * s.sh - s.ph + r * s.dh, ix = q * s.sw - s.pw + t * s.dw;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              for (int c = 0; c < cpg; ++c) {
                size_t xi = (((size_t)n * s.h + iy) * s.w + ix) * s.c + k / kpg * cpg + c;
                size_t wi = (((size_t)k * s.kh + r) * s.kw + t) * cpg + c;
                dxd[xi] += g * w[wi];
                dwd[wi] += g * x[xi];
              }
            }
        }
  dx.assign(dxd.begin(), dxd.end());
  dw.assign(dwd.begin(), dwd.end());
}

}  // namespace

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

// The depthwise convolution's GPU path (depthwise_conv2d_cuda.cu) emulated: Keras' kernel moved to
// KRSC by depthwise_keras_index, x padded where the geometry needs it, the grouped convolution of
// depthwise_geom (c groups) by the reference above, dW moved back; against the CPU op.
void check_depthwise(std::vector<SelftestResult>& out) {
  struct Case { int n, h, w, c, m, k, s, d; Padding pad; };
  const Case cases[] = {{2, 8, 8, 5, 1, 3, 1, 1, Padding::Same}, {2, 8, 9, 3, 2, 3, 2, 1, Padding::Same},
                        {1, 9, 7, 4, 3, 2, 1, 2, Padding::Valid}, {2, 10, 10, 6, 1, 3, 1, 2, Padding::Same},
                        {1, 7, 7, 40, 1, 5, 2, 1, Padding::Same}};
  double ef = 0, ed = 0, ew_ = 0;
  for (const Case& k : cases) {
    const DepthwiseGeometry g = DepthwiseGeometry::make(k.n, k.h, k.w, k.c, k.m, k.k, k.k, k.s, k.s, k.d, k.d, k.pad);
    const body::ConvGeom s = body::depthwise_geom(g);
    const int taps = g.kh * g.kw, oc = g.oc();
    Vec x = random_vec((size_t)g.n * g.h * g.w * g.c, 31), w = random_vec((size_t)taps * oc, 32);
    Vec wk(w.size());
    for (size_t i = 0; i < wk.size(); ++i) wk[i] = w[body::depthwise_keras_index((long long)i, taps, oc)];
    Vec xin = x;
    if (s.padded) {
      xin.assign((size_t)s.n * s.h * s.w * s.c, 0.f);
      for (size_t i = 0; i < xin.size(); ++i)
        xin[i] = body::pad_at(x.data(), g.h, g.w, g.c, g.pad_top, g.pad_left, s.h, s.w, i);
    }
    Vec y_cpu((size_t)g.n * g.oh * g.ow * oc);
    cpu::depthwise_conv2d_forward(g, x.data(), w.data(), nullptr, y_cpu.data());
    ef = std::max(ef, rel_err(ref_conv_forward(s, xin, wk), y_cpu));
    Vec dy = random_vec(y_cpu.size(), 33), dx_cpu(x.size()), dw_cpu(w.size());
    cpu::depthwise_conv2d_backward(g, x.data(), w.data(), dy.data(), dx_cpu.data(), dw_cpu.data(), nullptr);
    Vec dx_ref, dwk_ref;
    ref_conv_backward(s, xin, wk, dy, dx_ref, dwk_ref);
    Vec dx_emu = dx_ref;
    if (s.padded) {
      dx_emu.assign(x.size(), 0.f);
      for (size_t i = 0; i < dx_emu.size(); ++i)
        dx_emu[i] = body::crop_at(dx_ref.data(), g.h, g.w, g.c, g.pad_top, g.pad_left, s.h, s.w, i);
    }
    ed = std::max(ed, rel_err(dx_emu, dx_cpu));
    Vec dw_keras(w.size());
    for (size_t i = 0; i < dwk_ref.size(); ++i) dw_keras[body::depthwise_keras_index((long long)i, taps, oc)] = dwk_ref[i];
    ew_ = std::max(ew_, rel_err(dw_keras, dw_cpu));
  }
  out.push_back({"depthwise forward via cuDNN's grouped NHWC/KRSC contract", ef, 1e-5});
  out.push_back({"depthwise dx via cuDNN's grouped NHWC/KRSC contract", ed, 1e-5});
  out.push_back({"depthwise dW via cuDNN's grouped NHWC/KRSC contract", ew_, 1e-5});
}

}  // namespace hpcnn::cuda::selftest
