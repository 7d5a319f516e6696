// The per-output arithmetic of global_pool2d_cuda.cu's kernels (one (image, channel) pair each)
// as HPCNN_HD functions; the host self-test runs them and compares with global_pool2d_cpu.cpp
// bit for bit.
#pragma once

#include <cmath>

#include "core/hd.h"

namespace hpcnn::cuda::body {

// Output o = n * c + ci of (n, c).
HPCNN_HD float global_avg_at(const float* x, long long hw, int c, long long o) {
  const long long n = o / c;
  const int ci = static_cast<int>(o % c);
  const float* p = x + n * hw * c + ci;
  float acc = 0.f;
  for (long long q = 0; q < hw; ++q) acc += p[q * c];
  return acc / static_cast<float>(hw);
}

HPCNN_HD float global_max_at(const float* x, long long hw, int c, long long o) {
  const long long n = o / c;
  const int ci = static_cast<int>(o % c);
  const float* p = x + n * hw * c + ci;
  float best = -INFINITY;
  for (long long q = 0; q < hw; ++q) best = p[q * c] > best ? p[q * c] : best;
  return best;
}

// The position (0..hw-1) of output o's first maximal input (hw when none equals y: NaN input).
HPCNN_HD long long global_max_winner(const float* x, const float* y, long long hw, int c, long long o) {
  const long long n = o / c;
  const int ci = static_cast<int>(o % c);
  const float* p = x + n * hw * c + ci;
  for (long long q = 0; q < hw; ++q)
    if (p[q * c] == y[o]) return q;
  return hw;
}

}  // namespace hpcnn::cuda::body
