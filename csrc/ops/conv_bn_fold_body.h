// The arithmetic of conv_bn_fold (conv_bn_fold.h), per element, as HPCNN_HD code both backends run.
#pragma once

#include <cmath>

#include "core/hd.h"
#include "ops/conv2d_layout.h"

namespace hpcnn::body {

// Filter f's scale a = gamma / sqrt(var + eps), as the CPU's batch norm inference computes it
// (in double, rounded to float once).
HPCNN_HD float conv_bn_fold_scale(const float* gamma, const float* moving_var, float eps, int f) {
  return static_cast<float>((gamma ? gamma[f] : 1.0) / sqrt(static_cast<double>(moving_var[f]) + eps));
}

// The filter of kernel element i: the last axis in HWIO, the first in OHWI (`weights` elements).
HPCNN_HD int conv_bn_fold_filter(long long i, long long weights, int f, KernelLayout layout) {
  return layout == KernelLayout::HWIO ? static_cast<int>(i % f) : static_cast<int>(i / (weights / f));
}

HPCNN_HD float conv_bn_fold_kernel(float w, float a) { return w * a; }

HPCNN_HD float conv_bn_fold_bias(const float* b, const float* beta, const float* moving_mean, float a, int f) {
  return ((b ? b[f] : 0.f) - moving_mean[f]) * a + (beta ? beta[f] : 0.f);
}

}  // namespace hpcnn::body
