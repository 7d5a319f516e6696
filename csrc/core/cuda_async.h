// What the rest of hpcnn (the model, the bindings) may ask of the CUDA backend beyond the ops:
// TF32 on/off, prefetching the next batch on the copy stream, and waiting for the device.
// Plain C++ (no CUDA headers): defined in cuda_context.cu with the CUDA backend and in
// cuda_async_absent.cpp (every call explains that there is no backend) without it.
#pragma once

#include <cstddef>
#include <functional>

#include "core/cuda_runtime.h"

namespace hpcnn::cuda {

// TF32 tensor-core math for float32 convolutions (cuDNN) and GEMMs (cuBLAS). On by default, as in
// PyTorch's cuDNN path and TensorFlow; it only takes effect on compute capability 8.0 and newer.
// Process-wide; the next op on each device picks the new setting up.
void set_tf32(bool on);
bool tf32_enabled();
// Whether device `device` has TF32 tensor cores (compute capability >= 8.0).
bool tf32_supported(int device);

// Page-locked host memory (cudaMallocHost) for the batches copy_h2d_async uploads: RAII, grows
// on demand (contents not kept), never shrinks. Without the backend, reserve() throws why.
class PinnedHostBuffer {
 public:
  explicit PinnedHostBuffer(int device = 0) : device_(device) {}
  PinnedHostBuffer(size_t bytes, int device) : device_(device) { reserve(bytes); }
  ~PinnedHostBuffer() { free_pinned(ptr_); }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  void* reserve(size_t bytes) {
    if (bytes > bytes_ || !ptr_) {
      void* p = malloc_pinned(bytes ? bytes : 1, device_);  // throws OutOfMemory / BackendError; old buffer kept then
      free_pinned(ptr_);
      ptr_ = p;
      bytes_ = bytes;
    }
    return ptr_;
  }
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  int device_ = 0;  // the GPU made current for the allocation
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Host-to-device copy on the device's copy stream, so that it overlaps the compute stream's work:
//   - `src` must be pinned host memory (cuda::malloc_pinned) and stay unchanged until
//     copy_wait_host(device) returns (or the next synchronising call);
//   - every op enqueued on `device` after this call sees the copied data (the compute stream
//     waits on an event recorded after the copy);
//   - `dst` must not be read or written by compute work enqueued before this call, unless
//     `after_queued_compute` is true: then the copy starts only once that work has finished.
void copy_h2d_async(int device, void* dst, const void* src, size_t bytes, bool after_queued_compute);
// Blocks the host until the last copy_h2d_async on `device` has finished (so its pinned source
// can be refilled).
void copy_wait_host(int device);
// Blocks the host until everything enqueued on `device`'s compute stream has finished.
void synchronize_compute(int device);

// The GPU's peak SM clock in kHz (cudaDevAttrClockRate), 0 when unknown. For % of peak.
int sm_clock_khz(int device);

// Runs fn() `repeat` times between two CUDA events on `device`'s compute stream and returns the
// mean milliseconds per run (device time, excluding launch gaps before the first event). For the
// per-layer benchmark: fn must enqueue its work on that device's ops.
double time_ms(int device, const std::function<void()>& fn, int repeat);

}  // namespace hpcnn::cuda
