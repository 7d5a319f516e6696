// The CUDA runtime as the core sees it: device query, memory, copies, and the reason a GPU is
// not usable. Defined in cuda_runtime.cu when the CUDA backend is built, and in
// cuda_runtime_absent.cpp (every call throws, the query says why) when it is not.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hpcnn::cuda {

bool compiled();  // was the CUDA backend built into this module?

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;          // compute capability
  size_t total_memory = 0, free_memory = 0;
  int multiprocessors = 0;
  int memory_bus_width_bits = 0;
  double memory_clock_khz = 0;       // 0 where the runtime no longer reports it
  double memory_bandwidth_gbs = 0;   // derived from the above, 0 where unknown
  std::string pci_bus_id;
};

// Visible devices; never throws. When the list is empty, `unavailable_reason()` says why
// (no backend compiled, no driver, CUDA_VISIBLE_DEVICES empty or NoDevFiles, no device).
// Listing creates no CUDA context. Free memory does, on every device (hundreds of MiB each, and
// an error where a GPU in exclusive-process mode is another job's): ask for it only when wanted;
// free_memory is 0 without it.
std::vector<DeviceInfo> list_devices(bool with_free_memory = false);
// Free bytes on GPU `device` (cudaMemGetInfo), asked from a short-lived thread of its own so that
// the calling thread's current device stays what it was. Creates this process's context on that
// device if it has none. 0 when the device cannot be asked.
size_t free_memory(int device) noexcept;
std::string unavailable_reason();
// Throws BackendError with the reason when device `index` cannot be used.
void require_device(int index);

std::string runtime_version_str();   // cudaRuntimeGetVersion, "13.0"
std::string driver_version_str();    // cudaDriverGetVersion, "" when no driver

void* malloc_device(size_t bytes, int device);   // OutOfMemory with bytes, free/total on failure
// Waits until GPU `device` has finished all queued work, then frees `ptr`: kernels or copies still
// queued may read or write the block, and cudaFree is allowed, not promised, to wait for them.
// Every device Storage is freed here, so no owner of device memory has to remember to wait.
void free_device(void* ptr, int device) noexcept;
// Page-locked host memory, allocated and freed with GPU `device` current (see cuda_runtime.cu);
// portable: any GPU may copy from it. These three leave the calling thread's current context as
// they found it (none included): a thread that holds another GPU's context keeps it.
void* malloc_pinned(size_t bytes, int device = 0);
void free_pinned(void* ptr, int device) noexcept;
// Whether `ptr` points into page-locked host memory (cuda::malloc_pinned or any other
// cudaHostAlloc'd block), so that an asynchronous copy to GPU `device` may read it directly.
// `device` is made current first (asking with another GPU current would create a context
// there). Never throws; false without the backend.
bool is_pinned(const void* ptr, int device) noexcept;
// Which side each pointer of a copy is on (the values index cudaMemcpyKind's first four).
enum class CopyKind { HostToHost = 0, HostToDevice = 1, DeviceToHost = 2, DeviceToDevice = 3 };
// Synchronous copy. `dst_device` / `src_device`: the GPU that holds dst / src (ignored for a
// host side). The GPU holding the data is made current BEFORE any CUDA call: the calling thread
// may be one that never chose a device, and asking anything with GPU 0 current would create a
// context there (hundreds of MiB; an error where GPU 0 is another job's in exclusive mode).
void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes, CopyKind kind);
void synchronize(int device);
// Whether this process holds a CUDA context on GPU `device` (the driver's primary context, which
// the runtime uses), asked without creating one: for tests that a call leaves other GPUs alone.
// False without the backend or a driver.
bool primary_context_active(int device) noexcept;
// The GPU whose context is current on the calling thread, or -1 when the thread has none (a
// thread that never made a CUDA call). Asked through the driver without creating anything.
int current_context_device() noexcept;

}  // namespace hpcnn::cuda
