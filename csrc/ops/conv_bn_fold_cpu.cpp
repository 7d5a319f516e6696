// conv_bn_fold on the CPU (conv_bn_fold.h): the per-filter scales once, then every kernel element.
// One thread: the kernel is small next to the convolution it feeds (ResNet-20's largest, 64x64
// 3x3, is 37k values).
#include <vector>

#include "ops/conv_bn_fold.h"
#include "ops/conv_bn_fold_body.h"

namespace hpcnn::cpu {

void conv_bn_fold(const ConvBnFoldGeometry& g, const float* w, const float* b, const float* gamma, const float* beta,
                  const float* moving_mean, const float* moving_var, float eps, float* w_out, float* b_out) {
  std::vector<float> a(g.f);
  for (int f = 0; f < g.f; ++f) {
    a[f] = body::conv_bn_fold_scale(gamma, moving_var, eps, f);
    b_out[f] = body::conv_bn_fold_bias(b, beta, moving_mean, a[f], f);
  }
  if (g.layout == KernelLayout::HWIO) {  // rows of f filters: the loop over f vectorizes
    for (long long r = 0; r < g.weights / g.f; ++r)
      for (int f = 0; f < g.f; ++f) w_out[r * g.f + f] = body::conv_bn_fold_kernel(w[r * g.f + f], a[f]);
  } else {
    for (long long i = 0; i < g.weights; ++i)
      w_out[i] = body::conv_bn_fold_kernel(w[i], a[body::conv_bn_fold_filter(i, g.weights, g.f, g.layout)]);
  }
}

}  // namespace hpcnn::cpu
