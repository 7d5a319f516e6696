// Packs buffers whose lifetimes are known into one arena: two buffers share bytes only when their
// lifetimes do not overlap. A lifetime is a closed interval of step times [first, last] (nn/
// step_plan.h: when a buffer is first written and last read), so an op's inputs and outputs,
// alive at the same time, never share memory.
//
// Greedy by size (the largest buffer placed first), each at the smallest gap that fits among the
// buffers placed so far whose lifetimes overlap its own, else after them. Deterministic: equal
// sizes are taken in index order.
#pragma once

#include <vector>

namespace hpcnn::nn {

struct BufferLife {
  long long bytes = 0;
  int first = 0, last = 0;
};

struct ArenaLayout {
  std::vector<long long> offsets;  // bytes, per buffer, multiples of the alignment
  long long bytes = 0;             // the arena's size
};

ArenaLayout pack_buffers(const std::vector<BufferLife>& buffers, long long alignment);

}  // namespace hpcnn::nn
