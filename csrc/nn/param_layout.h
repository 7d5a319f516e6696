// How a model's parameters are laid out in its one flat buffer on a device, and the only place
// where that layout is converted.
//
// Every parameter has a fixed offset and element count in the buffer (the same on every device).
// The trainable weights are packed first, in model order, then the non-trainable ones
// (ParamSpec::trainable: BatchNormalization's moving statistics), also in model order: the
// weights an optimizer steps are then one contiguous range unless layers are frozen. The order
// of the arrays (get_weights, index i below) is the model's order regardless.
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

class ParamLayout {
 public:
  ParamLayout() = default;
  // The parameters of a model, layer by layer in Keras order (kernel, bias, ...): indexed in that
  // order, packed trainable first (above).
  explicit ParamLayout(const std::vector<std::vector<ParamSpec>>& per_layer);

  size_t size() const { return entries_.size(); }  // parameter arrays (get_weights' count)
  long long numel() const { return total_; }       // elements of the flat buffer
  const ParamSpec& spec(size_t i) const { return entries_.at(i).spec; }
  long long offset(size_t i) const { return entries_.at(i).offset; }

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
  // A copy of `flat` (in the layout of its own device) on device d, in d's layout: how the model
  // and its optimizer move every buffer aligned with the parameters. Undefined stays undefined.
  Tensor move(const Tensor& flat, Device d) const;

 private:
  struct Entry {
    ParamSpec spec;
    long long offset;
  };
  void check_flat(const Tensor& flat, const char* what) const;
  std::vector<Entry> entries_;
  long long total_ = 0;
};

}  // namespace hpcnn::nn
