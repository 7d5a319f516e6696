// The pybind11 module hpcnn._core is assembled from one function per area, each in its own file
// of this folder. Nothing outside bindings/ includes pybind11.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "core/device.h"
#include "core/errors.h"

namespace hpcnn::bindings {

void bind_core(pybind11::module_& m);  // build info, threads, devices, errors   (core.cpp)
void bind_ops(pybind11::module_& m);   // the operators on NumPy arrays            (ops.cpp)
// ... of the loss, the optimizers, the variable sums and the data path    (ops_step.cpp)
void bind_step_ops(pybind11::module_& m);
// ... of batch normalization and the per-channel scale and shift          (ops_norm.cpp)
void bind_norm_ops(pybind11::module_& m);
void bind_nn(pybind11::module_& m);    // layers, model, training step            (nn.cpp)
void bind_data(pybind11::module_& m);  // HDF5 datasets, loaders, writers         (data.cpp)
void bind_cuda(pybind11::module_& m);  // TF32 switch, GPU sync, per-layer timings (cuda.cpp)
void bind_distribute(pybind11::module_& m);  // data parallelism: groups, MPI, NCCL      (distribute.cpp)
// The HDF5 tree reader and writer (Keras' file layouts), into hpcnn._core.data  (h5_tree.cpp)
void bind_h5_tree(pybind11::module_& data);

// Raises the warnings the core queued (core/warnings.h) as Python RuntimeWarnings; call with the
// GIL held after a call into the core that may queue one (a training step, a convolution). A
// warning that the filters turn into an error propagates as that exception.
void raise_core_warnings();

// Runs the op `repeat` times without the GIL, then raises the core's warnings. repeat > 1 is for
// benchmarks: the op is timed inside C++, free of the NumPy conversions around it (ops that update
// their inputs in place, like the optimizers, simply take `repeat` steps).
template <typename F>
void run_repeat(int repeat, F&& op) {
  HPCNN_CHECK_ARG(repeat >= 1, "repeat must be >= 1, got ", repeat);
  {
    pybind11::gil_scoped_release nogil;
    for (int i = 0; i < repeat; ++i) op();
  }
  raise_core_warnings();
}

// Devices named by the caller ("cpu", "gpu:1") are parsed and checked usable by
// hpcnn::resolve_device (core/device.h), the one grammar for device names.

}  // namespace hpcnn::bindings
