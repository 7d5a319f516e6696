"""Callbacks with Keras names and hooks: History, EarlyStopping, CSVLogger, LambdaCallback, and
(checkpoints.py) ModelCheckpoint and BackupAndRestore.

Callbacks whose behaviour depends on what they saw earlier in training (EarlyStopping's counters,
ModelCheckpoint's best value, History's epochs) implement the state protocol, ``get_state()`` /
``set_state(state)``: BackupAndRestore saves their states with its backups and gives them back
when a later ``fit`` resumes, so a resumed run decides exactly as an uninterrupted one."""
from __future__ import annotations

import csv
import math
import os
from typing import Any, Callable, Dict, List, Optional

from . import validation


class Callback:
    """Override any hook. ``self.model`` is the model being trained; set
    ``self.model.stop_training = True`` to stop after the current epoch. As in Keras,
    ``on_batch_begin`` / ``on_batch_end`` are aliases: the default ``on_train_batch_begin`` /
    ``on_train_batch_end`` call them, so overriding either name works."""

    def __init__(self) -> None:
        self.model: Any = None
        self.params: Dict[str, Any] = {}

    def set_model(self, model: Any) -> None:
        self.model = model

    def set_params(self, params: Dict[str, Any]) -> None:
        self.params = params

    # ---- the state protocol (BackupAndRestore)
    def get_state(self) -> Optional[Dict[str, Any]]:
        """What this callback must remember across an interruption, for BackupAndRestore: a dict of
        numbers, strings, booleans, None, lists, dicts and NumPy arrays, or None (the default)
        when it keeps nothing. Called at the batch or epoch boundary where a backup is written."""
        return None

    def set_state(self, state: Dict[str, Any]) -> None:
        """Takes back what get_state returned. ``fit`` calls it when it resumes from a backup,
        after every callback's ``on_train_begin`` (which may reset the state) and before the
        first resumed batch. A callback that overrides get_state overrides this too."""
        raise NotImplementedError(f"{type(self).__name__} defines get_state but not set_state")

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_batch_begin(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_batch_end(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None: ...

    def on_train_batch_begin(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        self.on_batch_end(batch, logs=logs)


class History(Callback):
    """What ``fit`` returns. ``history.history`` maps each metric to its per-epoch values:
    loss, accuracy, val_loss, val_accuracy (as Keras), plus seconds and images_per_second per
    epoch. ``history.epoch`` lists the epoch numbers. ``interrupted`` is True when training was
    stopped by a signal (Ctrl-C = SIGINT, SIGTERM, SIGUSR1) before its last epoch, and
    ``interrupted_by`` then names the signal. A fit resumed by BackupAndRestore returns the
    epochs of the interrupted run too."""

    def __init__(self) -> None:
        super().__init__()
        self.history: Dict[str, List[float]] = {}
        self.epoch: List[int] = []
        self.interrupted = False
        self.interrupted_by: Optional[str] = None

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)

    def get_state(self) -> Dict[str, Any]:
        return {"epoch": list(self.epoch), "history": {k: list(v) for k, v in self.history.items()}}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.epoch = [int(e) for e in state["epoch"]]
        self.history = {str(k): list(v) for k, v in state["history"].items()}

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"


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
        self.best = math.inf if self.mode == "min" else -math.inf
        self.wait, self.best_weights, self.stopped_epoch = 0, None, None

    def get_state(self) -> Dict[str, Any]:
        return {"best": self.best, "wait": self.wait, "stopped_epoch": self.stopped_epoch,
                "best_weights": self.best_weights}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.best, self.wait, self.stopped_epoch = float(state["best"]), int(state["wait"]), state["stopped_epoch"]
        self.best_weights = None if state["best_weights"] is None else list(state["best_weights"])

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


class CSVLogger(Callback):
    """One CSV row per epoch (epoch, metrics, seconds, images_per_second): handy in sbatch jobs.
    ``append=False`` starts the file anew with the first row this training writes. With
    BackupAndRestore, a resumed fit continues the same file, cut back to the rows it had when the
    backup was written (rows of epochs trained again are not repeated)."""

    def __init__(self, filename: str, separator: str = ",", append: bool = False) -> None:
        super().__init__()
        if not isinstance(separator, str) or len(separator) != 1:
            raise ValueError(f"CSVLogger: separator must be a single character, got {separator!r}")
        self.filename, self.sep = os.fspath(filename), separator
        self.append = validation.boolean(append, "append", "CSVLogger")
        self._keys: Optional[List[str]] = None
        self._start_anew = False  # the file is to be replaced at the first row of this training

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        self._keys = None
        self._start_anew = not self.append

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        logs = logs or {}
        if self._start_anew:
            if os.path.exists(self.filename):
                os.remove(self.filename)
            self._start_anew = False
        new = not os.path.exists(self.filename) or os.path.getsize(self.filename) == 0
        if self._keys is None:
            self._keys = sorted(logs)
        with open(self.filename, "a", newline="") as f:
            w = csv.writer(f, delimiter=self.sep)
            if new:
                w.writerow(["epoch"] + self._keys)
            w.writerow([epoch] + [logs.get(k, "") for k in self._keys])

    def get_state(self) -> Dict[str, Any]:
        size = os.path.getsize(self.filename) if os.path.exists(self.filename) and not self._start_anew else 0
        return {"keys": self._keys, "bytes": size, "start_anew": self._start_anew}

    def set_state(self, state: Dict[str, Any]) -> None:
        self._keys = None if state["keys"] is None else [str(k) for k in state["keys"]]
        self._start_anew = bool(state["start_anew"])
        size = int(state["bytes"])
        if not self._start_anew and os.path.exists(self.filename) and os.path.getsize(self.filename) > size:
            with open(self.filename, "r+b") as f:
                f.truncate(size)  # rows written after the backup: their epochs are trained again


class LambdaCallback(Callback):
    """Callbacks from plain functions: ``LambdaCallback(on_epoch_end=lambda epoch, logs: ...)``."""

    def __init__(self, on_epoch_begin: Optional[Callable] = None, on_epoch_end: Optional[Callable] = None,
                 on_train_begin: Optional[Callable] = None, on_train_end: Optional[Callable] = None,
                 on_train_batch_begin: Optional[Callable] = None,
                 on_train_batch_end: Optional[Callable] = None, on_batch_begin: Optional[Callable] = None,
                 on_batch_end: Optional[Callable] = None) -> None:
        super().__init__()
        for name, fn in dict(on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end, on_train_begin=on_train_begin,
                             on_train_end=on_train_end, on_train_batch_begin=on_train_batch_begin,
                             on_train_batch_end=on_train_batch_end, on_batch_begin=on_batch_begin,
                             on_batch_end=on_batch_end).items():
            if fn is not None:
                if not callable(fn):
                    raise ValueError(f"LambdaCallback: {name} must be callable, got {fn!r}")
                setattr(self, name, fn)


# Defined in their own module (they need saving.py); importable from here, as in Keras.
from .checkpoints import BackupAndRestore, ModelCheckpoint  # noqa: E402

__all__ = ["Callback", "History", "EarlyStopping", "CSVLogger", "LambdaCallback", "ModelCheckpoint",
           "BackupAndRestore"]
