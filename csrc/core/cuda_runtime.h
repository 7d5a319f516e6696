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
// Free memory needs a CUDA context on each device (hundreds of MiB): ask for it only when wanted.
std::vector<DeviceInfo> list_devices(bool with_free_memory = true);
std::string unavailable_reason();
// Throws BackendError with the reason when device `index` cannot be used.
void require_device(int index);

std::string runtime_version_str();   // cudaRuntimeGetVersion, "13.0"
std::string driver_version_str();    // cudaDriverGetVersion, "" when no driver

void* malloc_device(size_t bytes, int device);   // OutOfMemory with bytes, free/total on failure
void free_device(void* ptr, int device) noexcept;
// Page-locked host memory, allocated with GPU `device` current (see cuda_runtime.cu); portable:
// any GPU may copy from it.
void* malloc_pinned(size_t bytes, int device = 0);
void free_pinned(void* ptr) noexcept;
// Which side each pointer of a copy is on (the values index cudaMemcpyKind's first four).
enum class CopyKind { HostToHost = 0, HostToDevice = 1, DeviceToHost = 2, DeviceToDevice = 3 };
void copy(void* dst, const void* src, size_t bytes, CopyKind kind);  // synchronous
void synchronize(int device);

}  // namespace hpcnn::cuda
