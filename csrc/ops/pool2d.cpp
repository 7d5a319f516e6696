// The two 2-D window pools' geometry read from their tensors (pool2d.h): one reading of an NHWC
// input for max_pool2d and avg_pool2d alike, with the pool's name in its errors, and the forward
// pass's check of its output; maxpool2d.cpp and avgpool2d.cpp dispatch with it.
#include "ops/pool2d.h"

#include "ops/dispatch.h"
#include "ops/ops.h"

namespace hpcnn::ops {

Pool2dGeometry pool2d_geometry(const char* op, const Tensor& x, int ph, int pw, int sh, int sw, Padding pad) {
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() == 4, op, ": input must be 4-D (batch, height, width, channels), got shape ",
                  shape_str(x.shape()));
  HPCNN_CHECK_ARG(x.dim(0) > 0, op, ": batch size is 0 (input shape ", shape_str(x.shape()), ")");
  return Pool2dGeometry::make(as_int(x.dim(0), op), as_int(x.dim(1), op), as_int(x.dim(2), op), as_int(x.dim(3), op),
                              ph, pw, sh, sw, pad, op);
}

Pool2dGeometry maxpool2d_geometry(const Tensor& x, int ph, int pw, int sh, int sw, Padding pad) {
  return pool2d_geometry("max_pool2d", x, ph, pw, sh, sw, pad);
}

Pool2dGeometry avgpool2d_geometry(const Tensor& x, int ph, int pw, int sh, int sw, Padding pad) {
  return pool2d_geometry("avg_pool2d", x, ph, pw, sh, sw, pad);
}

Pool2dGeometry pool2d_forward_geometry(const char* op, const Tensor& x, const Tensor& y, int ph, int pw, int sh, int sw,
                                       Padding pad) {
  const Pool2dGeometry g = pool2d_geometry(op, x, ph, pw, sh, sw, pad);
  expect_shape(op, "output", y, {g.n, g.oh, g.ow, g.c});
  same_device(op, {&x, &y});
  return g;
}

}  // namespace hpcnn::ops
