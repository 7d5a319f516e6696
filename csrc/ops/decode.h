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
void decode_u8(int device, long long count, int channels, const uint8_t* x, float* y, const float* scale,
               const float* shift);
}

}  // namespace hpcnn
