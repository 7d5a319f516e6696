"""The layers that reshape without weights: ``Flatten``, ``Reshape``, ``ZeroPadding2D``."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from .. import validation
from .arguments import channels_last_only, zero_padding
from .layer import Layer


class Flatten(Layer):
    """(H, W, C) -> (H*W*C,), in Keras' (H, W, C) order; no copy."""

    name_prefix = "flatten"

    def __init__(self, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        if kwargs.pop("data_format", None) not in (None, "channels_last"):
            raise ValueError("hpcnn is NHWC only: data_format must be 'channels_last'")
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class Reshape(Layer):
    """``Reshape(target_shape)``: each sample to ``target_shape`` (one entry may be -1: the size that
    keeps the element count), in row-major order as Keras; no copy. A ``target_shape`` whose
    element count differs from the input's is a ValueError naming both when the model is built."""

    name_prefix = "reshape"
    config_keys = ("target_shape",)

    def __init__(self, target_shape: Sequence[int], name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        msg = ("Reshape: target_shape must be a tuple of positive integers with at most one -1, received "
               f"target_shape={target_shape!r}")
        try:
            shape = tuple(target_shape)
        except TypeError:
            raise ValueError(msg) from None
        if (not shape or not all(validation.is_integer(d) and (int(d) > 0 or int(d) == -1) for d in shape)
                or sum(int(d) == -1 for d in shape) > 1 or any(int(d) > validation.INT32_MAX for d in shape)):
            raise ValueError(msg)
        self.target_shape = tuple(int(d) for d in shape)
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class ZeroPadding2D(Layer):
    """Zeros around the spatial axes: ``padding`` an int, (rows, cols) or ((top, bottom), (left, right))."""

    name_prefix = "zero_padding2d"
    config_keys = ("padding",)

    def core_config(self) -> Dict[str, Any]:
        (t, b), (l, r) = self.padding
        return dict(class_name="ZeroPadding2D", padding=[t, b, l, r])

    def __init__(self, padding: Any = (1, 1), name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.padding = zero_padding(padding)
        super().__init__(name=name, input_shape=input_shape, **kwargs)
