// uint8 -> float32 decode of a batch on the GPU (after a uint8 upload: 4x fewer bytes over PCIe),
// y = pixel::decode_u8(x, scale[c], shift[c]). scale/shift are host arrays; they travel as kernel
// arguments (by value), so no extra copy or synchronisation is needed.
#include "core/cuda_context.h"
#include "core/pixel.h"
#include "ops/decode.h"

namespace hpcnn::cuda {

namespace {

constexpr int kMaxChannels = kDecodeMaxChannels;  // 2 x 64 floats = 512 bytes of kernel parameters

struct Affine {
  float scale[kMaxChannels], shift[kMaxChannels];
};

__global__ void decode_kernel(long long count, int channels, const uint8_t* x, float* y, Affine a) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    int c = static_cast<int>(i % channels);
    y[i] = pixel::decode_u8(x[i], a.scale[c], a.shift[c]);
  }
}

}  // namespace

void decode_u8(int device, long long count, int channels, const uint8_t* x, float* y, const float* scale,
               const float* shift) {
  HPCNN_CHECK_ARG(channels > 0 && channels <= kMaxChannels, "decode on the GPU: ", channels,
                  " channels; at most ", kMaxChannels, " are supported (images have 1 to 4)");
  ContextLock ctx(device);
  if (count == 0) return;
  Affine a{};
  for (int c = 0; c < channels; ++c) {
    a.scale[c] = scale[c];
    a.shift[c] = shift[c];
  }
  decode_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, channels, x, y, a);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
