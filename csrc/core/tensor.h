// Tensor: a typed, shaped view into a Storage on one device.
//
// Storage owns bytes (64-byte aligned on the host, cudaMalloc'd on a GPU) or borrows them
// (a NumPy array kept alive by a keep-alive handle). Tensors are cheap to copy: they share the
// storage. A model's parameters are views into one contiguous buffer (see nn/param_layout.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/errors.h"

namespace hpcnn {

using Shape = std::vector<long long>;

enum class DType { F32 = 0, U8 = 1, I32 = 2 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);
// The element count of `s`: ValueError for a negative dimension or a count beyond 2^63-1 (checked
// arithmetic: a huge shape must not wrap around into a small, wrong one).
long long shape_numel(const Shape& s);
// a * b and a + b for sizes: ValueError naming `what` when the result does not fit in 64 bits.
long long checked_mul(long long a, long long b, const char* what);
long long checked_add(long long a, long long b, const char* what);

class Storage {
 public:
  // Owning storage of `bytes` on `device`; throws OutOfMemory naming the size on failure.
  Storage(size_t bytes, Device device);
  // Borrowed memory: `keep_alive` holds whatever owns `ptr` (e.g. a NumPy array) until released.
  Storage(void* ptr, size_t bytes, Device device, std::shared_ptr<void> keep_alive);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  bool owned_ = true;
  std::shared_ptr<void> keep_alive_;
};

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor borrow(void* ptr, const Shape& shape, DType dtype, Device device,
                       std::shared_ptr<void> keep_alive);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  long long dim(int i) const { return shape_.at(i < 0 ? i + rank() : i); }
  long long numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw() const { return static_cast<char*>(storage_->data()) + offset_; }
  float* f32() const { return typed<float>(DType::F32); }
  uint8_t* u8() const { return typed<uint8_t>(DType::U8); }
  int32_t* i32() const { return typed<int32_t>(DType::I32); }

  // A view of `shape` starting `elem_offset` elements in; shares storage.
  Tensor view(long long elem_offset, const Shape& shape) const;
  // Same storage, new shape with the same element count.
  Tensor reshape(const Shape& shape) const;
  // A copy on `device` (a new storage, even when the device is the same).
  Tensor to(Device device) const;
  // Copies `src` (same dtype and element count, any devices) into this tensor.
  void copy_from(const Tensor& src);
  void fill_zero();

  std::string str() const;  // "float32(250, 32, 32, 3) on cpu"

 private:
  template <typename T>
  T* typed(DType want) const {
    if (dtype_ != want) throw ValueError(cat("tensor is ", dtype_name(dtype_), ", expected ", dtype_name(want)));
    return static_cast<T*>(raw());
  }
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  DType dtype_ = DType::F32;
};

}  // namespace hpcnn
