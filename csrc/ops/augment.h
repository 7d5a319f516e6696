// Image augmentation of a batch, NHWC: Keras 3's RandomFlip, RandomTranslation, RandomRotation,
// RandomZoom and RandomCrop (a crop may read its input padded by zeros: ZeroPadding2D then
// RandomCrop, the CIFAR recipe "pad 4, crop 32" in one pass). x (n, h, w, c) -> y (n, oh, ow, c);
// oh, ow = h, w except for a crop.
//
// What each sample becomes (augment_body.h has it as code):
//   per axis (rows, columns) of size `size`, output index o reads the input at the coordinate
//       src(o) = fma(coef, size, base + dir * o)
//     flip          base = size - 1, dir = -1 (flipped) or the identity (base 0, dir 1, coef 0)
//     crop          base = offset - pad (offset: where the crop starts in the padded input), dir 1
//     translation   coef = -fraction (so src = o - fraction * size), base 0, dir 1
//   rotation and zoom (not separable: a 2-D affine map, Keras 3's affine_transform matrix): output
//   pixel (row y, column x) reads the input at
//       column = a0 * x + a1 * y + a2,   row = b0 * x + b1 * y + b2   (fmaf(a0, x, fmaf(a1, y, a2)))
//     rotation      by the angle t (radians) about the centre (cx, cy) = ((w - 1) / 2, (h - 1) / 2):
//                   a0 = cos t, a1 = -sin t, a2 = cx - cx * a0 - cy * a1,
//                   b0 = sin t, b1 = cos t,  b2 = cy - cx * b0 - cy * b1
//                   (Keras: a positive factor turns the image counter-clockwise)
//     zoom          a0 = zx, a2 = cx * (1 - zx), b1 = zy, b2 = cy * (1 - zy), a1 = b0 = 0; zoom
//                   zx = 1 + the width's factor: above 1 reads a larger area (Keras 3: a positive
//                   factor zooms out), below 1 a smaller one (zooms in)
//   and each of the two coordinates is sampled like an axis' above;
//   sampled with the interpolation (nearest: the index round(src), halves away from zero;
//   bilinear: indices floor(src) and floor(src) + 1, weights 1 - frac and frac, frac =
//   src - floor(src)), each integer index outside [0, size) fixed by the fill mode (constant: the
//   value fill_value; reflect: d c b a | a b c d | d c b a; wrap: a b c d | a b c d | a b c d;
//   nearest: a a a a | a b c d | d d d d) -- what Keras 3's affine_transform computes. A crop
//   fills with zeros (the padding), nearest interpolation (its coordinates are integers).
//
// The random draws. A batch's sample i is the global row r = first_row + i (its row in the global
// batch: a data-parallel replica's share starts at its first row) and draws the four 32-bit words
// rng::bits4(seed, stream, r); u(k) = to_unit_float(word k) in [0, 1):
//   flip          flipped when u(0) <= 0.5, along every axis of the mode (Keras 3:
//                 "horizontal_and_vertical" flips both axes of the same samples)
//   translation   fraction = fma(u(0), hi - lo, lo) of the height, fma(u(1), hi - lo, lo) of the
//                 width (the factors' range [lo, hi])
//   crop          offset = (word >> 8) * (range + 1) >> 24 in [0, range], range = padded size -
//                 crop size: word 0 for the rows, word 1 for the columns
//   rotation      the turn f = fma(u(0), hi - lo, lo) (a fraction of a full turn, Keras' factor);
//                 t = (f * 360) * float(pi / 180) radians, as Keras computes it; cos t and sin t
//                 from body::sin_cos (the same bits on the host and the device)
//   zoom          zy = fma(u(0), hi - lo, 1 + lo) from the height's range; zx likewise from the
//                 width's range with u(1), or zx = zy when the layer has no width_factor (Keras:
//                 the aspect ratio kept)
// A model draws stream = step * 1024 + the layer's index (nn::StepContext: dropout's rule), so
// the images depend on (seed, step, global row, layer) only: not on threads, replicas or devices.
// In inference (AugmentDraw::training false) a flip, a translation, a rotation and a zoom are the
// identity and a crop takes the centre: offset = range / 2 (rounded down). A layer built with
// Keras' seed= draws with a key of its own instead (nn/augmentation.h).
//
// CPU: augment_cpu.cpp (reads the batch's rows of a uint8 or float32 source, decoding uint8 on
// the way: the batch stager's gather, decode and augmentation in one pass); CUDA: augment_cuda.cu
// (float32 to float32 on the device, after the batch's upload and decode).
#pragma once

#include <cstdint>

namespace hpcnn {

enum class AugmentKind { Flip, Translate, Crop, Rotate, Zoom };
// Keras' fill_mode (constant, reflect, wrap, nearest) and interpolation (nearest, bilinear).
enum class FillMode { Constant, Reflect, Wrap, Nearest };
enum class Interpolation { Nearest, Bilinear };

struct AugmentSpec {
  AugmentKind kind = AugmentKind::Flip;
  bool flip_rows = false, flip_cols = false;  // Flip: vertical, horizontal
  // Translate: the ranges [lo, hi] of the shift as a fraction of the height and of the width.
  // Zoom: the ranges of the zoom factor (1 + factor is the scale) of the height and the width.
  float height_lo = 0.f, height_hi = 0.f, width_lo = 0.f, width_hi = 0.f;
  bool zoom_keep_aspect = false;  // Zoom without a width factor: the width's zoom is the height's
  // Rotate: the range [lo, hi] of the angle as a fraction of a full turn (Keras' factor).
  float rotation_lo = 0.f, rotation_hi = 0.f;
  FillMode fill_mode = FillMode::Constant;  // Translate, Rotate, Zoom (a crop fills with zeros)
  float fill_value = 0.f;
  Interpolation interpolation = Interpolation::Nearest;
  // Crop: the output size, from the input with these zeros around it.
  int crop_h = 0, crop_w = 0;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// The batch: input (n, h, w, c), output (n, oh, ow, c).
struct AugmentGeometry {
  long long n = 0;
  int h = 0, w = 0, c = 0, oh = 0, ow = 0;
};

// Training (random, from the key) or inference (a crop's centre; anything else the identity).
struct AugmentDraw {
  bool training = false;
  uint64_t seed = 0, stream = 0;
  long long first_row = 0;  // the global row of the batch's first sample
};

// ValueError naming the layer for parameters out of range (a factor outside [-1, 1], ...).
void check_augment_spec(const AugmentSpec& s);
// The output's height and width for an input of (h, w), after check_augment_spec: ValueError
// naming the layer when a crop does not fit in the (padded) input.
void augment_output_hw(const AugmentSpec& s, int h, int w, int& oh, int& ow);

namespace cpu {
// What the CPU reads: sample i of the batch is row rows[i] of `x` (rows null: row i), uint8 (then
// decoded to float as pixel::decode_u8 with scale[ch], shift[ch]) or float32.
struct AugmentSource {
  const float* f32 = nullptr;
  const uint8_t* u8 = nullptr;
  const long long* rows = nullptr;
  const float* scale = nullptr;  // uint8 only: one per channel
  const float* shift = nullptr;
};
void augment(const AugmentGeometry& g, const AugmentSpec& s, const AugmentDraw& d, const AugmentSource& x, float* y);
}  // namespace cpu

namespace cuda {
void augment(int device, const AugmentGeometry& g, const AugmentSpec& s, const AugmentDraw& d, const float* x,
             float* y);
}  // namespace cuda

}  // namespace hpcnn
