// The element-wise sums' dispatch (ops.h: add_n, accumulate): checks, then add_cpu.cpp or
// add_cuda.cu (add.h).
#include "ops/ops.h"

#include <vector>

#include "ops/add.h"
#include "ops/dispatch.h"

namespace hpcnn::ops {

void add_n(const std::vector<Tensor>& xs, Tensor& y) {
  HPCNN_CHECK_ARG(xs.size() >= 2, "add: needs at least two inputs, got ", xs.size());
  expect_f32("add", "output", y);
  for (size_t i = 0; i < xs.size(); ++i) {
    expect_f32("add", "input", xs[i]);
    HPCNN_CHECK_ARG(xs[i].shape() == y.shape(), "add: input ", i, " has shape ", shape_str(xs[i].shape()),
                    ", the output ", shape_str(y.shape()), " (every input must have the output's shape)");
    same_device("add", {&xs[i], &y});
  }
  const long long n = y.numel();
  HPCNN_DISPATCH(y.device(), cpu::add(n, xs[0].f32(), xs[1].f32(), y.f32()),
                 cuda::add(device_index, n, xs[0].f32(), xs[1].f32(), y.f32()));
  for (size_t i = 2; i < xs.size(); ++i)
    HPCNN_DISPATCH(y.device(), cpu::accumulate(n, y.f32(), xs[i].f32()),
                   cuda::accumulate(device_index, n, y.f32(), xs[i].f32()));
}

void accumulate(Tensor& dst, const Tensor& src) {
  expect_f32("accumulate", "destination", dst);
  expect_f32("accumulate", "source", src);
  HPCNN_CHECK_ARG(src.numel() == dst.numel(), "accumulate: source ", shape_str(src.shape()), " and destination ",
                  shape_str(dst.shape()), " differ in size");
  same_device("accumulate", {&dst, &src});
  HPCNN_DISPATCH(dst.device(), cpu::accumulate(dst.numel(), dst.f32(), src.f32()),
                 cuda::accumulate(device_index, dst.numel(), dst.f32(), src.f32()));
}

}  // namespace hpcnn::ops
