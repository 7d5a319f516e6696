// The CUDA backend's own switches and measurements: hpcnn._core.cuda_* (TF32, synchronisation,
// the kernels' host self-test, the prefetch-path check) and the per-layer timings bench_* (the
// work is in ops/ and diagnostics/). Builds with or without the backend (core/cuda_async.h
// explains without).
#include <optional>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "core/cuda_async.h"
#include "core/cuda_runtime.h"
#include "core/host_buffer.h"
#include "core/tensor.h"
#include "diagnostics/cuda_kernel_selftest.h"
#include "diagnostics/op_timing.h"
#include "diagnostics/prefetch_check.h"
#include "ops/conv_algo_choice.h"

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

cuda::Determinism determinism_named(const std::string& mode) {
  if (mode == "required") return cuda::Determinism::Required;
  if (mode == "warn") return cuda::Determinism::Warn;
  if (mode == "any") return cuda::Determinism::Any;
  throw ValueError(cat("determinism must be 'required', 'warn' or 'any', got '", mode, "'"));
}

py::dict plan_dict(const conv_algo::PlanInfo& i) {
  py::dict d;
  d["device"] = "gpu:" + std::to_string(i.device);
  d["pass"] = i.pass;
  d["input"] = py::tuple(py::cast(i.input));
  d["kernel"] = py::tuple(py::cast(i.kernel));
  d["strides"] = py::tuple(py::cast(i.strides));
  d["padding"] = py::tuple(py::cast(i.padding));
  d["output"] = py::tuple(py::cast(i.output));
  d["tf32"] = i.tf32;
  d["determinism"] = i.determinism;
  d["algorithm"] = i.algorithm;
  d["math"] = i.math;
  d["deterministic"] = i.deterministic;
  d["workspace"] = i.workspace;
  d["workspace_limit"] = i.workspace_limit;
  d["replan_at"] = i.replan_at;
  d["fused"] = i.fused;
  d["fused_status"] = i.fused_status;
  d["candidates"] = i.candidates;
  d["candidates_deterministic"] = i.candidates_deterministic;
  d["candidates_math"] = i.candidates_math;
  d["offers"] = i.offers;
  d["failed"] = i.failed;
  return d;
}

// Device memory held from Python (cuda_hold_memory): for tests of what happens when a GPU is
// nearly full.
struct DeviceMemoryBlock {
  Tensor t;
};

// Pinned host memory held from Python (cuda_hold_pinned_memory): for tests that allocating and
// freeing it leaves the calling thread's current GPU alone.
struct PinnedMemoryBlock {
  HostBuffer buffer;
};

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

  m.def("cuda_set_determinism", [](const std::string& mode) { cuda::set_determinism(determinism_named(mode)); },
        py::arg("mode"),
        "Which cuDNN convolution algorithms may be used: 'required' (deterministic only; an op that finds none "
        "within its workspace refuses with an error; the default), 'warn' (a non-deterministic one when no "
        "deterministic one fits, with a RuntimeWarning) or 'any' (the fastest that fits). Process-wide.");
  m.def("cuda_get_determinism", [] { return std::string(cuda::determinism_name(cuda::determinism())); },
        "The determinism setting: 'required', 'warn' or 'any' (see cuda_set_determinism).");
  m.def("cuda_conv_plans", [](int device) {
    std::vector<conv_algo::PlanInfo> plans;
    {
      py::gil_scoped_release nogil;
      plans = conv_algo::conv_plans(device);
    }
    py::list out;
    for (const auto& p : plans) out.append(plan_dict(p));
    return out;
  }, py::arg("device") = 0,
     "The cuDNN plans made so far on GPU `device`, one dict per convolution geometry and pass: the algorithm "
     "running and whether it is deterministic, its math type and workspace, the candidates in order (with their "
     "math types), cuDNN's heuristic answer (offers), the ones that failed at run time, whether the fused "
     "conv+bias+ReLU call is used (and fused_status: what cuDNN answered when it declined it). Empty when nothing "
     "ran there.");
  m.def("cuda_clear_conv_plans", &conv_algo::clear_conv_plans,
        "Forgets every cuDNN plan: the next convolution of each geometry chooses its algorithm afresh.");
  m.def("cuda_force_conv_failures", &conv_algo::set_forced_failures, py::arg("algorithms"),
        py::arg("fused") = false,
        "For tests: the cuDNN algorithms named (e.g. 'CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM') fail as if "
        "cuDNN answered CUDNN_STATUS_NOT_SUPPORTED when run, and with fused=True so does the fused "
        "conv+bias+ReLU call. Replaces the previous marks; ([], False) clears them.");
  m.def("cuda_choose_conv_algorithms", [](py::list offers, const std::string& mode, size_t workspace_limit,
                                          std::vector<size_t> failed, const std::string& what,
                                          const std::string& layer) {
    std::vector<conv_algo::Offer> os;
    for (auto item : offers) {
      py::dict d = item.cast<py::dict>();
      conv_algo::Offer o;
      o.name = d["name"].cast<std::string>();
      o.algo = d.contains("algo") ? d["algo"].cast<int>() : static_cast<int>(os.size());
      o.usable = d.contains("usable") ? d["usable"].cast<bool>() : true;
      o.deterministic = d["deterministic"].cast<bool>();
      o.workspace = d["workspace"].cast<size_t>();
      if (d.contains("math_name")) o.math_name = d["math_name"].cast<std::string>();
      if (d.contains("status")) o.status = d["status"].cast<std::string>();
      os.push_back(std::move(o));
    }
    conv_algo::Choice c = conv_algo::choose(os, determinism_named(mode), workspace_limit, failed);
    py::dict r;
    r["order"] = c.order;
    r["replan_at"] = c.replan_at == conv_algo::kNever ? py::object(py::none()) : py::int_(c.replan_at);
    r["refusal"] = c.refusal;
    r["refusal_is_memory"] = c.refusal_is_memory;
    // The error a refusal raises, as a layer running the convolution would see it.
    std::optional<conv_algo::LayerLabel> scope;
    if (!layer.empty()) scope.emplace(layer);
    r["message"] = c.order.empty() ? conv_algo::message(what, c.refusal) : std::string();
    return r;
  }, py::arg("offers"), py::arg("determinism"), py::arg("workspace_limit"), py::arg("failed") = std::vector<size_t>{},
     py::arg("what") = "conv2d", py::arg("layer") = "",
     "The CUDA backend's choice among cuDNN's algorithm offers, run on the host (needs no GPU): offers are dicts "
     "{name, deterministic, workspace[, usable, algo, math_name, status]} in cuDNN's order. Returns {order: "
     "indices to try, best first; replan_at: the workspace limit from which a preferred offer would fit (None: "
     "never); refusal: why nothing may run ('' when something may), with every offer; refusal_is_memory; message: "
     "the error a refusal raises, naming `layer` (as a model's layer sets it) and `what` (the pass and shapes)}.");
  m.def("cuda_primary_context_active", &cuda::primary_context_active, py::arg("device"),
        "Whether this process holds a CUDA context on GPU `device`, asked without creating one (False without a "
        "driver).");

  py::class_<DeviceMemoryBlock>(m, "DeviceMemoryBlock",
                                "Device memory held from Python (cuda_hold_memory); freed by release() or when "
                                "collected.")
      .def_property_readonly("nbytes", [](const DeviceMemoryBlock& b) { return b.t.defined() ? b.t.nbytes() : 0; })
      .def("release", [](DeviceMemoryBlock& b) {
        py::gil_scoped_release nogil;
        b.t = Tensor();
      });
  m.def("cuda_hold_memory", [](size_t bytes, const std::string& device) {
    Device d = resolve_device(device);
    HPCNN_CHECK_ARG(d.is_cuda(), "cuda_hold_memory: device must be a GPU, got '", device, "'");
    auto b = std::make_unique<DeviceMemoryBlock>();
    py::gil_scoped_release nogil;
    b->t = Tensor::empty({static_cast<long long>(bytes)}, DType::U8, d);
    return b;
  }, py::arg("nbytes"), py::arg("device") = "gpu:0",
     "Allocates and holds `nbytes` of memory on a GPU (MemoryError naming the sizes when it is not there): for "
     "tests and checks of what happens when the GPU is nearly full.");

  m.def("cuda_current_context_device", &cuda::current_context_device,
        "The GPU whose CUDA context is current on the calling thread, or -1 when it has none (asked without "
        "creating one).");

  py::class_<PinnedMemoryBlock>(m, "PinnedMemoryBlock",
                                "Pinned host memory held from Python (cuda_hold_pinned_memory); freed by release() "
                                "or when collected.")
      .def_property_readonly("nbytes", [](const PinnedMemoryBlock& b) { return b.buffer.bytes(); })
      .def("release", [](PinnedMemoryBlock& b) {
        py::gil_scoped_release nogil;
        b.buffer = HostBuffer();
      });
  m.def("cuda_hold_pinned_memory", [](size_t bytes, int device) {
    auto b = std::make_unique<PinnedMemoryBlock>();
    py::gil_scoped_release nogil;
    b->buffer = HostBuffer(bytes, HostMemory::Pinned, device);
    return b;
  }, py::arg("nbytes"), py::arg("device") = 0,
     "Allocates and holds `nbytes` of page-locked host memory for GPU `device`, as the loader and the stager "
     "do: for tests of the pinned-memory helpers.");

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
    Device d = resolve_device(device);
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
    Device d = resolve_device(device);
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
    Device d = resolve_device(device);
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
