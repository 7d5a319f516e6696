// Batch normalization in training mode over a single row per channel (rows = N*H*W == 1: batch 1
// after global pooling, a 1x1 map of one sample), per channel, as HPCNN_HD code: the CUDA backend
// runs it instead of cuDNN (whose training calls take the unbiased variance, undefined for one
// row, and may refuse it), and the host self-test runs it against the CPU op.
//
// It is the CPU op's arithmetic (batchnorm_cpu.cpp) for one row, operation for operation: the
// statistics from the values shifted by the first row (here the only one: d = x - x), in double;
// mean = x, var = 0 (Keras and TensorFlow give the same), invstd = 1 / sqrt(eps), y = (x - mean)
// * a + b, so y = beta (relu: max(beta, 0)) for a finite x; backward dbeta = g, dgamma = g * (x -
// mean) * invstd = 0 and dx = k1 * g + k2 * (x - mean) + k3 with the CPU's per-channel factors
// (about 0: a single row's normalized value does not depend on it).
#pragma once

#include <cmath>

#include "core/hd.h"
#include "ops/elementwise.h"

namespace hpcnn::body {

// Channel j's forward: y, and the statistics the backward pass and the moving update read.
HPCNN_HD void batchnorm_one_row_forward(float x, const float* gamma, const float* beta, int j, float eps, bool relu,
                                        float* y, float* mean, float* var, float* invstd) {
  const float d = x - x;  // the CPU's shifted sums (shift = the first row): one row of d
  const double s1 = static_cast<double>(0.f + d), s2 = static_cast<double>(0.f + d * d);
  const double dm = s1 / 1.0;
  const double q = s2 / 1.0 - dm * dm;
  const double v = q < 0.0 ? 0.0 : q;  // std::max(q, 0.0): NaN stays NaN
  const double m = static_cast<double>(x) + dm;
  const double is = 1.0 / sqrt(v + static_cast<double>(eps));
  mean[j] = static_cast<float>(m);
  var[j] = static_cast<float>(v);
  invstd[j] = static_cast<float>(is);
  const float a = static_cast<float>((gamma ? gamma[j] : 1.0) * is);
  const float b = beta ? beta[j] : 0.f;
  const float out = (x - mean[j]) * a + b;
  y[j] = relu ? ew::relu(out) : out;
}

// Channel j's backward (y is read only with relu); dx, dgamma, dbeta may be null.
HPCNN_HD void batchnorm_one_row_backward(float x, float y, float dy, const float* gamma, const float* mean,
                                         const float* invstd, int j, bool relu, float* dx, float* dgamma,
                                         float* dbeta) {
  const float g = relu ? ew::relu_grad(y, dy) : dy;
  const double sg = static_cast<double>(0.f + g), sgx = static_cast<double>(0.f + g * (x - mean[j]));
  const double is = invstd[j];
  const double db = sg, dgm = sgx * is;
  if (dbeta) dbeta[j] = static_cast<float>(db);
  if (dgamma) dgamma[j] = static_cast<float>(dgm);
  if (!dx) return;
  const double a = (gamma ? gamma[j] : 1.0) * is;
  const float k1 = static_cast<float>(a), k2 = static_cast<float>(-a * is * dgm * 1.0),
              k3 = static_cast<float>(-a * db * 1.0);
  dx[j] = k1 * g + k2 * (x - mean[j]) + k3;
}

// A trainable layer run in inference mode (batchnorm.h, "inference parameter gradients"), the
// CUDA backend's arithmetic: element i (of channel j = i % c) gives g = dy masked by y > 0 (y
// null: no ReLU), left in dy, and term[i] = g * (x - moving_mean[j]) (term null: not wanted);
// the column sums of g are dbeta, those of term times invstd (batchnorm_inference_dgamma) dgamma,
// as the CPU's training backward computes them with the moving statistics (in double, in another
// order of the sums).
HPCNN_HD void batchnorm_inference_param_term(long long i, int c, const float* x, const float* y, float* dy,
                                             const float* moving_mean, float* term) {
  const int j = static_cast<int>(i % c);
  const float g = y ? ew::relu_grad(y[i], dy[i]) : dy[i];
  if (y) dy[i] = g;
  if (term) term[i] = g * (x[i] - moving_mean[j]);
}

// Channel j: dgamma[j] holds the column sum of the terms; times invstd (the CPU's double product).
HPCNN_HD void batchnorm_inference_dgamma(int j, const float* moving_var, float eps, float* dgamma) {
  const double is = ew::inv_std(moving_var[j], eps);
  dgamma[j] = static_cast<float>(static_cast<double>(dgamma[j]) * is);
}

}  // namespace hpcnn::body
