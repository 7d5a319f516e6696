// Resizing a decoded image as TensorFlow's tf.image.resize does it (image_dataset_from_directory's
// rows, python/hpcnn/image_folders/resize.py): half-pixel centres, no antialiasing, float32
// arithmetic in TensorFlow's order, so that a row matches Keras' to float32 rounding.
//   bilinear: src = (x + 0.5) * (in / out) - 0.5, lo = max(floor(src), 0), hi = min(ceil(src), in - 1),
//             d = src - floor(src); top = tl + (tr - tl) * dx, bottom = bl + (br - bl) * dx,
//             out = top + (bottom - top) * dy
//   nearest:  src = min(floor((x + 0.5) * (in / out)), in - 1)
// The output is float32, or uint8 rounded to the nearest integer (what an images file stores).
#pragma once

#include <cstdint>
#include <string>

namespace hpcnn::data {

struct ImageShape {
  long long height = 0, width = 0, channels = 0;
};

// `src`: uint8 (in.height, in.width, in.channels), C-contiguous. `out_f32` or `out_u8` (one of
// them non-null): (out_h, out_w, in.channels). `method`: "bilinear" or "nearest" (ValueError else).
void resize_image(const uint8_t* src, ImageShape in, long long out_h, long long out_w, const std::string& method,
                  float* out_f32, uint8_t* out_u8);

}  // namespace hpcnn::data
