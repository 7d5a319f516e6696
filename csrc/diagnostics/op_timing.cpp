#include "diagnostics/op_timing.h"

#include <chrono>
#include <functional>
#include <random>

#include "core/cuda_async.h"
#include "core/errors.h"
#include "ops/conv2d_layout.h"
#include "ops/ops.h"

namespace hpcnn::diagnostics {

namespace {

// A float tensor of `shape` on `d` holding uniform values in [-1, 1) (fixed seed: reproducible).
Tensor random_tensor(const Shape& shape, Device d, unsigned seed) {
  Tensor h = Tensor::empty(shape, DType::F32, Device::cpu());
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  float* p = h.f32();
  for (long long i = 0; i < h.numel(); ++i) p[i] = u(gen);
  return d.is_cpu() ? h : h.to(d);
}

// Mean milliseconds per call of fn on `d`: CUDA events on the device's compute stream, or the
// host clock on the CPU. One untimed call first (algorithm choice, workspace allocation).
double time_on(Device d, int repeat, const std::function<void()>& fn) {
  HPCNN_CHECK_ARG(repeat > 0, "repeat must be positive, got ", repeat);
  fn();
  if (d.is_cuda()) {
    cuda::synchronize_compute(d.index);
    return cuda::time_ms(d.index, fn, repeat);
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < repeat; ++i) fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / repeat;
}

}  // namespace

OpTiming time_conv2d(const Shape& x_shape, const Shape& kernel_shape, int stride, Padding pad, bool relu, int repeat,
                     Device d) {
  // kernel_shape is Keras' (kh, kw, in, out); the kernel is made in the layout d's backend takes.
  const Shape w_shape = hpcnn::kernel_shape(ops::conv2d_kernel_layout(d), kernel_dims(KernelLayout::HWIO, kernel_shape));
  Tensor X = random_tensor(x_shape, d, 1), W = random_tensor(w_shape, d, 2);
  Conv2dGeometry g = ops::conv2d_geometry(X, W, stride, stride, pad);
  Tensor B = random_tensor({g.f}, d, 3), Y = Tensor::empty({g.n, g.oh, g.ow, g.f}, DType::F32, d);
  Tensor DY = random_tensor(Y.shape(), d, 4), DX = Tensor::empty(X.shape(), DType::F32, d);
  Tensor DW = Tensor::empty(W.shape(), DType::F32, d), DB = Tensor::empty({g.f}, DType::F32, d);
  OpTiming t;
  t.forward_ms = time_on(d, repeat, [&] { ops::conv2d_forward(X, W, B, Y, stride, stride, pad, relu); });
  t.backward_ms = time_on(d, repeat, [&] {
    ops::conv2d_backward(X, W, Y, DY, &DX, DW, DB, stride, stride, pad, relu);
  });
  t.forward_flops = g.forward_flops();
  return t;
}

OpTiming time_maxpool2d(const Shape& x_shape, int pool, int repeat, Device d) {
  Tensor X = random_tensor(x_shape, d, 1);
  Pool2dGeometry g = ops::maxpool2d_geometry(X, pool, pool, pool, pool, Padding::Valid);
  Tensor Y = Tensor::empty({g.n, g.oh, g.ow, g.c}, DType::F32, d);
  Tensor DY = random_tensor(Y.shape(), d, 2), DX = Tensor::empty(X.shape(), DType::F32, d);
  OpTiming t;
  t.forward_ms = time_on(d, repeat, [&] { ops::maxpool2d_forward(X, Y, pool, pool, pool, pool, Padding::Valid); });
  t.backward_ms = time_on(d, repeat, [&] {
    ops::maxpool2d_backward(X, Y, DY, DX, pool, pool, pool, pool, Padding::Valid);
  });
  return t;
}

OpTiming time_dense(const Shape& x_shape, const Shape& kernel_shape, bool relu, int repeat, Device d) {
  Tensor X = random_tensor(x_shape, d, 1), W = random_tensor(kernel_shape, d, 2);
  HPCNN_CHECK_ARG(X.rank() == 2 && W.rank() == 2, "bench_dense: x and kernel must be 2-D");
  Tensor B = random_tensor({W.dim(1)}, d, 3), Y = Tensor::empty({X.dim(0), W.dim(1)}, DType::F32, d);
  Tensor DY = random_tensor(Y.shape(), d, 4), DX = Tensor::empty(X.shape(), DType::F32, d);
  Tensor DW = Tensor::empty(W.shape(), DType::F32, d), DB = Tensor::empty({W.dim(1)}, DType::F32, d);
  OpTiming t;
  t.forward_ms = time_on(d, repeat, [&] { ops::dense_forward(X, W, B, Y, relu); });
  t.backward_ms = time_on(d, repeat, [&] { ops::dense_backward(X, W, Y, DY, &DX, DW, DB, relu); });
  t.forward_flops = 2.0 * X.dim(0) * (double)X.dim(1) * W.dim(1);
  return t;
}

}  // namespace hpcnn::diagnostics
