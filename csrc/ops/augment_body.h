// The arithmetic of the augmentation (augment.h) as HPCNN_HD functions: a sample's random draw, one
// axis' source indices and weights (a rotation's and a zoom's: one coordinate's), and the value
// of one output element. augment_cuda.cu's kernel
// is a loop around augment_at; augment_cpu.cpp builds per-sample tables from the same sample_map
// and axis_taps and combines taps with the same combine(), so the two give the same bits; the host
// self-test (diagnostics/cuda_kernel_selftest.cpp) compares augment_at with the CPU op.
//
// Rounding is explicit (fmaf where a product meets a sum), so that no compiler's choice to fuse
// or not changes a coordinate or a weight between the host and the device.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "core/rng.h"
#include "ops/augment.h"

namespace hpcnn::cuda::body {

// One axis of one sample: output index o reads the source coordinate fmaf(coef, size, base + dir * o).
struct AxisMap {
  int base = 0, dir = 1;
  float coef = 0.f;
};
struct SampleMap {
  AxisMap rows, cols;
};

// A uniform integer in [0, range] from a 32-bit word (its top 24 bits).
HPCNN_HD int uniform_offset(uint32_t word, int range) {
  return static_cast<int>((static_cast<uint64_t>(word >> 8) * static_cast<uint64_t>(range + 1)) >> 24);
}

// The fill mode and interpolation the kind uses (a crop reads zeros outside its padded input, at
// integer coordinates).
HPCNN_HD FillMode fill_mode_of(const AugmentSpec& s) {
  return s.kind == AugmentKind::Crop ? FillMode::Constant : s.fill_mode;
}
HPCNN_HD float fill_value_of(const AugmentSpec& s) { return s.kind == AugmentKind::Crop ? 0.f : s.fill_value; }
HPCNN_HD Interpolation interpolation_of(const AugmentSpec& s) {
  return s.kind == AugmentKind::Flip || s.kind == AugmentKind::Crop ? Interpolation::Nearest : s.interpolation;
}
// Rotation and zoom map output pixels through a 2-D affine map (Affine); the others per axis.
HPCNN_HD bool is_affine(const AugmentSpec& s) { return s.kind == AugmentKind::Rotate || s.kind == AugmentKind::Zoom; }

// Sample i of the batch (global row d.first_row + i): where each output axis reads its input
// (h, w: the input's height and width).
HPCNN_HD SampleMap sample_map(const AugmentSpec& s, const AugmentDraw& d, int h, int w, long long i) {
  SampleMap m;
  const bool crop = s.kind == AugmentKind::Crop;
  if (!d.training && !crop) return m;  // flip, translation: the identity in inference
  rng::U32x4 r{{0u, 0u, 0u, 0u}};
  if (d.training) r = rng::bits4(d.seed, d.stream, static_cast<uint64_t>(d.first_row + i));
  if (crop) {
    const int range_h = h + s.pad_top + s.pad_bottom - s.crop_h;
    const int range_w = w + s.pad_left + s.pad_right - s.crop_w;
    const int oy = d.training ? uniform_offset(r.v[0], range_h) : range_h / 2;
    const int ox = d.training ? uniform_offset(r.v[1], range_w) : range_w / 2;
    m.rows.base = oy - s.pad_top;
    m.cols.base = ox - s.pad_left;
  } else if (s.kind == AugmentKind::Flip) {
    if (rng::to_unit_float(r.v[0]) <= 0.5f) {
      if (s.flip_rows) m.rows = AxisMap{h - 1, -1, 0.f};
      if (s.flip_cols) m.cols = AxisMap{w - 1, -1, 0.f};
    }
  } else {  // Translate: src = o - fraction * size
    m.rows.coef = -fmaf(rng::to_unit_float(r.v[0]), s.height_hi - s.height_lo, s.height_lo);
    m.cols.coef = -fmaf(rng::to_unit_float(r.v[1]), s.width_hi - s.width_lo, s.width_lo);
  }
  return m;
}

// Output pixel (row y, column x) reads the input at column fmaf(a0, x, fmaf(a1, y, a2)) and row
// fmaf(b0, x, fmaf(b1, y, b2)) (augment.h). The identity by default.
struct Affine {
  float a0 = 1.f, a1 = 0.f, a2 = 0.f, b0 = 0.f, b1 = 1.f, b2 = 0.f;
};

// sin t and cos t rounded to float, computed in double with every operation written out (a
// quarter-turn reduction, then Taylor polynomials on [-pi/4, pi/4] far below a float's ulp), so
// that the host and the device get the same bits: the CUDA and host libraries' sinf and cosf
// need not agree in the last bit.
HPCNN_HD void sin_cos(float t, float& sin_t, float& cos_t) {
  const double x = static_cast<double>(t);
  const double k = rint(x * 0.63661977236758134308);  // x / (pi / 2), to the nearest integer
  const double pio2_hi = 1.5707963267948966, pio2_lo = 6.123233995736766e-17;
  const double r = fma(-k, pio2_lo, fma(-k, pio2_hi, x));  // |r| <= pi / 4 (and a little)
  const double r2 = r * r;
  double ps = fma(r2, -1.0 / 1307674368000.0 / 272.0, 1.0 / 1307674368000.0);  // r^17 / 17!, r^15 / 15!
  ps = fma(r2, ps, -1.0 / 6227020800.0);
  ps = fma(r2, ps, 1.0 / 39916800.0);
  ps = fma(r2, ps, -1.0 / 362880.0);
  ps = fma(r2, ps, 1.0 / 5040.0);
  ps = fma(r2, ps, -1.0 / 120.0);
  ps = fma(r2, ps, 1.0 / 6.0);
  const double s = fma(-(r * r2), ps, r);  // r - r^3 / 3! + r^5 / 5! - ...
  double pc = fma(r2, 1.0 / 20922789888000.0, -1.0 / 87178291200.0);  // r^16 / 16!, r^14 / 14!
  pc = fma(r2, pc, 1.0 / 479001600.0);
  pc = fma(r2, pc, -1.0 / 3628800.0);
  pc = fma(r2, pc, 1.0 / 40320.0);
  pc = fma(r2, pc, -1.0 / 720.0);
  pc = fma(r2, pc, 1.0 / 24.0);
  pc = fma(r2, pc, -0.5);
  const double c = fma(r2, pc, 1.0);  // 1 - r^2 / 2! + r^4 / 4! - ...
  const long long q = static_cast<long long>(k) & 3;  // the quarter turns (two's complement: also for k < 0)
  const double sv = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
  const double cv = q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
  sin_t = static_cast<float>(sv);
  cos_t = static_cast<float>(cv);
}

// Sample i's affine map (rotation, zoom; the identity in inference).
HPCNN_HD Affine sample_affine(const AugmentSpec& s, const AugmentDraw& d, int h, int w, long long i) {
  Affine m;
  if (!d.training) return m;
  const rng::U32x4 r = rng::bits4(d.seed, d.stream, static_cast<uint64_t>(d.first_row + i));
  const float cx = 0.5f * static_cast<float>(w - 1), cy = 0.5f * static_cast<float>(h - 1);
  if (s.kind == AugmentKind::Rotate) {
    const float turn = fmaf(rng::to_unit_float(r.v[0]), s.rotation_hi - s.rotation_lo, s.rotation_lo);
    const float degrees = turn * 360.f;
    float sin_t = 0.f, cos_t = 1.f;
    sin_cos(degrees * static_cast<float>(3.14159265358979323846 / 180.0), sin_t, cos_t);
    m.a0 = cos_t;
    m.a1 = -sin_t;
    m.b0 = sin_t;
    m.b1 = cos_t;
    m.a2 = fmaf(-cy, m.a1, fmaf(-cx, m.a0, cx));
    m.b2 = fmaf(-cy, m.b1, fmaf(-cx, m.b0, cy));
  } else {  // Zoom
    const float zy = fmaf(rng::to_unit_float(r.v[0]), s.height_hi - s.height_lo, 1.f + s.height_lo);
    const float zx = s.zoom_keep_aspect ? zy
                                        : fmaf(rng::to_unit_float(r.v[1]), s.width_hi - s.width_lo, 1.f + s.width_lo);
    m.a0 = zx;
    m.a2 = cx * (1.f - zx);
    m.b1 = zy;
    m.b2 = cy * (1.f - zy);
  }
  return m;
}

// An integer index of an axis of `size`, fixed by the fill mode: an index in [0, size), or -1
// for the fill value (constant).
HPCNN_HD int fix_index(int i, int size, FillMode mode) {
  if (i >= 0 && i < size) return i;
  switch (mode) {
    case FillMode::Nearest:
      return i < 0 ? 0 : size - 1;
    case FillMode::Wrap: {
      const int k = i % size;
      return k < 0 ? k + size : k;
    }
    case FillMode::Reflect: {  // d c b a | a b c d | d c b a: period 2 * size
      const long long p = 2LL * size;
      long long k = i % p;
      if (k < 0) k += p;
      return static_cast<int>(k >= size ? p - 1 - k : k);
    }
    default:
      return -1;
  }
}

// Output index o of an axis: the input indices it reads (i1 = -1 when w1 == 0: i0 alone) and
// their weights.
struct Taps {
  int i0 = -1, i1 = -1;
  float w0 = 1.f, w1 = 0.f;
};

// The taps of a source coordinate `src` on an axis of `size`.
HPCNN_HD Taps coordinate_taps(float src, int size, FillMode mode, Interpolation interp) {
  Taps t;
  if (interp == Interpolation::Nearest) {
    t.i0 = fix_index(static_cast<int>(roundf(src)), size, mode);  // halves away from zero
    return t;
  }
  const float lower = floorf(src);
  const float frac = src - lower;  // exact
  const int i = static_cast<int>(lower);
  t.i0 = fix_index(i, size, mode);
  if (frac != 0.f) {
    t.w0 = 1.f - frac;
    t.w1 = frac;
    t.i1 = fix_index(i + 1, size, mode);
  }
  return t;
}

HPCNN_HD Taps axis_taps(const AxisMap& m, int size, int o, FillMode mode, Interpolation interp) {
  return coordinate_taps(fmaf(m.coef, static_cast<float>(size), static_cast<float>(m.base + m.dir * o)), size, mode,
                         interp);
}

// Output pixel (y, x)'s taps under an affine map: ty along the rows, tx along the columns.
HPCNN_HD void affine_taps(const Affine& m, int h, int w, int y, int x, FillMode mode, Interpolation interp, Taps& ty,
                          Taps& tx) {
  const float fx = static_cast<float>(x), fy = static_cast<float>(y);
  tx = coordinate_taps(fmaf(m.a0, fx, fmaf(m.a1, fy, m.a2)), w, mode, interp);
  ty = coordinate_taps(fmaf(m.b0, fx, fmaf(m.b1, fy, m.b2)), h, mode, interp);
}

// Two taps' values combined: a alone when w1 is 0, else w0 * a + w1 * b rounded as written here.
HPCNN_HD float combine(float a, float b, float w0, float w1) { return w1 == 0.f ? a : fmaf(w1, b, w0 * a); }

// The value at input pixel (iy, ix) of one channel plane (x points at the sample's channel),
// or the fill value where an index is -1.
HPCNN_HD float tap_value(const float* x, int w, int c, int iy, int ix, float fill) {
  return iy < 0 || ix < 0 ? fill : x[(static_cast<long long>(iy) * w + ix) * c];
}

// What a kernel takes (by value).
struct AugmentArgs {
  AugmentGeometry g;
  AugmentSpec s;
  AugmentDraw d;
};

// Output element i (flat NHWC index into y) from the float input x (n, h, w, c).
HPCNN_HD float augment_at(const AugmentArgs& a, const float* x, long long i) {
  const AugmentGeometry& g = a.g;
  long long t = i;
  const int ch = static_cast<int>(t % g.c); t /= g.c;
  const int ox = static_cast<int>(t % g.ow); t /= g.ow;
  const int oy = static_cast<int>(t % g.oh);
  const long long n = t / g.oh;
  const FillMode mode = fill_mode_of(a.s);
  const Interpolation interp = interpolation_of(a.s);
  const float fill = fill_value_of(a.s);
  Taps ty, tx;
  if (is_affine(a.s)) {
    affine_taps(sample_affine(a.s, a.d, g.h, g.w, n), g.h, g.w, oy, ox, mode, interp, ty, tx);
  } else {
    const SampleMap m = sample_map(a.s, a.d, g.h, g.w, n);
    ty = axis_taps(m.rows, g.h, oy, mode, interp);
    tx = axis_taps(m.cols, g.w, ox, mode, interp);
  }
  const float* xs = x + n * g.h * g.w * g.c + ch;
  const float r0 = combine(tap_value(xs, g.w, g.c, ty.i0, tx.i0, fill), tap_value(xs, g.w, g.c, ty.i0, tx.i1, fill),
                           tx.w0, tx.w1);
  if (ty.w1 == 0.f) return r0;
  const float r1 = combine(tap_value(xs, g.w, g.c, ty.i1, tx.i0, fill), tap_value(xs, g.w, g.c, ty.i1, tx.i1, fill),
                           tx.w0, tx.w1);
  return combine(r0, r1, ty.w0, ty.w1);
}

}  // namespace hpcnn::cuda::body
