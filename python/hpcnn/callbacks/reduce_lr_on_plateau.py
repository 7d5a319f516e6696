"""``ReduceLROnPlateau``: a lower learning rate when a monitored value stops improving."""
from __future__ import annotations

import warnings
from typing import Any, Dict, Optional

import numpy as np

from .. import validation
from .base import Callback
from .learning_rate_scheduler import float_rate_optimizer


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by ``factor`` when ``monitor`` has not improved by more than
    ``min_delta`` for ``patience`` epochs (Keras' rule: the reduction happens at the epoch where the
    count of epochs without improvement reaches ``patience``; then ``cooldown`` epochs pass before
    counting again; the rate never goes below ``min_lr``). ``mode``: 'min', 'max', or 'auto'
    ('max' for accuracies, else 'min'). Adds ``learning_rate`` to the epoch's logs."""

    def __init__(self, monitor: str = "val_loss", factor: float = 0.1, patience: int = 10, verbose: int = 0,
                 mode: str = "auto", min_delta: float = 1e-4, cooldown: int = 0, min_lr: float = 0.0,
                 **kwargs: Any) -> None:
        super().__init__()
        validation.no_other_arguments(kwargs, "ReduceLROnPlateau")
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"ReduceLROnPlateau: monitor must be a metric name such as 'val_loss', got {monitor!r}")
        factor = validation.number(factor, "factor", "ReduceLROnPlateau", low=0.0, low_open=True,
                                   expected="a float in (0, 1)")
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau does not support a factor >= 1.0. Received factor={factor}")
        self.monitor, self.factor = monitor, factor
        self.patience = validation.integer(patience, "patience", "ReduceLROnPlateau", minimum=0, maximum=None)
        self.verbose = validation.integer(verbose, "verbose", "ReduceLROnPlateau", minimum=0, maximum=2)
        validation.choice(mode, "mode", ("auto", "min", "max"), "ReduceLROnPlateau")
        self.mode = ("max" if "acc" in monitor else "min") if mode == "auto" else mode
        self.min_delta = abs(validation.number(min_delta, "min_delta", "ReduceLROnPlateau"))
        self.cooldown = validation.integer(cooldown, "cooldown", "ReduceLROnPlateau", minimum=0, maximum=None)
        self.min_lr = validation.number(min_lr, "min_lr", "ReduceLROnPlateau", low=0.0,
                                        expected="a non-negative finite float")
        self.best: Optional[float] = None
        self.wait = 0
        self.cooldown_counter = 0

    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_improvement(self, value: float) -> bool:
        if self.best is None:
            return True
        if self.mode == "min":
            return value + self.min_delta < self.best
        return value - self.min_delta > self.best

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        float_rate_optimizer(self.model, "ReduceLROnPlateau")
        if self._keep_restored_state():  # set_state before this fit: kept, not reset
            return
        self.best, self.wait, self.cooldown_counter = None, 0, 0

    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None:
        self._restored = False

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        logs = logs if logs is not None else {}
        opt = float_rate_optimizer(self.model, "ReduceLROnPlateau")
        logs["learning_rate"] = float(opt.learning_rate)
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(f"Learning rate reduction is conditioned on metric `{self.monitor}` which is not available. "
                          f"Available metrics are: {','.join(logs)}.", UserWarning, stacklevel=2)
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self._is_improvement(current):
            self.best, self.wait = float(current), 0
        elif not self.in_cooldown():
            self.wait += 1
            if self.wait >= self.patience:
                old_lr = float(opt.learning_rate)
                if old_lr > np.float32(self.min_lr):
                    new_lr = max(old_lr * self.factor, self.min_lr)
                    if new_lr > 0:  # hpcnn's rates are positive: min_lr=0 and an underflow keep the old rate
                        opt.learning_rate = new_lr
                        if self.verbose > 0:
                            print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new_lr}.",
                                  flush=True)
                        self.cooldown_counter = self.cooldown
                        self.wait = 0

    # ---- the callback-state protocol (BackupAndRestore): what a resumed run needs to continue
    # exactly (the learning rate itself is the optimizer's)
    def get_state(self) -> Dict[str, Any]:
        return {"best": self.best, "wait": self.wait, "cooldown_counter": self.cooldown_counter}

    def set_state(self, state: Dict[str, Any]) -> None:
        if not isinstance(state, dict) or set(state) != {"best", "wait", "cooldown_counter"}:
            raise ValueError(f"ReduceLROnPlateau.set_state: expected a dict with best, wait and cooldown_counter, "
                             f"got {state!r:.200}")
        best = state["best"]
        self.best = None if best is None else validation.number(best, "best", "ReduceLROnPlateau.set_state")
        self.wait = validation.integer(state["wait"], "wait", "ReduceLROnPlateau.set_state", minimum=0, maximum=None)
        self.cooldown_counter = validation.integer(state["cooldown_counter"], "cooldown_counter",
                                                   "ReduceLROnPlateau.set_state", minimum=0, maximum=None)
        self._restored = True
