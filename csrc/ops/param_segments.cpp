#include "ops/param_segments.h"

#include <algorithm>
#include <limits>

#include "core/errors.h"

namespace hpcnn {

SegmentTable::SegmentTable(const std::vector<VariableSpan>& variables, Device d) : device_(d) {
  for (const VariableSpan& v : variables) {
    HPCNN_CHECK_ARG(v.begin >= 0 && v.end >= v.begin, "segment table: variable [", v.begin, ", ", v.end,
                    ") is not a range of elements");
    if (v.end == v.begin) continue;
    HPCNN_CHECK_ARG(variables_ < std::numeric_limits<int>::max(), "segment table: too many variables");
    for (long long b = v.begin; b < v.end; b += kSegmentElems) {
      ParamSegment s;
      s.begin = b;
      s.end = std::min(v.end, b + kSegmentElems);
      s.variable = variables_;
      s.decay = v.decay ? 1 : 0;
      s.l1 = v.l1;
      s.l2 = v.l2;
      host_.push_back(s);
    }
    HPCNN_CHECK_ARG(host_.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
                    "segment table: too many segments");
    ++variables_;
    elements_ += v.end - v.begin;
    extent_ = std::max(extent_, v.end);
  }
  if (d.is_cuda() && !host_.empty()) {
    const long long bytes = static_cast<long long>(host_.size() * sizeof(ParamSegment));
    Tensor host = Tensor::borrow(host_.data(), {bytes}, DType::U8, Device::cpu(), nullptr);
    on_device_ = host.to(d);
  }
}

const ParamSegment* SegmentTable::data() const {
  if (host_.empty()) return nullptr;
  if (device_.is_cpu()) return host_.data();
  return reinterpret_cast<const ParamSegment*>(on_device_.raw());
}

}  // namespace hpcnn
