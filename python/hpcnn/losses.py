"""Losses, by Keras' names: as strings (``loss='mse'``), functions (``loss=hpcnn.losses.mse``) or
objects (``loss=hpcnn.losses.BinaryCrossentropy(from_logits=True)``).

The training step computes the loss and its gradient in the C++ core (ops/softmax_xent and
ops/loss_metrics), weighted by ``sample_weight`` / ``class_weight`` and reduced as Keras'
default ``"sum_over_batch_size"``: the sum of the per-sample (weighted) losses divided by the
number of samples. The categorical cross-entropies are fused with a final softmax and binary
cross-entropy with a final sigmoid (computed from the logits, stable).

The functions and the objects' ``__call__`` compute the same losses with NumPy in float64, as
Keras' functions do (per-sample values; an object reduces them), for checking and for use
outside training.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Union

import numpy as np

from . import suggestions, validation

EPSILON = 1e-7  # keras.config.epsilon(): binary cross-entropy clips probabilities to [eps, 1 - eps]
# ... in float32, as Keras computes: 1 - 1e-7 is 1 - 2**-23 there.
_CLIP = (float(np.float32(EPSILON)), float(np.float32(1) - np.float32(EPSILON)))


# ---------------------------------------------------------------------- per-sample functions (NumPy)
def _pair(y_true: Any, y_pred: Any):
    return np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)


def mean_squared_error(y_true: Any, y_pred: Any) -> np.ndarray:
    """Per-sample mean over the last axis of (y_true - y_pred)**2."""
    t, p = _pair(y_true, y_pred)
    return np.mean((p - t) ** 2, axis=-1)


def mean_absolute_error(y_true: Any, y_pred: Any) -> np.ndarray:
    """Per-sample mean over the last axis of |y_true - y_pred|."""
    t, p = _pair(y_true, y_pred)
    return np.mean(np.abs(p - t), axis=-1)


def binary_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0,
                        axis: int = -1) -> np.ndarray:
    """Per-sample mean over the last axis of -(t log p + (1 - t) log(1 - p)), p clipped to
    [1e-7, 1 - 1e-7] (from logits: computed stably from them); label smoothing moves t towards 0.5."""
    t, p = _pair(y_true, y_pred)
    t = t * (1.0 - label_smoothing) + 0.5 * label_smoothing
    if from_logits:
        values = np.maximum(p, 0) - p * t + np.log1p(np.exp(-np.abs(p)))
    else:
        q = np.clip(p, *_CLIP)
        values = -(t * np.log(q) + (1 - t) * np.log(1 - q))
    return np.mean(values, axis=axis)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0,
                             axis: int = -1) -> np.ndarray:
    """Per-sample -sum(t log p) over one-hot (or probability) rows t; label smoothing spreads
    ``label_smoothing`` of each row evenly over the classes."""
    t, p = _pair(y_true, y_pred)
    t = t * (1.0 - label_smoothing) + label_smoothing / t.shape[-1]
    logp = _log_softmax(p) if from_logits else np.log(np.clip(p / p.sum(axis=-1, keepdims=True), *_CLIP))
    return -np.sum(t * logp, axis=axis)


def sparse_categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False,
                                    axis: int = -1) -> np.ndarray:
    """Per-sample -log p[label] for integer class indices."""
    p = np.asarray(y_pred, dtype=np.float64)
    labels = np.asarray(y_true).reshape(-1).astype(np.int64)
    classes = p.shape[-1]
    return categorical_crossentropy(np.eye(classes)[labels], p, from_logits=from_logits, axis=axis)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error


# ---------------------------------------------------------------------- loss objects
class Loss:
    """Base of the loss objects: ``loss(y_true, y_pred, sample_weight=None)`` is the weighted
    per-sample loss reduced as Keras' ``"sum_over_batch_size"`` (float64, NumPy)."""

    #: The core's name of the loss (also the function's name and the default ``name``).
    core_name = ""

    def __init__(self, reduction: str = "sum_over_batch_size", name: Optional[str] = None) -> None:
        if reduction != "sum_over_batch_size":
            raise ValueError(f"{type(self).__name__}: only reduction='sum_over_batch_size' (Keras' default) is "
                             f"supported, got reduction={reduction!r}")
        self.reduction = reduction
        self.name = self.core_name if name is None else str(name)
        self.from_logits = False
        self.label_smoothing = 0.0

    def call(self, y_true: Any, y_pred: Any) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> float:
        values = np.asarray(self.call(y_true, y_pred), dtype=np.float64)
        if sample_weight is not None:
            values = values * np.asarray(sample_weight, dtype=np.float64).reshape(values.shape)
        return float(values.sum() / max(values.size, 1))

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "reduction": self.reduction}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Loss":
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k not in ("name", "reduction"))
        return f"{type(self).__name__}({args})"


def _from_logits(value: Any, owner: str) -> bool:
    return validation.boolean(value, "from_logits", owner)


def _smoothing(value: Any, owner: str) -> float:
    return validation.number(value, "label_smoothing", owner, low=0.0, high=1.0,
                             expected="a float between 0 and 1")


class MeanSquaredError(Loss):
    core_name = "mean_squared_error"

    def call(self, y_true: Any, y_pred: Any) -> np.ndarray:
        return mean_squared_error(y_true, y_pred)


class MeanAbsoluteError(Loss):
    core_name = "mean_absolute_error"

    def call(self, y_true: Any, y_pred: Any) -> np.ndarray:
        return mean_absolute_error(y_true, y_pred)


class BinaryCrossentropy(Loss):
    """Binary cross-entropy against targets in [0, 1] of the outputs' shape (n, units). With a
    final sigmoid the core computes it from the logits (exact where the probabilities round to 0 or 1)."""

    core_name = "binary_crossentropy"

    def __init__(self, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1,
                 reduction: str = "sum_over_batch_size", name: Optional[str] = None) -> None:
        super().__init__(reduction, name)
        if axis != -1:
            raise ValueError(f"BinaryCrossentropy: only axis=-1 is supported, got axis={axis!r}")
        self.from_logits = _from_logits(from_logits, "BinaryCrossentropy")
        self.label_smoothing = _smoothing(label_smoothing, "BinaryCrossentropy")

    def call(self, y_true: Any, y_pred: Any) -> np.ndarray:
        return binary_crossentropy(y_true, y_pred, self.from_logits, self.label_smoothing)

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "from_logits": self.from_logits, "label_smoothing": self.label_smoothing}


class CategoricalCrossentropy(Loss):
    """Cross-entropy against one-hot targets of shape (n, classes)."""

    core_name = "categorical_crossentropy"

    def __init__(self, from_logits: bool = False, label_smoothing: float = 0.0, axis: int = -1,
                 reduction: str = "sum_over_batch_size", name: Optional[str] = None) -> None:
        super().__init__(reduction, name)
        if axis != -1:
            raise ValueError(f"CategoricalCrossentropy: only axis=-1 is supported, got axis={axis!r}")
        self.from_logits = _from_logits(from_logits, "CategoricalCrossentropy")
        self.label_smoothing = _smoothing(label_smoothing, "CategoricalCrossentropy")

    def call(self, y_true: Any, y_pred: Any) -> np.ndarray:
        return categorical_crossentropy(y_true, y_pred, self.from_logits, self.label_smoothing)

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "from_logits": self.from_logits, "label_smoothing": self.label_smoothing}


class SparseCategoricalCrossentropy(Loss):
    """Cross-entropy against integer class indices of shape (n,) or (n, 1), of any integer dtype."""

    core_name = "sparse_categorical_crossentropy"

    def __init__(self, from_logits: bool = False, reduction: str = "sum_over_batch_size",
                 name: Optional[str] = None) -> None:
        super().__init__(reduction, name)
        self.from_logits = _from_logits(from_logits, "SparseCategoricalCrossentropy")

    def call(self, y_true: Any, y_pred: Any) -> np.ndarray:
        return sparse_categorical_crossentropy(y_true, y_pred, self.from_logits)

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "from_logits": self.from_logits}


# ---------------------------------------------------------------------- lookup
LossLike = Union[str, Loss, Callable[..., Any]]

CLASSES = {c.__name__: c for c in (MeanSquaredError, MeanAbsoluteError, BinaryCrossentropy, CategoricalCrossentropy,
                                    SparseCategoricalCrossentropy)}
#: The core's names of the losses it computes (what compile settings name).
CORE_NAMES = tuple(c.core_name for c in CLASSES.values())
# Keras' string identifiers (keras.losses.get) and the functions, each to its class.
_BY_NAME = {
    "mse": MeanSquaredError, "MSE": MeanSquaredError, "mean_squared_error": MeanSquaredError,
    "mae": MeanAbsoluteError, "MAE": MeanAbsoluteError, "mean_absolute_error": MeanAbsoluteError,
    "binary_crossentropy": BinaryCrossentropy, "categorical_crossentropy": CategoricalCrossentropy,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy, **CLASSES,
}
_BY_FUNCTION = {mean_squared_error: MeanSquaredError, mean_absolute_error: MeanAbsoluteError,
                binary_crossentropy: BinaryCrossentropy, categorical_crossentropy: CategoricalCrossentropy,
                sparse_categorical_crossentropy: SparseCategoricalCrossentropy}


def get(identifier: LossLike) -> Loss:
    """A loss object for a name ('mse', 'binary_crossentropy', 'MeanSquaredError', ...), a loss
    function of this module, or a loss object (returned as is)."""
    if isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]()
    if callable(identifier) and not isinstance(identifier, type):
        try:
            if identifier in _BY_FUNCTION:
                return _BY_FUNCTION[identifier]()
        except TypeError:  # an unhashable callable
            pass
    if isinstance(identifier, type) and issubclass(identifier, Loss) and identifier is not Loss:
        return identifier()
    known = ", ".join(repr(k) for k in ("categorical_crossentropy", "sparse_categorical_crossentropy",
                                        "binary_crossentropy", "mse", "mae"))
    hint = suggestions.did_you_mean(identifier, _BY_NAME)
    raise ValueError(f"unknown loss {identifier!r}{hint}: use one of {known} (or hpcnn.losses objects such as "
                     "CategoricalCrossentropy(label_smoothing=0.1)); custom loss functions are not supported: "
                     "the loss runs in the C++ core")


def resolve(loss: LossLike) -> Dict[str, Any]:
    """What the core compiles: {'loss': core name, 'from_logits', 'label_smoothing'}."""
    obj = get(loss)
    return {"loss": obj.core_name, "from_logits": bool(obj.from_logits),
            "label_smoothing": float(obj.label_smoothing), "object": obj}


def serialize(loss: Loss) -> Dict[str, Any]:
    return {"class_name": type(loss).__name__, "config": loss.get_config()}


def deserialize(config: Any) -> Loss:
    if isinstance(config, str):
        return get(config)
    if not isinstance(config, dict) or config.get("class_name") not in CLASSES:
        raise ValueError(f"unknown loss {config!r:.200}")
    return CLASSES[config["class_name"]].from_config(dict(config.get("config") or {}))


__all__ = ["Loss", "MeanSquaredError", "MeanAbsoluteError", "BinaryCrossentropy", "CategoricalCrossentropy",
           "SparseCategoricalCrossentropy", "mean_squared_error", "mean_absolute_error", "binary_crossentropy",
           "categorical_crossentropy", "sparse_categorical_crossentropy", "mse", "mae", "MSE", "MAE", "get",
           "resolve", "serialize", "deserialize", "CLASSES", "CORE_NAMES"]
