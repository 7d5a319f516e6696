"""Optimizers with Keras names, defaults and update rules. The update runs in C++ over the
model's one parameter buffer."""
from __future__ import annotations

from typing import Any, Dict, Union


class Optimizer:
    """Base class. ``learning_rate`` may be changed between epochs (callbacks do)."""

    def __init__(self, learning_rate: float) -> None:
        if not float(learning_rate) > 0:
            raise ValueError(f"learning_rate must be positive, got {learning_rate}")
        self.learning_rate = float(learning_rate)

    def get_config(self) -> Dict[str, Any]:
        raise NotImplementedError

    def _core_config(self) -> Dict[str, Any]:
        cfg = self.get_config()
        cfg["name"] = type(self).__name__
        return cfg

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


class Adam(Optimizer):
    """Adam as Keras: beta_1=0.9, beta_2=0.999, epsilon=1e-7 added to sqrt(v), bias correction
    folded into the step size."""

    def __init__(self, learning_rate: float = 0.001, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, **kwargs: Any) -> None:
        kwargs.pop("name", None)
        if kwargs.pop("amsgrad", False):
            raise ValueError("Adam(amsgrad=True) is not supported")
        if kwargs:
            raise TypeError(f"Adam: unexpected arguments {sorted(kwargs)}")
        super().__init__(learning_rate)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)

    def get_config(self) -> Dict[str, Any]:
        return dict(learning_rate=self.learning_rate, beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)


class SGD(Optimizer):
    """SGD as Keras: ``v = momentum * v - lr * g``; ``p += v`` (or Nesterov's look-ahead)."""

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, nesterov: bool = False,
                 **kwargs: Any) -> None:
        kwargs.pop("name", None)
        if kwargs:
            raise TypeError(f"SGD: unexpected arguments {sorted(kwargs)}")
        super().__init__(learning_rate)
        if not 0.0 <= float(momentum) < 1.0:
            raise ValueError(f"SGD: momentum must be in [0, 1), got {momentum}")
        self.momentum, self.nesterov = float(momentum), bool(nesterov)

    def get_config(self) -> Dict[str, Any]:
        return dict(learning_rate=self.learning_rate, momentum=self.momentum, nesterov=self.nesterov)


def get(identifier: Union[str, Optimizer]) -> Optimizer:
    """``'adam'`` / ``'sgd'`` (Keras defaults) or an Optimizer instance."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower()
        if key == "adam":
            return Adam()
        if key == "sgd":
            return SGD()
    raise ValueError(f"unknown optimizer {identifier!r}: use 'adam', 'sgd', hpcnn.optimizers.Adam(...) or SGD(...)")


__all__ = ["Optimizer", "Adam", "SGD", "get"]
