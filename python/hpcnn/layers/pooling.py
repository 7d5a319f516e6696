"""The pooling layers: ``MaxPooling2D``, ``AveragePooling2D``, ``GlobalAveragePooling2D``,
``GlobalMaxPooling2D`` (and their short aliases)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from .. import validation
from .arguments import IntPair, channels_last_only, padding_mode
from .layer import Layer

class _Pooling2D(Layer):
    """What MaxPooling2D and AveragePooling2D share: ``pool_size``, ``strides`` (default: ``pool_size``,
    as Keras) and ``padding``, their checks and config."""

    _core_class = ""

    def __init__(self, pool_size: IntPair = (2, 2), strides: Optional[IntPair] = None, padding: str = "valid",
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.pool_size = validation.int_tuple(pool_size, 2, "pool_size")
        self.strides = validation.int_tuple(strides, 2, "strides") if strides is not None else self.pool_size
        self.padding = padding_mode(padding)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(pool_size=list(self.pool_size), strides=list(self.strides), padding=self.padding)
        return cfg

    def core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name=self._core_class, pool_size=list(self.pool_size), strides=list(self.strides),
                     padding=self.padding)]


class MaxPooling2D(_Pooling2D):
    """Max pooling, NHWC; ``strides`` default to ``pool_size`` (Keras)."""

    name_prefix = "max_pooling2d"
    _core_class = "MaxPooling2D"


MaxPool2D = MaxPooling2D


class AveragePooling2D(_Pooling2D):
    """Average pooling, NHWC; ``strides`` default to ``pool_size`` (Keras). With ``padding='same'``
    each window averages its in-bounds positions only (padding is not counted), as Keras does."""

    name_prefix = "average_pooling2d"
    _core_class = "AveragePooling2D"


AvgPool2D = AveragePooling2D


class _GlobalPooling2D(Layer):
    """(H, W, C) -> (C,) (``keepdims=True``: (1, 1, C))."""

    _core_class = ""

    def __init__(self, keepdims: bool = False, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.keepdims = validation.boolean(keepdims, "keepdims", type(self).__name__)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(keepdims=self.keepdims)
        return cfg

    def core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name=self._core_class, keepdims=self.keepdims)]


class GlobalAveragePooling2D(_GlobalPooling2D):
    """The mean over the spatial axes of each channel: (H, W, C) -> (C,) (keepdims: (1, 1, C))."""

    name_prefix = "global_average_pooling2d"
    _core_class = "GlobalAveragePooling2D"


class GlobalMaxPooling2D(_GlobalPooling2D):
    """The max over the spatial axes of each channel: (H, W, C) -> (C,) (keepdims: (1, 1, C)); the
    gradient goes to the first maximal position, as MaxPooling2D's."""

    name_prefix = "global_max_pooling2d"
    _core_class = "GlobalMaxPooling2D"


GlobalAvgPool2D = GlobalAveragePooling2D
GlobalMaxPool2D = GlobalMaxPooling2D
