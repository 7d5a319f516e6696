// Checked CUDA runtime calls: HPCNN_CUDA_CHECK(cudaMemcpy(...)) throws BackendError naming the
// call, file:line and the runtime's own message. CUDA translation units only.
#pragma once

#include <cuda_runtime_api.h>

#include "core/errors.h"

#define HPCNN_CUDA_CHECK(call)                                                                      \
  do {                                                                                              \
    cudaError_t hpcnn_err_ = (call);                                                                \
    if (hpcnn_err_ != cudaSuccess) {                                                                \
      (void)cudaGetLastError(); /* clear a sticky-free error so the next call starts clean */     \
      throw ::hpcnn::BackendError(::hpcnn::cat(#call, " failed: ", cudaGetErrorName(hpcnn_err_), " (", \
                                               cudaGetErrorString(hpcnn_err_), ") [", __FILE__, ":", __LINE__, "]")); \
    }                                                                                               \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define HPCNN_CUDA_CHECK_LAUNCH() HPCNN_CUDA_CHECK(cudaGetLastError())
