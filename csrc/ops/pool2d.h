// The geometry the 2-D window pools share (max_pool2d: maxpool2d.h, avg_pool2d: avgpool2d.h):
// NHWC input (n, h, w, c), a (ph, pw) window moved by strides (sh, sw), Keras' padding rules
// (conv2d.h), output (n, oh, ow, c). Both pools, on both backends, take their windows from
// `window` below, so the CPU loops, the GPU kernels and the host self-test cannot disagree on them.
#pragma once

#include "core/hd.h"
#include "ops/conv2d.h"

namespace hpcnn {

struct Pool2dGeometry {
  int n, h, w, c;
  int ph, pw;  // pool size
  int sh, sw;
  int oh, ow;
  int pad_top, pad_left, pad_bottom, pad_right;
  // ValueError (naming `op`) when the output would be empty or arguments are non-positive.
  static Pool2dGeometry make(int n, int h, int w, int c, int ph, int pw, int sh, int sw, Padding pad,
                             const char* op = "max_pool2d");

  HPCNN_HD long long input_count() const { return (long long)n * h * w * c; }
  HPCNN_HD long long output_count() const { return (long long)n * oh * ow * c; }

  // The in-bounds window of output (oy, ox): rows [y0, y1), columns [x0, x1). Padded positions
  // are outside it (max pooling: they never win; average pooling: they are not counted).
  HPCNN_HD void window(int oy, int ox, int& y0, int& y1, int& x0, int& x1) const {
    y0 = oy * sh - pad_top;
    x0 = ox * sw - pad_left;
    y1 = y0 + ph < h ? y0 + ph : h;
    x1 = x0 + pw < w ? x0 + pw : w;
    y0 = y0 > 0 ? y0 : 0;
    x0 = x0 > 0 ? x0 : 0;
  }
};

class Tensor;  // core/tensor.h

namespace ops {
// The geometry of a window pool (op: "max_pool2d" or "avg_pool2d") over input x, an NHWC tensor,
// checked (a ValueError names `op`). Both pools' dispatch reads its input so (pool2d.cpp, which
// also defines ops.h's maxpool2d_geometry and avgpool2d_geometry with it).
Pool2dGeometry pool2d_geometry(const char* op, const Tensor& x, int ph, int pw, int sh, int sw, Padding pad);
// The same for a forward pass, with its output y checked too: the pooled shape, on x's device.
Pool2dGeometry pool2d_forward_geometry(const char* op, const Tensor& x, const Tensor& y, int ph, int pw, int sh, int sw,
                                       Padding pad);
}  // namespace ops

}  // namespace hpcnn
