// Output sizes and padding under Keras rules, shared by both backends.
#include <algorithm>

#include "core/errors.h"
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

}  // namespace hpcnn
