// Build information, threads and devices.
#include <hdf5.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "core/cuda_runtime.h"
#include "core/device.h"
#include "core/errors.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "core/transfer_stats.h"
#include "core/warnings.h"
#include "distribute/mpi.h"
#include "distribute/nccl.h"
#include "ops/blas.h"
#include "ops/small_gemm_cpu.h"

#ifdef HPCNN_WITH_CUDA
#include <cublas_api.h>
#include <cudnn_version.h>
#endif

namespace hpcnn::bindings {

namespace py = pybind11;

#ifdef HPCNN_WITH_CUDA
// CMake passes architecture lists space-separated; shown as CMake lists ("75;80;90").
static std::string cmake_list(std::string words) {
  for (char& c : words)
    if (c == ' ') c = ';';
  return words;
}
#endif

void raise_core_warnings() {
  for (const std::string& message : take_warnings())
    if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) < 0) throw py::error_already_set();
}

static py::dict build_info() {
  py::dict d;
  d["version"] = HPCNN_VERSION;
  d["compiler"] = HPCNN_COMPILER;
  d["cxx_standard"] = static_cast<long>(__cplusplus);
  d["blas_vendor"] = blas::vendor();
  d["blas_library"] = blas::library();
  d["blas_config"] = blas::config();
  // The CPU's small products (Winograd convolution, few-row layers): "avx512" or "avx2", chosen at
  // run time (ops/small_gemm_cpu.h; HPCNN_AVX512=0 keeps AVX2).
  d["cpu_kernels"] = cpu::small_gemm_isa();
  d["threading"] = "hpcnn thread pool (std::thread), BLAS pinned to 1 thread inside it";
  d["num_threads"] = get_num_threads();
  d["default_num_threads"] = default_num_threads();
  d["default_num_threads_source"] = default_num_threads_choice().source;
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  d["hdf5_version"] = std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
  d["hdf5_compiled_version"] = H5_VERS_INFO;
#ifdef HPCNN_HAVE_LIBDEFLATE
  d["inflate"] = "libdeflate";
#else
  d["inflate"] = "zlib";
#endif
  // Data parallelism (hpcnn.distribute): the MPI library this build talks to, and NCCL.
  d["mpi"] = distribute::mpi::compiled();
  d["mpi_library"] = distribute::mpi::compiled() ? py::object(py::str(distribute::mpi::library_version())) : py::none();
  d["mpi_standard"] = distribute::mpi::compiled() ? py::object(py::str(distribute::mpi::standard_version())) : py::none();
  d["nccl"] = distribute::nccl::compiled();
  d["nccl_version"] = distribute::nccl::compiled() ? py::object(py::str(distribute::nccl::version())) : py::none();
  d["cuda"] = cuda::compiled();
#ifdef HPCNN_WITH_CUDA
  d["cuda_version"] = HPCNN_CUDA_VERSION_STR;
  d["cuda_runtime_version"] = cuda::runtime_version_str();
  d["cuda_driver_version"] = cuda::driver_version_str();
  d["cudnn_version"] = std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "." +
                       std::to_string(CUDNN_PATCHLEVEL);
  d["cublas_version"] = std::to_string(CUBLAS_VER_MAJOR) + "." + std::to_string(CUBLAS_VER_MINOR) + "." +
                        std::to_string(CUBLAS_VER_PATCH);
  d["cuda_archs"] = cmake_list(HPCNN_CUDA_ARCHS);  // machine code built, e.g. "75;80;90;100;110;120"
  d["cuda_ptx"] = cmake_list(HPCNN_CUDA_PTX);      // PTX embedded (JIT-compiled on newer GPUs), e.g. "120"
  d["cuda_archs_requested"] = cmake_list(HPCNN_CUDA_ARCHS_REQUESTED);  // CMAKE_CUDA_ARCHITECTURES: "all-major"
#else
  d["cuda_version"] = py::none();
  d["cuda_runtime_version"] = py::none();
  d["cuda_driver_version"] = py::none();
  d["cudnn_version"] = py::none();
  d["cublas_version"] = py::none();
  d["cuda_archs"] = py::none();
  d["cuda_ptx"] = py::none();
  d["cuda_archs_requested"] = py::none();
#endif
  return d;
}

void bind_core(py::module_& m) {
  m.def("build_info", &build_info, "What this build of hpcnn was compiled with and against.");
  m.def("get_num_threads", &get_num_threads);
  // Without the GIL: it waits for a region in progress, which may be another Python thread's call.
  m.def("set_num_threads", &set_num_threads, py::arg("n"), py::call_guard<py::gil_scoped_release>());
  m.def("default_num_threads", &default_num_threads);
  m.def("default_num_threads_source", [] { return default_num_threads_choice().source; },
        "Where the default thread count comes from: 'HPCNN_NUM_THREADS=n', 'SLURM_CPUS_PER_TASK=n' or "
        "'the affinity mask' (read from the environment now).");
  m.def("max_num_threads", [] { return kMaxThreads; });

  py::class_<cuda::DeviceInfo>(m, "CudaDeviceInfo")
      .def_readonly("index", &cuda::DeviceInfo::index)
      .def_readonly("name", &cuda::DeviceInfo::name)
      .def_property_readonly("compute_capability", [](const cuda::DeviceInfo& d) { return py::make_tuple(d.major, d.minor); })
      .def_readonly("total_memory", &cuda::DeviceInfo::total_memory)
      .def_readonly("free_memory", &cuda::DeviceInfo::free_memory)
      .def_readonly("multiprocessors", &cuda::DeviceInfo::multiprocessors)
      .def_readonly("memory_bus_width_bits", &cuda::DeviceInfo::memory_bus_width_bits)
      .def_readonly("memory_bandwidth_gbs", &cuda::DeviceInfo::memory_bandwidth_gbs)
      .def_readonly("pci_bus_id", &cuda::DeviceInfo::pci_bus_id);
  m.def("cuda_compiled", &cuda::compiled);
  m.def("cuda_devices", &cuda::list_devices, py::arg("with_free_memory") = false,
        "Visible CUDA devices (empty when none is usable), listed without creating a CUDA context. "
        "with_free_memory=True also fills free_memory, which creates this process's context on every device.");
  m.def("cuda_free_memory", &cuda::free_memory, py::arg("device"),
        "Free bytes on GPU `device` (creates this process's context there if it has none; 0 if it cannot be asked).");
  m.def("cuda_unavailable_reason", &cuda::unavailable_reason,
        "Why no GPU is usable, or '' when at least one is.");

  // Python's device names (hpcnn.device, compile(device=...), the CLI's --device) go through here:
  // one grammar, in core/device.cpp.
  m.def("normalize_device", [](const py::object& spec, bool check_usable) {
    if (!py::isinstance<py::str>(spec))
      throw ValueError(cat("device must be a string like 'cpu' or 'gpu:0', got ", py::repr(spec).cast<std::string>()));
    auto s = spec.cast<std::string>();
    return (check_usable ? resolve_device(s) : parse_device(s)).str();
  }, py::arg("spec"), py::arg("check_usable") = true,
        "'cpu', 'gpu', 'GPU:1', 'cuda:0', '/device:GPU:0', ... -> 'cpu' or 'gpu:N'. ValueError for a name "
        "that is not a device; with check_usable, RuntimeError saying why a GPU asked for cannot be used.");

  m.def("transfer_stats", [] {
    auto& s = transfer_stats();
    py::dict d;
    d["h2d_count"] = s.h2d_count.load();
    d["d2h_count"] = s.d2h_count.load();
    d["h2d_bytes"] = s.h2d_bytes.load();
    d["d2h_bytes"] = s.d2h_bytes.load();
    return d;
  }, "Host<->device copies made so far (counts and bytes).");
  m.def("reset_transfer_stats", [] { transfer_stats().reset(); });
}

}  // namespace hpcnn::bindings
