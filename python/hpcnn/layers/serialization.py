"""Layers to and from Keras' serialized form ``{'class_name': ..., 'config': {...}}``."""
from __future__ import annotations

from typing import Any, Dict

from .activations import ELU, LeakyReLU, ReLU, Softmax
from .convolutional import Conv2D, DepthwiseConv2D, SeparableConv2D
from .core import Activation, Dense
from .layer import InputLayer, Layer
from .merging import Add, Concatenate, Multiply
from .normalization import BatchNormalization
from .pooling import AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D, MaxPooling2D
from .preprocessing import (Normalization, RandomCrop, RandomFlip, RandomRotation, RandomTranslation, RandomZoom,
                            Rescaling)
from .regularization import Dropout
from .reshaping import Flatten, Reshape, ZeroPadding2D


# The layer classes a config may name (an explicit table: a name from a file is never looked up otherwise).
LAYER_CLASSES = {c.__name__: c for c in (InputLayer, Conv2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D,
                                      GlobalMaxPooling2D, ZeroPadding2D, Flatten, Dense, Dropout, Activation, ReLU,
                                      LeakyReLU, ELU, Softmax, Rescaling, BatchNormalization, RandomFlip,
                                      RandomTranslation, RandomRotation, RandomZoom, RandomCrop, Add, Concatenate,
                                      DepthwiseConv2D, SeparableConv2D, Multiply, Reshape, Normalization)}


def deserialize(config: Dict[str, Any]) -> Layer:
    """A layer from ``{'class_name': ..., 'config': {...}}`` (Keras' serialization shape). Anything
    else (not a dict, an unknown class, arguments the class does not take) is a ValueError."""
    if not isinstance(config, dict):
        raise ValueError(f"a layer config must be a dict with 'class_name' and 'config', got {config!r:.200}")
    name = config.get("class_name")
    if not isinstance(name, str) or name not in LAYER_CLASSES:
        raise ValueError(f"unknown layer class {name!r:.100}: hpcnn has {sorted(LAYER_CLASSES)}")
    cfg = config.get("config", {})
    if not isinstance(cfg, dict):
        raise ValueError(f"the config of a {name} layer must be a dict, got {cfg!r:.200}")
    try:
        return LAYER_CLASSES[name].from_config(dict(cfg))
    except TypeError as e:  # an argument the class does not take
        raise ValueError(f"{name}: {e}") from None


def serialize(layer: Layer) -> Dict[str, Any]:
    return {"class_name": type(layer).__name__, "config": layer.get_config()}
