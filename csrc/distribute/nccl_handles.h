// The NCCL transport's owners and waits (distribute/nccl_communicator.cu, the one file that
// includes this): one ncclComm_t ended by ncclCommAbort, the NCCL stream with the events that
// order it against the compute stream, zeroed device floats for the warm-up sums, a
// communicator's state, and the polling pace and deadline of every wait. Built only with the
// CUDA backend and HPCNN_NCCL.
#pragma once

#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <thread>

#include "core/cuda_check.h"
#include "core/cuda_context.h"
#include "core/cuda_runtime.h"

namespace hpcnn::distribute::nccl {

using Clock = std::chrono::steady_clock;

// Polls fast at first (a gradient sum ends in microseconds to milliseconds), then sleeps: a
// replica waiting for a slow or dead peer leaves the cores to the others.
class Backoff {
 public:
  void pause() {
    ++polls_;
    if (polls_ < 200) return;
    std::this_thread::sleep_for(std::chrono::microseconds(polls_ < 2000 ? 20 : 200));
  }

 private:
  int polls_ = 0;
};

class Deadline {
 public:
  explicit Deadline(double seconds) : end_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                              std::chrono::duration<double>(seconds))) {}
  bool passed() const { return Clock::now() > end_; }

 private:
  Clock::time_point end_;
};

// The state of a non-blocking communicator: ncclSuccess (idle or enqueued), ncclInProgress (an
// init, connect or enqueue still running), or the error that broke it.
inline ncclResult_t state_of(ncclComm_t comm) {
  ncclResult_t s = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm, &s);
  return r != ncclSuccess ? r : s;
}

// One ncclComm_t, ended by ncclCommAbort in every case: a healthy communicator is idle when its
// owner goes (every sum was waited for), and ncclCommAbort frees it locally without talking to
// peers (ncclCommDestroy would first finalize, which on a non-blocking communicator returns
// before it is done and may wait for the peers' own finalize).
class CommHandle {
 public:
  explicit CommHandle(int device) : device_(device) {}
  ~CommHandle() { abort(); }
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  ncclComm_t get() const { return comm_; }
  ncclComm_t* slot() { return &comm_; }
  void abort() noexcept {
    if (!comm_) return;
    cudaSetDevice(device_);
    ncclCommAbort(comm_);
    (void)cudaGetLastError();
    comm_ = nullptr;
  }

 private:
  int device_;
  ncclComm_t comm_ = nullptr;
};

// The NCCL stream (non-blocking: the synchronous copies on the legacy default stream must not
// wait for a collective) and the events that order it with the compute stream.
struct CommStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr, drained = nullptr;
  int device = 0;
  explicit CommStream(int dev) : device(dev) {
    cuda::ContextLock ctx(dev);  // the device current for the calls below
    HPCNN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    HPCNN_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    HPCNN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    HPCNN_CUDA_CHECK(cudaEventCreateWithFlags(&drained, cudaEventDisableTiming));
  }
  ~CommStream() {
    cudaSetDevice(device);
    if (drained) cudaEventDestroy(drained);
    if (done) cudaEventDestroy(done);
    if (ready) cudaEventDestroy(ready);
    if (stream) cudaStreamDestroy(stream);
    (void)cudaGetLastError();
  }
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;
};

// Zeroed floats on a device, for the warm-up sums. Zeroed on `stream`, the communicator's (NCCL's)
// stream that the sums then run on: that orders the two. A plain cudaMemset would run on the legacy
// default stream, which a non-blocking stream does not wait for: the sums could read the buffer
// before it was zeroed.
struct DeviceFloats {
  float* p = nullptr;
  int device;
  DeviceFloats(int dev, size_t count, cudaStream_t stream) : device(dev) {
    HPCNN_CUDA_CHECK(cudaSetDevice(dev));
    HPCNN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), count * sizeof(float)));
    HPCNN_CUDA_CHECK(cudaMemsetAsync(p, 0, count * sizeof(float), stream));
  }
  ~DeviceFloats() {
    cudaSetDevice(device);
    if (p) cudaFree(p);
    (void)cudaGetLastError();
  }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
};

}  // namespace hpcnn::distribute::nccl
