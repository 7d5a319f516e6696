// The index arithmetic of the shared kernels in cuda_kernels.cu (zero padding and crop,
// deterministic column sums), as HPCNN_HD functions of (block, thread) or of one element. The
// kernels are thin loops around these; the host self-test (diagnostics/cuda_kernel_selftest.cpp)
// runs the same functions in emulated grids, so CI checks the GPU's indexing without a GPU.
// Plain C++ under g++ (HPCNN_HD = inline), __host__ __device__ under nvcc.
#pragma once

#include "core/hd.h"

namespace hpcnn::cuda::body {

// ------------------------------------------------------------------ zero padding / crop (NHWC)
// The coordinates (b, y, x, ci) of flat index i into an NHWC array of (h, w, c) images.
struct Nhwc {
  long long b;
  int y, x, ci;
};
HPCNN_HD Nhwc nhwc_of(long long i, int h, int w, int c) {
  long long t = i;
  int ci = static_cast<int>(t % c); t /= c;
  int x = static_cast<int>(t % w); t /= w;
  int y = static_cast<int>(t % h);
  return {t / h, y, x, ci};
}

// Padded output element i of (n, h+pt+pb, w+pl+pr, c) = (n, oh, ow, c).
HPCNN_HD float pad_at(const float* in, int h, int w, int c, int pt, int pl, int oh, int ow, long long i) {
  const Nhwc o = nhwc_of(i, oh, ow, c);
  int iy = o.y - pt, ix = o.x - pl;
  return (iy >= 0 && iy < h && ix >= 0 && ix < w) ? in[((o.b * h + iy) * w + ix) * c + o.ci] : 0.f;
}

// Cropped output element i of (n, h, w, c) from a padded (n, ih, iw, c).
HPCNN_HD float crop_at(const float* in, int h, int w, int c, int pt, int pl, int ih, int iw, long long i) {
  const Nhwc o = nhwc_of(i, h, w, c);
  return in[((o.b * ih + o.y + pt) * iw + o.x + pl) * c + o.ci];
}

// ------------------------------------------------------------------ deterministic column sums
// m (rows x f) row-major. Grid (ceil(f/32), kSlices), block (32, 8): lane (tx, ty) of block
// (bx, slice) sums rows slice*chunk + ty, +8, ... of column bx*32 + tx; then lane ty == 0 adds
// the 8 lane sums in order into partials[slice, j]; finally out[j] = sum over slices in order.
constexpr int kColumnSumSlices = 64;

HPCNN_HD float column_sum_lane(const float* m, long long rows, int f, unsigned bx, unsigned slice, unsigned tx,
                               unsigned ty) {
  const int j = static_cast<int>(bx * 32 + tx);
  const long long chunk = (rows + kColumnSumSlices - 1) / kColumnSumSlices;
  const long long r0 = slice * chunk;
  long long r1 = r0 + chunk;
  if (r1 > rows) r1 = rows;
  float s = 0.f;
  if (j < f)
    for (long long r = r0 + ty; r < r1; r += 8) s += m[r * f + j];
  return s;
}

}  // namespace hpcnn::cuda::body
