"""The double-scaling trap: a model whose first layer divides by 255 (``Rescaling(1./255)``, as
TensorFlow's and Keras' image tutorials begin) fed images that are already in [0, 1]
(``HDF5Dataset`` divides uint8 images by 255 by default; or ``x / 255`` done by hand). The model
then sees values below 1/255: it trains at chance, with no error anywhere. fit warns once, naming
both scalings and the fix; it does not refuse (values in [0, 1] may be meant, and training goes on)."""
from __future__ import annotations

import math
import warnings
from typing import Any, List, Optional

import numpy as np

from ..layers import RandomCrop, RandomFlip, RandomRotation, RandomTranslation, RandomZoom, Rescaling

# Layers that may stand before the Rescaling without changing the values' range (the tutorial's
# data_augmentation block: RandomFlip, RandomRotation, RandomZoom).
_RANGE_KEEPING = (RandomFlip, RandomRotation, RandomZoom, RandomTranslation, RandomCrop)


def _first_layers(model: Any) -> List[Any]:
    """The model's layers in order, nested models (a data_augmentation Sequential) opened."""
    out: List[Any] = []
    for layer in getattr(model, "layers", []):
        if hasattr(layer, "layers") and not isinstance(layer, Rescaling):
            out += _first_layers(layer)
        else:
            out.append(layer)
    return out


def dividing_rescaling(model: Any) -> Optional[Any]:
    """The Rescaling layer that opens the model and divides by 255 (every channel's scale 1/255,
    to 0.1 %), after the input and any augmentation layers; None otherwise."""
    for layer in _first_layers(model):
        if getattr(layer, "is_input", False) or isinstance(layer, _RANGE_KEEPING):
            continue
        if not isinstance(layer, Rescaling):
            return None
        scales = layer.scale if isinstance(layer.scale, list) else [layer.scale]
        return layer if all(math.isclose(s, 1 / 255, rel_tol=1e-3) for s in scales) else None
    return None


def _already_scaled(x: Any, is_dataset: bool, batch_size: Optional[int]) -> Optional[str]:
    """How we know the training images are already in [0, 1], or None when they are not (or it
    is not known cheaply)."""
    if is_dataset:
        value_range = getattr(x, "value_range", None)  # HDF5Dataset: known from its stored type and scale
        if value_range is not None and value_range[1] <= 1.0 + 1e-6 and value_range[0] >= -1e-6:
            return (f"{type(x).__name__} delivers values in [{value_range[0]:g}, {value_range[1]:g}] (it divides "
                    "uint8 images by 255 by default)")
        return None
    first = np.asarray(x[:batch_size or 32])  # the first batch only: cheap on any size of data
    if first.size == 0 or first.dtype.kind != "f":
        return None
    low, high = float(np.min(first)), float(np.max(first))
    if low >= 0.0 and high <= 1.0:
        return f"the training data's first batch lies in [{low:.3g}, {high:.3g}]: already divided by 255"
    return None


def warn_double_scaling(model: Any, x: Any, is_dataset: bool, batch_size: Optional[int]) -> None:
    """A UserWarning when the model divides its input by 255 and x is already scaled to [0, 1]."""
    layer = dividing_rescaling(model)
    if layer is None:
        return
    why = _already_scaled(x, is_dataset, batch_size)
    if why is None:
        return
    fix = ("give HDF5Dataset(..., scale=1.0) so it delivers 0-255 values, as Keras' image_dataset_from_directory "
           "does" if is_dataset else "pass the 0-255 values (drop your own / 255)")
    warnings.warn(f"fit: the images are scaled twice: {why}, and the model's first layer "
                  f"'{layer.name}' (Rescaling(1./255)) divides them by 255 again, so the model sees values below "
                  f"{1 / 255:.4f} and will likely train at chance. Keep one of the two scalings: {fix}, or remove "
                  "the Rescaling layer.", UserWarning, stacklevel=5)  # the line calling model.fit


__all__ = ["dividing_rescaling", "warn_double_scaling"]
