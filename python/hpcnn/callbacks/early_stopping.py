"""``EarlyStopping``: stop when a monitored value stops improving."""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

from .. import validation
from .base import Callback


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs."""

    def __init__(self, monitor: str = "val_loss", min_delta: float = 0.0, patience: int = 0,
                 mode: str = "auto", restore_best_weights: bool = False) -> None:
        super().__init__()
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"EarlyStopping: monitor must be a metric name such as 'val_loss', got {monitor!r}")
        min_delta = validation.number(min_delta, "min_delta", "EarlyStopping")
        patience = validation.integer(patience, "patience", "EarlyStopping", minimum=0, maximum=None)
        self.monitor, self.min_delta, self.patience = monitor, abs(min_delta), patience
        validation.choice(mode, "mode", ("auto", "min", "max"), "EarlyStopping")
        if mode == "auto":
            mode = "max" if "acc" in monitor else "min"
        self.mode = mode
        self.restore_best_weights = validation.boolean(restore_best_weights, "restore_best_weights", "EarlyStopping")
        self.best = math.inf if mode == "min" else -math.inf
        self.wait, self.best_weights, self.stopped_epoch = 0, None, None

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        if self._keep_restored_state():
            return
        self.best = math.inf if self.mode == "min" else -math.inf
        self.wait, self.best_weights, self.stopped_epoch = 0, None, None

    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None:
        self._restored = False

    def get_state(self) -> Dict[str, Any]:
        return {"best": self.best, "wait": self.wait, "stopped_epoch": self.stopped_epoch,
                "best_weights": self.best_weights}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.best, self.wait, self.stopped_epoch = float(state["best"]), int(state["wait"]), state["stopped_epoch"]
        self.best_weights = None if state["best_weights"] is None else list(state["best_weights"])
        self._restored = True

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        value = (logs or {}).get(self.monitor)
        if value is None:
            raise ValueError(f"EarlyStopping: '{self.monitor}' is not among the logged metrics {sorted(logs or {})}")
        better = value < self.best - self.min_delta if self.mode == "min" else value > self.best + self.min_delta
        if better:
            self.best, self.wait = value, 0
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
        else:
            self.wait += 1
            if self.wait > self.patience:
                self.stopped_epoch = epoch
                self.model.stop_training = True
                if self.restore_best_weights and self.best_weights is not None:
                    self.model.set_weights(self.best_weights)
