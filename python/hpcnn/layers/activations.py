"""The activation layers: ``ReLU``, ``LeakyReLU``, ``ELU``, ``Softmax``."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .. import validation
from .arguments import non_negative_slope
from .layer import Layer


class ReLU(Layer):
    """``ReLU(max_value=None, negative_slope=0.0, threshold=0.0)`` as in Keras, for the forms hpcnn
    computes: the plain ReLU, ``max_value=6`` (ReLU6) and ``negative_slope > 0`` (a leaky ReLU);
    other combinations are a ValueError."""

    name_prefix = "re_lu"
    config_keys = ("max_value", "negative_slope", "threshold")

    def __init__(self, max_value: Optional[float] = None, negative_slope: float = 0.0, threshold: float = 0.0,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        slope = non_negative_slope(negative_slope, "ReLU")
        if max_value is not None:
            validation.number(max_value, "max_value", "ReLU", low=0.0)
        validation.number(threshold, "threshold", "ReLU")
        if threshold != 0:
            raise ValueError(f"ReLU: threshold={threshold!r} is not supported (hpcnn supports only Keras' default)")
        if max_value is not None and (float(max_value) != 6.0 or slope != 0.0):
            raise ValueError(f"ReLU: max_value={max_value!r} is not supported (hpcnn computes max_value=None, and "
                             "max_value=6 without a negative_slope: ReLU6)")
        self.max_value = None if max_value is None else float(max_value)
        self.negative_slope = slope
        self.threshold = 0.0
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
