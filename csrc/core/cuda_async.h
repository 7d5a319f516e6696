// What the rest of hpcnn (the model, the bindings) may ask of the CUDA backend beyond the ops:
// TF32 on/off, uploading the next batch on the copy stream (nn/batch_stager), and waiting for the
// device.
// Plain C++ (no CUDA headers): defined in cuda_context.cu with the CUDA backend and in
// cuda_async_absent.cpp (every call explains that there is no backend) without it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "core/cuda_runtime.h"

namespace hpcnn::cuda {

// TF32 tensor-core math for float32 convolutions (cuDNN) and GEMMs (cuBLAS). On by default, as in
// PyTorch's cuDNN path and TensorFlow; it only takes effect on compute capability 8.0 and newer.
// Process-wide; the next op on each device picks the new setting up.
void set_tf32(bool on);
bool tf32_enabled();
// Whether device `device` has TF32 tensor cores (compute capability >= 8.0).
bool tf32_supported(int device);

// Which cuDNN convolution algorithms may be used (hpcnn.config.set_deterministic):
//   Required  only deterministic ones (the default: a GPU run repeats itself bit for bit, as the
//             CPU does); when none fits the workspace the op refuses with an error that says so;
//   Warn      deterministic ones first; when none fits, a non-deterministic one with a warning;
//   Any       the fastest that fits, deterministic or not (cuDNN's order), without a word.
// Process-wide; each convolution plans again under a new setting. Every other GPU op of hpcnn
// is deterministic whatever the setting (our kernels use no atomics; cuBLAS on one stream).
enum class Determinism { Required = 0, Warn = 1, Any = 2 };
void set_determinism(Determinism d);
Determinism determinism();
inline const char* determinism_name(Determinism d) {
  return d == Determinism::Required ? "required" : d == Determinism::Warn ? "warn" : "any";
}

// Host-to-device copy on the device's copy stream, so that it overlaps the compute stream's work:
//   - `src` must be pinned host memory (a pinned HostBuffer, core/host_buffer.h) and stay
//     unchanged until copy_wait_host(device) returns (or the next synchronising call);
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
// Zeroes `bytes` of device memory on `device`'s compute stream (cudaMemsetAsync): ordered with the
// ops as any op is, and the host does not wait.
void fill_zero_async(int device, void* ptr, size_t bytes);

// Work on streams other than the compute stream that must finish before the device allocates or
// frees memory mid-step: cudaMalloc and cudaFree may wait for all of the device's work, and a
// collective on NCCL's stream can wait for peers that are themselves waiting for this replica, or
// that failed; the host thread would then hang inside cudaFree, where no timeout looks. So before
// the workspace or scratch buffer grows, the context calls every guard of the device: each one
// (an NCCL communicator's) waits, with its timeout and failure checks, until its collectives in
// flight are done, and may throw. Guards run on the growing thread with the device's context lock
// held: they must not take it. add_ returns an id for remove_ (which waits for a running guard).
int add_growth_guard(int device, std::function<void()> guard);
void remove_growth_guard(int device, int id);

// The GPU's peak SM clock in kHz (cudaDevAttrClockRate), 0 when unknown. For % of peak.
int sm_clock_khz(int device);

// Runs fn() `repeat` times between two CUDA events on `device`'s compute stream and returns the
// mean milliseconds per run (device time, excluding launch gaps before the first event). For the
// per-layer benchmark: fn must enqueue its work on that device's ops.
double time_ms(int device, const std::function<void()>& fn, int repeat);

}  // namespace hpcnn::cuda
