#include "diagnostics/prefetch_check.h"

#include <cstring>

#include "core/cuda_async.h"
#include "core/errors.h"
#include "core/host_buffer.h"
#include "ops/ops.h"

namespace hpcnn::diagnostics {

Tensor relu_after_async_upload(const Tensor& x_host, int device) {
  HPCNN_CHECK_ARG(x_host.device().is_cpu() && x_host.dtype() == DType::F32,
                  "prefetch check: x must be a float32 host tensor, got ", x_host.str());
  cuda::require_device(device);
  Device d = Device::cuda(device);
  size_t bytes = x_host.nbytes();
  Tensor x = Tensor::empty(x_host.shape(), DType::F32, d), y = Tensor::empty(x_host.shape(), DType::F32, d);
  HostBuffer pinned(bytes, HostMemory::Pinned, device);
  std::memcpy(pinned.data(), x_host.raw(), bytes);
  cuda::copy_h2d_async(device, x.raw(), pinned.data(), bytes, true);
  ops::relu_forward(x, y);
  cuda::copy_wait_host(device);  // before `pinned` goes
  return y.to(Device::cpu());
}

}  // namespace hpcnn::diagnostics
