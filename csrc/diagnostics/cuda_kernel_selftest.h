// A host-side self-test of the CUDA backend's index arithmetic and library-call glue, runnable
// without a GPU (CI): the bodies of our kernels (the *_body.h header beside each op) run in
// emulated grids, the cuBLAS calls' arguments feed a reference column-major GEMM written from the
// cuBLAS documentation, and the cuDNN calls' layouts (NHWC data, KRSC filters, symmetric padding, the
// explicit-padding path) feed a reference cross-correlation written from the cuDNN
// documentation, with the kernel converted from Keras' HWIO to the CUDA backend's OHWI (= KRSC)
// by the conversion the model uses (ops/conv2d_layout.h, itself checked element by element).
// Everything is compared with the CPU ops. What it cannot check: the libraries
// and the GPU themselves (tests/gpu/test_gpu_ops.py does, on a GPU).
// It ends with the rows of cuda::cudnn_descriptor_selftest() (ops/cudnn_selftest.h), the checks
// that must sit beside the cuDNN calls. A diagnostic, not part of training: hpcnn._core runs it as
// cuda_kernel_selftest().
#pragma once

#include <vector>

#include "ops/cudnn_selftest.h"

namespace hpcnn::cuda {

std::vector<SelftestResult> kernel_selftest();

}  // namespace hpcnn::cuda
