"""``tf.data.experimental``'s names for hpcnn's datasets: ``cardinality`` (the transfer-learning
tutorial's ``tf.data.experimental.cardinality(validation_dataset)``) and its two constants.
``hpcnn.data`` offers them as ``hpcnn.data.experimental``, so that ``import hpcnn as tf`` makes the
tutorial's line run unchanged (as ``tf.data.AUTOTUNE``)."""
from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

from .dataset import AUTOTUNE

__all__ = ["Cardinality", "cardinality", "experimental", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]

# ---------------------------------------------------------------- tf.data.experimental.cardinality
#: tf.data's values for a dataset without an end, and for one whose length is not known.
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


class Cardinality(int):
    """The number of batches ``cardinality`` gives: an int (``%d``, ``// 5``, ``take(n)`` work on it)
    with TensorFlow's tensor method ``numpy()``."""

    def numpy(self) -> np.int64:
        """The value as NumPy's int64 (what TensorFlow's scalar tensor gives)."""
        return np.int64(self)


def cardinality(input_dataset: Any) -> Cardinality:
    """``tf.data.experimental.cardinality(ds)``: the batches one epoch of `input_dataset` has.

    Parameters
    ----------
    input_dataset : ImageDataset, HDF5Dataset, keras.utils.PyDataset, or anything with ``len()``
        The dataset (``image_dataset_from_directory``'s, after ``take``/``skip``/``map`` too).

    Returns
    -------
    Cardinality
        The number of batches; ``UNKNOWN_CARDINALITY`` (-2) for an object without a length (a
        generator), as TensorFlow gives for a dataset whose length it cannot know.
    """
    if isinstance(input_dataset, (str, bytes, np.ndarray)) or not hasattr(input_dataset, "__len__"):
        if hasattr(input_dataset, "__iter__") and not isinstance(input_dataset, (str, bytes, np.ndarray)):
            return Cardinality(UNKNOWN_CARDINALITY)
        raise TypeError(f"cardinality: expected a dataset (image_dataset_from_directory's, an HDF5Dataset, a "
                        f"PyDataset), got {type(input_dataset).__name__}")
    return Cardinality(len(input_dataset))


#: ``tf.data.experimental`` as ``import hpcnn as tf`` sees it: ``tf.data.experimental.cardinality``
#: (also importable: ``from hpcnn.data.experimental import cardinality``).
experimental = types.ModuleType("hpcnn.data.experimental",
                                "tf.data.experimental's names that hpcnn's datasets support: cardinality, "
                                "INFINITE_CARDINALITY, UNKNOWN_CARDINALITY.")
experimental.cardinality = cardinality  # type: ignore[attr-defined]
experimental.INFINITE_CARDINALITY = INFINITE_CARDINALITY  # type: ignore[attr-defined]
experimental.UNKNOWN_CARDINALITY = UNKNOWN_CARDINALITY  # type: ignore[attr-defined]
experimental.AUTOTUNE = AUTOTUNE  # type: ignore[attr-defined]
sys.modules[experimental.__name__] = experimental
