"""The layers of several inputs: ``Add``, ``Multiply`` and ``Concatenate``."""
from __future__ import annotations

from typing import Any, Optional

from .. import validation
from .layer import Layer

# ------------------------------------------------------------------ merging layers (several inputs)


class _Merge(Layer):
    """A layer called on a list of at least two tensors."""

    merges_inputs = True

    def __init__(self, name: Optional[str] = None, **kwargs: Any) -> None:
        if kwargs.get("input_shape") is not None:
            raise ValueError(f"{type(self).__name__}: input_shape= is not taken: the layer is called on tensors")
        kwargs.pop("input_shape", None)
        super().__init__(name=name, **kwargs)


class Add(_Merge):
    """``Add()([a, b, ...])``: the element-wise sum of tensors of one shape (a residual
    connection). Its backward passes the gradient to every input unchanged."""

    name_prefix = "add"


class Multiply(_Merge):
    """``Multiply()([a, b])``: the element-wise product of two tensors with Keras' broadcasting
    (each axis equal or 1: a squeeze-and-excitation block's ``(h, w, c) x (1, 1, c)``). Its
    backward gives each input dy times the other, summed over the axes it was broadcast along.
    Inputs whose shapes do not fit are a ValueError naming them."""

    name_prefix = "multiply"


class Concatenate(_Merge):
    """``Concatenate(axis=-1)([a, b, ...])``: tensors side by side along ``axis`` (Keras counts the
    batch axis: -1, the default, is the channels of NHWC images); every other axis must agree."""

    name_prefix = "concatenate"
    config_keys = ("axis",)

    def __init__(self, axis: int = -1, name: Optional[str] = None, **kwargs: Any) -> None:
        if not validation.is_integer(axis):
            raise ValueError(f"Invalid value for argument `axis`. Expected an integer. Received: axis={axis!r}")
        if axis == 0:
            raise ValueError("Invalid value for argument `axis`. Expected a per-sample axis (0 is the batch axis). "
                             "Received: axis=0")
        self.axis = int(axis)
        super().__init__(name=name, **kwargs)


# ------------------------------------------------------------------ Keras' functional forms
def add(inputs: Any, **kwargs: Any) -> Any:
    """``layers.add([a, b, ...])``: Keras' functional form of ``Add(**kwargs)([a, b, ...])`` (a new
    Add layer, named as Keras names it, called on the tensors)."""
    return Add(**kwargs)(inputs)


def multiply(inputs: Any, **kwargs: Any) -> Any:
    """``layers.multiply([a, b])``: Keras' functional form of ``Multiply(**kwargs)([a, b])``."""
    return Multiply(**kwargs)(inputs)


def concatenate(inputs: Any, axis: int = -1, **kwargs: Any) -> Any:
    """``layers.concatenate([a, b, ...], axis=-1)``: Keras' functional form of
    ``Concatenate(axis=axis, **kwargs)([a, b, ...])``."""
    return Concatenate(axis=axis, **kwargs)(inputs)
