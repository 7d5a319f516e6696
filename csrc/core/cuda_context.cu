// Per-device CUDA context (see cuda_context.h) and the cuda_async.h entry points.
#include "core/cuda_context.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda_async.h"
#include "core/cuda_runtime.h"
#include "core/errors.h"
#include "core/transfer_stats.h"

namespace hpcnn::cuda {

// ------------------------------------------------------------------ errors
void throw_oom(int device, size_t bytes, const char* what) {
  size_t fr = 0, tot = 0;
  cudaMemGetInfo(&fr, &tot);
  (void)cudaGetLastError();
  throw OutOfMemory(cat("GPU ", device, " out of memory in ", what, ": asked for ", bytes, " bytes (",
                        bytes / 1048576.0, " MiB) with ", fr / 1048576.0, " MiB free of ", tot / 1048576.0,
                        " MiB; try a smaller batch_size"));
}

// ------------------------------------------------------------------ growth guards (cuda_async.h)
namespace {
// One device's guards. Its mutex is held while they run (so remove_growth_guard waits for a
// running one) and is per device: a replica draining its device never blocks another device's.
struct GrowthGuards {
  std::mutex mu;
  int next_id = 1;
  std::map<int, std::function<void()>> guards;
};
std::mutex g_guards_mutex;
std::map<int, std::shared_ptr<GrowthGuards>>& guard_table() {
  static std::map<int, std::shared_ptr<GrowthGuards>> t;
  return t;
}
std::shared_ptr<GrowthGuards> guards_of(int device) {
  std::lock_guard<std::mutex> lk(g_guards_mutex);
  auto& p = guard_table()[device];
  if (!p) p = std::make_shared<GrowthGuards>();
  return p;
}
void run_growth_guards(int device) {
  std::shared_ptr<GrowthGuards> g = guards_of(device);
  std::lock_guard<std::mutex> lk(g->mu);
  for (auto& [id, guard] : g->guards) guard();
}
}  // namespace

int add_growth_guard(int device, std::function<void()> guard) {
  std::shared_ptr<GrowthGuards> g = guards_of(device);
  std::lock_guard<std::mutex> lk(g->mu);
  const int id = g->next_id++;
  g->guards[id] = std::move(guard);
  return id;
}

void remove_growth_guard(int device, int id) {
  std::shared_ptr<GrowthGuards> g = guards_of(device);
  std::lock_guard<std::mutex> lk(g->mu);
  g->guards.erase(id);
}

// ------------------------------------------------------------------ RAII owners
void* DeviceBuffer::reserve(size_t bytes, int device, cudaStream_t stream, const char* what) {
  if (bytes <= bytes_ && ptr_) return ptr_;
  // cudaFree and cudaMalloc may wait for every stream of the device: collectives in flight on
  // other streams finish first (cuda_async.h, growth guards), so that this never waits on a peer.
  run_growth_guards(device);
  // Work already queued may still use the old block: let it finish before the block goes.
  if (ptr_) HPCNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  size_t want = std::max(bytes, bytes_ + bytes_ / 2);  // grow geometrically: few reallocations
  release();
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, want);
  if (e == cudaErrorMemoryAllocation && want > bytes) {  // the slack did not fit: ask for the need only
    (void)cudaGetLastError();
    want = bytes;
    e = cudaMalloc(&p, want);
  }
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw_oom(device, bytes, what);
  }
  HPCNN_CUDA_CHECK(e);
  ptr_ = p;
  bytes_ = want;
  device_ = device;
  return ptr_;
}

void DeviceBuffer::release() noexcept {
  if (ptr_) {
    cudaFree(ptr_);  // the device is current (ContextLock) or the process is ending
    (void)cudaGetLastError();
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

StreamOwner::StreamOwner(int) {
  // Blocking with respect to the legacy default stream: see cuda_context.h.
  HPCNN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamDefault));
}
StreamOwner::~StreamOwner() {
  if (s) cudaStreamDestroy(s);
  (void)cudaGetLastError();
}

EventOwner::EventOwner() { HPCNN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
EventOwner::~EventOwner() {
  if (e) cudaEventDestroy(e);
  (void)cudaGetLastError();
}

// cuDNN's version at run time must be the major version compiled against and not older than it
// (cuDNN 9 keeps the API of a major release backward compatible across minor releases).
static void check_cudnn_version() {
  static std::once_flag once;
  static std::string problem;
  std::call_once(once, [] {
    size_t rt = cudnnGetVersion();
    size_t ct = CUDNN_VERSION;
    // cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 encoded major*1000 + minor*100 + patch.
    constexpr size_t scale = CUDNN_MAJOR >= 9 ? 10000 : 1000;
    size_t rt_major = rt / scale, ct_major = ct / scale;
    auto str = [](size_t v) { return cat(v / scale, ".", (v % scale) / 100, ".", v % 100); };
    if (rt_major != ct_major || rt < ct)
      problem = cat("cuDNN at run time is ", str(rt), " but hpcnn was compiled against cuDNN ", str(ct),
                    ": load the cuDNN ", ct_major, ".x it was built with (>= ", str(ct),
                    ", e.g. `conda install -c conda-forge cudnn`) or rebuild hpcnn in this environment");
  });
  if (!problem.empty()) throw BackendError(problem);
}

CudnnHandle::CudnnHandle() {
  check_cudnn_version();
  HPCNN_CUDNN_CHECK(cudnnCreate(&h));
}
CudnnHandle::~CudnnHandle() {
  if (h) cudnnDestroy(h);
}

CublasHandle::CublasHandle() { HPCNN_CUBLAS_CHECK(cublasCreate(&h)); }
CublasHandle::~CublasHandle() {
  if (h) cublasDestroy(h);
}

// ------------------------------------------------------------------ TF32 switch
static std::atomic<bool> g_tf32{true};

void set_tf32(bool on) { g_tf32 = on; }
bool tf32_enabled() { return g_tf32; }

// ------------------------------------------------------------------ determinism switch
static std::atomic<Determinism> g_determinism{Determinism::Required};

void set_determinism(Determinism d) { g_determinism = d; }
Determinism determinism() { return g_determinism; }

bool tf32_supported(int device) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major >= 8;
}

int sm_clock_khz(int device) {
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return khz;
}

// ------------------------------------------------------------------ context
std::shared_ptr<ConvAlgoCache> make_conv_algo_cache();  // cudnn_ops.cu

Context::Context(int dev) : device(dev), compute(dev), copy(dev) {
  HPCNN_CUDA_CHECK(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, dev));
  HPCNN_CUDA_CHECK(cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
  HPCNN_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev));
  HPCNN_CUDNN_CHECK(cudnnSetStream(cudnn.h, compute.s));
  HPCNN_CUBLAS_CHECK(cublasSetStream(cublas.h, compute.s));
  // cuBLAS may then use its own default workspace; pointer mode host: alpha/beta are host floats.
  HPCNN_CUBLAS_CHECK(cublasSetPointerMode(cublas.h, CUBLAS_POINTER_MODE_HOST));
  HPCNN_CUBLAS_CHECK(cublasSetMathMode(cublas.h, CUBLAS_DEFAULT_MATH));
  conv_algos = make_conv_algo_cache();
}

Context::~Context() {
  // Let queued work finish before its buffers and handles go (members die after this body).
  cudaSetDevice(device);
  cudaStreamSynchronize(compute.s);
  cudaStreamSynchronize(copy.s);
  (void)cudaGetLastError();
}

bool Context::use_tf32() const { return has_tf32() && tf32_enabled(); }

size_t Context::workspace_limit() const {
  size_t fr = 0, tot = 0;
  if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
    (void)cudaGetLastError();
    return workspace.bytes();
  }
  // The current workspace can be reused; new memory: a quarter of what is free, at most 1 GiB.
  return workspace.bytes() + std::min<size_t>(fr / 4, size_t(1) << 30);
}

static std::mutex g_contexts_mutex;

// Contexts live until the process ends, and at exit they are deliberately NOT destroyed: by then
// the CUDA runtime (linked statically, with its own exit handler), cuBLAS and cuDNN may already
// have been torn down in an order we do not control, and destroying handles after that can crash
// a program that has finished its work. The driver reclaims every resource of an exiting process.
struct ContextTable {
  std::vector<std::unique_ptr<Context>> v;
  ~ContextTable() {
    for (auto& c : v) (void)c.release();  // intentional: see above
  }
};

static ContextTable& context_table() {
  static ContextTable table;
  return table;
}

static Context& context_of(int device) {
  auto& contexts = context_table().v;
  std::lock_guard<std::mutex> lock(g_contexts_mutex);
  if (device < 0) throw ValueError(cat("GPU index ", device, " is negative"));
  if (static_cast<size_t>(device) >= contexts.size()) {
    require_device(device);  // a clear message when the device does not exist or there is no driver
    contexts.resize(device + 1);
  }
  if (!contexts[device]) {
    require_device(device);
    HPCNN_CUDA_CHECK(cudaSetDevice(device));
    contexts[device] = std::make_unique<Context>(device);
  }
  return *contexts[device];
}

bool context_exists(int device) {
  std::lock_guard<std::mutex> lock(g_contexts_mutex);
  const auto& contexts = context_table().v;
  return device >= 0 && static_cast<size_t>(device) < contexts.size() && contexts[device] != nullptr;
}

ContextLock::ContextLock(int device) : ctx_(&context_of(device)), lock_(ctx_->mutex) {
  HPCNN_CUDA_CHECK(cudaSetDevice(device));
  bool want = ctx_->use_tf32();
  if (want != ctx_->tf32_applied) {
    HPCNN_CUBLAS_CHECK(cublasSetMathMode(ctx_->cublas.h, want ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    ctx_->tf32_applied = want;
  }
}

// ------------------------------------------------------------------ async copies
void copy_h2d_async(int device, void* dst, const void* src, size_t bytes, bool after_queued_compute) {
  ContextLock ctx(device);
  if (bytes == 0) return;
  cudaPointerAttributes attr{};
  HPCNN_CUDA_CHECK(cudaPointerGetAttributes(&attr, src));
  HPCNN_CHECK_ARG(attr.type == cudaMemoryTypeHost, "copy_h2d_async: the source must be pinned host memory "
                  "(cuda::malloc_pinned); a pageable source would make the copy synchronous");
  if (after_queued_compute) {
    HPCNN_CUDA_CHECK(cudaEventRecord(ctx->compute_mark.e, ctx->compute.s));
    HPCNN_CUDA_CHECK(cudaStreamWaitEvent(ctx->copy.s, ctx->compute_mark.e, 0));
  }
  transfer_stats().count_h2d(bytes);
  HPCNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->copy.s));
  HPCNN_CUDA_CHECK(cudaEventRecord(ctx->copy_done.e, ctx->copy.s));
  // Work enqueued on the compute stream from now on starts after the copy.
  HPCNN_CUDA_CHECK(cudaStreamWaitEvent(ctx->compute.s, ctx->copy_done.e, 0));
}

void copy_wait_host(int device) {
  ContextLock ctx(device);
  HPCNN_CUDA_CHECK(cudaEventSynchronize(ctx->copy_done.e));
}

void synchronize_compute(int device) {
  ContextLock ctx(device);
  HPCNN_CUDA_CHECK(cudaStreamSynchronize(ctx->compute.s));
}

void fill_zero_async(int device, void* ptr, size_t bytes) {
  ContextLock ctx(device);
  if (bytes) HPCNN_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, ctx->compute.s));
}

namespace {
struct TimingEvent {
  cudaEvent_t e = nullptr;
  TimingEvent() { HPCNN_CUDA_CHECK(cudaEventCreate(&e)); }
  ~TimingEvent() {
    if (e) cudaEventDestroy(e);
  }
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
};
}  // namespace

double time_ms(int device, const std::function<void()>& fn, int repeat) {
  HPCNN_CHECK_ARG(repeat > 0, "time_ms: repeat must be positive, got ", repeat);
  cudaStream_t s;
  {
    ContextLock ctx(device);  // released before fn(): the ops take the lock themselves
    s = ctx.stream();
  }
  HPCNN_CUDA_CHECK(cudaSetDevice(device));
  TimingEvent start, stop;
  HPCNN_CUDA_CHECK(cudaEventRecord(start.e, s));
  for (int i = 0; i < repeat; ++i) fn();
  HPCNN_CUDA_CHECK(cudaSetDevice(device));
  HPCNN_CUDA_CHECK(cudaEventRecord(stop.e, s));
  HPCNN_CUDA_CHECK(cudaEventSynchronize(stop.e));
  float ms = 0.f;
  HPCNN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, stop.e));
  return ms / repeat;
}

}  // namespace hpcnn::cuda
