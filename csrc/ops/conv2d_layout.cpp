// See conv2d_layout.h. Plain host code: no step calls it.
#include "ops/conv2d_layout.h"

#include <cstring>

namespace hpcnn {

const char* kernel_layout_name(KernelLayout l) {
  return l == KernelLayout::HWIO ? "HWIO (kh, kw, in, out)" : "OHWI (out, kh, kw, in)";
}

Shape kernel_shape(KernelLayout l, const KernelDims& d) {
  if (l == KernelLayout::HWIO) return {d.kh, d.kw, d.in, d.out};
  return {d.out, d.kh, d.kw, d.in};
}

KernelDims kernel_dims(KernelLayout l, const Shape& s, const char* what) {
  HPCNN_CHECK_ARG(s.size() == 4, what, " must be 4-D, ", kernel_layout_name(l), ", got shape ", shape_str(s));
  if (l == KernelLayout::HWIO) return {s[0], s[1], s[2], s[3]};
  return {s[1], s[2], s[3], s[0]};
}

void convert_kernel_layout(const float* src, KernelLayout from, float* dst, KernelLayout to, const KernelDims& d) {
  const long long khwi = d.kh * d.kw * d.in;  // the rows of HWIO, the columns of OHWI
  if (from == to) {
    std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(khwi * d.out));
    return;
  }
  // HWIO[r][o] (r = (ky*kw + kx)*in + c) <-> OHWI[o][r]: the same r runs over (ky, kx, c) in both.
  if (from == KernelLayout::HWIO) {
    for (long long r = 0; r < khwi; ++r)
      for (long long o = 0; o < d.out; ++o) dst[o * khwi + r] = src[r * d.out + o];
  } else {
    for (long long o = 0; o < d.out; ++o)
      for (long long r = 0; r < khwi; ++r) dst[r * d.out + o] = src[o * khwi + r];
  }
}

Tensor convert_kernel(const Tensor& w, KernelLayout from, KernelLayout to, Device device) {
  HPCNN_CHECK_ARG(w.defined() && w.dtype() == DType::F32, "conv2d kernel must be float32, got ",
                  w.defined() ? w.str() : std::string("nothing"));
  const KernelDims d = kernel_dims(from, w.shape());
  if (from == to) return w.to(device);
  const Tensor host = w.device().is_cpu() ? w : w.to(Device::cpu());
  Tensor out = Tensor::empty(kernel_shape(to, d), DType::F32, Device::cpu());
  convert_kernel_layout(host.f32(), from, out.f32(), to, d);
  return device.is_cpu() ? out : out.to(device);
}

}  // namespace hpcnn
