// Small kernels shared by several CUDA ops (see cuda_kernels.h).
#include "ops/cuda_kernels.h"

#include "core/cuda_check.h"
#include "core/cuda_context.h"
#include "core/errors.h"
#include "ops/cuda_kernels_body.h"
#include "ops/elementwise.h"

namespace hpcnn::cuda::kernels {

namespace {

using body::kColumnSumSlices;  // fixed, so the summation order never changes

__global__ void bias_act_kernel(float* y, long long count, int f, const float* b, bool relu, const float* residual,
                                float relu_max) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    float v = b ? y[i] + b[i % f] : y[i];
    if (residual) v += residual[i];
    y[i] = relu ? fminf(ew::relu(v), relu_max) : v;
  }
}

__global__ void relu_mask_kernel(float* dy, const float* y, long long count) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dy[i] = ew::relu_grad(y[i], dy[i]);
}

// Block (32, 8): 32 columns, 8 row lanes; blockIdx.y = slice of rows (body::column_sum_lane).
__global__ void column_sum_partial_kernel(const float* m, long long rows, int f, float* partials) {
  __shared__ float acc[8][33];
  acc[threadIdx.y][threadIdx.x] = body::column_sum_lane(m, rows, f, blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y);
  __syncthreads();
  const int j = blockIdx.x * 32 + threadIdx.x;
  if (threadIdx.y == 0 && j < f) {
    float t = 0.f;
    for (int k = 0; k < 8; ++k) t += acc[k][threadIdx.x];
    partials[(long long)blockIdx.y * f + j] = t;
  }
}

__global__ void column_sum_final_kernel(const float* partials, int f, float* out) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= f) return;
  float t = 0.f;
  for (int p = 0; p < kColumnSumSlices; ++p) t += partials[(long long)p * f + j];
  out[j] = t;
}

__global__ void pad_kernel(const float* in, int n, int h, int w, int c, int pt, int pl, int oh, int ow, float* out) {
  long long count = (long long)n * oh * ow * c;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    out[i] = body::pad_at(in, h, w, c, pt, pl, oh, ow, i);
}

__global__ void crop_kernel(const float* in, int n, int h, int w, int c, int pt, int pl, int ih, int iw, float* out) {
  long long count = (long long)n * h * w * c;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    out[i] = body::crop_at(in, h, w, c, pt, pl, ih, iw, i);
}

}  // namespace

void bias_act(cudaStream_t s, float* y, long long rows, int f, const float* b, bool relu, const float* residual,
              float relu_max) {
  long long count = rows * f;
  if (count == 0 || (!b && !relu && !residual)) return;
  bias_act_kernel<<<blocks_for(count), 256, 0, s>>>(y, count, f, b, relu, residual, relu_max);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void relu_mask(cudaStream_t s, float* dy, const float* y, long long count) {
  if (count == 0) return;
  relu_mask_kernel<<<blocks_for(count), 256, 0, s>>>(dy, y, count);
  HPCNN_CUDA_CHECK_LAUNCH();
}

long long column_sum_partials(int f) { return (long long)kColumnSumSlices * f; }

void column_sum(cudaStream_t s, const float* m, long long rows, int f, float* partials, float* out) {
  if (f == 0) return;
  dim3 grid((f + 31) / 32, kColumnSumSlices), block(32, 8);
  column_sum_partial_kernel<<<grid, block, 0, s>>>(m, rows, f, partials);
  HPCNN_CUDA_CHECK_LAUNCH();
  column_sum_final_kernel<<<(f + 255) / 256, 256, 0, s>>>(partials, f, out);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void pad_nhwc(cudaStream_t s, const float* in, int n, int h, int w, int c, int pt, int pb, int pl, int pr, float* out) {
  int oh = h + pt + pb, ow = w + pl + pr;
  long long count = (long long)n * oh * ow * c;
  pad_kernel<<<blocks_for(count), 256, 0, s>>>(in, n, h, w, c, pt, pl, oh, ow, out);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void crop_nhwc(cudaStream_t s, const float* in, int n, int h, int w, int c, int pt, int pb, int pl, int pr, float* out) {
  long long count = (long long)n * h * w * c;
  crop_kernel<<<blocks_for(count), 256, 0, s>>>(in, n, h, w, c, pt, pl, h + pt + pb, w + pl + pr, out);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda::kernels
