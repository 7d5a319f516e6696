// Small kernels shared by several CUDA ops, launched on the given stream. CUDA translation units
// only (the pointers are device pointers).
#pragma once

#include <cuda_runtime_api.h>

#include <limits>

namespace hpcnn::cuda::kernels {

// y[r, j] = act(y[r, j] + b[j] + residual[r, j]) for `rows` rows of width f (act: ReLU when relu,
// capped at relu_max, else identity); b and residual may be null (none; nothing at all to do
// without either and relu).
void bias_act(cudaStream_t s, float* y, long long rows, int f, const float* b, bool relu,
              const float* residual = nullptr,
              float relu_max = std::numeric_limits<float>::infinity());
// dy[i] = ew::relu_grad(y[i], dy[i]) in place.
void relu_mask(cudaStream_t s, float* dy, const float* y, long long count);
// out[j] = sum over r of m[r, j] (m: rows x f, row-major), overwritten. Deterministic: the same
// grid and the same summation order on every call. `partials` must hold column_sum_partials(f)
// floats of device memory.
long long column_sum_partials(int f);
void column_sum(cudaStream_t s, const float* m, long long rows, int f, float* partials, float* out);
// Zero-padding of an NHWC batch: out (n, h+pt+pb, w+pl+pr, c); and the reverse crop.
void pad_nhwc(cudaStream_t s, const float* in, int n, int h, int w, int c, int pt, int pb, int pl, int pr, float* out);
void crop_nhwc(cudaStream_t s, const float* in, int n, int h, int w, int c, int pt, int pb, int pl, int pr, float* out);

}  // namespace hpcnn::cuda::kernels
