"""Callbacks with Keras names and hooks: History, EarlyStopping, CSVLogger, LambdaCallback,
LearningRateScheduler, ReduceLROnPlateau, TerminateOnNaN, and (checkpoints.py) ModelCheckpoint and
BackupAndRestore.

Callbacks whose behaviour depends on what they saw earlier in training (EarlyStopping's counters,
ReduceLROnPlateau's, ModelCheckpoint's best value, History's epochs) implement the state protocol,
``get_state()`` / ``set_state(state)``: BackupAndRestore saves their states with its backups and
gives them back when a later ``fit`` resumes (after every callback's ``on_train_begin``), so a
resumed run decides exactly as an uninterrupted one."""
from __future__ import annotations

import csv
import inspect
import math
import os
import warnings
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from . import distribute, validation


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
        first resumed batch. It may also be called before ``fit``: hpcnn's callbacks then keep the
        state through that fit's ``on_train_begin`` (a ``_restored`` flag, cleared at
        ``on_train_end``). A callback that overrides get_state overrides this too."""
        raise NotImplementedError(f"{type(self).__name__} defines get_state but not set_state")

    def _keep_restored_state(self) -> bool:
        """For on_train_begin: True (once) when set_state came before this fit, so the reset is skipped."""
        restored = getattr(self, "_restored", False)
        self._restored = False
        return restored

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
        if self._keep_restored_state():
            return
        self._keys = None
        self._start_anew = not self.append

    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None:
        self._restored = False

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        logs = logs or {}
        if self.model is not None and not distribute.writes_files(self.model):
            return  # a multi-process run: the chief writes the log
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
        self._restored = True


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


def _float_rate_optimizer(model: Any, caller: str) -> Any:
    """The model's optimizer, which must have a float learning rate for `caller` to set it."""
    from .optimizers import LearningRateSchedule  # callbacks is imported before optimizers by models
    opt = getattr(model, "optimizer", None)
    if opt is None:
        raise ValueError(f"{caller}: the model has no optimizer: compile it first")
    if isinstance(opt._learning_rate, LearningRateSchedule):
        raise ValueError(f"{caller} sets the learning rate, but this optimizer's rate follows a "
                         f"{type(opt._learning_rate).__name__} schedule and cannot be set: use one or the other")
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
        _float_rate_optimizer(self.model, "LearningRateScheduler")

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        opt = _float_rate_optimizer(self.model, "LearningRateScheduler")
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
        _float_rate_optimizer(self.model, "ReduceLROnPlateau")
        if self._keep_restored_state():  # set_state before this fit: kept, not reset
            return
        self.best, self.wait, self.cooldown_counter = None, 0, 0

    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None:
        self._restored = False

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        logs = logs if logs is not None else {}
        opt = _float_rate_optimizer(self.model, "ReduceLROnPlateau")
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


class TerminateOnNaN(Callback):
    """Stops training when a batch's loss is NaN or inf (Keras). hpcnn's core never applies the
    update of such a batch, so the model keeps the weights of the last good step.

    Without this callback, a NaN or inf loss stops ``fit`` with a ValueError ("the loss is NaN:
    training diverged"). With it, the batch's logs carry the loss, this callback sets
    ``model.stop_training`` and fit ends quietly after the epoch (its logs show the loss), returning
    the History; ``raise_error=True`` raises a RuntimeError at once instead (Keras 3)."""

    def __init__(self, raise_error: bool = False) -> None:
        super().__init__()
        self.raise_error = validation.boolean(raise_error, "raise_error", "TerminateOnNaN")

    def on_batch_end(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and (math.isnan(loss) or math.isinf(loss)):
            if self.raise_error:
                raise RuntimeError(f"NaN or Inf loss encountered at batch {batch}. Loss value: {loss}. "
                                   "Terminating training immediately.")
            print(f"Batch {batch}: Invalid loss, terminating training", flush=True)
            self.model.stop_training = True


# Defined in their own module (they need saving.py); importable from here, as in Keras.
from .checkpoints import BackupAndRestore, ModelCheckpoint  # noqa: E402

__all__ = ["Callback", "History", "EarlyStopping", "CSVLogger", "LambdaCallback", "LearningRateScheduler",
           "ReduceLROnPlateau", "TerminateOnNaN", "ModelCheckpoint", "BackupAndRestore"]
