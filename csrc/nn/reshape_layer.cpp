#include "nn/reshape_layer.h"

#include "core/errors.h"

namespace hpcnn::nn {

namespace {
std::string target_str(const std::vector<long long>& t) {
  std::string s = "(";
  for (size_t i = 0; i < t.size(); ++i) s += cat(i ? ", " : "", t[i]);
  return s + (t.size() == 1 ? ",)" : ")");
}
}  // namespace

ReshapeLayer::ReshapeLayer(std::vector<long long> target) : target_(std::move(target)) {
  HPCNN_CHECK_ARG(!target_.empty(), "Reshape: target_shape needs at least one axis");
  int unknown = 0;
  for (long long d : target_) {
    HPCNN_CHECK_ARG(d > 0 || d == -1, "Reshape: target_shape ", target_str(target_),
                    " may hold positive sizes and at most one -1, got ", d);
    unknown += d == -1;
  }
  HPCNN_CHECK_ARG(unknown <= 1, "Reshape: target_shape ", target_str(target_), " has more than one -1");
}

Shape ReshapeLayer::output_shape(const Shape& in) const {
  const long long total = shape_numel(in);
  long long known = 1;
  for (long long d : target_)
    if (d != -1) known *= d;
  Shape out(target_.begin(), target_.end());
  for (long long& d : out) {
    if (d != -1) continue;
    HPCNN_CHECK_ARG(known > 0 && total % known == 0, "Reshape: the input ", shape_str(in), " (", total,
                    " values per sample) cannot be reshaped to ", target_str(target_));
    d = total / known;
  }
  HPCNN_CHECK_ARG(shape_numel(out) == total, "Reshape: total size of the new array must be unchanged: the input ",
                  shape_str(in), " holds ", total, " values per sample, target_shape ", target_str(target_),
                  " holds ", shape_numel(out));
  return out;
}

}  // namespace hpcnn::nn
