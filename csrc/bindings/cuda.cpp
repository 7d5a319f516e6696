// The CUDA backend's own switches and measurements: hpcnn._core.cuda_* (TF32, synchronisation,
// per-layer timings). Builds with or without the backend (core/cuda_async.h explains without).
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <random>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "core/cuda_async.h"
#include "core/cuda_kernel_selftest.h"
#include "core/cuda_runtime.h"
#include "core/host_buffer.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace hpcnn::bindings {

namespace py = pybind11;

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

Device device_of(const std::string& spec) {
  Device d = parse_device(spec);
  if (d.is_cuda()) cuda::require_device(d.index);
  return d;
}

}  // namespace

void bind_cuda(py::module_& m) {
  m.def("cuda_set_tf32", &cuda::set_tf32, py::arg("enabled"),
        "Allow TF32 tensor-core math for float32 convolutions and matrix products on GPUs of compute "
        "capability >= 8.0 (default: on, as in TensorFlow). Process-wide.");
  m.def("cuda_get_tf32", &cuda::tf32_enabled, "Whether TF32 is allowed (see cuda_set_tf32).");
  m.def("cuda_tf32_supported", &cuda::tf32_supported, py::arg("device") = 0,
        "Whether GPU `device` has TF32 tensor cores (compute capability >= 8.0).");
  m.def("cuda_sm_clock_khz", &cuda::sm_clock_khz, py::arg("device") = 0,
        "Peak SM clock of GPU `device` in kHz (0 when unknown).");
  m.def("cuda_synchronize", [](int device) {
    py::gil_scoped_release nogil;
    cuda::synchronize_compute(device);
  }, py::arg("device") = 0, "Wait for all work queued on the GPU's compute stream.");

  m.def("cuda_kernel_selftest", [] {
    py::list out;
    for (const auto& r : cuda::kernel_selftest()) out.append(py::make_tuple(r.name, r.error, r.tolerance));
    return out;
  }, "Runs the CUDA kernels' index arithmetic and the cuBLAS/cuDNN call layouts on the host against the CPU "
     "ops (no GPU needed). Returns [(check, error, tolerance)].");

  m.def("cuda_prefetch_check", [](py::array_t<float, py::array::c_style | py::array::forcecast> a, int device) {
    // The prefetch path end to end: pinned staging buffer -> copy_h2d_async on the copy stream ->
    // an op on the compute stream (which must wait for the copy) -> back to the host.
    Device d = device_of(cat("gpu:", device));
    Shape shape(a.shape(), a.shape() + a.ndim());
    size_t bytes = static_cast<size_t>(a.size()) * sizeof(float);
    Tensor x = Tensor::empty(shape, DType::F32, d), y = Tensor::empty(shape, DType::F32, d);
    {
      py::gil_scoped_release nogil;
      HostBuffer pinned(bytes, HostMemory::Pinned, d.index);
      std::memcpy(pinned.data(), a.data(), bytes);
      cuda::copy_h2d_async(d.index, x.raw(), pinned.data(), bytes, true);
      ops::relu_forward(x, y);
      cuda::copy_wait_host(d.index);  // before `pinned` goes
    }
    return to_numpy(y);
  }, py::arg("x"), py::arg("device") = 0,
     "relu(x) computed on GPU `device` after an asynchronous upload from pinned memory (a test of the "
     "prefetch path: copy stream, event, compute stream).");

  m.def("bench_conv2d", [](std::vector<long long> x_shape, std::vector<long long> k_shape, int stride,
                           std::string padding, bool relu, int repeat, std::string device) {
    Device d = device_of(device);
    Padding pad = parse_padding(padding);
    // kernel_shape is Keras' (kh, kw, in, out); the kernel is made in the layout d's backend takes.
    const Shape w_shape = kernel_shape(ops::conv2d_kernel_layout(d), kernel_dims(KernelLayout::HWIO, k_shape));
    Tensor X = random_tensor(x_shape, d, 1), W = random_tensor(w_shape, d, 2);
    Conv2dGeometry g = ops::conv2d_geometry(X, W, stride, stride, pad);
    Tensor B = random_tensor({g.f}, d, 3), Y = Tensor::empty({g.n, g.oh, g.ow, g.f}, DType::F32, d);
    Tensor DY = random_tensor(Y.shape(), d, 4), DX = Tensor::empty(X.shape(), DType::F32, d);
    Tensor DW = Tensor::empty(W.shape(), DType::F32, d), DB = Tensor::empty({g.f}, DType::F32, d);
    double fwd, bwd;
    {
    py::gil_scoped_release nogil;
    fwd = time_on(d, repeat, [&] { ops::conv2d_forward(X, W, B, Y, stride, stride, pad, relu); });
    bwd = time_on(d, repeat, [&] {
      ops::conv2d_backward(X, W, Y, DY, &DX, DW, DB, stride, stride, pad, relu);
    });
    }
    py::dict r;
    r["forward_ms"] = fwd;
    r["backward_ms"] = bwd;
    r["forward_flops"] = g.forward_flops();
    return r;
  }, py::arg("x_shape"), py::arg("kernel_shape"), py::arg("stride") = 1, py::arg("padding") = "valid",
     py::arg("relu") = true, py::arg("repeat") = 20, py::arg("device") = "gpu:0",
     "Times one conv2d layer (forward; backward with dx) on random data: mean ms per call. kernel_shape is "
     "Keras' (kh, kw, in, out).");

  m.def("bench_maxpool2d", [](std::vector<long long> x_shape, int pool, int repeat, std::string device) {
    Device d = device_of(device);
    Tensor X = random_tensor(x_shape, d, 1);
    Pool2dGeometry g = ops::maxpool2d_geometry(X, pool, pool, pool, pool, Padding::Valid);
    Tensor Y = Tensor::empty({g.n, g.oh, g.ow, g.c}, DType::F32, d);
    Tensor DY = random_tensor(Y.shape(), d, 2), DX = Tensor::empty(X.shape(), DType::F32, d);
    double fwd, bwd;
    {
    py::gil_scoped_release nogil;
    fwd = time_on(d, repeat, [&] { ops::maxpool2d_forward(X, Y, pool, pool, pool, pool, Padding::Valid); });
    bwd = time_on(d, repeat, [&] {
      ops::maxpool2d_backward(X, Y, DY, DX, pool, pool, pool, pool, Padding::Valid);
    });
    }
    py::dict r;
    r["forward_ms"] = fwd;
    r["backward_ms"] = bwd;
    r["forward_flops"] = 0.0;
    return r;
  }, py::arg("x_shape"), py::arg("pool_size") = 2, py::arg("repeat") = 20, py::arg("device") = "gpu:0",
     "Times one max-pooling layer (forward, backward) on random data: mean ms per call.");

  m.def("bench_dense", [](std::vector<long long> x_shape, std::vector<long long> k_shape, bool relu, int repeat,
                          std::string device) {
    Device d = device_of(device);
    Tensor X = random_tensor(x_shape, d, 1), W = random_tensor(k_shape, d, 2);
    HPCNN_CHECK_ARG(X.rank() == 2 && W.rank() == 2, "bench_dense: x and kernel must be 2-D");
    Tensor B = random_tensor({W.dim(1)}, d, 3), Y = Tensor::empty({X.dim(0), W.dim(1)}, DType::F32, d);
    Tensor DY = random_tensor(Y.shape(), d, 4), DX = Tensor::empty(X.shape(), DType::F32, d);
    Tensor DW = Tensor::empty(W.shape(), DType::F32, d), DB = Tensor::empty({W.dim(1)}, DType::F32, d);
    double fwd, bwd;
    {
    py::gil_scoped_release nogil;
    fwd = time_on(d, repeat, [&] { ops::dense_forward(X, W, B, Y, relu); });
    bwd = time_on(d, repeat, [&] { ops::dense_backward(X, W, Y, DY, &DX, DW, DB, relu); });
    }
    py::dict r;
    r["forward_ms"] = fwd;
    r["backward_ms"] = bwd;
    r["forward_flops"] = 2.0 * X.dim(0) * (double)X.dim(1) * W.dim(1);
    return r;
  }, py::arg("x_shape"), py::arg("kernel_shape"), py::arg("relu") = true, py::arg("repeat") = 20,
     py::arg("device") = "gpu:0", "Times one dense layer (forward, backward) on random data: mean ms per call.");
}

}  // namespace hpcnn::bindings
