// Output sizes and padding under Keras rules, shared by both backends.
#include <algorithm>

#include <cmath>

#include "core/errors.h"
#include "ops/augment.h"
#include "ops/conv2d.h"
#include "ops/maxpool2d.h"

namespace hpcnn {

Padding parse_padding(const std::string& s) {
  if (s == "valid" || s == "VALID") return Padding::Valid;
  if (s == "same" || s == "SAME") return Padding::Same;
  throw ValueError(cat("padding must be 'valid' or 'same', got '", s, "'"));
}

void keras_padding(int in, int k, int stride, Padding pad, int& out, int& before, int& after) {
  if (pad == Padding::Valid) {
    out = in >= k ? (in - k) / stride + 1 : 0;
    before = after = 0;
    return;
  }
  // In 64 bits: in + stride, or the padding of a huge kernel, can exceed int.
  out = static_cast<int>((static_cast<long long>(in) + stride - 1) / stride);
  const long long total = std::max((static_cast<long long>(out) - 1) * stride + k - in, 0LL);
  before = static_cast<int>(total / 2);
  after = static_cast<int>(total - total / 2);
}

Conv2dGeometry Conv2dGeometry::make(int n, int h, int w, int c, int f, int kh, int kw, int sh, int sw, Padding pad) {
  HPCNN_CHECK_ARG(n > 0 && h > 0 && w > 0 && c > 0, "conv2d: input (", n, ", ", h, ", ", w, ", ", c,
                  ") must have positive dimensions");
  HPCNN_CHECK_ARG(f > 0 && kh > 0 && kw > 0, "conv2d: filters and kernel size must be positive, got filters=", f,
                  " kernel=(", kh, ", ", kw, ")");
  HPCNN_CHECK_ARG(sh > 0 && sw > 0, "conv2d: strides must be positive, got (", sh, ", ", sw, ")");
  Conv2dGeometry g{n, h, w, c, f, kh, kw, sh, sw, 0, 0, 0, 0, 0, 0};
  keras_padding(h, kh, sh, pad, g.oh, g.pad_top, g.pad_bottom);
  keras_padding(w, kw, sw, pad, g.ow, g.pad_left, g.pad_right);
  HPCNN_CHECK_ARG(g.oh > 0 && g.ow > 0, "conv2d: a ", kh, "x", kw, " kernel with 'valid' padding does not fit a ", h,
                  "x", w, " input (the output would be empty)");
  return g;
}

Pool2dGeometry Pool2dGeometry::make(int n, int h, int w, int c, int ph, int pw, int sh, int sw, Padding pad,
                                    const char* op) {
  HPCNN_CHECK_ARG(n > 0 && h > 0 && w > 0 && c > 0, op, ": input (", n, ", ", h, ", ", w, ", ", c,
                  ") must have positive dimensions");
  HPCNN_CHECK_ARG(ph > 0 && pw > 0 && sh > 0 && sw > 0, op, ": pool size and strides must be positive");
  Pool2dGeometry g{n, h, w, c, ph, pw, sh, sw, 0, 0, 0, 0, 0, 0};
  keras_padding(h, ph, sh, pad, g.oh, g.pad_top, g.pad_bottom);
  keras_padding(w, pw, sw, pad, g.ow, g.pad_left, g.pad_right);
  HPCNN_CHECK_ARG(g.oh > 0 && g.ow > 0, op, ": a ", ph, "x", pw, " pool with 'valid' padding does not fit a ",
                  h, "x", w, " input");
  return g;
}

// The augmentation's parameters (the layers check them with Keras' messages first; this guards
// every other caller).
void check_augment_spec(const AugmentSpec& s) {
  if (s.kind == AugmentKind::Translate) {
    for (float f : {s.height_lo, s.height_hi, s.width_lo, s.width_hi})
      HPCNN_CHECK_ARG(std::isfinite(f) && f >= -1.f && f <= 1.f, "RandomTranslation: factors must be in [-1, 1], got ",
                      f);
    HPCNN_CHECK_ARG(s.height_lo <= s.height_hi && s.width_lo <= s.width_hi,
                    "RandomTranslation: a factor's lower bound exceeds its upper bound");
    HPCNN_CHECK_ARG(std::isfinite(s.fill_value), "RandomTranslation: fill_value must be finite, got ", s.fill_value);
  } else if (s.kind == AugmentKind::Zoom) {
    // Keras: factors in (-1, 1]; a zoom of 1 + factor in (0, 2] (a lower bound of -1 from a
    // factor 1.0, the range [-1, 1], reaches 0: every pixel reads the centre).
    for (float f : {s.height_lo, s.height_hi, s.width_lo, s.width_hi})
      HPCNN_CHECK_ARG(std::isfinite(f) && f >= -1.f && f <= 1.f, "RandomZoom: factors must be in [-1, 1], got ", f);
    HPCNN_CHECK_ARG(s.height_lo <= s.height_hi && s.width_lo <= s.width_hi,
                    "RandomZoom: a factor's lower bound exceeds its upper bound");
    HPCNN_CHECK_ARG(std::isfinite(s.fill_value), "RandomZoom: fill_value must be finite, got ", s.fill_value);
  } else if (s.kind == AugmentKind::Rotate) {
    // Keras checks only that a range reaches into [-1, 1]; a turn beyond it is still a rotation.
    HPCNN_CHECK_ARG(std::isfinite(s.rotation_lo) && std::isfinite(s.rotation_hi) && s.rotation_lo <= s.rotation_hi &&
                    std::fabs(s.rotation_lo) <= 1e6f && std::fabs(s.rotation_hi) <= 1e6f,
                    "RandomRotation: the factor must be a finite range (lower <= upper), got [", s.rotation_lo, ", ",
                    s.rotation_hi, "]");
    HPCNN_CHECK_ARG(std::isfinite(s.fill_value), "RandomRotation: fill_value must be finite, got ", s.fill_value);
  } else if (s.kind == AugmentKind::Crop) {
    HPCNN_CHECK_ARG(s.crop_h > 0 && s.crop_w > 0, "RandomCrop: height and width must be > 0, got ", s.crop_h, "x",
                    s.crop_w);
    HPCNN_CHECK_ARG(s.pad_top >= 0 && s.pad_bottom >= 0 && s.pad_left >= 0 && s.pad_right >= 0,
                    "RandomCrop: padding must be >= 0");
  }
}

void augment_output_hw(const AugmentSpec& s, int h, int w, int& oh, int& ow) {
  check_augment_spec(s);
  HPCNN_CHECK_ARG(h > 0 && w > 0, "augmentation: the input's height and width must be > 0, got ", h, "x", w);
  oh = h;
  ow = w;
  if (s.kind == AugmentKind::Crop) {
    const long long ph = static_cast<long long>(h) + s.pad_top + s.pad_bottom;
    const long long pw = static_cast<long long>(w) + s.pad_left + s.pad_right;
    HPCNN_CHECK_ARG(s.crop_h <= ph && s.crop_w <= pw, "RandomCrop(", s.crop_h, ", ", s.crop_w, "): the input is ",
                    ph, "x", pw, ", smaller than the crop (hpcnn crops, it does not resize: pad the input first, "
                    "e.g. with ZeroPadding2D)");
    oh = s.crop_h;
    ow = s.crop_w;
  }
}

}  // namespace hpcnn
