"""The pooling layers: ``MaxPooling2D``, ``AveragePooling2D``, ``GlobalAveragePooling2D``,
``GlobalMaxPooling2D`` (and their short aliases)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .. import validation
from .arguments import IntPair, channels_last_only, padding_mode
from .layer import Layer


class _Pooling2D(Layer):
    """What MaxPooling2D and AveragePooling2D share: ``pool_size``, ``strides`` (default: ``pool_size``,
    as Keras) and ``padding``, their checks and config."""

    config_keys = ("pool_size", "strides", "padding")

    def __init__(self, pool_size: IntPair = (2, 2), strides: Optional[IntPair] = None, padding: str = "valid",
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.pool_size = validation.int_tuple(pool_size, 2, "pool_size")
        self.strides = validation.int_tuple(strides, 2, "strides") if strides is not None else self.pool_size
        self.padding = padding_mode(padding)
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class MaxPooling2D(_Pooling2D):
    """Max pooling, NHWC; ``strides`` default to ``pool_size`` (Keras)."""

    name_prefix = "max_pooling2d"


MaxPool2D = MaxPooling2D


class AveragePooling2D(_Pooling2D):
    """Average pooling, NHWC; ``strides`` default to ``pool_size`` (Keras). With ``padding='same'``
    each window averages its in-bounds positions only (padding is not counted), as Keras does."""

    name_prefix = "average_pooling2d"


AvgPool2D = AveragePooling2D


class _GlobalPooling2D(Layer):
    """(H, W, C) -> (C,) (``keepdims=True``: (1, 1, C))."""

    config_keys = ("keepdims",)

    def __init__(self, keepdims: bool = False, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.keepdims = validation.boolean(keepdims, "keepdims", type(self).__name__)
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class GlobalAveragePooling2D(_GlobalPooling2D):
    """The mean over the spatial axes of each channel: (H, W, C) -> (C,) (keepdims: (1, 1, C))."""

    name_prefix = "global_average_pooling2d"


class GlobalMaxPooling2D(_GlobalPooling2D):
    """The max over the spatial axes of each channel: (H, W, C) -> (C,) (keepdims: (1, 1, C)); the
    gradient goes to the first maximal position, as MaxPooling2D's."""

    name_prefix = "global_max_pooling2d"


GlobalAvgPool2D = GlobalAveragePooling2D


GlobalMaxPool2D = GlobalMaxPooling2D
