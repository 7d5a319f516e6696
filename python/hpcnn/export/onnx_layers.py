"""hpcnn's layers in inference mode as ONNX operators: one rule per layer class (``RULES``), each
given the graph, the layer, the values it reads, its per-sample output shape (the core's report)
and its weights by Keras' names ('kernel', 'bias', 'gamma', ...), and returning its output value.

What a rule writes is what ``predict`` computes:
- Dropout and the augmentation layers are the identity (RandomCrop: its centre window, as hpcnn
  crops in ``predict``; an input of the crop's size: the identity), so they leave no node.
- BatchNormalization is ONNX's BatchNormalization (inference form, the moving statistics). It is
  not folded into the convolution before it here: the file keeps Keras' four weights as they are
  (readable and checkable per layer), and both engines fold it themselves when they load the
  model (ONNX Runtime's ConvBNFusion, OpenVINO's fusions; tests/python/export checks that ONNX
  Runtime's optimized graph has no BatchNormalization left beside a convolution).
- 'same' padding is Keras' (the odd pixel at the bottom and right), written as explicit pads;
  AveragePooling2D leaves the padding out of its averages, as Keras and hpcnn do.
- Flatten and Reshape read channels-last (Keras' (H, W, C) order).
- DepthwiseConv2D is a grouped Conv (group = the input channels), SeparableConv2D that Conv then a
  1x1 Conv; Normalization is its per-channel scale and offset; Multiply is ONNX's broadcasting Mul.

The rules are looked up by the layer's exact class: a subclass (a user's layer) may compute
something else, and is refused by name (hpcnn.export.onnx_model)."""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from ..layers import (Activation, Add, AveragePooling2D, BatchNormalization, Concatenate, Conv2D, Dense,
                      DepthwiseConv2D, Dropout, ELU, Flatten, GlobalAveragePooling2D, GlobalMaxPooling2D, LeakyReLU,
                      MaxPooling2D, Multiply, Normalization, RandomCrop, RandomFlip, RandomRotation, RandomTranslation,
                      RandomZoom, ReLU, Rescaling, Reshape, SeparableConv2D, Softmax, ZeroPadding2D)
from . import onnx_activations as act
from .onnx_graph import OnnxGraph, Value

Weights = Dict[str, np.ndarray]
Rule = Callable[[OnnxGraph, object, List[Value], Tuple[int, ...], Weights], Value]


def same_pads(size: Sequence[int], kernel: Sequence[int], strides: Sequence[int]) -> List[int]:
    """Keras' (TensorFlow's) 'same' padding of two spatial axes as ONNX's pads [top, left, bottom,
    right]: the output is ceil(size / stride), the odd padding pixel goes to the end."""
    begin, end = [], []
    for n, k, s in zip(size, kernel, strides):
        total = max((math.ceil(n / s) - 1) * s + k - n, 0)
        begin.append(total // 2)
        end.append(total - total // 2)
    return begin + end


def _window_attributes(layer: object, x: Value, kernel: Sequence[int]) -> Dict[str, List[int]]:
    strides = list(layer.strides)  # type: ignore[attr-defined]
    pads = same_pads(x.shape[:2], kernel, strides) if layer.padding == "same" else [0, 0, 0, 0]  # type: ignore
    return dict(kernel_shape=list(kernel), strides=strides, pads=pads)


# ---------------------------------------------------------------------- layers with weights
def conv2d(g: OnnxGraph, layer: Conv2D, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    x = g.channels_first(ins[0])
    names = [x.name, g.weight(f"{layer.name}/kernel", w["kernel"].transpose(3, 2, 0, 1))]  # (out, in, kh, kw)
    if "bias" in w:
        names.append(g.weight(f"{layer.name}/bias", w["bias"]))
    y = g.op("Conv", names, f"{layer.name}/Conv", **_window_attributes(layer, x, layer.kernel_size))
    return act.activation(g, Value(y, out_shape, "nchw"), layer.activation, layer.name)


def _depthwise(g: OnnxGraph, layer: object, x: Value, kernel: np.ndarray, bias: object, name: str) -> str:
    """The depthwise convolution as ONNX's grouped Conv (group = the input channels): Keras' kernel
    (kh, kw, c, m) as (c*m, 1, kh, kw), output channel c*m + j reading channel c as Keras;
    'same' padding of the dilated kernel's extent."""
    kh, kw, c, m = kernel.shape
    dil = list(layer.dilation_rate)  # type: ignore[attr-defined]
    strides = list(layer.strides)  # type: ignore[attr-defined]
    extent = [(kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1]
    pads = same_pads(x.shape[:2], extent, strides) if layer.padding == "same" else [0, 0, 0, 0]  # type: ignore
    w = np.ascontiguousarray(kernel.reshape(kh, kw, c * m).transpose(2, 0, 1)[:, None])
    names = [x.name, g.weight(f"{name}/kernel", w)]
    if bias is not None:
        names.append(g.weight(f"{name}/bias", bias))
    return g.op("Conv", names, f"{name}/Conv", group=int(c), kernel_shape=[kh, kw], strides=strides, pads=pads,
                dilations=dil)


def depthwise_conv2d(g: OnnxGraph, layer: DepthwiseConv2D, ins: List[Value], out_shape: Tuple[int, ...],
                     w: Weights) -> Value:
    x = g.channels_first(ins[0])
    y = _depthwise(g, layer, x, w["kernel"], w.get("bias"), layer.name)
    return act.activation(g, Value(y, out_shape, "nchw"), layer.activation, layer.name)


def separable_conv2d(g: OnnxGraph, layer: SeparableConv2D, ins: List[Value], out_shape: Tuple[int, ...],
                     w: Weights) -> Value:
    """The depthwise Conv (no bias), then the 1x1 Conv with the bias: Keras' two steps."""
    x = g.channels_first(ins[0])
    d = _depthwise(g, layer, x, w["depthwise_kernel"], None, f"{layer.name}/depthwise")
    names = [d, g.weight(f"{layer.name}/pointwise_kernel", w["pointwise_kernel"].transpose(3, 2, 0, 1))]
    if "bias" in w:
        names.append(g.weight(f"{layer.name}/bias", w["bias"]))
    y = g.op("Conv", names, f"{layer.name}/pointwise/Conv", kernel_shape=[1, 1])
    return act.activation(g, Value(y, out_shape, "nchw"), layer.activation, layer.name)


def normalization(g: OnnxGraph, layer: Normalization, ins: List[Value], out_shape: Tuple[int, ...],
                  w: Weights) -> Value:
    """(x - mean) / max(sqrt(variance), 1e-7) per channel, as x * scale + offset (what the core
    computes), from the weights or from the mean and variance given."""
    x = ins[0]
    c = out_shape[-1]
    mean = np.asarray(w["mean"] if layer.mean is None else layer.mean, np.float64) * np.ones(c)
    var = np.asarray(w["variance"] if layer.variance is None else layer.variance, np.float64) * np.ones(c)
    scale = (1.0 / np.maximum(np.sqrt(var.astype(np.float32)), np.float32(1e-7))).astype(np.float32)
    offset = (-mean.astype(np.float32) * scale).astype(np.float32)
    shape = (-1, 1, 1) if x.layout == "nchw" else (-1,)
    y = g.op("Mul", [x.name, g.weight(f"{layer.name}/scale", scale.reshape(shape))], f"{layer.name}/Mul")
    y = g.op("Add", [y, g.weight(f"{layer.name}/offset", offset.reshape(shape))], f"{layer.name}/Add")
    return Value(y, out_shape, x.layout)


def dense(g: OnnxGraph, layer: Dense, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    x = ins[0]
    if len(x.shape) != 1:  # the core takes Dense on vectors only
        raise NotImplementedError(f"export: layer '{layer.name}' (Dense) on a per-sample shape {x.shape}: hpcnn "
                                  "exports Dense on vectors (features,)")
    names = [x.name, g.weight(f"{layer.name}/kernel", w["kernel"])]
    if "bias" in w:
        names.append(g.weight(f"{layer.name}/bias", w["bias"]))
    y = g.op("Gemm", names, f"{layer.name}/Gemm")
    return act.activation(g, Value(y, out_shape, "plain"), layer.activation, layer.name)


def batch_normalization(g: OnnxGraph, layer: BatchNormalization, ins: List[Value], out_shape: Tuple[int, ...],
                        w: Weights) -> Value:
    x = ins[0]
    if layer.axis not in (-1, len(x.shape)):
        raise NotImplementedError(f"export: layer '{layer.name}' (BatchNormalization) normalizes axis {layer.axis}; "
                                  "hpcnn exports the normalization of the last axis (axis=-1)")
    if x.is_image:
        x = g.channels_first(x)
    elif len(x.shape) != 1:
        raise NotImplementedError(f"export: layer '{layer.name}' (BatchNormalization) on a per-sample shape "
                                  f"{x.shape}: hpcnn exports it on images (H, W, C) and on vectors (C,)")
    c = out_shape[-1]
    p = layer.name
    gamma = w.get("gamma", np.ones(c, np.float32))  # scale=False: no gamma
    beta = w.get("beta", np.zeros(c, np.float32))   # center=False: no beta
    names = [x.name, g.weight(f"{p}/gamma", gamma), g.weight(f"{p}/beta", beta),
             g.weight(f"{p}/moving_mean", w["moving_mean"]), g.weight(f"{p}/moving_variance", w["moving_variance"])]
    y = g.op("BatchNormalization", names, f"{p}/BatchNormalization", epsilon=float(layer.epsilon))
    return Value(y, out_shape, x.layout)


# ---------------------------------------------------------------------- pooling, reshaping
def pooling2d(g: OnnxGraph, layer: MaxPooling2D, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    x = g.channels_first(ins[0])
    attrs = _window_attributes(layer, x, layer.pool_size)
    if isinstance(layer, AveragePooling2D):
        y = g.op("AveragePool", [x.name], f"{layer.name}/AveragePool", count_include_pad=0, **attrs)
    else:
        y = g.op("MaxPool", [x.name], f"{layer.name}/MaxPool", **attrs)
    return Value(y, out_shape, "nchw")


def global_pooling2d(g: OnnxGraph, layer: GlobalAveragePooling2D, ins: List[Value], out_shape: Tuple[int, ...],
                     w: Weights) -> Value:
    x = g.channels_first(ins[0])
    op = "GlobalMaxPool" if isinstance(layer, GlobalMaxPooling2D) else "GlobalAveragePool"
    y = g.op(op, [x.name], f"{layer.name}/{op}")  # (N, C, 1, 1)
    if layer.keepdims:
        return Value(y, out_shape, "nchw")
    return Value(g.op("Flatten", [y], f"{layer.name}/Flatten", axis=1), out_shape, "plain")


def flatten(g: OnnxGraph, layer: Flatten, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    x = g.channels_last(ins[0])  # Keras' (H, W, C) order
    if len(x.shape) == 1:
        return x
    return Value(g.op("Flatten", [x.name], f"{layer.name}/Flatten", axis=1), out_shape, "plain")


def reshape(g: OnnxGraph, layer: Reshape, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    """Keras' row-major reshape of each sample: from channels-last, to the core's output shape."""
    x = g.channels_last(ins[0])
    shape = g.ints(f"{layer.name}/shape", [0] + list(out_shape))  # 0: the batch as it is
    y = g.op("Reshape", [x.name, shape], f"{layer.name}/Reshape")
    return Value(y, out_shape, "nhwc" if len(out_shape) == 3 else "plain")


def zero_padding2d(g: OnnxGraph, layer: ZeroPadding2D, ins: List[Value], out_shape: Tuple[int, ...],
                   w: Weights) -> Value:
    x = ins[0]
    (top, bottom), (left, right) = layer.padding
    begin, end = [0] * 4, [0] * 4
    begin[x.axis(1)], end[x.axis(1)], begin[x.axis(2)], end[x.axis(2)] = top, bottom, left, right
    pads = g.ints(f"{layer.name}/pads", begin + end)
    return Value(g.op("Pad", [x.name, pads], f"{layer.name}/Pad"), out_shape, x.layout)


def rescaling(g: OnnxGraph, layer: Rescaling, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    """x * scale + offset; a per-channel scale or offset broadcast along the channels."""
    x = ins[0]

    def constant(value: object, what: str) -> str:
        a = np.asarray(value, np.float32)
        if a.ndim == 1 and x.layout == "nchw":
            a = a.reshape(-1, 1, 1)
        return g.weight(f"{layer.name}/{what}", a)

    y = g.op("Mul", [x.name, constant(layer.scale, "scale")], f"{layer.name}/Mul")
    if np.any(np.asarray(layer.offset) != 0):
        y = g.op("Add", [y, constant(layer.offset, "offset")], f"{layer.name}/Add")
    return Value(y, out_shape, x.layout)


# ---------------------------------------------------------------------- inference: identity, crop
def identity(g: OnnxGraph, layer: object, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    return ins[0]


def random_crop(g: OnnxGraph, layer: RandomCrop, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    """The centre (height, width) window, as hpcnn's predict takes it: offset (size - crop) // 2."""
    x = ins[0]
    top, left = (x.shape[0] - layer.height) // 2, (x.shape[1] - layer.width) // 2
    if (layer.height, layer.width) == tuple(x.shape[:2]):
        return x
    p = layer.name
    names = [x.name, g.ints(f"{p}/starts", [top, left]), g.ints(f"{p}/ends", [top + layer.height, left + layer.width]),
             g.ints(f"{p}/axes", [x.axis(1), x.axis(2)])]
    return Value(g.op("Slice", names, f"{p}/Slice"), out_shape, x.layout)


# ---------------------------------------------------------------------- merging
def add(g: OnnxGraph, layer: Add, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    xs = [g.as_layout(v, ins[0].layout) for v in ins]
    op = "Add" if len(xs) == 2 else "Sum"
    return Value(g.op(op, [v.name for v in xs], f"{layer.name}/{op}"), out_shape, xs[0].layout)


def multiply(g: OnnxGraph, layer: Multiply, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    """ONNX's Mul broadcasts as Keras does (each axis equal or 1), both inputs in one layout."""
    xs = [g.as_layout(v, ins[0].layout) for v in ins]
    y = g.op("Mul", [v.name for v in xs], f"{layer.name}/Mul")
    return Value(y, out_shape, xs[0].layout)


def concatenate(g: OnnxGraph, layer: Concatenate, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    xs = [g.as_layout(v, ins[0].layout) for v in ins]
    y = g.op("Concat", [v.name for v in xs], f"{layer.name}/Concat", axis=xs[0].axis(layer.axis))
    return Value(y, out_shape, xs[0].layout)


# ---------------------------------------------------------------------- activation layers
def activation(g: OnnxGraph, layer: Activation, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    return act.activation(g, ins[0], layer.activation, layer.name)


def relu(g: OnnxGraph, layer: ReLU, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    if not layer.threshold and layer.max_value is None:
        if layer.negative_slope:
            return act.leaky_relu(g, ins[0], layer.negative_slope, layer.name)
        return act.activation(g, ins[0], "relu", layer.name)
    if not layer.threshold and layer.max_value == 6.0 and not layer.negative_slope:
        return act.activation(g, ins[0], "relu6", layer.name)
    return act.general_relu(g, ins[0], layer.max_value, layer.negative_slope, layer.threshold, layer.name)


def leaky_relu(g: OnnxGraph, layer: LeakyReLU, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    return act.leaky_relu(g, ins[0], layer.negative_slope, layer.name)


def elu(g: OnnxGraph, layer: ELU, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    return act.elu(g, ins[0], layer.alpha, layer.name)


def softmax(g: OnnxGraph, layer: Softmax, ins: List[Value], out_shape: Tuple[int, ...], w: Weights) -> Value:
    return act.activation(g, ins[0], "softmax", layer.name)


RULES: Dict[type, Rule] = {
    DepthwiseConv2D: depthwise_conv2d, SeparableConv2D: separable_conv2d, Reshape: reshape, Multiply: multiply,
    Normalization: normalization,
    Conv2D: conv2d, Dense: dense, BatchNormalization: batch_normalization,
    MaxPooling2D: pooling2d, AveragePooling2D: pooling2d,
    GlobalAveragePooling2D: global_pooling2d, GlobalMaxPooling2D: global_pooling2d,
    Flatten: flatten, ZeroPadding2D: zero_padding2d, Rescaling: rescaling,
    Dropout: identity, RandomFlip: identity, RandomTranslation: identity, RandomRotation: identity,
    RandomZoom: identity, RandomCrop: random_crop,
    Add: add, Concatenate: concatenate,
    Activation: activation, ReLU: relu, LeakyReLU: leaky_relu, ELU: elu, Softmax: softmax,
}  # type: ignore[dict-item]
