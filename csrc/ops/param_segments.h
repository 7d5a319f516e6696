// The unit of work of the ops that run over a model's variables (its weight arrays in the one flat
// parameter buffer): the optimizer updates (ops/optimizer_step.h) and the fixed-order sums behind
// gradient clipping and weight penalties (ops/param_norms.h).
//
// A variable is cut into segments of at most kSegmentElems elements; a segment never spans two
// variables. A CUDA block runs one segment (kSegmentLanes threads), a CPU thread runs whole
// segments. Every per-variable sum is computed per segment in one fixed order (param_norms_body.h)
// and the segments' sums are added in table order, so the result does not depend on the thread
// count, and the CPU and the GPU add the same numbers in the same order.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace hpcnn {

constexpr long long kSegmentElems = 4096;
constexpr int kSegmentLanes = 256;  // threads of a CUDA block; lanes of the fixed-order sums

struct ParamSegment {
  long long begin = 0, end = 0;  // elements [begin, end) of the flat buffer
  int variable = 0;              // index of the variable in its table: 0, 1, ... (segments in order)
  int decay = 1;                 // optimizer tables: 1 when weight decay applies to the variable
  float l1 = 0.f, l2 = 0.f;      // weight-penalty tables: the variable's L1 and L2 factors
};

// One variable's description when a table is built: its elements and its per-variable settings.
struct VariableSpan {
  long long begin = 0, end = 0;
  bool decay = true;
  float l1 = 0.f, l2 = 0.f;
};

// A segment table: the host copy (what the CPU ops read) and, for a GPU, a copy in its memory
// (what the kernels read). Built once when the variables or the device change, not per step.
class SegmentTable {
 public:
  SegmentTable() = default;
  // The segments of `variables` (in the given order; empty spans are skipped), on device d.
  SegmentTable(const std::vector<VariableSpan>& variables, Device d);

  int size() const { return static_cast<int>(host_.size()); }  // segments
  int variables() const { return variables_; }
  long long elements() const { return elements_; }  // elements covered (sum over the spans)
  Device device() const { return device_; }
  const std::vector<ParamSegment>& host() const { return host_; }
  // The table in the memory of device(): the host vector's data on the CPU.
  const ParamSegment* data() const;
  // The largest element index + 1 the table touches (0 when empty): ops check it against buffers.
  long long extent() const { return extent_; }

 private:
  std::vector<ParamSegment> host_;
  Tensor on_device_;  // bytes of host_, on a GPU
  Device device_ = Device::cpu();
  int variables_ = 0;
  long long elements_ = 0, extent_ = 0;
};

}  // namespace hpcnn
