// How a stored uint8 pixel becomes a float input: x * scale + shift (scale = 1/255 or
// 1/(255*std), shift = -mean/std). One definition for every place that decodes -- the loader's
// producer (data/, on the CPU) and the decode op (ops/, CPU and GPU) -- so all give the same bits.
// HPCNN_HD: the GPU kernel calls the very same function. Rounded once (a fused multiply-add) on
// purpose: written as `x * scale + shift`, whether it is fused is up to each compiler (nvcc fuses
// by default, g++ only with FMA code generation), and a batch decoded on the GPU would then differ
// in the last bit from one decoded on the host.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace hpcnn::pixel {

HPCNN_HD float decode_u8(uint8_t x, float scale, float shift) { return fmaf(static_cast<float>(x), scale, shift); }

}  // namespace hpcnn::pixel
