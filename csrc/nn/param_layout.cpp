// See param_layout.h. The conversions run on the host: every one of them moves weights across a
// device boundary anyway (host arrays in or out, or a copy between devices).
#include "nn/param_layout.h"

#include <cstring>

#include "ops/ops.h"

namespace hpcnn::nn {

namespace {

// The layout of conv2d kernels on device d: the one its conv2d backend takes.
KernelLayout kernel_layout_on(Device d) { return ops::conv2d_kernel_layout(d); }

bool is_kernel(const ParamSpec& s) { return s.kind == ParamKind::Conv2DKernel; }

KernelDims keras_kernel_dims(const ParamSpec& s) { return kernel_dims(KernelLayout::HWIO, s.shape, s.name.c_str()); }

}  // namespace

ParamLayout::ParamLayout(const std::vector<std::vector<ParamSpec>>& per_layer) {
  for (const auto& layer : per_layer)
    for (const ParamSpec& s : layer) {
      if (is_kernel(s)) keras_kernel_dims(s);  // a kernel spec must be 4-D (kh, kw, in, out)
      entries_.push_back({s, 0});
    }
  for (bool trainable_pass : {true, false})  // trainable weights first, then the others
    for (Entry& e : entries_)
      if (e.spec.trainable == trainable_pass) {
        const long long n = shape_numel(e.spec.shape);
        e.packed_offset = packed_total_;
        packed_total_ = checked_add(packed_total_, n, "the model's parameter count");
        checked_add(total_, kParamAlignElems, "the model's parameter buffer");  // so aligning cannot overflow
        e.offset = align_param_offset(total_);  // aligned (param_layout.h): the padding before it is zero
        total_ = checked_add(e.offset, n, "the model's parameter buffer");
      }
  // The end aligned too: a range rounded up to the next array's start stays inside the buffer.
  checked_add(total_, kParamAlignElems, "the model's parameter buffer");
  total_ = align_param_offset(total_);
}

Shape ParamLayout::device_shape(size_t i, Device d) const {
  const ParamSpec& s = spec(i);
  if (!is_kernel(s)) return s.shape;
  return kernel_shape(kernel_layout_on(d), keras_kernel_dims(s));
}

bool ParamLayout::same_layout(Device a, Device b) const {
  if (kernel_layout_on(a) == kernel_layout_on(b)) return true;
  for (const Entry& e : entries_)
    if (is_kernel(e.spec)) return false;
  return true;  // no kernels: every parameter has its Keras shape everywhere
}

void ParamLayout::check_flat(const Tensor& flat, const char* what) const {
  HPCNN_CHECK_ARG(flat.defined() && flat.dtype() == DType::F32 && flat.numel() == total_, what,
                  ": a flat parameter buffer has ", total_, " float32 elements, got ",
                  flat.defined() ? flat.str() : std::string("nothing"));
}

Tensor ParamLayout::to_keras(const Tensor& flat, size_t i) const {
  check_flat(flat, "get_weights");
  const Device d = flat.device();
  Tensor held = flat.view(offset(i), device_shape(i, d));
  if (!is_kernel(spec(i))) return held.to(Device::cpu());
  return convert_kernel(held, kernel_layout_on(d), KernelLayout::HWIO, Device::cpu());
}

void ParamLayout::from_keras(const Tensor& keras, Tensor& flat, size_t i) const {
  check_flat(flat, "set_weights");
  const Device d = flat.device();
  Tensor dst = flat.view(offset(i), device_shape(i, d));
  if (!is_kernel(spec(i)) || kernel_layout_on(d) == KernelLayout::HWIO) {
    dst.copy_from(keras);
    return;
  }
  dst.copy_from(convert_kernel(keras, KernelLayout::HWIO, kernel_layout_on(d), Device::cpu()));
}

void ParamLayout::copy_arrays(const float* src, bool src_packed, Device from, float* dst, bool dst_packed,
                              Device to) const {
  const KernelLayout lf = kernel_layout_on(from), lt = kernel_layout_on(to);
  for (const Entry& e : entries_) {
    const float* s = src + (src_packed ? e.packed_offset : e.offset);
    float* d = dst + (dst_packed ? e.packed_offset : e.offset);
    const long long n = shape_numel(e.spec.shape);
    if (is_kernel(e.spec) && lf != lt) convert_kernel_layout(s, lf, d, lt, keras_kernel_dims(e.spec));
    else if (n > 0) std::memcpy(d, s, sizeof(float) * static_cast<size_t>(n));
  }
}

Tensor ParamLayout::convert(const Tensor& host, Device from, Device to) const {
  check_flat(host, "convert parameter layout");
  HPCNN_CHECK_ARG(host.device().is_cpu(), "convert parameter layout: the buffer must be on the host, got ",
                  host.str());
  Tensor out = Tensor::empty({total_}, DType::F32, Device::cpu());
  std::memcpy(out.raw(), host.raw(), host.nbytes());  // the padding too (zero)
  if (kernel_layout_on(from) == kernel_layout_on(to)) return out;
  copy_arrays(host.f32(), false, from, out.f32(), false, to);
  return out;
}

Tensor ParamLayout::pack(const Tensor& host, Device from, Device to) const {
  check_flat(host, "pack parameter buffer");
  HPCNN_CHECK_ARG(host.device().is_cpu(), "pack parameter buffer: the buffer must be on the host, got ", host.str());
  Tensor out = Tensor::empty({packed_total_}, DType::F32, Device::cpu());
  copy_arrays(host.f32(), false, from, out.f32(), true, to);
  return out;
}

Tensor ParamLayout::unpack(const Tensor& packed, Device from, Device to, const char* what) const {
  HPCNN_CHECK_ARG(packed.defined() && packed.dtype() == DType::F32 && packed.numel() == packed_total_ &&
                      packed.device().is_cpu(),
                  what, ": a packed parameter buffer has ", packed_total_, " float32 elements on the host, got ",
                  packed.defined() ? packed.str() : std::string("nothing"));
  Tensor out = Tensor::zeros({total_}, DType::F32, Device::cpu());  // the padding: zero
  copy_arrays(packed.f32(), true, from, out.f32(), false, to);
  return out;
}

Tensor ParamLayout::move(const Tensor& flat, Device d) const {
  if (!flat.defined()) return Tensor();
  if (same_layout(flat.device(), d)) return flat.to(d);
  Tensor host = flat.device().is_cpu() ? flat : flat.to(Device::cpu());
  Tensor converted = convert(host, flat.device(), d);
  return d.is_cpu() ? converted : converted.to(d);
}

}  // namespace hpcnn::nn
