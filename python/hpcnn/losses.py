"""Losses (Keras names). Both are fused with a final softmax inside the core."""
from __future__ import annotations

from typing import Tuple, Union


class CategoricalCrossentropy:
    """Cross-entropy against one-hot targets of shape (n, classes)."""

    name = "categorical_crossentropy"

    def __init__(self, from_logits: bool = False) -> None:
        self.from_logits = bool(from_logits)


class SparseCategoricalCrossentropy:
    """Cross-entropy against integer class indices of shape (n,) or (n, 1)."""

    name = "sparse_categorical_crossentropy"

    def __init__(self, from_logits: bool = False) -> None:
        self.from_logits = bool(from_logits)


LossLike = Union[str, CategoricalCrossentropy, SparseCategoricalCrossentropy]


def resolve(loss: LossLike) -> Tuple[str, bool]:
    """(core loss name, from_logits) for a loss given as a string or an object."""
    if isinstance(loss, (CategoricalCrossentropy, SparseCategoricalCrossentropy)):
        return loss.name, loss.from_logits
    if isinstance(loss, str) and loss in (CategoricalCrossentropy.name, SparseCategoricalCrossentropy.name):
        return loss, False
    raise ValueError(f"unknown loss {loss!r}: use 'categorical_crossentropy' or 'sparse_categorical_crossentropy'")


categorical_crossentropy = CategoricalCrossentropy.name
sparse_categorical_crossentropy = SparseCategoricalCrossentropy.name

__all__ = ["CategoricalCrossentropy", "SparseCategoricalCrossentropy", "resolve"]
