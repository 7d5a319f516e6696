// What the CUDA row copy (concat_cuda.cu) computes per element, as plain HPCNN_HD code: element i
// of `rows` x `width` is row i / width, column i % width of both sides. The host self-test
// (diagnostics/cuda_kernel_selftest.cpp) runs it against the CPU's row copies.
#pragma once

#include "core/hd.h"

namespace hpcnn::cuda::body {

HPCNN_HD void copy_rows_element(long long i, long long width, const float* src, long long src_pitch,
                                       float* dst, long long dst_pitch) {
  const long long r = i / width, c = i - r * width;
  dst[r * dst_pitch + c] = src[r * src_pitch + c];
}

}  // namespace hpcnn::cuda::body
