// hpcnn._core: the one extension module.
#include "bindings/bindings.h"
#include "ops/blas.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "hpcnn's C++/CUDA core (use the `hpcnn` package, not this module directly)";
  hpcnn::blas::init();
  hpcnn::bindings::bind_core(m);
  auto ops = m.def_submodule("ops", "operators on NumPy arrays (tests and benchmarks use these)");
  hpcnn::bindings::bind_ops(ops);
  hpcnn::bindings::bind_step_ops(ops);
  hpcnn::bindings::bind_norm_ops(ops);
  hpcnn::bindings::bind_nn(m);
  hpcnn::bindings::bind_data(m);
  hpcnn::bindings::bind_cuda(m);
  auto distribute = m.def_submodule("distribute", "data parallelism: replica groups over MPI, NCCL or threads (hpcnn.distribute)");
  hpcnn::bindings::bind_distribute(distribute);
}
