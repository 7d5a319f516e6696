// The augmentation's dispatch (ops.h): checks, then augment_cpu.cpp or augment_cuda.cu (augment.h);
// augment_rows, the batch stager's fused gather-decode-augment pass, is host only.
#include "ops/ops.h"

#include <string>

#include "ops/augment.h"
#include "ops/dispatch.h"

namespace hpcnn::ops {

static AugmentGeometry augment_geometry(const char* op, const Tensor& x, const Tensor& y, long long n,
                                        const AugmentSpec& s) {
  HPCNN_CHECK_ARG(x.defined() && x.rank() == 4, op, ": input must be 4-D (batch, height, width, channels), got ",
                  x.defined() ? shape_str(x.shape()) : std::string("nothing"));
  AugmentGeometry g;
  g.n = n;
  g.h = as_int(x.dim(1), op);
  g.w = as_int(x.dim(2), op);
  g.c = as_int(x.dim(3), op);
  augment_output_hw(s, g.h, g.w, g.oh, g.ow);
  expect_shape(op, "output", y, {n, g.oh, g.ow, g.c});
  return g;
}

void augment(const Tensor& x, Tensor& y, const AugmentSpec& s, const AugmentDraw& d) {
  expect_f32("augment", "input", x);
  const AugmentGeometry g = augment_geometry("augment", x, y, x.rank() == 4 ? x.dim(0) : 0, s);
  same_device("augment", {&x, &y});
  if (y.numel() == 0) return;
  HPCNN_DISPATCH(x.device(), cpu::augment(g, s, d, cpu::AugmentSource{x.f32()}, y.f32()),
                 cuda::augment(device_index, g, s, d, x.f32(), y.f32()));
}

void augment_rows(const Tensor& x, const long long* rows, const float* scale, const float* shift, Tensor& y,
                  const AugmentSpec& s, const AugmentDraw& d) {
  HPCNN_CHECK_ARG(x.defined() && x.device().is_cpu() && y.device().is_cpu(), "augment_rows: host tensors only");
  HPCNN_CHECK_ARG(x.dtype() == DType::F32 || x.dtype() == DType::U8, "augment_rows: input must be float32 or uint8, "
                  "got ", x.str());
  HPCNN_CHECK_ARG(y.defined() && y.rank() == 4, "augment_rows: output must be 4-D, got ",
                  y.defined() ? shape_str(y.shape()) : std::string("nothing"));
  const AugmentGeometry g = augment_geometry("augment_rows", x, y, y.dim(0), s);
  const long long have = x.dim(0);
  if (rows) {
    for (long long i = 0; i < g.n; ++i)
      HPCNN_CHECK_ARG(rows[i] >= 0 && rows[i] < have, "augment_rows: row index ", rows[i], " is outside the input's ",
                      have, " rows");
  } else {
    HPCNN_CHECK_ARG(g.n <= have, "augment_rows: ", g.n, " output rows from an input of ", have);
  }
  const bool u8 = x.dtype() == DType::U8;
  HPCNN_CHECK_ARG(!u8 || (scale && shift), "augment_rows: a uint8 input needs its decode (scale, shift)");
  if (y.numel() == 0) return;
  cpu::AugmentSource src;
  if (u8) src.u8 = x.u8();
  else src.f32 = x.f32();
  src.rows = rows;
  src.scale = scale;
  src.shift = shift;
  cpu::augment(g, s, d, src, y.f32());
}

}  // namespace hpcnn::ops
