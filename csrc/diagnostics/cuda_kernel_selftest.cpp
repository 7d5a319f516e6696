// See cuda_kernel_selftest.h. Plain C++: built with and without the CUDA backend. This part: the
// kernels' bodies in emulated grids, and the runner of every part (cuda_kernel_selftest_parts.h).
#include "diagnostics/cuda_kernel_selftest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "core/errors.h"
#include "diagnostics/cuda_kernel_selftest_parts.h"
#include "ops/augment.h"
#include "ops/augment_body.h"
#include "ops/avgpool2d.h"
#include "ops/avgpool2d_body.h"
#include "ops/concat.h"
#include "ops/concat_body.h"
#include "ops/conv2d.h"
#include "ops/conv2d_body.h"
#include "ops/cuda_kernels_body.h"
#include "ops/global_pool2d.h"
#include "ops/global_pool2d_body.h"
#include "ops/maxpool2d.h"
#include "ops/maxpool2d_body.h"
#include "ops/multiply.h"
#include "ops/multiply_body.h"
#include "ops/param_norms.h"
#include "ops/param_norms_body.h"
#include "ops/softmax_xent.h"
#include "ops/softmax_xent_body.h"

namespace hpcnn::cuda::selftest {

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

namespace {

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

// The broadcast product's kernels (multiply_cuda.cu) emulated with their body: y per element, each
// operand's gradient gathered over the y positions it covers; against the CPU op (which sums the
// same terms row by row: a few ulp apart).
void check_multiply(std::vector<SelftestResult>& out) {
  struct Case { long long a[4], b[4]; };
  const Case cases[] = {{{2, 5, 4, 6}, {2, 1, 1, 6}}, {{3, 1, 1, 6}, {3, 4, 5, 6}}, {{2, 3, 4, 5}, {2, 3, 4, 1}},
                        {{2, 1, 4, 5}, {2, 3, 1, 5}}};
  double ey = 0, eg = 0;
  for (const Case& k : cases) {
    BroadcastGeometry g;
    g.rank = 4;
    long long na = 1, nb = 1, sa = 1, sb = 1;
    for (int d = 3; d >= 0; --d) {
      g.dims[d] = std::max(k.a[d], k.b[d]);
      g.sa[d] = k.a[d] == 1 && g.dims[d] != 1 ? 0 : sa;
      g.sb[d] = k.b[d] == 1 && g.dims[d] != 1 ? 0 : sb;
      sa *= k.a[d];
      sb *= k.b[d];
    }
    na = sa;
    nb = sb;
    Vec a = random_vec(na, 51), b = random_vec(nb, 52), dy = random_vec(g.numel(), 53);
    Vec y_emu(g.numel()), y_cpu(g.numel());
    for (long long i = 0; i < g.numel(); ++i) {
      long long oa, ob;
      body::broadcast_offsets(g, i, oa, ob);
      y_emu[i] = a[oa] * b[ob];
    }
    cpu::multiply_forward(g, a.data(), b.data(), y_cpu.data());
    ey = std::max(ey, mismatches(y_emu, y_cpu));
    Vec da_cpu(na), db_cpu(nb);
    cpu::multiply_backward(g, a.data(), b.data(), dy.data(), da_cpu.data(), na, db_cpu.data(), nb);
    for (int which = 0; which < 2; ++which) {
      const long long n = which == 0 ? na : nb;
      Vec emu(n);
      for (long long j = 0; j < n; ++j) {
        float t = 0.f;
        for (long long q = 0; q < g.numel() / n; ++q) {
          const long long yi = body::gather_index(g, which == 0 ? g.sa : g.sb, j, q);
          long long oa, ob;
          body::broadcast_offsets(g, yi, oa, ob);
          t += dy[yi] * (which == 0 ? b[ob] : a[oa]);
        }
        emu[j] = t;
      }
      eg = std::max(eg, rel_err(emu, which == 0 ? da_cpu : db_cpu));
    }
  }
  out.push_back({"multiply (broadcast): product body (mismatches)", ey, 0});
  out.push_back({"multiply (broadcast): gradients gathered per operand element", eg, 1e-5});
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

}  // namespace

}  // namespace hpcnn::cuda::selftest

namespace hpcnn::cuda {

std::vector<SelftestResult> kernel_selftest() {
  std::vector<SelftestResult> out;
  selftest::check_maxpool(out);
  selftest::check_avgpool(out);
  selftest::check_global_pools(out);
  selftest::check_column_sums(out);
  selftest::check_kernel_layouts(out);
  selftest::check_pad_crop(out);
  selftest::check_augment(out);
  selftest::check_concat(out);
  selftest::check_dense(out);
  selftest::check_conv(out);
  selftest::check_multiply(out);
  selftest::check_depthwise(out);
  selftest::check_xent(out);
  selftest::check_variable_sums(out);
  selftest::check_conv_algo_choice(out);
  selftest::check_batchnorm_one_row(out);
  selftest::check_batchnorm_inference_param_gradients(out);
  selftest::check_batchnorm_stats_layout(out);
  for (auto& r : cudnn_descriptor_selftest()) out.push_back(r);
  return out;
}

}  // namespace hpcnn::cuda
