// The dispatch of concatenate, its backward split, and copy (ops.h): checks, then the row copies
// of concat_cpu.cpp or concat_cuda.cu (concat.h).
#include "ops/ops.h"

#include <utility>
#include <vector>

#include "ops/concat.h"
#include "ops/dispatch.h"

namespace hpcnn::ops {

namespace {

// The axis of `shape` that `axis` names (negative from the end), checked: not the batch axis.
int concat_axis(const char* op, const Shape& shape, int axis) {
  const int rank = static_cast<int>(shape.size());
  const int a = axis < 0 ? axis + rank : axis;
  HPCNN_CHECK_ARG(a >= 0 && a < rank, op, ": axis ", axis, " is out of range for shape ", shape_str(shape));
  HPCNN_CHECK_ARG(a != 0, op, ": axis ", axis, " is the batch axis; concatenate along a per-sample axis");
  return a;
}

long long prod(const Shape& s, int from, int to) {
  long long p = 1;
  for (int i = from; i < to; ++i) p *= s[i];
  return p;
}

// The parts' shapes along `a` must agree with `whole` on every other axis, and add up to it.
void check_parts(const char* op, const Shape& whole, const std::vector<Shape>& parts, int a) {
  long long total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    bool fits = parts[i].size() == whole.size();
    for (size_t d = 0; fits && d < whole.size(); ++d) fits = static_cast<int>(d) == a || parts[i][d] == whole[d];
    HPCNN_CHECK_ARG(fits, op, ": part ", i, " has shape ", shape_str(parts[i]), ", which does not fit ",
                    shape_str(whole), " along axis ", a);
    total += parts[i][a];
  }
  HPCNN_CHECK_ARG(total == whole[a], op, ": the parts add up to ", total, " along axis ", a, ", the whole has ",
                  whole[a]);
}

void copy_rows(const Device& d, long long rows, long long width, const float* src, long long src_pitch, float* dst,
               long long dst_pitch) {
  HPCNN_DISPATCH(d, cpu::copy_rows(rows, width, src, src_pitch, dst, dst_pitch),
                 cuda::copy_rows(device_index, rows, width, src, src_pitch, dst, dst_pitch));
}

}  // namespace

void concat(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  HPCNN_CHECK_ARG(!xs.empty(), "concatenate: no inputs");
  expect_f32("concatenate", "output", y);
  const int a = concat_axis("concatenate", y.shape(), axis);
  std::vector<Shape> parts;
  for (const Tensor& x : xs) {
    expect_f32("concatenate", "input", x);
    same_device("concatenate", {&x, &y});
    parts.push_back(x.shape());
  }
  check_parts("concatenate", y.shape(), parts, a);
  const long long rows = prod(y.shape(), 0, a), pitch = prod(y.shape(), a, y.rank());
  long long offset = 0;
  for (const Tensor& x : xs) {
    const long long width = prod(x.shape(), a, x.rank());
    copy_rows(y.device(), rows, width, x.f32(), width, y.f32() + offset, pitch);
    offset += width;
  }
}

void split(const Tensor& dy, const std::vector<long long>& sizes, const std::vector<Tensor*>& dxs, int axis) {
  expect_f32("split", "input", dy);
  HPCNN_CHECK_ARG(sizes.size() == dxs.size(), "split: ", sizes.size(), " sizes for ", dxs.size(), " outputs");
  const int a = concat_axis("split", dy.shape(), axis);
  std::vector<Shape> parts;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape s = dy.shape();
    s[a] = sizes[i];
    if (dxs[i]) expect_shape("split", "output", *dxs[i], s);
    if (dxs[i]) same_device("split", {&dy, dxs[i]});
    parts.push_back(std::move(s));
  }
  check_parts("split", dy.shape(), parts, a);
  const long long rows = prod(dy.shape(), 0, a), pitch = prod(dy.shape(), a, dy.rank());
  long long offset = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const long long width = prod(parts[i], a, dy.rank());
    if (dxs[i]) copy_rows(dy.device(), rows, width, dy.f32() + offset, pitch, dxs[i]->f32(), width);
    offset += width;
  }
}

void copy(const Tensor& src, Tensor& dst) {
  expect_f32("copy", "source", src);
  expect_f32("copy", "destination", dst);
  HPCNN_CHECK_ARG(src.numel() == dst.numel(), "copy: source ", shape_str(src.shape()), " and destination ",
                  shape_str(dst.shape()), " differ in size");
  same_device("copy", {&src, &dst});
  const long long n = src.numel();
  const long long rows = src.rank() >= 2 ? src.dim(0) : 1;  // per sample: the CPU splits rows over threads
  const long long width = rows ? n / rows : 0;
  copy_rows(src.device(), rows, width, src.f32(), width, dst.f32(), width);
}

}  // namespace hpcnn::ops
