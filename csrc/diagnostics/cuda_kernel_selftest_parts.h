// The host self-test of the CUDA backend (cuda_kernel_selftest.h) in parts, one file per section:
// the kernels' bodies in emulated grids (cuda_kernel_selftest.cpp, which also runs every part),
// the cuBLAS/cuDNN call layouts (cuda_kernel_selftest_library_calls.cpp), the cuDNN algorithm
// choice (cuda_kernel_selftest_conv_algo.cpp) and batch normalization
// (cuda_kernel_selftest_batchnorm.cpp); and the comparisons they share. Each check appends its
// rows to `out`.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ops/cudnn_selftest.h"

namespace hpcnn::cuda::selftest {

using Vec = std::vector<float>;

inline Vec random_vec(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

inline double rel_err(const Vec& a, const Vec& ref) {
  if (a.size() != ref.size()) return INFINITY;
  double mx = 1e-30, err = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    mx = std::max(mx, (double)std::fabs(ref[i]));
    double d = std::fabs((double)a[i] - ref[i]);
    if (std::isnan(d)) return INFINITY;
    err = std::max(err, d);
  }
  return err / mx;
}

inline double mismatches(const Vec& a, const Vec& ref) {
  if (a.size() != ref.size()) return INFINITY;
  double n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += (a[i] == ref[i] || (std::isnan(a[i]) && std::isnan(ref[i]))) ? 0 : 1;
  return n;
}

// The column-sum kernel (ops/cuda_kernels_body.h) in an emulated grid (cuda_kernel_selftest.cpp).
Vec emu_column_sum(const Vec& m, long long rows, int f);

// cuda_kernel_selftest_library_calls.cpp
void check_dense(std::vector<SelftestResult>& out);
void check_kernel_layouts(std::vector<SelftestResult>& out);
void check_conv(std::vector<SelftestResult>& out);
void check_depthwise(std::vector<SelftestResult>& out);

// cuda_kernel_selftest_conv_algo.cpp
void check_conv_algo_choice(std::vector<SelftestResult>& out);

// cuda_kernel_selftest_batchnorm.cpp
void check_batchnorm_one_row(std::vector<SelftestResult>& out);
void check_batchnorm_inference_param_gradients(std::vector<SelftestResult>& out);
void check_batchnorm_stats_layout(std::vector<SelftestResult>& out);

}  // namespace hpcnn::cuda::selftest
