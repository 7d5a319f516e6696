"""``ModelCheckpoint``: the model (or its weights) saved during ``fit``, as Keras' callback does."""
from __future__ import annotations

import math
import os
from typing import Any, Dict, Optional, Union

from .. import distribute, interrupts, validation
from .base import Callback
from .checkpoint_arguments import monitor_mode, path_argument, save_freq_argument


class ModelCheckpoint(Callback):
    """Save the model (or its weights) during ``fit``, as Keras' ModelCheckpoint does.

    ``filepath`` may hold format fields filled from the epoch (1-based), the batch (1-based, when
    saving every ``save_freq`` batches) and the logged metrics: ``'ckpt-{epoch:02d}-{val_loss:.3f}.h5'``.
    With ``save_best_only`` a file is written only when ``monitor`` improved (``mode``: 'min', 'max'
    or 'auto': 'max' for accuracies); ``initial_value_threshold`` is the value to beat at the start.
    ``save_weights_only`` writes ``model.save_weights`` files (read them with ``load_weights``),
    otherwise ``model.save`` files with the optimizer state (``load_model``). ``save_freq``: 'epoch'
    or a number of batches. Folders in ``filepath`` are created.

    When ``fit`` is stopped by a signal (SIGTERM, SIGUSR1, Ctrl-C) it writes one more file for the
    point reached, unless ``save_best_only`` (the best model is already on disk) or ``filepath``
    names a metric that is not known yet (e.g. ``{val_loss}`` in the middle of an epoch). Its best
    value and batch counter are part of BackupAndRestore's backups.

    Every file is written atomically (a temporary file flushed and renamed): a disk that fills up
    is an OSError (errno kept: ENOSPC, EDQUOT, EFBIG, EIO) naming the file, which stops fit; the
    file that was there stays as it was (and, with save_best_only, ``best`` stays its value)."""

    def __init__(self, filepath: Any, monitor: str = "val_loss", verbose: int = 0, save_best_only: bool = False,
                 save_weights_only: bool = False, mode: str = "auto", save_freq: Union[str, int] = "epoch",
                 initial_value_threshold: Optional[float] = None, **kwargs: Any) -> None:
        super().__init__()
        where = "ModelCheckpoint"
        validation.no_other_arguments(kwargs, where)
        path = path_argument(filepath, "filepath", "file name", where)
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"{where}: monitor must be a metric name such as 'val_loss', got {monitor!r}")
        self.filepath, self.monitor = path, monitor
        self.verbose = validation.integer(verbose, "verbose", where, minimum=0, maximum=2)
        self.save_best_only = validation.boolean(save_best_only, "save_best_only", where)
        self.save_weights_only = validation.boolean(save_weights_only, "save_weights_only", where)
        validation.choice(mode, "mode", ("auto", "min", "max"), where)
        self.mode = monitor_mode(monitor, mode)
        self.save_freq = save_freq_argument(save_freq, where, allow_false=False)
        if initial_value_threshold is not None:
            initial_value_threshold = validation.number(initial_value_threshold, "initial_value_threshold", where)
        self.initial_value_threshold = initial_value_threshold
        self.best = (initial_value_threshold if initial_value_threshold is not None
                     else math.inf if self.mode == "min" else -math.inf)
        self._batches_since_save = 0
        self._current_epoch = 0

    # ---- hooks
    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        self._current_epoch = epoch

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        super().on_train_batch_end(batch, logs)
        if isinstance(self.save_freq, int):
            self._batches_since_save += 1
            if self._batches_since_save >= self.save_freq:
                self._batches_since_save = 0
                self._save(self._current_epoch, batch, logs or {})

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        if self.save_freq == "epoch":
            self._save(epoch, None, logs or {})

    # ---- the state protocol
    def get_state(self) -> Dict[str, Any]:
        return {"best": self.best, "batches_since_save": self._batches_since_save,
                "current_epoch": self._current_epoch}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.best = float(state["best"])
        self._batches_since_save = int(state["batches_since_save"])
        self._current_epoch = int(state["current_epoch"])

    # ---- saving
    def _file_path(self, epoch: int, batch: Optional[int], logs: Dict[str, float]) -> str:
        fields = dict(logs)
        fields["epoch"] = epoch + 1
        if batch is not None:
            fields["batch"] = batch + 1
        try:
            return self.filepath.format(**fields)
        except KeyError as e:
            raise KeyError(f'ModelCheckpoint: failed to format the filepath "{self.filepath}": {e} is not among '
                           f"{sorted(fields)}") from None

    def _write(self, path: str) -> None:
        if not distribute.writes_files(self.model):
            return  # a multi-process run: the chief writes the checkpoints
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        with interrupts.writing_guard():  # a stop signal meanwhile is only recorded
            if self.save_weights_only:
                self.model.save_weights(path, overwrite=True)
            else:
                self.model.save(path, overwrite=True)

    def _save(self, epoch: int, batch: Optional[int], logs: Dict[str, float]) -> None:
        if not distribute.writes_files(self.model):
            return  # a multi-process run: the chief saves (and says so)
        path = self._file_path(epoch, batch, logs)
        what = "weights" if self.save_weights_only else "model"
        where = f"Epoch {epoch + 1}" + (f", batch {batch + 1}" if batch is not None else "")
        if not self.save_best_only:
            if self.verbose:
                print(f"\n{where}: saving {what} to {path}", flush=True)
            self._write(path)
            return
        current = logs.get(self.monitor)
        if current is None:
            hint = (" (saving every save_freq batches, only the training metrics of the batch are logged: "
                    "monitor 'loss' or 'accuracy', or save_freq='epoch')" if batch is not None else "")
            raise ValueError(f"ModelCheckpoint: save_best_only needs '{self.monitor}', which is not among the logged "
                             f"metrics {sorted(logs)}{hint}")
        better = current < self.best if self.mode == "min" else current > self.best
        if better:
            if self.verbose:
                print(f"\n{where}: {self.monitor} improved from {self.best:.5f} to {current:.5f}, saving {what} to "
                      f"{path}", flush=True)
            self._write(path)  # (an OSError, e.g. a full disk, keeps the best of the file on disk)
            self.best = float(current)
        elif self.verbose:
            print(f"\n{where}: {self.monitor} did not improve from {self.best:.5f}", flush=True)

    def on_stop_signal(self, position: Dict[str, Any], logs: Dict[str, float]) -> Optional[str]:
        """The final checkpoint when fit is stopped by a signal; returns what was done, for fit's
        message."""
        epoch, batches_done = position["epoch"], position["batch"]
        if self.save_best_only:
            return "ModelCheckpoint: save_best_only, so its best model stays as saved"
        if batches_done == 0:
            return "ModelCheckpoint: nothing trained since the end of the last epoch"
        try:
            path = self._file_path(epoch, batches_done - 1 if batches_done > 0 else None, logs)
        except KeyError as e:
            return f"ModelCheckpoint: nothing written ({e})"
        self._write(path)
        return f"ModelCheckpoint: {'weights' if self.save_weights_only else 'model'} saved to {path}"

    def __repr__(self) -> str:
        return f"ModelCheckpoint({self.filepath!r}, monitor={self.monitor!r}, save_freq={self.save_freq!r})"
