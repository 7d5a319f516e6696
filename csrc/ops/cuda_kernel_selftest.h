// A host-side self-test of the CUDA backend's index arithmetic and library-call glue, runnable
// without a GPU (CI): the bodies of our kernels (the *_body.h header beside each op) run in
// emulated grids, the cuBLAS calls' arguments feed a reference column-major GEMM written from the
// cuBLAS documentation, and the cuDNN calls' layouts (NHWC data, KRSC filters, symmetric padding, the
// explicit-padding path) feed a reference cross-correlation written from the cuDNN
// documentation, with the kernel converted from Keras' HWIO to the CUDA backend's OHWI (= KRSC)
// by the conversion the model uses (ops/conv2d_layout.h, itself checked element by element).
// Everything is compared with the CPU ops. What it cannot check: the libraries
// and the GPU themselves (tests/test_gpu_ops.py does, on a GPU).
#pragma once

#include <string>
#include <vector>

namespace hpcnn::cuda {

struct SelftestResult {
  std::string name;
  double error;      // max |emulated - CPU| / max(|CPU|, tiny), or the count of mismatches
  double tolerance;  // passes when error <= tolerance
};

std::vector<SelftestResult> kernel_selftest();

// The cuDNN descriptors built for Keras geometries, read back from cuDNN itself (descriptor calls
// need no GPU). Defined in ops/cudnn_ops.cu; empty without the CUDA backend.
std::vector<SelftestResult> cudnn_descriptor_selftest();

}  // namespace hpcnn::cuda
