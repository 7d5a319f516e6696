// The GPU prefetch path end to end, for tests (hpcnn._core.cuda_prefetch_check): the values are
// staged in a pinned host buffer, uploaded with copy_h2d_async on the device's copy stream, and
// read by an op (ReLU) on the compute stream, which must wait for the copy; the result comes back
// to the host. A wrong stream ordering shows as a wrong result.
#pragma once

#include "core/tensor.h"

namespace hpcnn::diagnostics {

// relu(x) computed on GPU `device` after an asynchronous upload of the host float tensor `x`.
Tensor relu_after_async_upload(const Tensor& x, int device);

}  // namespace hpcnn::diagnostics
