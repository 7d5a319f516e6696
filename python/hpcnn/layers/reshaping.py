"""The layers that reshape without weights: ``Flatten``, ``ZeroPadding2D``."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

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
