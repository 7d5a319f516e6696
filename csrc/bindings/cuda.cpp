// The CUDA backend's own switches and measurements: hpcnn._core.cuda_* (TF32, synchronisation,
// the kernels' host self-test, the prefetch-path check) and the per-layer timings bench_* (the
// work is in ops/ and diagnostics/). Builds with or without the backend (core/cuda_async.h
// explains without).
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "core/cuda_async.h"
#include "core/tensor.h"
#include "diagnostics/op_timing.h"
#include "diagnostics/prefetch_check.h"
#include "ops/cuda_kernel_selftest.h"

namespace hpcnn::bindings {

namespace py = pybind11;

namespace {

py::dict timing_dict(const diagnostics::OpTiming& t) {
  py::dict r;
  r["forward_ms"] = t.forward_ms;
  r["backward_ms"] = t.backward_ms;
  r["forward_flops"] = t.forward_flops;
  return r;
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
    Tensor x = borrow_array(a, "x");
    Tensor y;
    {
      py::gil_scoped_release nogil;
      y = diagnostics::relu_after_async_upload(x, device);
    }
    return to_numpy(y);
  }, py::arg("x"), py::arg("device") = 0,
     "relu(x) computed on GPU `device` after an asynchronous upload from pinned memory (a test of the "
     "prefetch path: copy stream, event, compute stream).");

  m.def("bench_conv2d", [](std::vector<long long> x_shape, std::vector<long long> k_shape, int stride,
                           std::string padding, bool relu, int repeat, std::string device) {
    Device d = usable_device(device);
    Padding pad = parse_padding(padding);
    diagnostics::OpTiming t;
    {
      py::gil_scoped_release nogil;
      t = diagnostics::time_conv2d(x_shape, k_shape, stride, pad, relu, repeat, d);
    }
    return timing_dict(t);
  }, py::arg("x_shape"), py::arg("kernel_shape"), py::arg("stride") = 1, py::arg("padding") = "valid",
     py::arg("relu") = true, py::arg("repeat") = 20, py::arg("device") = "gpu:0",
     "Times one conv2d layer (forward; backward with dx) on random data: mean ms per call. kernel_shape is "
     "Keras' (kh, kw, in, out).");

  m.def("bench_maxpool2d", [](std::vector<long long> x_shape, int pool, int repeat, std::string device) {
    Device d = usable_device(device);
    diagnostics::OpTiming t;
    {
      py::gil_scoped_release nogil;
      t = diagnostics::time_maxpool2d(x_shape, pool, repeat, d);
    }
    return timing_dict(t);
  }, py::arg("x_shape"), py::arg("pool_size") = 2, py::arg("repeat") = 20, py::arg("device") = "gpu:0",
     "Times one max-pooling layer (forward, backward) on random data: mean ms per call.");

  m.def("bench_dense", [](std::vector<long long> x_shape, std::vector<long long> k_shape, bool relu, int repeat,
                          std::string device) {
    Device d = usable_device(device);
    diagnostics::OpTiming t;
    {
      py::gil_scoped_release nogil;
      t = diagnostics::time_dense(x_shape, k_shape, relu, repeat, d);
    }
    return timing_dict(t);
  }, py::arg("x_shape"), py::arg("kernel_shape"), py::arg("relu") = true, py::arg("repeat") = 20,
     py::arg("device") = "gpu:0", "Times one dense layer (forward, backward) on random data: mean ms per call.");
}

}  // namespace hpcnn::bindings
