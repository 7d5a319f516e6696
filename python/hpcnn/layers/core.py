"""``Dense`` and ``Activation``."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .. import validation
from .arguments import WeightRegularizers, activation_name
from .layer import Layer


class Dense(WeightRegularizers, Layer):
    """Fully connected: ``x @ kernel + bias``, kernel (in, out); ``use_bias=False``: no bias.
    ``kernel_regularizer`` / ``bias_regularizer``: hpcnn.regularizers (L1, L2, L1L2)."""

    name_prefix = "dense"
    weight_attributes = ("kernel", "bias")
    config_keys = ("units", "activation", "use_bias")

    def __init__(self, units: int, activation: Optional[str] = None, use_bias: bool = True,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        for k, default in (("kernel_initializer", "glorot_uniform"), ("bias_initializer", "zeros")):
            v = kwargs.pop(k, None)
            if v not in (None, default):
                raise ValueError(f"Dense: only Keras' default initializers are supported ({k}={v!r}; hpcnn "
                                 f"initializes with {k}='{default}')")
        self._take_kernel_arguments(kwargs, use_bias, "Dense", {})
        if not validation.is_integer(units) or not 0 < units <= validation.INT32_MAX:
            raise ValueError("Received an invalid value for `units`, expected a positive integer "
                             f"(at most {validation.INT32_MAX}). Received: units={units!r}")
        self.units = int(units)
        self.activation = activation_name(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class Activation(Layer):
    """``Activation(name)``: any activation of this module's list ('relu', 'tanh', 'gelu',
    'softmax', ...), element-wise (softmax: over the last axis)."""

    name_prefix = "activation"
    config_keys = ("activation",)

    def __init__(self, activation: Any, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.activation = activation_name(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)
