// The input check both 2-D window pools' dispatch shares (maxpool2d.cpp, avgpool2d.cpp): one
// reading of an NHWC tensor into the window geometry (pool2d.h), with the pool's name in its errors.
#include "ops/pool2d.h"

#include "ops/dispatch.h"

namespace hpcnn::ops {

Pool2dGeometry pool2d_geometry(const char* op, const Tensor& x, int ph, int pw, int sh, int sw, Padding pad) {
  expect_f32(op, "input", x);
  HPCNN_CHECK_ARG(x.rank() == 4, op, ": input must be 4-D (batch, height, width, channels), got shape ",
                  shape_str(x.shape()));
  HPCNN_CHECK_ARG(x.dim(0) > 0, op, ": batch size is 0 (input shape ", shape_str(x.shape()), ")");
  return Pool2dGeometry::make(as_int(x.dim(0), op), as_int(x.dim(1), op), as_int(x.dim(2), op), as_int(x.dim(3), op),
                              ph, pw, sh, sw, pad, op);
}

}  // namespace hpcnn::ops
