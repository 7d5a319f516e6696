// cuda_async.h without the CUDA backend: the switches are remembered (so summary() can report
// them), the device calls explain why they cannot run.
#ifndef HPCNN_WITH_CUDA

#include <atomic>

#include "core/cuda_async.h"
#include "core/cuda_runtime.h"
#include "core/errors.h"

namespace hpcnn::cuda {

static std::atomic<bool> g_tf32{true};

static std::atomic<Determinism> g_determinism{Determinism::Required};

void set_tf32(bool on) { g_tf32 = on; }
bool tf32_enabled() { return g_tf32; }
bool tf32_supported(int) { return false; }
void set_determinism(Determinism d) { g_determinism = d; }
Determinism determinism() { return g_determinism; }
void fill_zero_async(int, void*, size_t) { throw BackendError(unavailable_reason()); }
void copy_h2d_async(int, void*, const void*, size_t, bool) { throw BackendError(unavailable_reason()); }
void copy_wait_host(int) { throw BackendError(unavailable_reason()); }
void synchronize_compute(int) {}
int sm_clock_khz(int) { return 0; }
int add_growth_guard(int, std::function<void()>) { return 0; }
void remove_growth_guard(int, int) {}
double time_ms(int, const std::function<void()>&, int) { throw BackendError(unavailable_reason()); }

}  // namespace hpcnn::cuda

#endif
