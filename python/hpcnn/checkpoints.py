"""Checkpoints during ``fit``: ``ModelCheckpoint`` (Keras' semantics) and ``BackupAndRestore``
(training that survives the scheduler: a later ``fit`` continues exactly where the last backup was,
to the batch). Both are importable from ``hpcnn.callbacks``.

A backup is one HDF5 file, ``<backup_dir>/backup.h5``, written as every hpcnn file is (a temporary
file flushed to disk, then renamed into place), so the previous backup is valid until the new one
is complete, and a temporary file left by a killed writer is removed by the next write. It holds
everything the rest of the training depends on:

  weights            ``weight_000``, ... (get_weights order, Keras layouts)
  optimizer state    ``optimizer_000``, ... (Adam's moments, SGD's momentum: flat, Keras layout),
                     with the step count and the learning rate in the description
  random state       the model's seed and step counter (dropout masks are keyed by both), the
                     shuffle seed of an HDF5Dataset (arrays are shuffled by the model's seed: every
                     epoch's order is a pure function of (seed, epoch))
  position           the epoch and the batch to continue from, with the running loss/accuracy sums
                     and seconds of a partly trained epoch
  callback states    History so far and every callback's get_state() (EarlyStopping's counters,
                     ModelCheckpoint's best value, ...); arrays in them as ``array_000``, ...
  description        ``hpcnn_backup_json``: all of the above that is not an array, plus the model's
                     config and what the data looked like (batches per epoch, batch size, rows),
                     checked when resuming.

A fit resumed from a backup trains the same batches in the same order with the same dropout masks
and optimizer state as an uninterrupted run, so (same thread count, same device kind) its final
weights are bitwise identical.
"""
from __future__ import annotations

import json
import math
import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _core, distribute, interrupts, saving, validation
from .callbacks import Callback

if TYPE_CHECKING:
    from .models import Model

BACKUP_FORMAT = "hpcnn-backup"
BACKUP_FORMAT_VERSION = 1
BACKUP_META = "hpcnn_backup_json"
BACKUP_FILE = "backup.h5"
PREVIOUS_FILE = "backup-previous.h5"  # double_checkpoint=True: the backup before the latest
_ARRAY_TAG = "__hpcnn_array__"


def _array_dataset(i: int) -> str:
    return f"array_{i:03d}"


def _save_freq(value: Any, caller: str, allow_false: bool) -> Union[str, int, bool]:
    if isinstance(value, str) and value == "epoch":
        return value
    if allow_false and value is False:
        return False
    if validation.is_integer(value) and not isinstance(value, bool) and value >= 1:
        return int(value)
    expected = "'epoch', a positive number of batches" + (" or False" if allow_false else "")
    raise ValueError(f"{caller}: Invalid value for argument `save_freq`. Expected {expected}. "
                     f"Received: save_freq={value!r}")


def _path(value: Any, argument: str, what: str, where: str) -> str:
    """``value`` (a str or os.PathLike) as a non-empty path string; ValueError naming the argument."""
    try:
        path = os.fspath(value)
    except TypeError:
        path = None
    if not isinstance(path, str) or not path:
        raise ValueError(f"{where}: {argument} must be a {what} (a string), got {value!r}")
    return path


def _mode(monitor: str, mode: str) -> str:
    if mode == "auto":
        return "max" if "acc" in monitor or monitor.startswith("fmeasure") else "min"
    return mode


# ---------------------------------------------------------------------- callback states <-> files
def _to_json(obj: Any, arrays: List[np.ndarray], where: str) -> Any:
    """A callback state as JSON, its arrays moved to `arrays` (replaced by a reference)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        arrays.append(np.ascontiguousarray(obj))
        return {_ARRAY_TAG: len(arrays) - 1}
    if isinstance(obj, (list, tuple)):
        return [_to_json(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise ValueError(f"BackupAndRestore: {where} has the key {k!r}; state keys must be strings")
            out[k] = _to_json(v, arrays, f"{where}[{k!r}]")
        return out
    raise ValueError(f"BackupAndRestore: {where} is a {type(obj).__name__}; callback states hold numbers, strings, "
                     "booleans, None, lists, dicts and NumPy arrays")


def _from_json(obj: Any, arrays: List[np.ndarray]) -> Any:
    if isinstance(obj, list):
        return [_from_json(v, arrays) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {_ARRAY_TAG}:
            k = obj[_ARRAY_TAG]
            if not (isinstance(k, int) and 0 <= k < len(arrays)):
                raise saving._Damaged(f"a callback state refers to array {k!r:.50}, which it does not hold")
            return arrays[k]
        return {k: _from_json(v, arrays) for k, v in obj.items()}
    return obj


def _keyed(callbacks: List[Callback]) -> List[Tuple[str, Callback]]:
    """('EarlyStopping#0', cb), ...: a callback's key is its class and its rank among the callbacks
    of that class, so a resumed fit matches states to callbacks even when others were added."""
    seen: Dict[str, int] = {}
    out = []
    for cb in callbacks:
        name = type(cb).__name__
        out.append((f"{name}#{seen.get(name, 0)}", cb))
        seen[name] = seen.get(name, 0) + 1
    return out


class _Mismatch(ValueError):
    """A readable backup of another training (model, optimizer or data): never silently skipped."""


def _normalized(obj: Any) -> Any:
    """As it reads back from JSON (tuples become lists): for comparing configs."""
    return json.loads(json.dumps(obj))


# ---------------------------------------------------------------------- ModelCheckpoint
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
    value and batch counter are part of BackupAndRestore's backups."""

    def __init__(self, filepath: Any, monitor: str = "val_loss", verbose: int = 0, save_best_only: bool = False,
                 save_weights_only: bool = False, mode: str = "auto", save_freq: Union[str, int] = "epoch",
                 initial_value_threshold: Optional[float] = None, **kwargs: Any) -> None:
        super().__init__()
        where = "ModelCheckpoint"
        validation.no_other_arguments(kwargs, where)
        path = _path(filepath, "filepath", "file name", where)
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"{where}: monitor must be a metric name such as 'val_loss', got {monitor!r}")
        self.filepath, self.monitor = path, monitor
        self.verbose = validation.integer(verbose, "verbose", where, minimum=0, maximum=2)
        self.save_best_only = validation.boolean(save_best_only, "save_best_only", where)
        self.save_weights_only = validation.boolean(save_weights_only, "save_weights_only", where)
        validation.choice(mode, "mode", ("auto", "min", "max"), where)
        self.mode = _mode(monitor, mode)
        self.save_freq = _save_freq(save_freq, where, allow_false=False)
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
            self.best = float(current)
            self._write(path)
        elif self.verbose:
            print(f"\n{where}: {self.monitor} did not improve from {self.best:.5f}", flush=True)

    def _on_stop(self, epoch: int, batches_done: int, logs: Dict[str, float]) -> str:
        """The final checkpoint when fit is stopped by a signal; returns what was done, for fit's
        message."""
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


# ---------------------------------------------------------------------- BackupAndRestore
class BackupAndRestore(Callback):
    """Back up the whole training state during ``fit`` and, when ``fit`` is started again with the
    same callback (a requeued job, a restarted notebook), continue from the last backup, to the
    batch, ending bitwise equal to an uninterrupted run (same thread count, same device kind).

    ``backup_dir`` is a directory of its own (created when missing). ``save_freq``: 'epoch' (after
    each epoch), a number of batches, or False (only when fit is stopped by a signal). Whatever
    ``save_freq``, a signal (SIGTERM, SIGUSR1, Ctrl-C) makes fit write a backup at the next batch
    boundary before it returns. ``delete_checkpoint``: remove the backup when training completes
    (True), or keep it (a later fit with the same callback then returns at once, with the full
    History). ``double_checkpoint``: also keep the backup before the latest, used (with a message)
    when the latest cannot be read.

    What is in a backup and how it is written: see the module's description (checkpoints.py).
    Resuming needs the same model (config), the same optimizer class and the same data shape
    (batches per epoch, batch size, rows); anything else, a damaged backup, or a directory holding
    files that are not backups is a ValueError before anything trains: never a silent fresh start.
    The epochs passed to fit may differ (training longer than first planned is fine)."""

    def __init__(self, backup_dir: Any, save_freq: Union[str, int, bool] = "epoch", double_checkpoint: bool = False,
                 delete_checkpoint: bool = True, **kwargs: Any) -> None:
        super().__init__()
        where = "BackupAndRestore"
        validation.no_other_arguments(kwargs, where)
        self.backup_dir = _path(backup_dir, "backup_dir", "directory name", where)
        self.save_freq = _save_freq(save_freq, where, allow_false=True)
        self.double_checkpoint = validation.boolean(double_checkpoint, "double_checkpoint", where)
        self.delete_checkpoint = validation.boolean(delete_checkpoint, "delete_checkpoint", where)
        self.write_seconds: List[float] = []  # how long each backup took to write (seconds)
        self.resumed_from: Optional[Dict[str, int]] = None  # {'epoch', 'batch'} after a resume
        self._batches_since_save = 0
        self._last_position: Optional[Tuple[int, int]] = None

    @property
    def path(self) -> str:
        """The backup file."""
        return os.path.join(self.backup_dir, BACKUP_FILE)

    @property
    def previous_path(self) -> str:
        return os.path.join(self.backup_dir, PREVIOUS_FILE)

    def __repr__(self) -> str:
        return f"BackupAndRestore({self.backup_dir!r}, save_freq={self.save_freq!r})"

    # ---- the directory
    def _check_dir(self) -> bool:
        """Whether a backup file may be there; ValueError for a directory that is not a backup
        directory (a file, foreign files, not writable)."""
        d = self.backup_dir
        if not os.path.exists(d):
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as e:
                raise ValueError(f"BackupAndRestore: cannot create backup_dir '{d}' ({e.strerror})") from None
            return False
        if not os.path.isdir(d):
            raise ValueError(f"BackupAndRestore: backup_dir '{d}' exists and is not a directory")
        ours = (BACKUP_FILE, PREVIOUS_FILE)
        foreign = sorted(n for n in os.listdir(d) if n not in ours and not n.startswith(BACKUP_FILE + ".tmp-"))
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise ValueError(f"BackupAndRestore: backup_dir '{d}' holds files that are not hpcnn backups ({shown}): "
                             "give BackupAndRestore a directory of its own (a backup is never read from, nor written "
                             "into, a directory with other files)")
        if not os.access(d, os.W_OK | os.X_OK):
            raise ValueError(f"BackupAndRestore: backup_dir '{d}' is not writable: backups could not be written")
        return any(os.path.exists(os.path.join(d, n)) for n in ours)

    def _delete(self) -> None:
        for p in (self.path, self.previous_path):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass
        try:
            os.rmdir(self.backup_dir)  # only when empty
        except OSError:
            pass

    # ---- writing (called by fit)
    def _due_after_batch(self) -> bool:
        """Counts a trained batch; True when a backup is due (save_freq batches since the last)."""
        if not isinstance(self.save_freq, int) or isinstance(self.save_freq, bool):
            return False
        self._batches_since_save += 1
        return self._batches_since_save >= self.save_freq

    def _write(self, callbacks: List[Callback], signature: Dict[str, Any], position: Dict[str, Any]) -> None:
        """Writes a backup of the model, its optimizer, the random state, the callbacks' states and
        the training position (epoch, batch, partial sums). In a multi-process run only the
        chief writes (every rank restores the same backup)."""
        if not distribute.writes_files(self.model):
            self._batches_since_save = 0
            self._last_position = (int(position["epoch"]), int(position["batch"]))
            return
        t0 = time.perf_counter()
        model = self.model
        desc, buffers = saving.optimizer_state(model)
        arrays: Dict[str, np.ndarray] = {}
        for i, w in enumerate(model.get_weights()):
            arrays[saving.weight_dataset(i)] = w
        for i, b in enumerate(buffers):
            arrays[saving.optimizer_dataset(i)] = b
        cb_arrays: List[np.ndarray] = []
        states = []
        for key, cb in _keyed(callbacks):
            if cb is self:
                continue
            state = cb.get_state()
            if state is not None:
                states.append({"key": key, "state": _to_json(state, cb_arrays, f"{type(cb).__name__}.get_state()")})
        for i, a in enumerate(cb_arrays):
            arrays[_array_dataset(i)] = a
        meta = {"format": BACKUP_FORMAT, "format_version": BACKUP_FORMAT_VERSION,
                "hpcnn_version": _core.build_info()["version"], "written": time.strftime("%Y-%m-%d %H:%M:%S"),
                "config": model.get_config(), "weight_names": model._weight_names(),
                "compile": saving.compile_description(model), "optimizer_state": desc,
                "rng": saving.rng_state(model), "fit": signature, "position": position, "callbacks": states,
                "arrays": len(cb_arrays)}
        arrays[BACKUP_META] = saving.json_bytes(meta)
        with interrupts.writing_guard():  # a stop signal meanwhile is only recorded
            os.makedirs(self.backup_dir, exist_ok=True)
            if self.double_checkpoint and os.path.exists(self.path):
                os.replace(self.path, self.previous_path)  # the latest becomes the previous one
            # Uncompressed: float weights hardly compress, and the write stays a plain copy.
            saving.write_file(self.path, arrays, "BackupAndRestore", compression=None)
        self._batches_since_save = 0
        self._last_position = (int(position["epoch"]), int(position["batch"]))
        self.write_seconds.append(time.perf_counter() - t0)

    # ---- reading (called by fit)
    def _read(self, path: str, model: "Model", callbacks: List[Callback],
              signature: Dict[str, Any]) -> Dict[str, Any]:
        """Everything in the backup at `path`, checked against this fit; nothing is applied yet.
        _Damaged (or ValueError) when it cannot be used."""
        meta = saving.read_description(path, BACKUP_META, BACKUP_FORMAT, BACKUP_FORMAT_VERSION, "BackupAndRestore",
                                       "backup")
        for key, kind in (("config", dict), ("compile", (dict, type(None))), ("optimizer_state", (dict, type(None))),
                          ("rng", dict), ("fit", dict), ("position", dict), ("callbacks", list), ("arrays", int)):
            if not isinstance(meta.get(key), kind):
                raise saving._Damaged(f"its backup description has no valid '{key}'")
        # The same model, optimizer and data: anything else could not continue the same training.
        mine, theirs = _normalized(model.get_config()), meta["config"]
        if mine != theirs:
            raise _Mismatch(f"BackupAndRestore: the backup '{path}' was written for another model "
                             f"({_config_difference(theirs, mine)}); use another backup_dir for this model, or "
                             f"delete '{self.backup_dir}' to train it from the start")
        comp = saving.compile_description(model)
        if meta["compile"] is not None and comp is not None and meta["compile"]["optimizer"] != comp["optimizer"]:
            raise _Mismatch(f"BackupAndRestore: the backup '{path}' was written training with "
                             f"{meta['compile']['optimizer']}, this model is compiled with {comp['optimizer']}")
        theirs_fit = meta["fit"]
        for key, label in (("data", "data kind"), ("steps", "batches per epoch"), ("batch_size", "batch size"),
                           ("rows", "training rows"), ("shuffle", "shuffle")):
            if theirs_fit.get(key) != signature.get(key):
                raise _Mismatch(f"BackupAndRestore: the backup '{path}' was written by a fit with {label} "
                                 f"{theirs_fit.get(key)!r}, this fit has {signature.get(key)!r}: resuming needs the "
                                 f"same data, batch size and steps_per_epoch (or delete '{self.backup_dir}' to train "
                                 "from the start)")
        pos = meta["position"]
        for key in ("epoch", "batch", "seen"):
            if not (validation.is_integer(pos.get(key)) and not isinstance(pos.get(key), bool) and pos[key] >= 0):
                raise saving._Damaged(f"its position has no valid '{key}' ({pos.get(key)!r:.50})")
        for key in ("loss_sum", "correct", "seconds"):
            if not isinstance(pos.get(key), (int, float)) or isinstance(pos.get(key), bool):
                raise saving._Damaged(f"its position has no valid '{key}' ({pos.get(key)!r:.50})")
        if pos["batch"] > signature["steps"]:
            raise saving._Damaged(f"its position (batch {pos['batch']}) is beyond the {signature['steps']} batches of "
                                  "an epoch")
        weights = saving._read_weights(path, model)
        desc = meta["optimizer_state"]
        buffers = saving.read_optimizer_buffers(path, model, desc) if desc is not None else []
        cb_arrays = []
        for i in range(meta["arrays"]):
            try:
                cb_arrays.append(np.asarray(_read_any(path, _array_dataset(i))))
            except ValueError:
                raise saving._Damaged(f"its callback array '{_array_dataset(i)}' is missing") from None
        states = {}
        for entry in meta["callbacks"]:
            if not (isinstance(entry, dict) and isinstance(entry.get("key"), str) and isinstance(entry.get("state"), dict)):
                raise saving._Damaged(f"its callback states are malformed ({entry!r:.100})")
            states[entry["key"]] = _from_json(entry["state"], cb_arrays)
        return {"meta": meta, "weights": weights, "optimizer": desc, "buffers": buffers, "states": states,
                "position": pos, "path": path}

    def _restore(self, callbacks: List[Callback], signature: Dict[str, Any], dataset: Any) -> Optional[Dict[str, Any]]:
        """Called by fit after every callback's on_train_begin: when a backup is there, puts the
        model, optimizer, random state, data seed and callback states back and returns the
        position to continue from; None for a first run. Prints what it did."""
        self._batches_since_save = 0
        self._last_position = None
        self.resumed_from = None
        if not self._check_dir():
            self._say(f"BackupAndRestore: no backup in '{self.backup_dir}' yet: training from the start")
            return None
        model = self.model
        candidates = [self.path] + ([self.previous_path] if self.double_checkpoint else [])
        problems = []
        found = None
        for path in candidates:
            if not os.path.exists(path):
                problems.append(f"'{path}' is missing")
                continue
            try:
                found = self._read(path, model, callbacks, signature)
                break
            except _Mismatch:
                raise  # readable, but of another model or data: no fallback hides that
            except saving._Damaged as e:
                problems.append(f"'{path}' is damaged: {e}")
            except ValueError as e:  # not readable as a backup at all (not HDF5, truncated, ...)
                problems.append(str(e).replace("BackupAndRestore: ", "", 1))
        if found is None:
            if not os.path.exists(self.path) and not os.path.exists(self.previous_path):
                self._say(f"BackupAndRestore: no backup in '{self.backup_dir}' yet: training from the start")
                return None
            raise ValueError("BackupAndRestore: cannot resume: " + "; ".join(problems) + ". Training does not start "
                             f"from the beginning by itself: delete '{self.backup_dir}' to do that")
        if found["path"] != self.path:
            # Said whatever verbose is: the run continues from an older point than the user may think.
            print(f"BackupAndRestore: the latest backup could not be used ({problems[0]}); resuming from the "
                  f"previous one, '{found['path']}'", flush=True)
        # Everything was read and checked: now put it back.
        try:
            model.set_weights(found["weights"])
            saving.restore_rng_state(model, found["meta"]["rng"])
            if found["optimizer"] is not None:
                saving.restore_optimizer_state(model, found["optimizer"], found["buffers"])
        except saving._Damaged as e:
            raise ValueError(f"BackupAndRestore: the backup '{found['path']}' is damaged: {e}") from None
        data_seed = found["meta"]["fit"].get("data_seed")
        if data_seed is not None and hasattr(dataset, "_set_seed"):
            dataset._set_seed(int(data_seed))
        restored = []
        for key, cb in _keyed(callbacks):
            if cb is not self and key in found["states"]:
                cb.set_state(found["states"][key])
                restored.append(key.split("#")[0])
        pos = found["position"]
        self.resumed_from = {"epoch": int(pos["epoch"]), "batch": int(pos["batch"])}
        self._last_position = (int(pos["epoch"]), int(pos["batch"]))
        where = (f"epoch {pos['epoch'] + 1}, batch {pos['batch'] + 1} of {signature['steps']}" if pos["batch"]
                 else f"the start of epoch {pos['epoch'] + 1}")
        self._say(f"BackupAndRestore: resuming from '{found['path']}' (written {found['meta'].get('written', '?')}) "
                  f"at {where}; restored weights, optimizer state, random state"
                  + (f", states of {', '.join(restored)}" if restored else ""))
        return dict(pos)

    def _say(self, line: str) -> None:
        if self.params.get("verbose"):
            print(line, flush=True)

    def _training_finished(self) -> None:
        """Training ran to its end (not stopped by a signal or an error)."""
        if self.delete_checkpoint and distribute.writes_files(self.model):
            self._delete()


def _read_any(path: str, name: str) -> np.ndarray:
    from . import data
    return data.read_dataset(path, name)


def _config_difference(theirs: Dict[str, Any], mine: Dict[str, Any]) -> str:
    a, b = theirs.get("layers") or [], mine.get("layers") or []
    if len(a) != len(b):
        return f"{len(a)} layers in the backup, {len(b)} in this model"
    for i, (la, lb) in enumerate(zip(a, b)):
        if la != lb:
            return f"layer {i}: {json.dumps(la)[:150]} in the backup, {json.dumps(lb)[:150]} here"
    return "their configs differ"


__all__ = ["ModelCheckpoint", "BackupAndRestore"]
