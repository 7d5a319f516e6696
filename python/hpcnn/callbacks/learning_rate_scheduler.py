"""``LearningRateScheduler``: the learning rate of each epoch from a function of the epoch."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Optional

import numpy as np

from .. import validation
from .base import Callback


def float_rate_optimizer(model: Any, caller: str) -> Any:
    """The model's optimizer, which must have a float learning rate for `caller` to set it."""
    opt = getattr(model, "optimizer", None)
    if opt is None:
        raise ValueError(f"{caller}: the model has no optimizer: compile it first")
    if opt.schedule is not None:
        raise ValueError(f"{caller} sets the learning rate, but this optimizer's rate follows a "
                         f"{type(opt.schedule).__name__} schedule and cannot be set: use one or the other")
    return opt


class LearningRateScheduler(Callback):
    """Sets the learning rate at the start of every epoch to ``schedule(epoch, lr)`` (epoch from 0,
    lr the current rate; a ``schedule(epoch)`` of one argument works too, as in Keras). The rate
    holds for every step of the epoch; ``learning_rate`` is added to the epoch's logs (History).
    For a rate that changes every step, pass a schedule from ``hpcnn.optimizers.schedules`` as the
    optimizer's learning_rate instead: the core evaluates it without a Python call per batch."""

    def __init__(self, schedule: Callable[..., float], verbose: int = 0) -> None:
        super().__init__()
        if not callable(schedule):
            raise ValueError(f"LearningRateScheduler: schedule must be a function (epoch, lr) -> lr, got {schedule!r}")
        self.schedule = schedule
        self.verbose = validation.integer(verbose, "verbose", "LearningRateScheduler", minimum=0, maximum=2)
        self._takes_lr = self._accepts_two(schedule)

    @staticmethod
    def _accepts_two(fn: Callable[..., Any]) -> bool:
        """Whether fn can be called as fn(epoch, lr) (Keras' new API) rather than fn(epoch)."""
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return True  # not inspectable (a builtin): the current API
        try:
            sig.bind(0, 0.1)
            return True
        except TypeError:
            return False

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        float_rate_optimizer(self.model, "LearningRateScheduler")

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        opt = float_rate_optimizer(self.model, "LearningRateScheduler")
        lr = self.schedule(epoch, float(opt.learning_rate)) if self._takes_lr else self.schedule(epoch)
        if isinstance(lr, bool) or not isinstance(lr, (int, float, np.integer, np.floating)):
            raise ValueError(f"The output of the `schedule` function should be a float. Got: {lr!r}")
        opt.learning_rate = float(lr)  # checked there: a positive finite float
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {float(lr)}.", flush=True)

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        if logs is not None and getattr(self.model, "optimizer", None) is not None:
            logs["learning_rate"] = float(self.model.optimizer.learning_rate)

    # ---- the callback-state protocol (BackupAndRestore): nothing to keep, the rate lives in the
    # optimizer and the schedule is a function of the epoch
    def get_state(self) -> Dict[str, Any]:
        return {}

    def set_state(self, state: Dict[str, Any]) -> None:
        if not isinstance(state, dict):
            raise ValueError(f"LearningRateScheduler.set_state: expected a dict, got {state!r:.200}")
