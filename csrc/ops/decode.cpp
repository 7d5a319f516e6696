// decode's dispatch (ops.h: uint8 to float32): checks, then decode_cpu.cpp or decode_cuda.cu (decode.h).
#include "ops/ops.h"

#include "ops/decode.h"
#include "ops/dispatch.h"

namespace hpcnn::ops {

void decode_u8(const Tensor& x, Tensor& y, const float* scale, const float* shift) {
  HPCNN_CHECK_ARG(x.dtype() == DType::U8, "decode: input must be uint8, got ", x.str());
  HPCNN_CHECK_ARG(x.rank() >= 1, "decode: input must have a channel axis");
  expect_shape("decode", "output", y, x.shape());
  same_device("decode", {&x, &y});
  int channels = as_int(x.dim(-1), "decode");
  HPCNN_DISPATCH(x.device(), cpu::decode_u8(x.numel(), channels, x.u8(), y.f32(), scale, shift),
                 cuda::decode_u8(device_index, x.numel(), channels, x.u8(), y.f32(), scale, shift));
}

}  // namespace hpcnn::ops
