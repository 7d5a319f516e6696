// The broadcast product on the GPU (multiply.h): grid-stride loops over y's elements (forward, a
// full operand's gradient) or over a broadcast operand's elements, each summing the positions it
// covers in a fixed order (multiply_body.h): deterministic, no atomics.
#include "core/cuda_check.h"
#include "core/cuda_context.h"
#include "ops/multiply.h"
#include "ops/multiply_body.h"

namespace hpcnn::cuda {

namespace {

__global__ void multiply_kernel(BroadcastGeometry g, const float* a, const float* b, float* y, long long count) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    long long oa, ob;
    body::broadcast_offsets(g, i, oa, ob);
    y[i] = a[oa] * b[ob];
  }
}

// d[j] = sum over the y positions operand element j covers of dy * other. `self_a`: the operand is
// a (strides g.sa), else b.
__global__ void gradient_kernel(BroadcastGeometry g, bool self_a, const float* other, const float* dy, float* d,
                                long long count, long long per) {
  const long long* s = self_a ? g.sa : g.sb;
  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < count;
       j += (long long)gridDim.x * blockDim.x) {
    float t = 0.f;
    for (long long k = 0; k < per; ++k) {
      const long long yi = body::gather_index(g, s, j, k);
      long long oa, ob;
      body::broadcast_offsets(g, yi, oa, ob);
      t += dy[yi] * other[self_a ? ob : oa];
    }
    d[j] = t;
  }
}

}  // namespace

void multiply_forward(int device, const BroadcastGeometry& g, const float* a, const float* b, float* y) {
  ContextLock ctx(device);
  const long long count = g.numel();
  multiply_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(g, a, b, y, count);
  HPCNN_CUDA_CHECK(cudaGetLastError());
}

void multiply_backward(int device, const BroadcastGeometry& g, const float* a, const float* b, const float* dy,
                       float* da, long long a_numel, float* db, long long b_numel) {
  ContextLock ctx(device);
  const long long total = g.numel();
  if (da) {
    gradient_kernel<<<blocks_for(a_numel), 256, 0, ctx.stream()>>>(g, true, b, dy, da, a_numel, total / a_numel);
    HPCNN_CUDA_CHECK(cudaGetLastError());
  }
  if (db) {
    gradient_kernel<<<blocks_for(b_numel), 256, 0, ctx.stream()>>>(g, false, a, dy, db, b_numel, total / b_numel);
    HPCNN_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace hpcnn::cuda
