// A batch of uint8 pixels (NHWC, channel innermost) to float: y = x * scale[c] + shift[c].
// Used by the data pipeline (CPU, producer side) and on the GPU after a uint8 upload.
// scale and shift are host arrays of `channels` floats on both backends.
// CPU: decode_cpu.cpp; CUDA: decode_cuda.cu.
#pragma once

#include <cstdint>

namespace hpcnn {

namespace cpu {
void decode_u8(long long count, int channels, const uint8_t* x, float* y, const float* scale, const float* shift);
}

namespace cuda {
// The CUDA kernel takes the per-channel values as kernel arguments: at most this many channels
// (a decode with one value for all channels works for any count: view the batch as 1 channel).
constexpr int kDecodeMaxChannels = 64;
void decode_u8(int device, long long count, int channels, const uint8_t* x, float* y, const float* scale,
               const float* shift);
}

}  // namespace hpcnn
