// Checked cuDNN and cuBLAS calls, the counterpart of core/cuda_check.h for the two libraries:
//   HPCNN_CUDNN_CHECK(cudnnConvolutionForward(...));
//   HPCNN_CUBLAS_CHECK(cublasSgemm(...));
// throw BackendError naming the call, the library's status name and message, and file:line.
// cuDNN 9 also keeps a per-thread detail message (cudnnGetLastErrorString), which usually says
// *which* parameter was rejected; it is appended when present. CUDA translation units only.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <string>

#include "core/errors.h"

namespace hpcnn::cuda {

inline std::string cudnn_detail() {
#if CUDNN_MAJOR >= 9
  char buf[512] = {0};
  cudnnGetLastErrorString(buf, sizeof(buf));
  return buf[0] ? std::string("; cuDNN says: ") + buf : std::string();
#else
  return std::string();
#endif
}

}  // namespace hpcnn::cuda

#define HPCNN_CUDNN_CHECK(call)                                                                          \
  do {                                                                                                   \
    cudnnStatus_t hpcnn_st_ = (call);                                                                    \
    if (hpcnn_st_ != CUDNN_STATUS_SUCCESS)                                                               \
      throw ::hpcnn::BackendError(::hpcnn::cat(#call, " failed: ", cudnnGetErrorString(hpcnn_st_), " (status ", \
                                               static_cast<int>(hpcnn_st_), ")", ::hpcnn::cuda::cudnn_detail(), \
                                               " [", __FILE__, ":", __LINE__, "]"));                     \
  } while (0)

#define HPCNN_CUBLAS_CHECK(call)                                                                         \
  do {                                                                                                   \
    cublasStatus_t hpcnn_st_ = (call);                                                                   \
    if (hpcnn_st_ != CUBLAS_STATUS_SUCCESS)                                                              \
      throw ::hpcnn::BackendError(::hpcnn::cat(#call, " failed: ", cublasGetStatusName(hpcnn_st_), " (",     \
                                               cublasGetStatusString(hpcnn_st_), ") [", __FILE__, ":",   \
                                               __LINE__, "]"));                                          \
  } while (0)
