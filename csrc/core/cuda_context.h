// The per-device CUDA context of the backend: one per GPU, created on first use and kept for the
// life of the process. It owns, each through its own RAII type:
//   - the compute stream (every op of the device runs on it) and the copy stream (batch uploads);
//   - the cuDNN and cuBLAS handles, bound to the compute stream;
//   - an event for "copy done" that the compute stream waits on;
//   - a workspace (cuDNN algorithms) and a scratch arena (our kernels' temporaries), both grown
//     on demand and reused, never shrunk; before either grows, the device's growth guards
//     (cuda_async.h) let the collectives in flight on other streams finish.
// Ops take the context with `ContextLock ctx(device)`: it makes `device` current for the calling
// thread and holds the context's mutex for the op, so two host threads never share a workspace.
// Device memory reuse between ops is safe without locks because everything runs in the order
// of the one compute stream.
//
// Streams are created with cudaStreamDefault (blocking) flags on purpose: Tensor::copy_from uses
// the synchronous cudaMemcpy on the legacy default stream, which waits for all prior work of
// blocking streams and is waited for by their later work. A d2h copy of an op's output therefore
// sees the finished result without any extra synchronisation (CUDA Runtime API, "Stream
// synchronization behavior": legacy default stream).
// CUDA translation units only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/cuda_check.h"
#include "core/cuda_lib_check.h"

namespace hpcnn::cuda {

// Device memory that only grows; contents are not preserved across growth.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // At least `bytes` on `device`; may synchronise `stream` before freeing the old block.
  void* reserve(size_t bytes, int device, cudaStream_t stream, const char* what);
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

struct StreamOwner {
  cudaStream_t s = nullptr;
  explicit StreamOwner(int device);
  ~StreamOwner();
  StreamOwner(const StreamOwner&) = delete;
  StreamOwner& operator=(const StreamOwner&) = delete;
};

struct EventOwner {
  cudaEvent_t e = nullptr;
  EventOwner();
  ~EventOwner();
  EventOwner(const EventOwner&) = delete;
  EventOwner& operator=(const EventOwner&) = delete;
};

struct CudnnHandle {
  cudnnHandle_t h = nullptr;
  CudnnHandle();
  ~CudnnHandle();
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
};

struct CublasHandle {
  cublasHandle_t h = nullptr;
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
};

class ConvAlgoCache;  // ops/cudnn_conv_plan.h: algorithms chosen per geometry

struct Context {
  explicit Context(int device);
  ~Context();

  int device;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::mutex mutex;
  StreamOwner compute, copy;
  EventOwner copy_done, compute_mark;
  CudnnHandle cudnn;
  CublasHandle cublas;
  DeviceBuffer workspace;  // cuDNN workspaces
  DeviceBuffer scratch;    // our kernels' temporaries (padded inputs, partial sums, ...)
  std::shared_ptr<ConvAlgoCache> conv_algos;  // shared_ptr: the type is complete only in the cudnn_*.cu files
  bool tf32_applied = false;  // the math mode currently set on the cuBLAS handle

  bool has_tf32() const { return cc_major >= 8; }
  // Whether TF32 is to be used for this op (the switch and the hardware).
  bool use_tf32() const;
  // Bytes that a workspace may take: a share of the free memory, so that one layer's algorithm
  // never starves the model's activations.
  size_t workspace_limit() const;
};

// Whether the backend has made the context of `device` (a query that makes none).
bool context_exists(int device);

// The context of `device` with the device made current and the context's lock held.
class ContextLock {
 public:
  explicit ContextLock(int device);
  Context* operator->() const { return ctx_; }
  Context& operator*() const { return *ctx_; }
  cudaStream_t stream() const { return ctx_->compute.s; }

 private:
  Context* ctx_;
  std::unique_lock<std::mutex> lock_;
};

// Carves a few aligned arrays out of the context's scratch buffer for one op:
//   ScratchPlan p; size_t a = p.add<float>(n); ... char* base = p.reserve(ctx, "conv2d");
//   float* A = p.at<float>(base, a);
class ScratchPlan {
 public:
  template <typename T>
  size_t add(size_t count) {
    size_t off = total_;
    total_ += (count * sizeof(T) + 255) / 256 * 256;
    return off;
  }
  char* reserve(Context& ctx, const char* what) {
    return static_cast<char*>(ctx.scratch.reserve(total_ ? total_ : 256, ctx.device, ctx.compute.s, what));
  }
  template <typename T>
  static T* at(char* base, size_t off) {
    return reinterpret_cast<T*>(base + off);
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

// Launch geometry for a 1-D element-wise kernel over `count` elements (grid-stride loops).
inline unsigned int blocks_for(long long count, int threads = 256) {
  long long b = (count + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 65535LL * 8) b = 65535LL * 8;  // grid-stride loops cover the rest
  return static_cast<unsigned int>(b);
}

// The OutOfMemory message of the backend: bytes asked, free/total, what for, and the advice.
[[noreturn]] void throw_oom(int device, size_t bytes, const char* what);

}  // namespace hpcnn::cuda
