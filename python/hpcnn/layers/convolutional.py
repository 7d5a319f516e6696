"""``Conv2D``."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .. import validation
from .arguments import IntPair, WeightRegularizers, activation_name, is_one_pair, padding_mode
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
