// Stand-alone activations on the GPU: ReLU, the element-wise kinds (one kernel per kind,
// instantiated from the same ew::act / ew::act_grad templates as the CPU loops) and softmax.
// Softmax: one thread per row, the row's max, sum and outputs in the CPU's order (rows are short
// class vectors; a row per thread keeps the arithmetic the CPU's).
#include "core/cuda_context.h"
#include "ops/activation.h"
#include "ops/elementwise.h"

namespace hpcnn::cuda {

namespace {

__global__ void relu_forward_kernel(long long count, const float* x, float* y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    y[i] = ew::relu(x[i]);
}

__global__ void relu_backward_kernel(long long count, const float* y, const float* dy, float* dx) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dx[i] = ew::relu_grad(y[i], dy[i]);
}

template <Act A>
__global__ void act_forward_kernel(float alpha, long long count, const float* x, float* y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    y[i] = ew::act<A>(x[i], alpha);
}

template <Act A>
__global__ void act_backward_kernel(float alpha, long long count, const float* x, const float* y, const float* dy,
                                    float* dx) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    dx[i] = dy[i] * ew::act_grad<A>(x[i], y[i], alpha);
}

__global__ void softmax_forward_kernel(int rows, int cols, const float* x, float* y) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + (long long)r * cols;
  float* yr = y + (long long)r * cols;
  float mx = xr[0];
  for (int j = 1; j < cols; ++j) mx = xr[j] > mx ? xr[j] : mx;  // std::max_element: first max
  float sum = 0.f;
  for (int j = 0; j < cols; ++j) sum += expf(xr[j] - mx);
  float lse = logf(sum);
  for (int j = 0; j < cols; ++j) yr[j] = ew::softmax_prob(xr[j], mx, lse);
}

__global__ void softmax_backward_kernel(int rows, int cols, const float* y, const float* dy, float* dx) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* yr = y + (long long)r * cols;
  const float* dyr = dy + (long long)r * cols;
  float dot = 0.f;
  for (int j = 0; j < cols; ++j) dot += dyr[j] * yr[j];
  for (int j = 0; j < cols; ++j) dx[(long long)r * cols + j] = yr[j] * (dyr[j] - dot);
}

}  // namespace

void relu_forward(int device, long long count, const float* x, float* y) {
  ContextLock ctx(device);
  if (count == 0) return;
  relu_forward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void relu_backward(int device, long long count, const float* y, const float* dy, float* dx) {
  ContextLock ctx(device);
  if (count == 0) return;
  relu_backward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(count, y, dy, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void act_forward(int device, Act a, float alpha, long long count, const float* x, float* y) {
  ContextLock ctx(device);
  if (count == 0) return;
#define HPCNN_FWD(K) act_forward_kernel<K><<<blocks_for(count), 256, 0, ctx.stream()>>>(alpha, count, x, y)
  HPCNN_SWITCH_ACT(a, HPCNN_FWD)
#undef HPCNN_FWD
  HPCNN_CUDA_CHECK_LAUNCH();
}

void act_backward(int device, Act a, float alpha, long long count, const float* x, const float* y, const float* dy,
                  float* dx) {
  ContextLock ctx(device);
  if (count == 0) return;
#define HPCNN_BWD(K) act_backward_kernel<K><<<blocks_for(count), 256, 0, ctx.stream()>>>(alpha, count, x, y, dy, dx)
  HPCNN_SWITCH_ACT(a, HPCNN_BWD)
#undef HPCNN_BWD
  HPCNN_CUDA_CHECK_LAUNCH();
}

void softmax_forward(int device, int rows, int cols, const float* x, float* y) {
  ContextLock ctx(device);
  if (rows == 0 || cols == 0) return;
  softmax_forward_kernel<<<(rows + 127) / 128, 128, 0, ctx.stream()>>>(rows, cols, x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void softmax_backward(int device, int rows, int cols, const float* y, const float* dy, float* dx) {
  ContextLock ctx(device);
  if (rows == 0 || cols == 0) return;
  softmax_backward_kernel<<<(rows + 127) / 128, 128, 0, ctx.stream()>>>(rows, cols, y, dy, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
