// Layers, model and training step: filled in by the model issue.
#include "bindings/bindings.h"

namespace hpcnn::bindings {
void bind_nn(pybind11::module_&) {}
}  // namespace hpcnn::bindings
