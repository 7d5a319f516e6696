// How a model's parameters are laid out in its one flat buffer on a device, and the only place
// where that layout is converted.
//
// Every parameter has a fixed offset and element count in the buffer (the same on every device).
// The trainable weights come first, in model order, then the non-trainable ones
// (ParamSpec::trainable: BatchNormalization's moving statistics), also in model order. The order
// of the arrays (get_weights, index i below) is the model's order regardless.
// Every array starts at a multiple of kParamAlignElems floats (256 bytes, what cudaMalloc gives a
// buffer): cuDNN and cuBLAS get kernels, biases and batch-norm scales at aligned addresses (cuDNN 9
// may refuse a misaligned one, CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER), on both backends alike.
// The padding between arrays (at most 63 floats each) is zero, belongs to no array, and no op
// reads or writes it: the ops over the variables run on segment tables of the arrays' own
// elements (ops/param_segments.h), so the padding enters no sum, norm or update. The buffer's
// numel() counts it; count() is the parameters alone.
//
// The packed form: the same arrays in the same order without the padding, count() floats (the
// concatenation of the trainable arrays, then the non-trainable ones). It is what leaves a model
// as one flat array (optimizer state in model files and backups, the flat buffers Python reads),
// so files written before the padding existed hold exactly this form and still load.
// What a device decides is the order of the elements inside a parameter: a conv2d kernel
// (ParamKind::Conv2DKernel) is stored in the layout the conv2d backend of that device computes
// with (ops::conv2d_kernel_layout: Keras' HWIO on the CPU, OHWI = cuDNN's KRSC on a GPU; see
// ops/conv2d_layout.h), every other parameter in its Keras shape. A flat buffer is therefore only
// meaningful together with the device whose layout it is in: the parameters, their gradients (the
// ops write dw in the kernel's layout) and any per-element optimizer state (Adam's moments, SGD's
// velocity: aligned with the parameters element for element) are all in the layout of the
// device they live on.
//
// Conversions happen where weights cross the model's boundary, never per step:
//   set_weights    Keras' layout in     -> the device's layout   from_keras()
//   get_weights    the device's layout  -> Keras' layout out     to_keras()
//   to(device)     device A's layout    -> device B's layout     move(), for the parameters and
//                                                                 the optimizer's state alike
// Model files are written from get_weights and read through set_weights: always Keras' layout.
#pragma once

#include <vector>

#include "nn/layer.h"

namespace hpcnn::nn {

constexpr long long kParamAlignElems = 64;  // floats: 256 bytes
// The first multiple of kParamAlignElems at or after n.
constexpr long long align_param_offset(long long n) {
  return (n + kParamAlignElems - 1) / kParamAlignElems * kParamAlignElems;
}

class ParamLayout {
 public:
  ParamLayout() = default;
  // The parameters of a model, layer by layer in Keras order (kernel, bias, ...): indexed in that
  // order, packed trainable first (above).
  explicit ParamLayout(const std::vector<std::vector<ParamSpec>>& per_layer);

  size_t size() const { return entries_.size(); }  // parameter arrays (get_weights' count)
  long long numel() const { return total_; }       // elements of the flat buffer, padding included
  long long count() const { return packed_total_; }  // parameters: elements of the packed form
  const ParamSpec& spec(size_t i) const { return entries_.at(i).spec; }
  long long offset(size_t i) const { return entries_.at(i).offset; }  // in the buffer: aligned
  long long packed_offset(size_t i) const { return entries_.at(i).packed_offset; }
  long long numel(size_t i) const { return shape_numel(spec(i).shape); }  // elements of array i

  // The shape parameter i has in a buffer on device d (its Keras shape, or the kernel layout of d).
  Shape device_shape(size_t i, Device d) const;
  // Whether buffers on devices a and b have the same layout (moving one is then a plain copy).
  bool same_layout(Device a, Device b) const;

  // A host copy of parameter i in Keras' shape and layout, read from `flat` (on its device, in
  // that device's layout).
  Tensor to_keras(const Tensor& flat, size_t i) const;
  // Writes `keras` (parameter i in Keras' shape and layout, any device) into `flat` (on its
  // device, in that device's layout).
  void from_keras(const Tensor& keras, Tensor& flat, size_t i) const;

  // A new host buffer holding `host` (a host flat buffer in the layout of device `from`) in the
  // layout of device `to`. ValueError when `host` is not a float32 host buffer of numel() elements.
  Tensor convert(const Tensor& host, Device from, Device to) const;
  // The packed form (count() floats, host) of `host` (a host flat buffer in the layout of device
  // `from`), its kernels in the layout of device `to` (Device::cpu(): Keras' layout).
  Tensor pack(const Tensor& host, Device from, Device to) const;
  // A new host flat buffer (numel() floats, zero padding) in the layout of device `to` holding
  // `packed` (count() floats on the host, its kernels in the layout of device `from`). ValueError
  // naming `what` when `packed` is not a float32 host buffer of count() elements.
  Tensor unpack(const Tensor& packed, Device from, Device to, const char* what) const;
  // A copy of `flat` (in the layout of its own device) on device d, in d's layout: how the model
  // and its optimizer move every buffer aligned with the parameters. Undefined stays undefined.
  Tensor move(const Tensor& flat, Device d) const;

 private:
  struct Entry {
    ParamSpec spec;
    long long offset = 0, packed_offset = 0;
  };
  void check_flat(const Tensor& flat, const char* what) const;
  // Copies every array from src (packed or not, kernels in the layout of device `from`) to dst
  // (packed or not, in the layout of device `to`); dst's padding is left as it is.
  void copy_arrays(const float* src, bool src_packed, Device from, float* dst, bool dst_packed, Device to) const;
  std::vector<Entry> entries_;
  long long total_ = 0, packed_total_ = 0;
};

}  // namespace hpcnn::nn
