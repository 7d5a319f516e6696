// check_finite (ops.h): the host scan of finite_check_cpu.cpp, turned into a ValueError that says
// where the first NaN or inf is (finite_check.h). GPU tensors are not scanned.
#include "ops/ops.h"

#include <cmath>

#include "ops/dispatch.h"
#include "ops/finite_check.h"

namespace hpcnn::ops {

void check_finite(const Tensor& t, const char* what) {
  if (!t.device().is_cpu() || t.dtype() != DType::F32) return;
  const float* p = t.f32();
  const long long i = cpu::first_non_finite(p, t.numel());
  if (i >= 0)
    throw ValueError(cat(what, " contains ", std::isnan(p[i]) ? "NaN" : "inf", " (first at flat index ", i,
                         " of shape ", shape_str(t.shape()), ")"));
}

}  // namespace hpcnn::ops
