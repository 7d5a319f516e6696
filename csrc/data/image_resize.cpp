#include "data/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/errors.h"

namespace hpcnn::data {

namespace {

struct Tap {
  long long lo, hi;
  float d;
};

// TensorFlow's HalfPixelScaler and its bilinear interpolation taps, in float32.
std::vector<Tap> bilinear_taps(long long in, long long out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<Tap> taps(static_cast<size_t>(out));
  for (long long i = 0; i < out; ++i) {
    const float src = (static_cast<float>(i) + 0.5f) * scale - 0.5f;
    const float f = std::floor(src);
    taps[i].lo = std::max(static_cast<long long>(f), 0LL);
    taps[i].hi = std::min(static_cast<long long>(std::ceil(src)), in - 1);
    taps[i].d = src - f;
  }
  return taps;
}

std::vector<long long> nearest_taps(long long in, long long out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<long long> taps(static_cast<size_t>(out));
  for (long long i = 0; i < out; ++i)
    taps[i] = std::min(static_cast<long long>(std::floor((static_cast<float>(i) + 0.5f) * scale)), in - 1);
  return taps;
}

inline void store(float v, size_t at, float* f32, uint8_t* u8) {
  if (f32) {
    f32[at] = v;
  } else {
    const float r = std::nearbyint(v);  // round half to even, as numpy.rint
    u8[at] = static_cast<uint8_t>(std::clamp(r, 0.0f, 255.0f));
  }
}

}  // namespace

void resize_image(const uint8_t* src, ImageShape in, long long out_h, long long out_w, const std::string& method,
                  float* out_f32, uint8_t* out_u8) {
  HPCNN_CHECK_ARG(in.height >= 1 && in.width >= 1 && in.channels >= 1, "resize_image: empty image (",
                  in.height, "x", in.width, "x", in.channels, ")");
  HPCNN_CHECK_ARG(out_h >= 1 && out_w >= 1, "resize_image: the size must be >= 1, got ", out_h, "x", out_w);
  HPCNN_CHECK_ARG((out_f32 != nullptr) != (out_u8 != nullptr), "resize_image: one output");
  const long long c = in.channels, row = in.width * c;
  if (method == "nearest") {
    const auto ys = nearest_taps(in.height, out_h), xs = nearest_taps(in.width, out_w);
    for (long long y = 0; y < out_h; ++y)
      for (long long x = 0; x < out_w; ++x)
        for (long long k = 0; k < c; ++k)
          store(static_cast<float>(src[ys[y] * row + xs[x] * c + k]), static_cast<size_t>((y * out_w + x) * c + k),
                out_f32, out_u8);
    return;
  }
  HPCNN_CHECK_ARG(method == "bilinear", "resize_image: method must be 'bilinear' or 'nearest', got '", method, "'");
  const auto ys = bilinear_taps(in.height, out_h), xs = bilinear_taps(in.width, out_w);
  std::vector<float> top(static_cast<size_t>(out_w * c)), bottom(top.size());
  auto across = [&](long long y, std::vector<float>& out) {  // one source row, interpolated across
    const uint8_t* r = src + y * row;
    for (long long x = 0; x < out_w; ++x) {
      const uint8_t* left = r + xs[x].lo * c;
      const uint8_t* right = r + xs[x].hi * c;
      for (long long k = 0; k < c; ++k) {
        const float l = left[k];
        out[x * c + k] = l + (static_cast<float>(right[k]) - l) * xs[x].d;
      }
    }
  };
  long long have_top = -1, have_bottom = -1;
  for (long long y = 0; y < out_h; ++y) {
    if (ys[y].lo != have_top) {
      if (ys[y].lo == have_bottom) {
        top.swap(bottom);
        std::swap(have_top, have_bottom);
      } else {
        across(ys[y].lo, top);
        have_top = ys[y].lo;
      }
    }
    if (ys[y].hi != have_bottom) {
      across(ys[y].hi, bottom);
      have_bottom = ys[y].hi;
    }
    const float dy = ys[y].d;
    const size_t base = static_cast<size_t>(y * out_w * c);
    for (long long i = 0; i < out_w * c; ++i) store(top[i] + (bottom[i] - top[i]) * dy, base + i, out_f32, out_u8);
  }
}

}  // namespace hpcnn::data
