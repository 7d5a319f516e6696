// The self-test checks that can only be written where cuDNN's descriptors are built: they read
// back, from cuDNN itself, what the cuDNN calls' own descriptor types hold (cudnn_descriptors.h,
// cudnn_conv_plan.h), so they live beside them, in cudnn_selftest.cu. The host self-test of the
// CUDA backend (diagnostics/cuda_kernel_selftest.h) appends their rows to its own; the row type
// is declared here because ops/ may not include diagnostics/.
#pragma once

#include <string>
#include <vector>

namespace hpcnn::cuda {

struct SelftestResult {
  std::string name;
  double error;      // max |emulated - CPU| / max(|CPU|, tiny), or the count of mismatches
  double tolerance;  // passes when error <= tolerance
};

// The cuDNN descriptors built for Keras geometries, read back from cuDNN itself (descriptor calls
// need no GPU). Defined in ops/cudnn_selftest.cu; without the CUDA backend, empty
// (ops/cudnn_selftest_absent.cpp).
std::vector<SelftestResult> cudnn_descriptor_selftest();

}  // namespace hpcnn::cuda
