"""Weight regularizers with Keras' names and formulas (``keras.regularizers``), for
``Conv2D`` / ``Dense``'s ``kernel_regularizer`` and ``bias_regularizer``::

    Dense(64, activation="relu", kernel_regularizer=hpcnn.regularizers.l2(1e-4))

The penalty ``l1 * sum(|w|) + l2 * sum(w^2)`` of every regularized trainable weight is added to the
loss that fit, evaluate and the ``*_on_batch`` methods report (Keras' model loss includes it), and
its gradient ``l1 * sign(w) + 2 * l2 * w`` to the weight's gradient before the optimizer step. The
C++ core computes both in one pass over the regularized weights. A frozen layer
(``trainable = False``) carries no penalty, as in Keras.

Strings work as in Keras: ``'l1'`` and ``'l2'`` give factor 0.01, ``'l1_l2'`` ``L1L2()`` (both 0).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Union

import numpy as np

from . import config_objects
from .config_objects import ConfigObject


def _factor(value: Any, name: str) -> float:
    """Keras' validate_float_arg: a non-negative finite number (None: 0 for L1L2, handled by callers)."""
    if (not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, (bool, np.bool_))
            or not math.isfinite(float(value)) or value < 0):
        raise ValueError(f"Invalid value for argument {name}: expected a non-negative float. Received: {name}={value!r}")
    return float(value)


class Regularizer(ConfigObject):
    """Base class: ``regularizer(weights)`` is the penalty of an array (NumPy, float64)."""

    l1: float = 0.0
    l2: float = 0.0

    def __call__(self, x: Any) -> float:
        w = np.asarray(x, dtype=np.float64)
        penalty = 0.0
        if self.l1:
            penalty += self.l1 * float(np.abs(w).sum())
        if self.l2:
            penalty += self.l2 * float(np.square(w).sum())
        return penalty

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


class L1(Regularizer):
    """``l1 * sum(|w|)``."""

    def __init__(self, l1: Optional[float] = 0.01) -> None:
        self.l1 = _factor(0.01 if l1 is None else l1, "l1")

    def get_config(self) -> Dict[str, Any]:
        return {"l1": self.l1}


class L2(Regularizer):
    """``l2 * sum(w^2)`` (its gradient: ``2 * l2 * w``)."""

    def __init__(self, l2: Optional[float] = 0.01) -> None:
        self.l2 = _factor(0.01 if l2 is None else l2, "l2")

    def get_config(self) -> Dict[str, Any]:
        return {"l2": self.l2}


class L1L2(Regularizer):
    """``l1 * sum(|w|) + l2 * sum(w^2)`` (Keras' defaults: both 0)."""

    def __init__(self, l1: Optional[float] = 0.0, l2: Optional[float] = 0.0) -> None:
        self.l1 = _factor(0.0 if l1 is None else l1, "l1")
        self.l2 = _factor(0.0 if l2 is None else l2, "l2")

    def get_config(self) -> Dict[str, Any]:
        return {"l1": self.l1, "l2": self.l2}


# Keras' function-style names are the classes themselves.
l1 = L1
l2 = L2
l1_l2 = L1L2

REGISTRY = {"L1": L1, "L2": L2, "L1L2": L1L2, "l1": L1, "l2": L2, "l1_l2": L1L2}


def serialize(regularizer: Regularizer) -> Dict[str, Any]:
    """``{'class_name': ..., 'config': {...}}``, Keras' serialized shape."""
    return config_objects.serialize(regularizer)


def deserialize(config: Dict[str, Any]) -> Regularizer:
    return config_objects.deserialize(config, REGISTRY, "regularizer", "L1, L2 and L1L2")


def get(identifier: Union[None, str, Dict[str, Any], Regularizer], argument: str = "regularizer") -> Optional[Regularizer]:
    """None, a Regularizer, a name (``'l1'``, ``'l2'``, ``'l1_l2'``, ``'L2'``, ...) or a serialized dict."""
    if identifier is None or isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str) and identifier in REGISTRY:
        return REGISTRY[identifier]()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    raise ValueError(f"Could not interpret regularizer identifier: {identifier!r} (for `{argument}`): use "
                     "hpcnn.regularizers.l2(0.01), l1(...), l1_l2(...), or 'l1' / 'l2' / 'l1_l2'")


__all__ = ["Regularizer", "L1", "L2", "L1L2", "l1", "l2", "l1_l2", "get", "serialize", "deserialize"]
