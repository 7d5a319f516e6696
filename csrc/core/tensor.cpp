#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "core/cuda_async.h"
#include "core/cuda_runtime.h"
#include "core/transfer_stats.h"

namespace hpcnn {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::U8: return 1;
    case DType::I32: return 4;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::U8: return "uint8";
    case DType::I32: return "int32";
  }
  return "?";
}

long long shape_numel(const Shape& s) {
  long long n = 1;
  for (long long d : s) {
    if (d < 0) throw ValueError(cat("negative dimension in shape ", shape_str(s)));
    if (__builtin_mul_overflow(n, d, &n))
      throw ValueError(cat("shape ", shape_str(s), " has more than 2^63-1 elements"));
  }
  return n;
}

long long checked_mul(long long a, long long b, const char* what) {
  long long r;
  if (__builtin_mul_overflow(a, b, &r)) throw ValueError(cat(what, ": ", a, " x ", b, " does not fit in 64 bits"));
  return r;
}

long long checked_add(long long a, long long b, const char* what) {
  long long r;
  if (__builtin_add_overflow(a, b, &r)) throw ValueError(cat(what, ": ", a, " + ", b, " does not fit in 64 bits"));
  return r;
}

// Bytes of a tensor of `shape` and `dtype`, checked: a size_t that wrapped would allocate (or
// view) a small buffer for a huge tensor.
static size_t shape_bytes(const Shape& shape, DType dtype) {
  return static_cast<size_t>(checked_mul(shape_numel(shape), static_cast<long long>(dtype_size(dtype)),
                                         cat("the size in bytes of a tensor of shape ", shape_str(shape)).c_str()));
}

static constexpr size_t kHostAlignment = 64;

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) bytes = 1;  // keep a valid, unique pointer for empty tensors
  if (device.is_cpu()) {
    size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    ptr_ = std::aligned_alloc(kHostAlignment, rounded);
    if (!ptr_) throw OutOfMemory(cat("cannot allocate ", bytes, " bytes of host memory"));
  } else {
    ptr_ = cuda::malloc_device(bytes, device.index);
  }
}

Storage::Storage(void* ptr, size_t bytes, Device device, std::shared_ptr<void> keep_alive)
    : ptr_(ptr), bytes_(bytes), device_(device), owned_(false), keep_alive_(std::move(keep_alive)) {}

Storage::~Storage() {
  if (!owned_ || !ptr_) return;
  if (device_.is_cpu()) std::free(ptr_);
  else cuda::free_device(ptr_, device_.index);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(shape_bytes(shape, dtype), device);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_zero();
  return t;
}

Tensor Tensor::borrow(void* ptr, const Shape& shape, DType dtype, Device device, std::shared_ptr<void> keep_alive) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(ptr, shape_bytes(shape, dtype), device,
                                         std::move(keep_alive));
  return t;
}

Tensor Tensor::view(long long elem_offset, const Shape& shape) const {
  size_t off = offset_ + static_cast<size_t>(elem_offset) * dtype_size(dtype_);
  size_t need = shape_bytes(shape, dtype_);
  HPCNN_CHECK_BACKEND(storage_ && off + need <= storage_->bytes(), "view ", shape_str(shape), " at ", elem_offset,
                      " is outside its storage");
  Tensor t = *this;
  t.offset_ = off;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  HPCNN_CHECK_ARG(shape_numel(shape) == numel(), "cannot reshape ", shape_str(shape_), " to ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::to(Device device) const {
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  HPCNN_CHECK_ARG(src.dtype_ == dtype_ && src.numel() == numel(), "copy from ", src.str(), " into ", str());
  size_t n = nbytes();
  if (n == 0) return;
  Device s = src.device(), d = device();
  if (s.is_cpu() && d.is_cpu()) {
    std::memcpy(raw(), src.raw(), n);
    return;
  }
  using cuda::CopyKind;
  CopyKind kind = s.is_cpu()   ? CopyKind::HostToDevice
                  : d.is_cpu() ? CopyKind::DeviceToHost
                               : CopyKind::DeviceToDevice;
  if (kind == CopyKind::HostToDevice) transfer_stats().count_h2d(n);
  if (kind == CopyKind::DeviceToHost) transfer_stats().count_d2h(n);
  cuda::copy(raw(), d.index, src.raw(), s.index, n, kind);
}

void Tensor::fill_zero() {
  if (device().is_cpu()) std::memset(raw(), 0, nbytes());
  else cuda::fill_zero_async(device().index, raw(), nbytes());  // no host buffer, no host wait
}

std::string Tensor::str() const {
  return cat(dtype_name(dtype_), shape_str(shape_), " on ", device().str());
}

}  // namespace hpcnn
