"""Metrics, by Keras' names: strings (``metrics=['accuracy', 'mae']``), functions
(``hpcnn.metrics.top_k_categorical_accuracy``) or objects (``TopKCategoricalAccuracy(k=3)``).

The training step computes them in the C++ core on the model's outputs, for each batch, as sums
over its rows (ops/loss_metrics; the categorical accuracy comes with the fused softmax
cross-entropy at no extra cost); fit/evaluate report their mean over the samples seen, under
Keras' names (``val_`` prefixed for validation). As Keras' ``metrics=``, they are not weighted
by ``sample_weight`` or ``class_weight``.

``'accuracy'`` (or ``'acc'``) resolves as in Keras, by what the targets look like: binary
accuracy for a one-unit output, sparse categorical accuracy for class indices
(``sparse_categorical_crossentropy``), else categorical accuracy; it keeps the name given.

The functions compute per-sample values with NumPy (float64), as Keras' functions do.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import validation


# ---------------------------------------------------------------------- per-sample functions (NumPy)
def _labels(y_true: Any, y_pred: np.ndarray) -> np.ndarray:
    t = np.asarray(y_true)
    if t.ndim == y_pred.ndim and t.shape[-1] == y_pred.shape[-1] and t.shape[-1] > 1:
        return np.argmax(t, axis=-1)  # one-hot rows
    return np.rint(t.reshape(y_pred.shape[:-1])).astype(np.int64)


def categorical_accuracy(y_true: Any, y_pred: Any) -> np.ndarray:
    """1.0 where argmax(y_pred) equals argmax(y_true) (one-hot rows), else 0.0."""
    p = np.asarray(y_pred, dtype=np.float64)
    return (np.argmax(p, axis=-1) == np.argmax(np.asarray(y_true), axis=-1)).astype(np.float64)


def sparse_categorical_accuracy(y_true: Any, y_pred: Any) -> np.ndarray:
    """1.0 where argmax(y_pred) equals the class index y_true, else 0.0."""
    p = np.asarray(y_pred, dtype=np.float64)
    return (np.argmax(p, axis=-1) == np.rint(np.asarray(y_true, dtype=np.float64).reshape(p.shape[:-1]))
            ).astype(np.float64)


def binary_accuracy(y_true: Any, y_pred: Any, threshold: float = 0.5) -> np.ndarray:
    """Per-sample mean over the last axis of ((y_pred > threshold) == y_true)."""
    p = np.asarray(y_pred, dtype=np.float64)
    t = np.asarray(y_true, dtype=np.float64).reshape(p.shape)
    return np.mean((p > threshold).astype(np.float64) == t, axis=-1)


def top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5) -> np.ndarray:
    """1.0 where the target class (argmax of a one-hot row) is among the k highest predictions
    (fewer than k predictions strictly above it), else 0.0."""
    p = np.asarray(y_pred, dtype=np.float64)
    c = np.argmax(np.asarray(y_true), axis=-1)
    at = np.take_along_axis(p, c[..., None], axis=-1)
    return (np.sum(p > at, axis=-1) < k).astype(np.float64)


def sparse_top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5) -> np.ndarray:
    """top_k_categorical_accuracy for class indices."""
    p = np.asarray(y_pred, dtype=np.float64)
    c = _labels(y_true, p)
    at = np.take_along_axis(p, c[..., None], axis=-1)
    return (np.sum(p > at, axis=-1) < k).astype(np.float64)


def mean_squared_error(y_true: Any, y_pred: Any) -> np.ndarray:
    p = np.asarray(y_pred, dtype=np.float64)
    return np.mean((p - np.asarray(y_true, dtype=np.float64).reshape(p.shape)) ** 2, axis=-1)


def mean_absolute_error(y_true: Any, y_pred: Any) -> np.ndarray:
    p = np.asarray(y_pred, dtype=np.float64)
    return np.mean(np.abs(p - np.asarray(y_true, dtype=np.float64).reshape(p.shape)), axis=-1)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error


# ---------------------------------------------------------------------- metric objects
class Metric:
    """A metric the core computes. ``name`` is its key in the logs and the History."""

    #: The core's name of the metric (Keras' function name).
    core_name = ""
    #: Whether a better model has a higher ("up": the accuracies) or a lower ("down": errors)
    #: value, as Keras' metrics say: callbacks with mode='auto' (EarlyStopping) go by it.
    direction = "up"

    def __init__(self, name: Optional[str] = None, dtype: Any = None) -> None:
        if dtype not in (None, "float32", np.float32):
            raise ValueError(f"{type(self).__name__}: only dtype='float32' is supported, got dtype={dtype!r}")
        self.name = self.core_name if name is None else str(name)
        self.k = 5
        self.threshold = 0.5

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "dtype": "float32"}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Metric":
        return cls(**config)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class CategoricalAccuracy(Metric):
    core_name = "categorical_accuracy"


class SparseCategoricalAccuracy(Metric):
    core_name = "sparse_categorical_accuracy"


class BinaryAccuracy(Metric):
    core_name = "binary_accuracy"

    def __init__(self, name: Optional[str] = None, dtype: Any = None, threshold: float = 0.5) -> None:
        super().__init__(name, dtype)
        self.threshold = validation.number(threshold, "threshold", "BinaryAccuracy")

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "threshold": self.threshold}


class TopKCategoricalAccuracy(Metric):
    core_name = "top_k_categorical_accuracy"

    def __init__(self, k: int = 5, name: Optional[str] = None, dtype: Any = None) -> None:
        super().__init__(name, dtype)
        self.k = validation.integer(k, "k", type(self).__name__)

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "k": self.k}


class SparseTopKCategoricalAccuracy(TopKCategoricalAccuracy):
    # The core's top-k reads class indices or one-hot rows alike.
    core_name = "sparse_top_k_categorical_accuracy"


class MeanSquaredError(Metric):
    core_name = "mean_squared_error"
    direction = "down"


class MeanAbsoluteError(Metric):
    core_name = "mean_absolute_error"
    direction = "down"


# ---------------------------------------------------------------------- lookup
MetricLike = Union[str, Metric, Callable[..., Any]]

CLASSES = {c.__name__: c for c in (CategoricalAccuracy, SparseCategoricalAccuracy, BinaryAccuracy,
                                    TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy, MeanSquaredError,
                                    MeanAbsoluteError)}
_BY_NAME = {
    "categorical_accuracy": CategoricalAccuracy, "sparse_categorical_accuracy": SparseCategoricalAccuracy,
    "binary_accuracy": BinaryAccuracy, "top_k_categorical_accuracy": TopKCategoricalAccuracy,
    "sparse_top_k_categorical_accuracy": SparseTopKCategoricalAccuracy,
    "mse": MeanSquaredError, "MSE": MeanSquaredError, "mean_squared_error": MeanSquaredError,
    "mae": MeanAbsoluteError, "MAE": MeanAbsoluteError, "mean_absolute_error": MeanAbsoluteError, **CLASSES,
}
_BY_FUNCTION = {categorical_accuracy: CategoricalAccuracy, sparse_categorical_accuracy: SparseCategoricalAccuracy,
                binary_accuracy: BinaryAccuracy, top_k_categorical_accuracy: TopKCategoricalAccuracy,
                sparse_top_k_categorical_accuracy: SparseTopKCategoricalAccuracy,
                mean_squared_error: MeanSquaredError, mean_absolute_error: MeanAbsoluteError}
_ACCURACY = ("accuracy", "acc")


def _accuracy_for(loss: str, units: int, name: str) -> Metric:
    """Keras' choice for 'accuracy': by the outputs and the targets the loss takes."""
    if units == 1:
        return BinaryAccuracy(name=name)
    if loss == "sparse_categorical_crossentropy":
        return SparseCategoricalAccuracy(name=name)
    return CategoricalAccuracy(name=name)


def get(identifier: MetricLike, loss: str, units: int) -> Metric:
    """The metric object for a name, a function of this module or an object, for a model whose
    loss is `loss` (core name) and whose output has `units` values per sample."""
    if isinstance(identifier, Metric):
        return identifier
    if isinstance(identifier, str):
        if identifier.lower() in _ACCURACY:
            return _accuracy_for(loss, units, identifier)
        if identifier in _BY_NAME:
            return _BY_NAME[identifier](name=identifier) if identifier not in CLASSES else _BY_NAME[identifier]()
    elif isinstance(identifier, type) and issubclass(identifier, Metric) and identifier is not Metric:
        return identifier()
    elif callable(identifier):
        try:
            if identifier in _BY_FUNCTION:
                return _BY_FUNCTION[identifier](name=identifier.__name__)
        except TypeError:  # an unhashable callable
            pass
    known = ", ".join(repr(k) for k in ("accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
                                        "binary_accuracy", "top_k_categorical_accuracy", "mse", "mae"))
    raise ValueError(f"compile: unknown metric {identifier!r}: hpcnn computes {known} (or hpcnn.metrics objects "
                     "such as TopKCategoricalAccuracy(k=3)); custom metric functions are not supported: metrics "
                     "run in the C++ core")


def resolve(metrics: Any, loss: str, units: int) -> List[Metric]:
    """compile's `metrics` (None or a list) as metric objects, checked against the loss: names
    unique, float-target metrics refused for class indices."""
    if metrics is None:
        return []
    if isinstance(metrics, (str, bytes)) or not isinstance(metrics, (list, tuple)):
        raise ValueError(f"compile: metrics must be a list such as ['accuracy'], got {metrics!r}")
    out = [get(m, loss, units) for m in metrics]
    names = [m.name for m in out]
    for n in names:
        if n == "loss" or names.count(n) > 1:
            raise ValueError(f"compile: the metric name {n!r} is used twice (or clashes with 'loss'): give the "
                             "metric objects distinct names (name=...)")
    sparse = loss == "sparse_categorical_crossentropy"
    for m in out:
        if sparse and m.core_name in ("binary_accuracy", "mean_squared_error", "mean_absolute_error"):
            raise ValueError(f"compile: the metric {m.name!r} compares the outputs with targets of their shape, but "
                             "sparse_categorical_crossentropy takes class indices")
        if not sparse and units > 1 and m.core_name == "sparse_categorical_accuracy":
            raise ValueError(f"compile: the metric {m.name!r} needs class indices "
                             "(loss='sparse_categorical_crossentropy'); use 'categorical_accuracy' with one-hot "
                             "targets")
        if m.core_name in ("top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy") and \
                (sparse != (m.core_name == "sparse_top_k_categorical_accuracy")):
            want = "sparse_top_k_categorical_accuracy" if sparse else "top_k_categorical_accuracy"
            raise ValueError(f"compile: the metric {m.name!r} does not fit the loss's targets; use {want!r}")
    return out


def core_specs(metrics: Sequence[Metric], loss: str) -> List[Any]:
    """(core name, k, threshold) for each metric the core computes; the categorical accuracy of a
    cross-entropy loss comes with the loss (its `correct` count) and is not listed. Returns the
    specs and, per metric, where its sum is: ('correct', None) or ('core', index)."""
    specs: List[Any] = []
    where: List[Any] = []
    fused_accuracy = {"categorical_crossentropy": "categorical_accuracy",
                      "sparse_categorical_crossentropy": "sparse_categorical_accuracy"}.get(loss)
    for m in metrics:
        if m.core_name == fused_accuracy:
            where.append(("correct", None))
            continue
        core = "top_k_categorical_accuracy" if m.core_name == "sparse_top_k_categorical_accuracy" else m.core_name
        where.append(("core", len(specs)))
        specs.append((core, int(m.k), float(m.threshold)))
    return [specs, where]


def serialize(metric: Any) -> Any:
    """A metric as compile got it, for files: the string, or {'class_name', 'config'}."""
    if isinstance(metric, str):
        return metric
    m = metric if isinstance(metric, Metric) else None
    if m is None:
        return getattr(metric, "__name__", str(metric))
    return {"class_name": type(m).__name__, "config": m.get_config()}


def deserialize(config: Any) -> Any:
    if isinstance(config, str):
        return config
    if not isinstance(config, dict) or config.get("class_name") not in CLASSES:
        raise ValueError(f"unknown metric {config!r:.200}")
    return CLASSES[config["class_name"]].from_config(dict(config.get("config") or {}))


# ---------------------------------------------------------------------- chance level
#: The one-sided z of the chance bound: an accuracy at or below p + Z * sqrt(p (1 - p) / n) is
#: what guessing reaches in about 97.5 % of evaluations on n samples (normal approximation of the
#: binomial; p = 1 / classes).
CHANCE_Z = 1.96


def chance_bound(num_classes: int, num_samples: int) -> Tuple[float, float]:
    """(chance, bound): the accuracy of a uniform guess, 1 / num_classes (2 classes for a one-unit
    binary output), and the highest accuracy a guess reaches on `num_samples` samples within the
    binomial's 95 % two-sided interval (CHANCE_Z standard errors above chance)."""
    k = validation.integer(num_classes, "num_classes", "chance_bound", minimum=1)
    n = validation.integer(num_samples, "num_samples", "chance_bound", minimum=1, maximum=None)
    k = max(k, 2)
    p = 1.0 / k
    return p, p + CHANCE_Z * float(np.sqrt(p * (1.0 - p) / n))


def within_chance(accuracy: float, num_classes: int, num_samples: int) -> bool:
    """Whether `accuracy` on `num_samples` samples is no better than guessing among `num_classes`
    balanced classes: at or below ``chance_bound``'s bound. With unbalanced classes, always
    answering the commonest class scores its share: compare with that as well."""
    return float(accuracy) <= chance_bound(num_classes, num_samples)[1]


def chance_note(accuracy: float, num_classes: int, num_samples: int) -> str:
    """'' when `accuracy` is above chance; else the words that say so, e.g. 'chance level: 10
    classes give 0.10 by guessing (up to 0.12 on 1,000 samples); the model has not learned yet'."""
    if not within_chance(accuracy, num_classes, num_samples):
        return ""
    p, bound = chance_bound(num_classes, num_samples)
    return (f"chance level: {max(int(num_classes), 2)} classes give {p:.2f} by guessing (up to {bound:.2f} on "
            f"{int(num_samples):,} samples); the model has not learned yet")


__all__ = ["Metric", "CategoricalAccuracy", "SparseCategoricalAccuracy", "BinaryAccuracy", "TopKCategoricalAccuracy",
           "SparseTopKCategoricalAccuracy", "MeanSquaredError", "MeanAbsoluteError", "categorical_accuracy",
           "sparse_categorical_accuracy", "binary_accuracy", "top_k_categorical_accuracy",
           "sparse_top_k_categorical_accuracy", "mean_squared_error", "mean_absolute_error", "mse", "mae", "get",
           "resolve", "serialize", "deserialize", "CLASSES", "CHANCE_Z", "chance_bound", "within_chance", "chance_note"]
