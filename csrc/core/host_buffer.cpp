#include "core/host_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/cuda_runtime.h"
#include "core/errors.h"

namespace hpcnn {

static constexpr size_t kHostBufferAlignment = 64;

HostBuffer::HostBuffer(size_t bytes, HostMemory kind, int device) : kind_(kind), device_(device) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kHostBufferAlignment - 1) / kHostBufferAlignment *
                         kHostBufferAlignment;
  if (kind == HostMemory::Pinned) {
    ptr_ = cuda::malloc_pinned(rounded, device);  // page-aligned, OutOfMemory / BackendError itself
  } else {
    ptr_ = std::aligned_alloc(kHostBufferAlignment, rounded);
    if (!ptr_) throw OutOfMemory(cat("cannot allocate a host buffer of ", bytes, " bytes"));
  }
  bytes_ = bytes;
}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
    device_ = other.device_;
  }
  return *this;
}

void HostBuffer::release() noexcept {
  if (!ptr_) return;
  if (kind_ == HostMemory::Pinned) cuda::free_pinned(ptr_, device_);
  else std::free(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

Tensor host_tensor(const std::shared_ptr<HostBuffer>& buf, const Shape& shape, DType dtype) {
  const size_t need = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  HPCNN_CHECK_BACKEND(buf && need <= buf->bytes(), "host_tensor: ", shape_str(shape), " ", dtype_name(dtype),
                      " does not fit a host buffer of ", buf ? buf->bytes() : 0, " bytes");
  return Tensor::borrow(buf->data(), shape, dtype, Device::cpu(), buf);
}

HostMemory host_memory_for(Device target) {
  if (!target.is_cuda() || !cuda::compiled()) return HostMemory::Pageable;
  try {
    cuda::require_device(target.index);
    return HostMemory::Pinned;
  } catch (const std::exception&) {
    return HostMemory::Pageable;  // the model's own placement reports the reason
  }
}

}  // namespace hpcnn
