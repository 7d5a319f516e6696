"""The activation layers: ``ReLU``, ``LeakyReLU``, ``ELU``, ``Softmax``."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from .. import validation
from .arguments import non_negative_slope
from .layer import Layer


class ReLU(Layer):
    """``ReLU(max_value=None, negative_slope=0.0, threshold=0.0)`` as in Keras: x above the
    threshold (else 0), clipped to ``max_value`` when given, minus ``negative_slope`` times the
    part below the threshold. ``ReLU(6.0)`` is MobileNet's ReLU6."""

    name_prefix = "re_lu"
    config_keys = ("max_value", "negative_slope", "threshold")

    def __init__(self, max_value: Optional[float] = None, negative_slope: float = 0.0, threshold: float = 0.0,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        if max_value is not None:
            validation.number(max_value, "max_value", "ReLU", low=0.0,
                              expected="a number >= 0 (max_value of a ReLU layer cannot be a negative value)")
        slope = non_negative_slope(negative_slope, "ReLU")
        ok = (isinstance(threshold, (int, float, np.integer, np.floating)) and not isinstance(threshold, bool)
              and math.isfinite(float(threshold)) and float(threshold) >= 0)
        if not ok:
            raise ValueError("ReLU: threshold of a ReLU layer cannot be None or a negative value. Received: "
                             f"threshold={threshold!r}")
        self.max_value = None if max_value is None else float(max_value)
        self.negative_slope = slope
        self.threshold = float(threshold)
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class LeakyReLU(Layer):
    """``LeakyReLU(negative_slope=0.3)``: x if x > 0 else negative_slope * x. Keras 3's default
    slope; ``alpha=`` (Keras 2's name for it) is accepted too."""

    name_prefix = "leaky_re_lu"
    config_keys = ("negative_slope",)

    def __init__(self, negative_slope: float = 0.3, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        if "alpha" in kwargs:  # Keras 2's name (Keras 3 still takes it)
            negative_slope = kwargs.pop("alpha")
        self.negative_slope = non_negative_slope(negative_slope, "LeakyReLU")
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class ELU(Layer):
    """``ELU(alpha=1.0)``: x if x > 0 else alpha * (exp(x) - 1)."""

    name_prefix = "elu"
    config_keys = ("alpha",)

    def __init__(self, alpha: float = 1.0, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.alpha = validation.number(alpha, "alpha", "ELU")
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class Softmax(Layer):
    """``Softmax(axis=-1)``: softmax over the last axis, on any layer (not only the output)."""

    name_prefix = "softmax"
    config_keys = ("axis",)

    def __init__(self, axis: int = -1, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        if not (validation.is_integer(axis) and int(axis) == -1):
            raise ValueError(f"Softmax: axis={axis!r} is not supported: hpcnn takes the softmax over the last axis "
                             "(axis=-1)")
        self.axis = -1
        super().__init__(name=name, input_shape=input_shape, **kwargs)
