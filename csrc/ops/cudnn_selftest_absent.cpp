// cudnn_descriptor_selftest when the CUDA backend was not built: there is no cuDNN to read
// descriptors back from, so it has no rows (ops/cudnn_selftest.h).
#ifndef HPCNN_WITH_CUDA

#include "ops/cudnn_selftest.h"

namespace hpcnn::cuda {

std::vector<SelftestResult> cudnn_descriptor_selftest() { return {}; }

}  // namespace hpcnn::cuda

#endif  // HPCNN_WITH_CUDA
