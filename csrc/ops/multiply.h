// Element-wise product of two tensors with Keras' broadcasting (the Multiply layer; a
// squeeze-and-excitation block's (n, h, w, c) x (n, 1, 1, c)): each axis of a and b is y's size or
// 1 (broadcast). The batch axis is never broadcast.
//   forward   y = a * b
//   backward  da = sum over a's broadcast axes of dy * b, db likewise (either may be skipped)
// The geometry (multiply_body.h) is plain index arithmetic both backends share.
// CPU (multiply_cpu.cpp): threads over the batch; per sample, rows of the last axis with
// contiguous loads (stride 0 for a broadcast last axis), a broadcast operand's gradient summed in
// row order (the same bits on any thread count). CUDA (multiply_cuda.cu): one thread per element
// of the output (forward) or of the gradient (backward: a broadcast operand's element sums its
// positions in a fixed order).
#pragma once

namespace hpcnn {

constexpr int kMaxBroadcastRank = 6;

// y's dims, and per operand the element strides of its own (packed) layout, 0 on a broadcast axis.
struct BroadcastGeometry {
  int rank = 0;
  long long dims[kMaxBroadcastRank] = {};
  long long sa[kMaxBroadcastRank] = {};
  long long sb[kMaxBroadcastRank] = {};
  long long numel() const {
    long long n = 1;
    for (int d = 0; d < rank; ++d) n *= dims[d];
    return n;
  }
};

namespace cpu {
void multiply_forward(const BroadcastGeometry& g, const float* a, const float* b, float* y);
// da, db may be null (not computed); overwritten. a_numel, b_numel: the operands' sizes.
void multiply_backward(const BroadcastGeometry& g, const float* a, const float* b, const float* dy, float* da,
                       long long a_numel, float* db, long long b_numel);
}  // namespace cpu

namespace cuda {
void multiply_forward(int device, const BroadcastGeometry& g, const float* a, const float* b, float* y);
void multiply_backward(int device, const BroadcastGeometry& g, const float* a, const float* b, const float* dy,
                       float* da, long long a_numel, float* db, long long b_numel);
}  // namespace cuda

}  // namespace hpcnn
