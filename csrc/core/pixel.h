// How a stored uint8 pixel becomes a float input: x * scale + shift (scale = 1/255 or
// 1/(255*std), shift = -mean/std). One definition for every place that decodes -- the loader's
// producer (data/, on the CPU) and the decode op (ops/, CPU and GPU) -- so all give the same bits.
// HPCNN_HD: the GPU kernel calls the very same function.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace hpcnn::pixel {

HPCNN_HD float decode_u8(uint8_t x, float scale, float shift) { return static_cast<float>(x) * scale + shift; }

}  // namespace hpcnn::pixel
