// The CUDA runtime when the CUDA backend was not built: every device call explains why.
#ifndef HPCNN_WITH_CUDA

#include "core/cuda_runtime.h"
#include "core/errors.h"

namespace hpcnn::cuda {

static const char* kWhy =
    "hpcnn was built without the CUDA backend (rebuild with nvcc, cuDNN and cuBLAS available, "
    "e.g. `HPCNN_CUDA=ON pip install .`; see docs/install.md)";

bool compiled() { return false; }
std::vector<DeviceInfo> list_devices(bool) { return {}; }
size_t free_memory(int) noexcept { return 0; }
std::string unavailable_reason() { return kWhy; }
void require_device(int) { throw BackendError(kWhy); }
std::string runtime_version_str() { return ""; }
std::string driver_version_str() { return ""; }
void* malloc_device(size_t, int) { throw BackendError(kWhy); }
void free_device(void*, int) noexcept {}
void* malloc_pinned(size_t, int) { throw BackendError(kWhy); }
void free_pinned(void*, int) noexcept {}
bool is_pinned(const void*, int) noexcept { return false; }
void copy(void*, int, const void*, int, size_t, CopyKind) { throw BackendError(kWhy); }
void synchronize(int) {}
bool primary_context_active(int) noexcept { return false; }
int current_context_device() noexcept { return -1; }

}  // namespace hpcnn::cuda

#endif
