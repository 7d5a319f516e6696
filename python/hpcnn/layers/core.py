"""``Dense`` and ``Activation``."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import validation
from .arguments import (ACTIVATION_ALPHA, NO_REGULARIZERS, WeightRegularizers, activation_configs, activation_name,
                        keras_defaults_only)
from .layer import Layer

class Dense(WeightRegularizers, Layer):
    """Fully connected: ``x @ kernel + bias``, kernel (in, out); ``use_bias=False``: no bias.
    ``kernel_regularizer`` / ``bias_regularizer``: hpcnn.regularizers (L1, L2, L1L2)."""

    name_prefix = "dense"

    def __init__(self, units: int, activation: Optional[str] = None, use_bias: bool = True,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        for k, default in (("kernel_initializer", "glorot_uniform"), ("bias_initializer", "zeros")):
            v = kwargs.pop(k, None)
            if v not in (None, default):
                raise ValueError(f"Dense: only Keras' default initializers are supported ({k}={v!r}; hpcnn "
                                 f"initializes with {k}='{default}')")
        keras_defaults_only(kwargs, "Dense", NO_REGULARIZERS)
        self._take_regularizers(kwargs)
        self.use_bias = validation.boolean(use_bias, "use_bias", "Dense")
        if not validation.is_integer(units) or not 0 < units <= validation.INT32_MAX:
            raise ValueError("Received an invalid value for `units`, expected a positive integer "
                             f"(at most {validation.INT32_MAX}). Received: units={units!r}")
        self.units = int(units)
        self.activation = activation_name(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(units=self.units, activation=self.activation, use_bias=self.use_bias)
        cfg.update(self._regularizer_config())
        return cfg

    def core_configs(self) -> List[Dict[str, Any]]:
        dense = dict(class_name="Dense", units=self.units, use_bias=self.use_bias,
                     activation="relu" if self.activation == "relu" else "linear")
        dense.update(self._regularizer_core_config())
        return [dense] + activation_configs(self.activation)

    def count_params(self, input_shape: Tuple[int, ...]) -> int:
        return input_shape[-1] * self.units + (self.units if self.use_bias else 0)


class Activation(Layer):
    """``Activation(name)``: any activation of this module's list ('relu', 'tanh', 'gelu',
    'softmax', ...), element-wise (softmax: over the last axis)."""

    name_prefix = "activation"

    def __init__(self, activation: Any, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.activation = activation_name(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(activation=self.activation)
        return cfg

    def core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name="Activation", activation=self.activation,
                     alpha=ACTIVATION_ALPHA.get(self.activation, 0.0))]
