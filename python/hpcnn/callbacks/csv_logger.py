"""``CSVLogger``: each epoch's logs as a row of a CSV file."""
from __future__ import annotations

import csv
import os
from typing import Any, Dict, List, Optional

from .. import distribute, validation
from .base import Callback


class CSVLogger(Callback):
    """One CSV row per epoch: the epoch, then the logs' keys sorted (loss, the metrics, their
    ``val_`` values), Keras' columns: without validation data Keras adds the ``val_`` columns
    anyway, and a value missing from an epoch's logs is written as ``NA``. hpcnn's timings are not
    logs: they are on the History (``history.seconds``, ``history.images_per_second``).
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
            if self._keys and not any(k.startswith("val_") for k in self._keys):
                self._keys += [f"val_{k}" for k in self._keys]  # as Keras: the columns of a validated fit
        with open(self.filename, "a", newline="") as f:
            w = csv.writer(f, delimiter=self.sep)
            if new:
                w.writerow(["epoch"] + self._keys)
            w.writerow([epoch] + [logs.get(k, "NA") for k in self._keys])

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
