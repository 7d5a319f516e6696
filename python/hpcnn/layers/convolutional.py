"""``Conv2D``, ``DepthwiseConv2D``, ``SeparableConv2D``."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

from .. import validation
from .arguments import (IntPair, WeightRegularizers, activation_name, is_none, is_one_pair, keras_defaults_only,
                        padding_mode)
from .layer import Layer


class Conv2D(WeightRegularizers, Layer):
    """2-D convolution, NHWC, Keras semantics for ``padding`` and ``strides`` (any stride; the
    CPU computes strided 3x3 and 1x1 convolutions with their own fast paths);
    ``use_bias=False`` drops the bias (Keras' convention before a BatchNormalization).
    ``kernel_regularizer`` / ``bias_regularizer``: hpcnn.regularizers (L1, L2, L1L2)."""

    name_prefix = "conv2d"
    weight_attributes = ("kernel", "bias")
    config_keys = ("filters", "kernel_size", "strides", "padding", "activation", "use_bias")

    def __init__(self, filters: int, kernel_size: IntPair, strides: IntPair = (1, 1), padding: str = "valid",
                 activation: Optional[str] = None, use_bias: bool = True, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        for k in ("kernel_initializer", "bias_initializer", "data_format"):
            v = kwargs.pop(k, None)
            if k == "data_format" and v not in (None, "channels_last"):
                raise ValueError("hpcnn is NHWC only: data_format must be 'channels_last'")
            if k == "kernel_initializer" and v not in (None, "glorot_uniform"):
                raise ValueError("hpcnn initializes kernels with glorot_uniform (Keras' default) only")
            if k == "bias_initializer" and v not in (None, "zeros"):
                raise ValueError("hpcnn initializes biases with zeros (Keras' default) only")
        self._take_kernel_arguments(kwargs, use_bias, "Conv2D", dict(dilation_rate=is_one_pair, groups=lambda v: v == 1))
        if not validation.is_integer(filters) or not 0 < filters <= validation.INT32_MAX:
            raise ValueError("Invalid value for argument `filters`. Expected a strictly positive integer "
                             f"(at most {validation.INT32_MAX}). Received filters={filters!r}.")
        self.filters = int(filters)
        self.kernel_size = validation.int_tuple(kernel_size, 2, "kernel_size")
        self.strides = validation.int_tuple(strides, 2, "strides")
        self.padding = padding_mode(padding)
        self.activation = activation_name(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)


def _dilation(dilation_rate: IntPair, caller: str) -> Tuple[int, int]:
    d = validation.int_tuple(dilation_rate, 2, "dilation_rate")
    if min(d) < 1:
        raise ValueError(f"{caller}: dilation_rate must hold positive integers, got {dilation_rate!r}")
    return d


def _depth_multiplier(value: Any, caller: str) -> int:
    if not validation.is_integer(value) or not 0 < int(value) <= validation.INT32_MAX:
        raise ValueError("Invalid value for argument `depth_multiplier`. Expected a strictly positive value. "
                         f"Received depth_multiplier={value!r} ({caller}).")
    return int(value)


def _depthwise_defaults(kwargs: Dict[str, Any], caller: str, kernel_keys: Tuple[str, ...]) -> None:
    """The Keras arguments hpcnn takes at their defaults only: NHWC, glorot_uniform kernels, zero
    biases, no regularizers or constraints (the core has them for Conv2D and Dense only)."""
    accepted: Dict[str, Any] = {"data_format": lambda v: v in (None, "channels_last"),
                                "bias_initializer": lambda v: v in (None, "zeros"),
                                "activity_regularizer": is_none, "bias_regularizer": is_none,
                                "bias_constraint": is_none, "groups": lambda v: v == 1}  # tf.keras 2 configs
    for key in kernel_keys:
        accepted[f"{key}_initializer"] = lambda v: v in (None, "glorot_uniform")
        accepted[f"{key}_regularizer"] = is_none
        accepted[f"{key}_constraint"] = is_none
    keras_defaults_only(kwargs, caller, accepted)


class DepthwiseConv2D(Layer):
    """``DepthwiseConv2D(kernel_size, strides=(1, 1), padding='valid', depth_multiplier=1,
    dilation_rate=(1, 1), activation=None, use_bias=True)`` as in Keras: each input channel is
    convolved with its own ``depth_multiplier`` filters (output channel ``c * depth_multiplier + j``).
    Weights as Keras 3: ``kernel`` (kh, kw, in, depth_multiplier) and ``bias`` (in *
    depth_multiplier,). Strides and dilation may be combined (as Keras on JAX)."""

    name_prefix = "depthwise_conv2d"
    weight_attributes = ("kernel", "bias")
    config_keys = ("kernel_size", "strides", "padding", "depth_multiplier", "dilation_rate", "activation", "use_bias")

    def __init__(self, kernel_size: IntPair, strides: IntPair = (1, 1), padding: str = "valid",
                 depth_multiplier: int = 1, dilation_rate: IntPair = (1, 1), activation: Optional[str] = None,
                 use_bias: bool = True, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        _depthwise_defaults(kwargs, "DepthwiseConv2D", ("depthwise",))
        self.kernel_size = validation.int_tuple(kernel_size, 2, "kernel_size")
        self.strides = validation.int_tuple(strides, 2, "strides")
        self.padding = padding_mode(padding)
        self.depth_multiplier = _depth_multiplier(depth_multiplier, "DepthwiseConv2D")
        self.dilation_rate = _dilation(dilation_rate, "DepthwiseConv2D")
        self.activation = activation_name(activation)
        self.use_bias = validation.boolean(use_bias, "use_bias", "DepthwiseConv2D")
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class SeparableConv2D(Layer):
    """``SeparableConv2D(filters, kernel_size, strides=(1, 1), padding='valid', depth_multiplier=1,
    dilation_rate=(1, 1), activation=None, use_bias=True)`` as in Keras: a depthwise convolution
    (no bias) followed by a 1x1 convolution to ``filters`` channels, with the bias and activation.
    Weights as Keras: ``depthwise_kernel`` (kh, kw, in, depth_multiplier), ``pointwise_kernel``
    (1, 1, in * depth_multiplier, filters), ``bias`` (filters,)."""

    name_prefix = "separable_conv2d"
    weight_attributes = ("depthwise_kernel", "pointwise_kernel", "bias")
    config_keys = ("filters", "kernel_size", "strides", "padding", "depth_multiplier", "dilation_rate", "activation",
                   "use_bias")

    def __init__(self, filters: int, kernel_size: IntPair, strides: IntPair = (1, 1), padding: str = "valid",
                 depth_multiplier: int = 1, dilation_rate: IntPair = (1, 1), activation: Optional[str] = None,
                 use_bias: bool = True, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        _depthwise_defaults(kwargs, "SeparableConv2D", ("depthwise", "pointwise"))
        if not validation.is_integer(filters) or not 0 < filters <= validation.INT32_MAX:
            raise ValueError("Invalid value for argument `filters`. Expected a strictly positive integer "
                             f"(at most {validation.INT32_MAX}). Received filters={filters!r}.")
        self.filters = int(filters)
        self.kernel_size = validation.int_tuple(kernel_size, 2, "kernel_size")
        self.strides = validation.int_tuple(strides, 2, "strides")
        self.padding = padding_mode(padding)
        self.depth_multiplier = _depth_multiplier(depth_multiplier, "SeparableConv2D")
        self.dilation_rate = _dilation(dilation_rate, "SeparableConv2D")
        self.activation = activation_name(activation)
        self.use_bias = validation.boolean(use_bias, "use_bias", "SeparableConv2D")
        super().__init__(name=name, input_shape=input_shape, **kwargs)
