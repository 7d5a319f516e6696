// depthwise_conv2d's dispatch (ops.h): checks, then depthwise_conv2d_cpu.cpp or
// depthwise_conv2d_cuda.cu (depthwise_conv2d.h).
#include "ops/ops.h"

#include "ops/depthwise_conv2d.h"
#include "ops/dispatch.h"

namespace hpcnn {

DepthwiseGeometry DepthwiseGeometry::make(int n, int h, int w, int c, int m, int kh, int kw, int sh, int sw, int dh,
                                          int dw, Padding pad) {
  HPCNN_CHECK_ARG(n > 0 && h > 0 && w > 0 && c > 0, "depthwise_conv2d: input (", n, ", ", h, ", ", w, ", ", c,
                  ") must have positive dimensions");
  HPCNN_CHECK_ARG(m > 0, "depthwise_conv2d: depth_multiplier must be positive, got ", m);
  HPCNN_CHECK_ARG(kh > 0 && kw > 0, "depthwise_conv2d: kernel size must be positive, got (", kh, ", ", kw, ")");
  HPCNN_CHECK_ARG(sh > 0 && sw > 0, "depthwise_conv2d: strides must be positive, got (", sh, ", ", sw, ")");
  HPCNN_CHECK_ARG(dh > 0 && dw > 0, "depthwise_conv2d: dilation_rate must be positive, got (", dh, ", ", dw, ")");
  HPCNN_CHECK_ARG((long long)c * m < (1LL << 31), "depthwise_conv2d: ", c, " channels x depth_multiplier ", m,
                  " is too many output channels");
  DepthwiseGeometry g{n, h, w, c, m, kh, kw, sh, sw, dh, dw, 0, 0, 0, 0, 0, 0};
  // The dilated kernel's extent, in 64 bits (a huge dilation must not overflow).
  const long long eh = (long long)(kh - 1) * dh + 1, ew = (long long)(kw - 1) * dw + 1;
  HPCNN_CHECK_ARG(eh < (1LL << 30) && ew < (1LL << 30), "depthwise_conv2d: the dilated kernel is too large");
  keras_padding(h, static_cast<int>(eh), sh, pad, g.oh, g.pad_top, g.pad_bottom);
  keras_padding(w, static_cast<int>(ew), sw, pad, g.ow, g.pad_left, g.pad_right);
  HPCNN_CHECK_ARG(g.oh > 0 && g.ow > 0, "depthwise_conv2d: a ", kh, "x", kw, " kernel (dilation ", dh, "x", dw,
                  ") with 'valid' padding does not fit a ", h, "x", w, " input (the output would be empty)");
  return g;
}

namespace ops {

DepthwiseGeometry depthwise_conv2d_geometry(const Tensor& x, const Tensor& w, int sh, int sw, int dh, int dw,
                                            Padding pad) {
  const char* op = "depthwise_conv2d";
  expect_f32(op, "input", x);
  expect_f32(op, "kernel", w);
  HPCNN_CHECK_ARG(x.rank() == 4, op, ": input must be 4-D (batch, height, width, channels), got shape ",
                  shape_str(x.shape()));
  HPCNN_CHECK_ARG(w.rank() == 4, op, ": kernel must be 4-D (kh, kw, channels, depth_multiplier), got shape ",
                  shape_str(w.shape()));
  HPCNN_CHECK_ARG(w.dim(2) == x.dim(3), op, ": kernel ", shape_str(w.shape()), " is for ", w.dim(2),
                  " channels but the input ", shape_str(x.shape()), " has ", x.dim(3));
  return DepthwiseGeometry::make(as_int(x.dim(0), op), as_int(x.dim(1), op), as_int(x.dim(2), op),
                                 as_int(x.dim(3), op), as_int(w.dim(3), op), as_int(w.dim(0), op),
                                 as_int(w.dim(1), op), sh, sw, dh, dw, pad);
}

void depthwise_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, int sh, int sw, int dh,
                              int dw, Padding pad, bool relu, float relu_max) {
  const DepthwiseGeometry g = depthwise_conv2d_geometry(x, w, sh, sw, dh, dw, pad);
  const char* op = "depthwise_conv2d";
  if (b.defined()) expect_channels(op, "bias", b, g.oc());
  expect_shape(op, "output", y, {g.n, g.oh, g.ow, g.oc()});
  same_device(op, {&x, &w, &b, &y});
  const float* bp = b.defined() ? b.f32() : nullptr;
  HPCNN_CHECK_ARG(relu_max > 0, op, ": the ReLU's cap must be positive, got ", relu_max);
  HPCNN_DISPATCH(x.device(), cpu::depthwise_conv2d_forward(g, x.f32(), w.f32(), bp, y.f32(), relu, relu_max),
                 cuda::depthwise_conv2d_forward(device_index, g, x.f32(), w.f32(), bp, y.f32(), relu, relu_max));
}

void depthwise_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor* dx, Tensor& dw_out,
                               Tensor& db, int sh, int sw, int dh, int dw, Padding pad) {
  const DepthwiseGeometry g = depthwise_conv2d_geometry(x, w, sh, sw, dh, dw, pad);
  const char* op = "depthwise_conv2d backward";
  expect_shape(op, "output gradient", dy, {g.n, g.oh, g.ow, g.oc()});
  if (dx) expect_shape(op, "input gradient", *dx, x.shape());
  expect_shape(op, "kernel gradient", dw_out, w.shape());
  if (db.defined()) expect_channels(op, "bias gradient", db, g.oc());
  same_device(op, {&x, &w, &dy, dx, &dw_out, &db});
  float* dxp = data_or_null(dx);
  float* dbp = db.defined() ? db.f32() : nullptr;
  HPCNN_DISPATCH(x.device(), cpu::depthwise_conv2d_backward(g, x.f32(), w.f32(), dy.f32(), dxp, dw_out.f32(), dbp),
                 cuda::depthwise_conv2d_backward(device_index, g, x.f32(), w.f32(), dy.f32(), dxp, dw_out.f32(), dbp));
}

}  // namespace ops
}  // namespace hpcnn
