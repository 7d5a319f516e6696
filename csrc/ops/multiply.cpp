// multiply's dispatch (ops.h): the broadcast geometry checked, then multiply_cpu.cpp or
// multiply_cuda.cu (multiply.h).
#include "ops/ops.h"

#include "ops/dispatch.h"
#include "ops/multiply.h"

namespace hpcnn::ops {

namespace {

// Packed strides of `s` in y's rank, 0 on the axes where s is 1 and y is not.
void strides_into(const Shape& s, const Shape& y, long long* out) {
  long long stride = 1;
  for (int d = static_cast<int>(y.size()) - 1; d >= 0; --d) {
    out[d] = (s[d] == 1 && y[d] != 1) ? 0 : stride;
    stride *= s[d];
  }
}

}  // namespace

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  HPCNN_CHECK_ARG(a.size() == b.size(), op, ": inputs of different ranks cannot be multiplied: ", shape_str(a),
                  " and ", shape_str(b));
  Shape y(a.size());
  for (size_t d = 0; d < a.size(); ++d) {
    HPCNN_CHECK_ARG(a[d] == b[d] || a[d] == 1 || b[d] == 1, op, ": inputs have incompatible shapes ", shape_str(a),
                    " and ", shape_str(b), " (each axis must agree or be 1)");
    y[d] = a[d] == 1 ? b[d] : a[d];
  }
  return y;
}

BroadcastGeometry multiply_geometry(const Tensor& a, const Tensor& b, const char* op) {
  expect_f32(op, "first input", a);
  expect_f32(op, "second input", b);
  HPCNN_CHECK_ARG(a.rank() >= 1 && a.rank() <= kMaxBroadcastRank, op, ": inputs must have 1 to ", kMaxBroadcastRank,
                  " axes, got ", shape_str(a.shape()));
  const Shape y = broadcast_shape(a.shape(), b.shape(), op);
  HPCNN_CHECK_ARG(a.dim(0) == b.dim(0), op, ": the batch axis is not broadcast: ", shape_str(a.shape()), " and ",
                  shape_str(b.shape()));
  BroadcastGeometry g;
  g.rank = static_cast<int>(y.size());
  for (int d = 0; d < g.rank; ++d) g.dims[d] = y[d];
  strides_into(a.shape(), y, g.sa);
  strides_into(b.shape(), y, g.sb);
  return g;
}

void multiply_forward(const Tensor& a, const Tensor& b, Tensor& y) {
  const BroadcastGeometry g = multiply_geometry(a, b, "multiply");
  expect_shape("multiply", "output", y, Shape(g.dims, g.dims + g.rank));
  same_device("multiply", {&a, &b, &y});
  if (y.numel() == 0) return;
  HPCNN_DISPATCH(y.device(), cpu::multiply_forward(g, a.f32(), b.f32(), y.f32()),
                 cuda::multiply_forward(device_index, g, a.f32(), b.f32(), y.f32()));
}

void multiply_backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor* da, Tensor* db) {
  const char* op = "multiply backward";
  const BroadcastGeometry g = multiply_geometry(a, b, op);
  expect_shape(op, "output gradient", dy, Shape(g.dims, g.dims + g.rank));
  if (da) expect_shape(op, "first input's gradient", *da, a.shape());
  if (db) expect_shape(op, "second input's gradient", *db, b.shape());
  same_device(op, {&a, &b, &dy, da, db});
  if (dy.numel() == 0) return;
  float* pa = data_or_null(da);
  float* pb = data_or_null(db);
  HPCNN_DISPATCH(dy.device(), cpu::multiply_backward(g, a.f32(), b.f32(), dy.f32(), pa, a.numel(), pb, b.numel()),
                 cuda::multiply_backward(device_index, g, a.f32(), b.f32(), dy.f32(), pa, a.numel(), pb, b.numel()));
}

}  // namespace hpcnn::ops
