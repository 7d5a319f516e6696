// The RAII owners of the cuDNN descriptors the cudnn_*.cu files use (ops/cudnn_ops.cu's contracts
// say what each call expects of them), and batch normalization's pair of data and per-channel
// descriptors. Included by the cudnn_*.cu files only (CUDA backend).
#pragma once

#include "core/cuda_check.h"
#include "ops/cudnn_ops.h"

namespace hpcnn::cuda {

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { HPCNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() {
    if (d) cudnnDestroyTensorDescriptor(d);
  }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  void nhwc(int n, int c, int h, int w) {
    HPCNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, w));
  }
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { HPCNN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() {
    if (d) cudnnDestroyFilterDescriptor(d);
  }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { HPCNN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() {
    if (d) cudnnDestroyConvolutionDescriptor(d);
  }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

struct ActivationDesc {
  cudnnActivationDescriptor_t d = nullptr;
  ActivationDesc() { HPCNN_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d)); }
  ~ActivationDesc() {
    if (d) cudnnDestroyActivationDescriptor(d);
  }
  ActivationDesc(const ActivationDesc&) = delete;
  ActivationDesc& operator=(const ActivationDesc&) = delete;
};

namespace cudnn {

// The data and the derived per-channel descriptors of one batch-norm call.
struct BnDescs {
  TensorDesc x, bn;
  BnDescs(const BnShape& s, cudnnBatchNormMode_t mode) {
    x.nhwc(s.n, s.c, s.h, 1);
    HPCNN_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bn.d, x.d, mode));
  }
};

constexpr cudnnBatchNormMode_t kBnTrainingMode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
constexpr cudnnBatchNormMode_t kBnInferenceMode = CUDNN_BATCHNORM_SPATIAL;

}  // namespace cudnn

}  // namespace hpcnn::cuda
