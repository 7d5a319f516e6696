// The CUDA runtime seen by the core: device query, memory, copies, and why a GPU is unusable.
// The runtime is linked statically and loads libcuda.so only on the first call, so importing
// hpcnn on a node without a driver is fine: calls here then report "no driver".
#include "core/cuda_runtime.h"

#include <cuda.h>  // driver API types only: the functions are looked up, libcuda is not linked
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "core/cuda_check.h"
#include "core/errors.h"

namespace hpcnn::cuda {

bool compiled() { return true; }

static std::string version_str(int v) {
  if (v <= 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string runtime_version_str() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "";
  return version_str(v);
}

std::string driver_version_str() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) return "";
  return version_str(v);
}

// A driver API function, looked up through the runtime: hpcnn links no libcuda (it must load on
// nodes without a driver). Null when the driver or the function is not there. Looking up makes
// no context.
template <typename Fn>
static Fn driver_function(const char* name) {
  void* fn = nullptr;
#if CUDART_VERSION >= 12050
  const bool found = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, nullptr) == cudaSuccess;
#else
  const bool found = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, nullptr) == cudaSuccess;
#endif
  (void)cudaGetLastError();
  return found ? reinterpret_cast<Fn>(fn) : nullptr;
}

namespace {

// Keeps the calling thread's current context (none included) across calls that must make a
// given GPU current: cudaSetDevice would otherwise leave that GPU current for the caller's later
// calls, and "restoring" with cudaSetDevice(previous) would create a context on GPU 0 for a
// thread that had none. The driver's context stack is saved and put back exactly.
class CurrentContextKept {
 public:
  CurrentContextKept() {
    // Looked up once (the stager asks is_pinned every step).
    static const auto get = driver_function<CUresult (*)(CUcontext*)>("cuCtxGetCurrent");
    static const auto set = driver_function<CUresult (*)(CUcontext)>("cuCtxSetCurrent");
    get_ = get;
    set_ = set;
    saved_ok_ = get_ && set_ && get_(&saved_) == CUDA_SUCCESS;
  }
  ~CurrentContextKept() {
    if (saved_ok_) set_(saved_);
  }
  CurrentContextKept(const CurrentContextKept&) = delete;
  CurrentContextKept& operator=(const CurrentContextKept&) = delete;

 private:
  CUresult (*get_)(CUcontext*) = nullptr;
  CUresult (*set_)(CUcontext) = nullptr;
  CUcontext saved_ = nullptr;
  bool saved_ok_ = false;
};

}  // namespace

// Why there are no usable devices, or "" when there is at least one.
static std::string probe_reason(int* count_out) {
  *count_out = 0;
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string s = cvd;
    if (s.empty())
      return "CUDA_VISIBLE_DEVICES is set but empty: no GPU is visible to this process "
             "(on Slurm, request one with --gres=gpu:1 or --gpus=1)";
    if (s == "NoDevFiles")
      return "CUDA_VISIBLE_DEVICES=NoDevFiles: Slurm gave this job no GPU "
             "(request one with --gres=gpu:1 or --gpus=1 on a GPU partition)";
  }
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (e == cudaErrorInsufficientDriver) {
      int drv = 0;
      cudaDriverGetVersion(&drv);
      if (drv == 0)
        return "no NVIDIA driver found (libcuda.so is not loadable): this node has no GPU driver; "
               "run on a GPU node (Slurm: --gres=gpu:1 on a GPU partition)";
      return "the NVIDIA driver (CUDA " + version_str(drv) + ") is older than the CUDA runtime hpcnn was built with (" +
             runtime_version_str() + "): load a newer driver or build hpcnn with an older CUDA toolkit";
    }
    if (e == cudaErrorNoDevice) return "the NVIDIA driver is loaded but reports no CUDA device";
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  }
  if (n == 0) return "no CUDA device is visible";
  *count_out = n;
  return "";
}

std::string unavailable_reason() {
  int n;
  return probe_reason(&n);
}

std::vector<DeviceInfo> list_devices(bool with_free_memory) {
  std::vector<DeviceInfo> out;
  int n = 0;
  if (!probe_reason(&n).empty()) return out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    DeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.major = p.major;
    d.minor = p.minor;
    d.total_memory = p.totalGlobalMem;
    d.multiprocessors = p.multiProcessorCount;
    d.memory_bus_width_bits = p.memoryBusWidth;
    int clock_khz = 0;  // cudaDeviceProp::memoryClockRate is gone in CUDA 13: ask the attribute
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i) == cudaSuccess && clock_khz > 0) {
      d.memory_clock_khz = clock_khz;
      d.memory_bandwidth_gbs = 2.0 * clock_khz * 1e3 * (p.memoryBusWidth / 8.0) / 1e9;  // DDR: two transfers a clock
    } else {
      (void)cudaGetLastError();
    }
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), i) == cudaSuccess) d.pci_bus_id = bus;
    (void)cudaGetLastError();
    if (with_free_memory) d.free_memory = free_memory(i);
    out.push_back(d);
  }
  return out;
}

size_t free_memory(int device) noexcept {
  // A thread of its own: it has no current context to disturb, and it ends with this call.
  size_t free_bytes = 0;
  try {
    std::thread asker([device, &free_bytes] {
      size_t fr = 0, tot = 0;
      if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess) free_bytes = fr;
      (void)cudaGetLastError();
    });
    asker.join();
  } catch (...) {  // no thread could be started: report nothing rather than throw from a query
  }
  return free_bytes;
}

void require_device(int index) {
  int n = 0;
  std::string why = probe_reason(&n);
  if (!why.empty()) throw BackendError("no usable GPU: " + why);
  if (index < 0 || index >= n)
    throw BackendError(cat("GPU ", index, " does not exist: ", n, " visible device(s) (indices 0..", n - 1,
                           "; CUDA_VISIBLE_DEVICES renumbers them from 0)"));
}

void* malloc_device(size_t bytes, int device) {
  HPCNN_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    throw OutOfMemory(cat("GPU ", device, " out of memory: asked for ", bytes, " bytes (", bytes / 1048576.0,
                          " MiB) with ", fr / 1048576.0, " MiB free of ", tot / 1048576.0,
                          " MiB; try a smaller batch_size"));
  }
  HPCNN_CUDA_CHECK(e);
  return p;
}

void free_device(void* ptr, int device) noexcept {
  if (!ptr) return;
  cudaSetDevice(device);
  // Work queued on any stream of the device (the compute stream's kernels, the copy stream's
  // uploads) may still use the block. Owners that free many buffers at once wait first
  // themselves (nn/model.cpp); then this wait returns at once. Errors are ignored: a device
  // in an error state frees what it can, and a destructor has nobody to report to.
  cudaDeviceSynchronize();
  cudaFree(ptr);
  (void)cudaGetLastError();
}

void* malloc_pinned(size_t bytes, int device) {
  // cudaMallocHost works in the calling thread's current device, whose context it creates when
  // the thread has none: on the prefetcher's own thread that would be GPU 0 whatever the model's
  // GPU (hundreds of MiB there, or cudaErrorDevicesUnavailable when GPU 0 is another process's in
  // exclusive-process mode). With unified addressing the block is portable to every GPU. The
  // caller's own current context is put back afterwards.
  CurrentContextKept keep;
  HPCNN_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  cudaError_t e = cudaMallocHost(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw OutOfMemory(cat("cannot allocate ", bytes, " bytes of pinned host memory"));
  }
  HPCNN_CUDA_CHECK(e);
  return p;
}

void free_pinned(void* ptr, int device) noexcept {
  if (!ptr) return;
  // As for malloc_pinned: a thread that never chose a device (the prefetcher's) would otherwise
  // create a context on GPU 0 just to free the block.
  CurrentContextKept keep;
  cudaSetDevice(device);
  cudaFreeHost(ptr);
  (void)cudaGetLastError();
}

bool is_pinned(const void* ptr, int device) noexcept {
  if (!ptr) return false;
  CurrentContextKept keep;
  cudaPointerAttributes attr{};
  if (cudaSetDevice(device) != cudaSuccess || cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes, CopyKind kind) {
  static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                         cudaMemcpyDeviceToDevice};  // indexed by CopyKind
  // cudaMemcpy runs on the CURRENT device's legacy default stream, which is ordered with that
  // device's blocking streams (the backend's compute streams, core/cuda_context.h). Make the GPU
  // that holds the data current first -- before any other CUDA call, so that no context is made
  // on the thread's default GPU 0 -- so the copy waits for (d2h) or precedes (h2d) its kernels.
  if (kind == CopyKind::HostToHost) {
    HPCNN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToHost));
    return;
  }
  const int on_gpu = kind == CopyKind::HostToDevice ? dst_device : src_device;
  HPCNN_CUDA_CHECK(cudaSetDevice(on_gpu));
  if (kind == CopyKind::DeviceToDevice && dst_device != src_device) {
    // Between two GPUs (model.to('gpu:1') of a model on gpu:0): a device-to-device cudaMemcpy
    // may return before the copy is done, and the legacy stream of the source GPU orders
    // nothing on the destination GPU. cudaMemcpyPeer is serialised with the pending and
    // future work of both devices (legacy default stream semantics on each); then wait for
    // it, so that the source may be freed and the destination's streams see the data.
    HPCNN_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes));
    HPCNN_CUDA_CHECK(cudaDeviceSynchronize());
    HPCNN_CUDA_CHECK(cudaSetDevice(dst_device));
    HPCNN_CUDA_CHECK(cudaDeviceSynchronize());
    return;
  }
  HPCNN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kinds[static_cast<int>(kind)]));
}

void synchronize(int device) {
  HPCNN_CUDA_CHECK(cudaSetDevice(device));
  HPCNN_CUDA_CHECK(cudaDeviceSynchronize());
}

bool primary_context_active(int device) noexcept {
  // Neither the lookup nor the query makes a context.
  const auto device_get = driver_function<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
  const auto get_state = driver_function<CUresult (*)(CUdevice, unsigned int*, int*)>("cuDevicePrimaryCtxGetState");
  if (!device_get || !get_state) return false;
  CUdevice dev = 0;
  unsigned int flags = 0;
  int active = 0;
  if (device_get(&dev, device) != CUDA_SUCCESS) return false;
  if (get_state(dev, &flags, &active) != CUDA_SUCCESS) return false;
  return active != 0;
}

int current_context_device() noexcept {
  const auto get_current = driver_function<CUresult (*)(CUcontext*)>("cuCtxGetCurrent");
  const auto ctx_device = driver_function<CUresult (*)(CUdevice*)>("cuCtxGetDevice");
  const auto device_get = driver_function<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
  const auto device_count = driver_function<CUresult (*)(int*)>("cuDeviceGetCount");
  CUcontext ctx = nullptr;
  if (!get_current || !ctx_device || !device_get || !device_count) return -1;
  if (get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr) return -1;
  CUdevice current = 0;
  int n = 0;
  if (ctx_device(&current) != CUDA_SUCCESS || device_count(&n) != CUDA_SUCCESS) return -1;
  for (int i = 0; i < n; ++i) {  // CUdevice is a handle: find its ordinal
    CUdevice d = 0;
    if (device_get(&d, i) == CUDA_SUCCESS && d == current) return i;
  }
  return -1;
}

}  // namespace hpcnn::cuda
