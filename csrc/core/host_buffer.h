// HostBuffer: the one kind of host memory that batches live in on their way to a model.
//
// 64-byte aligned bytes, either pageable (std::aligned_alloc) or pinned (page-locked with the
// CUDA runtime, for GPU `device`). "Pinned" is a property of the storage, fixed at allocation:
// the loader's batch pool (data/prefetcher.h) and the model's staging buffers (nn/batch_stager.h)
// both allocate through this type, and the host->device copy on the copy stream
// (cuda::copy_h2d_async) needs a pinned source. RAII: freed by the destructor with the function
// that matches how it was allocated. Move-only.
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"
#include "core/tensor.h"

namespace hpcnn {

enum class HostMemory { Pageable, Pinned };

class HostBuffer {
 public:
  HostBuffer() = default;  // empty: data() is null, bytes() 0
  // At least `bytes` (rounded up to 64). Pinned: allocated with GPU `device` made current (see
  // cuda::malloc_pinned), usable by every GPU. OutOfMemory when the memory is not there;
  // BackendError for pinned memory without a usable CUDA runtime.
  HostBuffer(size_t bytes, HostMemory kind, int device = 0);
  ~HostBuffer() { release(); }
  HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  bool pinned() const { return kind_ == HostMemory::Pinned; }
  HostMemory kind() const { return kind_; }

 private:
  void release() noexcept;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  HostMemory kind_ = HostMemory::Pageable;
  int device_ = 0;  // pinned: the GPU made current to allocate and to free it
};

// A host tensor of `shape` and `dtype` over the start of `buf`, which the tensor keeps alive.
// The caller sizes the buffer; one too small is an internal error (BackendError).
Tensor host_tensor(const std::shared_ptr<HostBuffer>& buf, const Shape& shape, DType dtype);

// The memory kind for batches headed to `target`: pinned when it is a CUDA device this process
// can use, pageable otherwise (the CPU, or a GPU whose placement will report its own error).
HostMemory host_memory_for(Device target);

}  // namespace hpcnn
