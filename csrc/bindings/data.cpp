// HDF5 datasets, loaders and writers: filled in by the data pipeline issue.
#include "bindings/bindings.h"

namespace hpcnn::bindings {
void bind_data(pybind11::module_&) {}
}  // namespace hpcnn::bindings
