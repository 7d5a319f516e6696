"""Helpers with Keras names: ``to_categorical``, ``PyDataset`` (and ``Sequence``), ``set_random_seed``."""
from __future__ import annotations

import os
from typing import Any, Optional

import numpy as np

from . import validation

_seed_state = {"seed": None, "count": 0}


def to_categorical(y: Any, num_classes: Optional[int] = None, dtype: str = "float32") -> np.ndarray:
    """Class indices -> one-hot rows, as Keras: a trailing axis of size 1 is dropped, so labels of
    shape (n, 1) give (n, num_classes). Labels are checked on their own type (an int64 2**32+3 is
    out of range, not class 3); the error names the first bad one."""
    num_classes = validation.integer(num_classes, "num_classes", "to_categorical", maximum=None, allow_none=True)
    y = np.asarray(y)
    if y.dtype.kind not in "iubf":
        example = repr(y.ravel()[:1].tolist()[0]) if y.size else "none"
        raise ValueError(f"to_categorical: labels must be integer class indices, got dtype {y.dtype} "
                         f"(first label {example}); map names to indices first, e.g. "
                         "np.unique(labels, return_inverse=True)[1]")
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise ValueError("to_categorical: labels must be whole numbers")
    shape = y.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = shape[:-1]
    flat = y.ravel()
    if flat.size and (flat < 0).any():
        row = int(np.flatnonzero(flat < 0)[0])
        raise ValueError(f"to_categorical: negative label {flat[row]} (row {row})")
    if num_classes is None:
        num_classes = int(flat.max()) + 1 if flat.size else 0
    if flat.size and (flat >= num_classes).any():
        row = int(np.flatnonzero(flat >= num_classes)[0])
        raise ValueError(f"to_categorical: label {flat[row]} (row {row}) is outside [0, {num_classes})")
    idx = flat.astype(np.int64)  # exact now: every label is in [0, num_classes)
    out = np.zeros((flat.size, num_classes), dtype=dtype)
    out[np.arange(flat.size), idx] = 1
    return out.reshape(shape + (num_classes,))


class PyDataset:
    """Base class for a dataset of batches, as ``keras.utils.PyDataset``: implement ``__len__``
    (batches per epoch) and ``__getitem__(i)`` returning batch i as ``(x, y)`` or
    ``(x, y, sample_weight)`` arrays (for ``predict`` also ``x`` alone); ``on_epoch_end`` is called
    after each epoch. ``fit`` takes its batches in a shuffled order (``shuffle=True``, keyed by the
    model's seed and the epoch) and hands each batch to the core whole: nothing is done per sample
    in Python.

    ``workers``, ``use_multiprocessing`` and ``max_queue_size`` are accepted for Keras
    compatibility and checked; batches are fetched in the training thread, one ahead of the step
    (the next batch is staged while the current one trains). For large data from disk,
    ``hpcnn.data.HDF5Dataset`` reads and decodes in native threads."""

    def __init__(self, workers: int = 1, use_multiprocessing: bool = False, max_queue_size: int = 10) -> None:
        self.workers = validation.integer(workers, "workers", "PyDataset")
        self.use_multiprocessing = validation.boolean(use_multiprocessing, "use_multiprocessing", "PyDataset")
        self.max_queue_size = validation.integer(max_queue_size, "max_queue_size", "PyDataset")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__ (the number of batches)")

    def __getitem__(self, index: int):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__ (batch `index` as (x, y))")

    @property
    def num_batches(self) -> Optional[int]:
        """The number of batches (Keras' property): ``len(self)``."""
        return len(self)

    def on_epoch_end(self) -> None:
        pass


class Sequence(PyDataset):
    """``keras.utils.Sequence``, the older name of ``PyDataset``."""


def set_random_seed(seed: int) -> None:
    """Seed hpcnn (weights, dropout, shuffling) and NumPy's global generator. Models built after
    this call get seeds derived from ``seed`` in build order, so a script is reproducible."""
    seed = validation.integer(seed, "seed", "set_random_seed", minimum=0, maximum=None)
    _seed_state["seed"] = seed
    _seed_state["count"] = 0
    np.random.seed(seed % (2**32))


def seeded() -> bool:
    """Whether set_random_seed() was called (models without a seed then get reproducible ones)."""
    return _seed_state["seed"] is not None


def next_model_seed() -> int:
    """The seed for the next model built without an explicit one."""
    if _seed_state["seed"] is None:
        return int.from_bytes(os.urandom(8), "little") >> 1
    _seed_state["count"] += 1
    return (_seed_state["seed"] * 1_000_003 + _seed_state["count"]) % (2**63)


__all__ = ["to_categorical", "PyDataset", "Sequence", "set_random_seed"]
