// hpcnn._core.distribute: the transports and groups of data parallelism (csrc/distribute/), for
// python/hpcnn/distribute.py. Collective calls release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>

#include "bindings/bindings.h"
#include "core/batch_shares.h"
#include "distribute/gradient_reducer.h"
#include "distribute/group.h"
#include "distribute/mpi.h"
#include "distribute/nccl.h"

namespace py = pybind11;

namespace hpcnn::bindings {

namespace {

distribute::Communicator& process_endpoint(distribute::Group& g, const char* what) {
  if (g.local_size() != 1)
    throw ValueError(cat(what, ": a group of ", g.local_size(), " replicas in this process has no process-level "
                           "collectives (they are for one replica per process)"));
  return g.endpoint(0);
}

}  // namespace

void bind_distribute(py::module_& m) {
  m.def("mpi_compiled", &distribute::mpi::compiled, "Whether this build has MPI (MultiWorkerMirroredStrategy).");
  m.def("nccl_compiled", &distribute::nccl::compiled, "Whether this build has NCCL (GPU gradient sums).");
  m.def("mpi_library_version", &distribute::mpi::library_version, "The MPI library's version string ('' without MPI).");
  m.def("mpi_standard_version", &distribute::mpi::standard_version);
  m.attr("default_bucket_bytes") = distribute::kDefaultBucketBytes;
  m.def("nccl_version", &distribute::nccl::version, "The NCCL library's version ('' without NCCL).");
  m.def("mpi_unavailable_reason", &distribute::mpi::unavailable_reason, "Why MPI cannot be used ('' when it can).");
  m.def("nccl_unavailable_reason", &distribute::nccl::unavailable_reason, "Why NCCL cannot be used ('' when it can).");
  m.def("mpi_initialized", &distribute::mpi::initialized);
  m.def("mpi_init", [] {
    distribute::mpi::World w;
    {
      py::gil_scoped_release nogil;
      w = distribute::mpi::init();
    }
    py::dict d;
    d["rank"] = w.rank;
    d["size"] = w.size;
    d["local_rank"] = w.local_rank;
    d["local_size"] = w.local_size;
    d["host"] = w.host;
    d["thread_level"] = w.thread_level;
    d["initialized_by_hpcnn"] = w.initialized_by_hpcnn;
    return d;
  }, "Initialises MPI unless it is (collective: every rank calls it); rank, size, local rank and size, host.");
  m.def("mpi_shutdown", [] {
    py::gil_scoped_release nogil;
    distribute::mpi::shutdown();
  }, "At exit: MPI_Finalize if hpcnn initialised MPI; after a failure, the acknowledgements and MPI_Abort.");
  m.def("default_timeout_seconds", &distribute::default_timeout_seconds,
        "A collective's time limit: HPCNN_DIST_TIMEOUT seconds when set, else 600.");
  m.def("default_heartbeat_seconds", &distribute::default_heartbeat_seconds,
        "How long an MPI rank may be silent before the others take it for lost: HPCNN_DIST_HEARTBEAT seconds "
        "when set (0: no heartbeat), else 30.");
  m.def("share_range", [](long long n, long long replicas, long long r) {
    HPCNN_CHECK_ARG(replicas >= 1 && r >= 0 && r < replicas && n >= 0, "share_range: need 0 <= r < replicas, n >= 0");
    return py::make_tuple(share_begin(n, replicas, r), share_end(n, replicas, r));
  }, py::arg("rows"), py::arg("replicas"), py::arg("replica"),
     "Rows [begin, end) of a global batch of `rows` that replica `replica` of `replicas` takes.");
  m.def("plan_buckets", [](const std::vector<std::pair<long long, long long>>& layer_ranges, long long bucket_bytes) {
    std::vector<nn::ParamRange> ranges;
    for (auto [b, e] : layer_ranges) ranges.push_back({b, e});
    py::list out;
    for (const distribute::Bucket& b : distribute::plan_buckets(ranges, bucket_bytes))
      out.append(py::make_tuple(b.begin, b.end, b.closing_layer));
    return out;
  }, py::arg("layer_ranges"), py::arg("bucket_bytes"),
     "The gradient buckets (begin, end, closing layer) for per-layer (begin, end) ranges of the gradient buffer, "
     "in the order they are summed.");

  m.def("inject_failure", &distribute::inject_failure, py::arg("replica"), py::arg("stall_seconds") = 0.0,
        "Test-only: replica `replica` (global index, in this process) fails once at its next training step, "
        "after its loss statistics were summed and before its first gradient bucket: it raises, or with "
        "stall_seconds > 0 it sleeps that long there instead (a stuck replica).");
  m.def("inject_nccl_async_error", &distribute::nccl::inject_async_error, py::arg("replica"),
        "Test-only: the NCCL communicator of replica `replica` (global index, in this process) reports "
        "ncclSystemError at its next wait for a gradient sum, as after a network failure (once).");
  m.def("inject_nccl_setup_failure", &distribute::nccl::inject_setup_failure, py::arg("rank"),
        "Test-only: MPI rank `rank` (this process) fails in its next NCCL setup, after the unique id arrived "
        "and before its communicator exists (once).");
  py::class_<distribute::Group, std::shared_ptr<distribute::Group>>(m, "Group",
      "Replicas that train one model data-parallel (made by hpcnn.distribute's strategies).")
      .def_static("in_process", [](const std::vector<std::string>& devices, const std::string& implementation,
                                   double timeout_s) {
        std::vector<Device> ds;
        for (const std::string& d : devices) ds.push_back(parse_device(d));
        const distribute::Transport t = distribute::parse_transport(implementation);
        py::gil_scoped_release nogil;
        return distribute::Group::in_process(ds, t, timeout_s);
      }, py::arg("devices"), py::arg("implementation") = "auto", py::arg("timeout_seconds") = 600.0)
      .def_static("across_processes", [](const std::string& device, const std::string& implementation,
                                         double timeout_s, double heartbeat_s) {
        const Device d = parse_device(device);
        const distribute::Transport t = distribute::parse_transport(implementation);
        std::shared_ptr<distribute::Group> g;
        {
          py::gil_scoped_release nogil;
          g = distribute::Group::across_processes(d, t, timeout_s, heartbeat_s);
        }
        raise_core_warnings();  // ranks sharing a GPU: summed through host memory
        return g;
      }, py::arg("device"), py::arg("implementation") = "auto", py::arg("timeout_seconds") = 600.0,
         py::arg("heartbeat_seconds") = 30.0)
      .def_property_readonly("size", &distribute::Group::size)
      .def_property_readonly("local_size", &distribute::Group::local_size)
      .def_property_readonly("first_replica", &distribute::Group::first_replica)
      .def_property_readonly("multi_process", &distribute::Group::multi_process)
      .def_property_readonly("transport", &distribute::Group::transport)
      .def_property_readonly("timeout_seconds", &distribute::Group::timeout_seconds)
      .def_property_readonly("heartbeat_seconds", &distribute::Group::heartbeat_seconds)
      .def_property_readonly("devices", [](const distribute::Group& g) {
        std::vector<std::string> out;
        for (const Device& d : g.devices()) out.push_back(d.str());
        return out;
      })
      .def_property_readonly("failed", &distribute::Group::failed)
      .def("allreduce_host", [](distribute::Group& g, py::array_t<double, py::array::c_style | py::array::forcecast> a) {
        distribute::Communicator& c = process_endpoint(g, "allreduce_host");
        py::array_t<double> out(a.request().shape);
        std::copy(a.data(), a.data() + a.size(), out.mutable_data());
        double* p = out.mutable_data();
        const int n = static_cast<int>(out.size());
        {
          py::gil_scoped_release nogil;
          c.allreduce_sum_host(p, n);
        }
        return out;
      }, py::arg("values"), "The sum over every rank of float64 `values` (collective).")
      .def("broadcast_host", [](distribute::Group& g, py::bytes data, int root) {
        distribute::Communicator& c = process_endpoint(g, "broadcast_host");
        std::string s = data;
        // The length first, so that ranks whose bytes differ in length still agree on the size.
        double len = static_cast<double>(s.size());
        Tensor lt = Tensor::empty({8}, DType::U8);
        std::memcpy(lt.raw(), &len, sizeof(len));
        {
          py::gil_scoped_release nogil;
          c.broadcast(lt, root);
        }
        std::memcpy(&len, lt.raw(), sizeof(len));
        Tensor buf = Tensor::zeros({std::max(1LL, static_cast<long long>(len))}, DType::U8);
        std::memcpy(buf.raw(), s.data(), std::min(s.size(), static_cast<size_t>(len)));
        {
          py::gil_scoped_release nogil;
          c.broadcast(buf, root);
        }
        return py::bytes(static_cast<const char*>(buf.raw()), static_cast<size_t>(len));
      }, py::arg("data"), py::arg("root") = 0, "Rank `root`'s bytes, on every rank (collective).")
      .def("barrier", [](distribute::Group& g) {
        distribute::Communicator& c = process_endpoint(g, "barrier");
        py::gil_scoped_release nogil;
        c.barrier();
      })
      .def("abort", [](distribute::Group& g, const std::string& why) {
        py::gil_scoped_release nogil;
        g.abort(why);
      }, py::arg("why"), "Stops the group: the other replicas' pending and later calls raise, naming this one.");
}

}  // namespace hpcnn::bindings
