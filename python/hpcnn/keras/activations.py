"""``keras.activations`` on hpcnn: NumPy versions of the activations hpcnn's layers name
(``activation=keras.activations.relu`` is the same as ``activation='relu'``); get / serialize /
deserialize by name."""
from __future__ import annotations

from typing import Any, Callable, Union

import numpy as np

from ..layers.arguments import ACTIVATIONS
from ._compat import install


def relu(x: Any, negative_slope: float = 0.0, max_value: Any = None, threshold: float = 0.0) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    out = np.where(x >= threshold, x, negative_slope * (x - threshold))
    return np.minimum(out, max_value) if max_value is not None else out


def softmax(x: Any, axis: int = -1) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def linear(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def sigmoid(x: Any) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float32)))


def tanh(x: Any) -> np.ndarray:
    return np.tanh(np.asarray(x, dtype=np.float32))


_BY_NAME = {"relu": relu, "softmax": softmax, "linear": linear, "sigmoid": sigmoid, "tanh": tanh}


def get(identifier: Union[None, str, Callable]) -> Callable:
    """The activation function for a name, a function, or None (linear)."""
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    raise ValueError(f"Could not interpret activation function identifier: {identifier!r}")


def serialize(activation: Callable) -> str:
    return activation.__name__


def deserialize(name: str) -> Callable:
    return get(name)


# The activations hpcnn's layers compute by name (in C++) but keeps no NumPy function of here.
_BY_LAYER = {name: f"pass activation='{name}' (the name) to Conv2D, Dense or Activation: hpcnn computes it in C++"
             for name in ACTIVATIONS if name not in _BY_NAME}
install(__name__, "activations", advice=_BY_LAYER,
        default_advice="pass one of the activations hpcnn's layers compute by name to Conv2D, Dense or Activation "
                       "(e.g. activation='gelu'): " + ", ".join(repr(n) for n in ACTIVATIONS) + " or None")

__all__ = ["relu", "softmax", "linear", "sigmoid", "tanh", "get", "serialize", "deserialize"]
