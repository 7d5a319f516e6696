// Per-thread scratch memory for CPU kernels (im2col buffers, partial gradients). Each thread
// keeps its own 64-byte aligned buffer that only grows, so a training step allocates nothing
// once the first step has run.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

#include "core/errors.h"

namespace hpcnn {

class ScratchBuffer {
 public:
  float* floats(size_t count, int slot = 0) {
    Slot& s = slots_[slot];
    size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    if (bytes > s.bytes) {
      void* p = std::aligned_alloc(64, bytes);
      if (!p) throw OutOfMemory(cat("cannot allocate ", bytes, " bytes of scratch memory"));
      s.ptr.reset(static_cast<float*>(p));
      s.bytes = bytes;
    }
    return s.ptr.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<float, Free> ptr;
    size_t bytes = 0;
  };
  Slot slots_[4];
};

// This thread's scratch buffers (slots 0..3 for independent uses within one kernel).
inline ScratchBuffer& thread_scratch() {
  static thread_local ScratchBuffer buf;
  return buf;
}

}  // namespace hpcnn
