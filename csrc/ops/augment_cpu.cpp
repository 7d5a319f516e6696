// Augmentation on the CPU (augment.h): threads over samples. Per sample, the two axes' taps are
// tabulated once (augment_body.h's sample_map and axis_taps, the GPU kernel's functions), then
// every output pixel is a table look-up: a copy when every weight is 1 (flips, crops, a
// translation with nearest interpolation or a whole-pixel shift), else the bilinear combination
// written as body::combine. An affine map without cross terms (a1 = b0 = 0: a zoom, a rotation
// by 0, inference) is separable and takes the same tables; a rotation computes its taps per output
// pixel as the kernel's body::affine_taps does. The source is read where it is (the batch's rows
// of the caller's array) and uint8 is decoded on the way, so for the batch stager this is the
// gather, the decode and the augmentation in one pass over the batch.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/pixel.h"
#include "core/thread_pool.h"
#include "ops/augment.h"
#include "ops/augment_body.h"

namespace hpcnn::cpu {

namespace body = cuda::body;

namespace {

// Values of the source at a flat element index, channel ch (uint8 decoded as pixel::decode_u8).
struct FloatSource {
  const float* x;
  float at(long long i, int) const { return x[i]; }
};
struct ByteSource {
  const uint8_t* x;
  const float* scale;
  const float* shift;
  float at(long long i, int ch) const { return pixel::decode_u8(x[i], scale[ch], shift[ch]); }
};

// One output pixel (c channels at o) from its taps, combined in body::augment_at's order: each
// corner's element offset is computed once for all channels (-1: the fill value, as
// body::tap_value). A second tap whose weight is 0 is not read (body::combine ignores it).
// C > 0: the channel count known at compile time (RGB, grey: the loops over channels unrolled);
// C = 0: c at run time.
template <int C, typename Source>
inline void blend(const Source& src, long long base, int w, int c_run, const body::Taps& y, const body::Taps& x,
                  float fill, float* o) {
  const int c = C > 0 ? C : c_run;
  auto at = [&](int iy, int ix) { return iy < 0 || ix < 0 ? -1LL : base + (static_cast<long long>(iy) * w + ix) * c; };
  auto value = [&](long long p, int ch) { return p < 0 ? fill : src.at(p + ch, ch); };
  const long long p00 = at(y.i0, x.i0), p01 = x.w1 == 0.f ? p00 : at(y.i0, x.i1);
  if (y.w1 == 0.f) {
    for (int ch = 0; ch < c; ++ch) o[ch] = body::combine(value(p00, ch), value(p01, ch), x.w0, x.w1);
    return;
  }
  const long long p10 = at(y.i1, x.i0), p11 = x.w1 == 0.f ? p10 : at(y.i1, x.i1);
  for (int ch = 0; ch < c; ++ch)
    o[ch] = body::combine(body::combine(value(p00, ch), value(p01, ch), x.w0, x.w1),
                          body::combine(value(p10, ch), value(p11, ch), x.w0, x.w1), y.w0, y.w1);
}

// Calls f(std::integral_constant<int, C>) with C = c for the channel counts blend() unrolls, else 0.
template <typename F>
void with_channels(int c, F&& f) {
  if (c == 3) f(std::integral_constant<int, 3>());
  else if (c == 1) f(std::integral_constant<int, 1>());
  else f(std::integral_constant<int, 0>());
}

template <typename Source>
void augment_sample(const AugmentGeometry& g, const Source& src, long long row, const std::vector<body::Taps>& ty,
                    const std::vector<body::Taps>& tx, bool copies, float fill, float* out) {
  const int c = g.c;
  const long long plane = static_cast<long long>(g.h) * g.w * c;
  const long long base = row * plane;
  if (copies) {
    for (int oy = 0; oy < g.oh; ++oy) {
      float* o = out + static_cast<long long>(oy) * g.ow * c;
      const int iy = ty[oy].i0;
      if (iy < 0) {
        std::fill(o, o + static_cast<long long>(g.ow) * c, fill);
        continue;
      }
      const long long rbase = base + static_cast<long long>(iy) * g.w * c;
      for (int ox = 0; ox < g.ow; ++ox) {
        const int ix = tx[ox].i0;
        float* op = o + static_cast<long long>(ox) * c;
        if (ix < 0) {
          for (int ch = 0; ch < c; ++ch) op[ch] = fill;
        } else {
          const long long p = rbase + static_cast<long long>(ix) * c;
          for (int ch = 0; ch < c; ++ch) op[ch] = src.at(p + ch, ch);
        }
      }
    }
    return;
  }
  with_channels(c, [&](auto C) {
    for (int oy = 0; oy < g.oh; ++oy) {
      float* o = out + static_cast<long long>(oy) * g.ow * c;
      for (int ox = 0; ox < g.ow; ++ox)
        blend<C()>(src, base, g.w, c, ty[oy], tx[ox], fill, o + static_cast<long long>(ox) * c);
    }
  });
}

// A sample under an affine map with cross terms (a rotation): the taps per output pixel, the
// coordinates as body::affine_taps computes them (the inner fmaf, constant along a row, once per
// row).
template <typename Source>
void augment_sample_affine(const AugmentGeometry& g, const Source& src, long long row, const body::Affine& m,
                           FillMode mode, Interpolation interp, float fill, float* out) {
  const int c = g.c;
  const long long base = row * static_cast<long long>(g.h) * g.w * c;
  with_channels(c, [&](auto C) {
    for (int oy = 0; oy < g.oh; ++oy) {
      const float fy = static_cast<float>(oy);
      const float col0 = fmaf(m.a1, fy, m.a2), row0 = fmaf(m.b1, fy, m.b2);
      float* o = out + static_cast<long long>(oy) * g.ow * c;
      for (int ox = 0; ox < g.ow; ++ox) {
        const float fx = static_cast<float>(ox);
        const body::Taps x = body::coordinate_taps(fmaf(m.a0, fx, col0), g.w, mode, interp);
        const body::Taps y = body::coordinate_taps(fmaf(m.b0, fx, row0), g.h, mode, interp);
        blend<C()>(src, base, g.w, c, y, x, fill, o + static_cast<long long>(ox) * c);
      }
    }
  });
}

}  // namespace

void augment(const AugmentGeometry& g, const AugmentSpec& s, const AugmentDraw& d, const AugmentSource& x, float* y) {
  const FillMode mode = body::fill_mode_of(s);
  const Interpolation interp = body::interpolation_of(s);
  const float fill = body::fill_value_of(s);
  const long long per = static_cast<long long>(g.oh) * g.ow * g.c;
  const long long min_samples = std::max<long long>(1, 16384 / std::max<long long>(per, 1));
  parallel_for(g.n, [&](long long i0, long long i1, int) {
    std::vector<body::Taps> ty(g.oh), tx(g.ow);
    for (long long i = i0; i < i1; ++i) {
      const long long row = x.rows ? x.rows[i] : i;
      float* out = y + i * per;
      bool copies = true;  // every weight 1: a copy (or the fill) per output pixel
      if (body::is_affine(s)) {
        const body::Affine m = body::sample_affine(s, d, g.h, g.w, i);
        if (m.a1 != 0.f || m.b0 != 0.f) {
          if (x.u8) augment_sample_affine(g, ByteSource{x.u8, x.scale, x.shift}, row, m, mode, interp, fill, out);
          else augment_sample_affine(g, FloatSource{x.f32}, row, m, mode, interp, fill, out);
          continue;
        }
        // No cross terms: column fmaf(a0, x, a2), row fmaf(b1, y, b2), what affine_taps computes
        // then (fmaf(0, y, a2) is a2), tabulated per axis.
        for (int o = 0; o < g.oh; ++o) {
          ty[o] = body::coordinate_taps(fmaf(m.b1, static_cast<float>(o), m.b2), g.h, mode, interp);
          copies = copies && ty[o].w1 == 0.f;
        }
        for (int o = 0; o < g.ow; ++o) {
          tx[o] = body::coordinate_taps(fmaf(m.a0, static_cast<float>(o), m.a2), g.w, mode, interp);
          copies = copies && tx[o].w1 == 0.f;
        }
      } else {
        const body::SampleMap m = body::sample_map(s, d, g.h, g.w, i);
        for (int o = 0; o < g.oh; ++o) {
          ty[o] = body::axis_taps(m.rows, g.h, o, mode, interp);
          copies = copies && ty[o].w1 == 0.f;
        }
        for (int o = 0; o < g.ow; ++o) {
          tx[o] = body::axis_taps(m.cols, g.w, o, mode, interp);
          copies = copies && tx[o].w1 == 0.f;
        }
      }
      if (x.u8) augment_sample(g, ByteSource{x.u8, x.scale, x.shift}, row, ty, tx, copies, fill, out);
      else augment_sample(g, FloatSource{x.f32}, row, ty, tx, copies, fill, out);
    }
  }, min_samples);
}

}  // namespace hpcnn::cpu
