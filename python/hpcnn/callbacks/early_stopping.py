"""``EarlyStopping``: stop when a monitored value stops improving, exactly as Keras 3.15 decides.

Keras' rules, which this file follows line for line (tests/python/callbacks/test_early_stopping_keras.py feeds the
same sequences of values to this class and to Keras' and compares):

- At each epoch's end, from epoch ``start_from_epoch`` on, ``wait`` counts one more epoch; an
  improvement (better than the best so far by more than ``min_delta``; the first value always is)
  becomes the best and resets ``wait`` to 0 only when it is also better than ``baseline`` (when one
  is given); otherwise, once ``wait >= patience`` (and past epoch 0), training stops after this epoch.
- ``restore_best_weights=True``: the weights of the best epoch (the first monitored epoch until one
  improves) are put back at the end of fit, whether or not training stopped early. A fit stopped
  by a signal (SIGTERM, Ctrl-C, ...) keeps its last weights, as its message says.
- ``mode='auto'``: 'loss' / 'val_loss' are minimised; a compiled metric goes its own way (the
  accuracies up, 'mse'/'mae' down); any other name is an error asking for mode='min' or 'max'.
- A monitored value missing from the logs (no validation data for 'val_loss') warns and skips the
  epoch.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, Optional

from .. import validation
from .base import Callback


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs
    (Keras' arguments and defaults). ``stopped_epoch`` is the epoch training stopped at (0 when it
    did not stop early) and ``best_epoch`` the epoch of the best value (both 0-based, as Keras)."""

    def __init__(self, monitor: str = "val_loss", min_delta: float = 0, patience: int = 0, verbose: int = 0,
                 mode: str = "auto", baseline: Optional[float] = None, restore_best_weights: bool = False,
                 start_from_epoch: int = 0) -> None:
        super().__init__()
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"EarlyStopping: monitor must be a metric name such as 'val_loss', got {monitor!r}")
        self.monitor = monitor
        self.min_delta = abs(validation.number(min_delta, "min_delta", "EarlyStopping"))
        self.patience = validation.integer(patience, "patience", "EarlyStopping", minimum=0, maximum=None)
        self.verbose = (int(verbose) if isinstance(verbose, bool)
                        else validation.integer(verbose, "verbose", "EarlyStopping", minimum=0, maximum=None))
        self.mode = validation.choice(mode, "mode", ("auto", "min", "max"), "EarlyStopping")
        self.baseline = (None if baseline is None
                         else validation.number(baseline, "baseline", "EarlyStopping"))
        self.restore_best_weights = validation.boolean(restore_best_weights, "restore_best_weights", "EarlyStopping")
        self.start_from_epoch = validation.integer(start_from_epoch, "start_from_epoch", "EarlyStopping",
                                                   minimum=0, maximum=None)
        # 'min' or 'max', decided at the first epoch's end (mode='auto' looks at the compiled metrics).
        self.direction: Optional[str] = None if mode == "auto" else mode
        self.best: Optional[float] = None
        self.wait, self.stopped_epoch, self.best_epoch = 0, 0, 0
        self.best_weights: Optional[list] = None

    # ------------------------------------------------------------------ the direction of improvement
    def _resolve_direction(self) -> str:
        """Keras' mode='auto': 'loss' goes down; a compiled metric of that name goes its own way."""
        name = self.monitor[len("val_"):] if self.monitor.startswith("val_") else self.monitor
        direction = "min" if name == "loss" else None
        settings = getattr(self.model, "compile_settings", None) or {}
        way = (settings.get("metric_directions") or {}).get(name)
        if way is not None:
            direction = "max" if way == "up" else "min"
        if direction is None:
            raise ValueError(f"EarlyStopping callback received monitor={self.monitor}, but hpcnn (as Keras) isn't "
                             "able to automatically determine whether that metric should be maximized or "
                             "minimized. Pass `mode='max'` in order to monitor based on the highest metric value, "
                             "or pass `mode='min'` in order to use the lowest value.")
        return direction

    def _is_improvement(self, value: float, reference: Optional[float]) -> bool:
        if reference is None:
            return True
        if self.direction == "min":
            return value + self.min_delta < reference
        return value - self.min_delta > reference

    # ------------------------------------------------------------------ the hooks
    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        self._stopped_by_signal = False
        if self._keep_restored_state():
            return
        # As Keras: an instance is reused across fits (the direction, once decided, stays).
        self.wait, self.stopped_epoch, self.best_epoch = 0, 0, 0
        self.best, self.best_weights = None, None

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        if self.direction is None:
            self.direction = self._resolve_direction()
        logs = logs or {}
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(f"Early stopping conditioned on metric `{self.monitor}` which is not available. "
                          f"Available metrics are: {','.join(list(logs.keys()))}", stacklevel=2)
            return
        if epoch < self.start_from_epoch:
            return  # the warm-up epochs are not monitored
        current = float(current)
        if self.restore_best_weights and self.best_weights is None:
            # Until an epoch improves, the first monitored epoch's weights are the best.
            self.best_weights = self.model.get_weights()
            self.best_epoch = epoch
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            # Patience starts again only for a value better than the baseline too.
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_stop_signal(self, position: Dict[str, Any], logs: Dict[str, float]) -> Optional[str]:
        self._stopped_by_signal = True  # the model keeps its last weights (and a backup has them)
        return None

    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None:
        self._restored = False
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping", flush=True)
        if getattr(self, "_stopped_by_signal", False) or _fit_interrupted(self.model):
            return
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.", flush=True)
            self.model.set_weights(self.best_weights)

    # ------------------------------------------------------------------ the state protocol
    def get_state(self) -> Dict[str, Any]:
        return {"best": self.best, "wait": self.wait, "stopped_epoch": self.stopped_epoch,
                "best_epoch": self.best_epoch, "best_weights": self.best_weights}

    def set_state(self, state: Dict[str, Any]) -> None:
        best = state.get("best")
        # Older backups kept +-inf for "nothing seen yet" and None for "not stopped".
        self.best = None if best is None or abs(float(best)) == float("inf") else float(best)
        self.wait = int(state["wait"])
        self.stopped_epoch = int(state.get("stopped_epoch") or 0)
        self.best_epoch = int(state.get("best_epoch") or 0)
        self.best_weights = None if state.get("best_weights") is None else list(state["best_weights"])
        self._restored = True


def _fit_interrupted(model: Any) -> bool:
    """True when the fit now ending was interrupted (a second Ctrl-C ends fit without a stop
    signal's hooks): its History, which fit gives the model at on_train_begin, says so."""
    history = getattr(model, "history", None)
    return bool(getattr(history, "interrupted", False))
