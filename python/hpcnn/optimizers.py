"""Optimizers with Keras names, defaults and update rules. The update runs in C++ over the
model's one parameter buffer."""
from __future__ import annotations

from typing import Any, Dict, Union

from . import validation


class Optimizer:
    """Base class. ``learning_rate`` may be changed between epochs (callbacks do)."""

    def __init__(self, learning_rate: float) -> None:
        self._learning_rate = 0.0
        self.learning_rate = learning_rate

    @property
    def learning_rate(self) -> float:
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        # Checked on every assignment: callbacks and users change it between epochs.
        self._learning_rate = validation.number(value, "learning_rate", type(self).__name__, low=0.0, low_open=True,
                                                expected="a positive finite float")

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
        validation.name(kwargs.pop("name", None), "Adam")
        if kwargs.pop("amsgrad", False):
            raise ValueError("Adam(amsgrad=True) is not supported")
        validation.no_other_arguments(kwargs, "Adam")
        super().__init__(learning_rate)
        self.beta_1 = validation.number(beta_1, "beta_1", "Adam", low=0.0, high=1.0, high_open=True)
        self.beta_2 = validation.number(beta_2, "beta_2", "Adam", low=0.0, high=1.0, high_open=True)
        self.epsilon = validation.number(epsilon, "epsilon", "Adam", low=0.0, low_open=True,
                                         expected="a positive finite float")

    def get_config(self) -> Dict[str, Any]:
        return dict(learning_rate=self.learning_rate, beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)


class SGD(Optimizer):
    """SGD as Keras: ``v = momentum * v - lr * g``; ``p += v`` (or Nesterov's look-ahead)."""

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, nesterov: bool = False,
                 **kwargs: Any) -> None:
        validation.name(kwargs.pop("name", None), "SGD")
        validation.no_other_arguments(kwargs, "SGD")
        super().__init__(learning_rate)
        self.momentum = validation.number(momentum, "momentum", "SGD", low=0.0, high=1.0, high_open=True,
                                          expected="a float in [0, 1)")
        self.nesterov = validation.boolean(nesterov, "nesterov", "SGD")

    def get_config(self) -> Dict[str, Any]:
        return dict(learning_rate=self.learning_rate, momentum=self.momentum, nesterov=self.nesterov)


# The optimizers a saved model may name (load_model looks names up here, never with getattr).
REGISTRY = {"Adam": Adam, "SGD": SGD}


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
