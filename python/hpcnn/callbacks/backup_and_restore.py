"""``BackupAndRestore``: training that survives the scheduler. A later ``fit`` with the same
callback continues exactly where the last backup was, to the batch (the backup directory's
layout and the backup file's: hpcnn.formats.backup_file; its lock: hpcnn.formats.backup_lock)."""
from __future__ import annotations

import os
import time
import warnings
from typing import Any, Dict, List, Optional, Tuple, Union

from .. import distribute, interrupts, validation
from ..errors import FileProblem, OtherTraining
from ..formats.backup_file import (BACKUP_FILE, NEXT_FILE, PREVIOUS_FILE, backup_fit, keyed, read_backup,
                                   write_backup)
from ..formats.backup_lock import LOCK_FILE, BackupLock
from ..formats.hpcnn_files import restore_optimizer_state, restore_rng_state
from .base import Callback, FitRun
from .checkpoint_arguments import path_argument, save_freq_argument


class BackupAndRestore(Callback):
    """Back up the whole training state during ``fit`` and, when ``fit`` is started again with the
    same callback (a requeued job, a restarted notebook), continue from the last backup, to the
    batch, ending bitwise equal to an uninterrupted run (same thread count, same device kind).

    ``backup_dir`` is a directory of its own (created when missing). ``save_freq``: 'epoch' (after
    each epoch), a number of batches, or False (only when fit is stopped by a signal). Whatever
    ``save_freq``, a signal (SIGTERM, SIGUSR1, Ctrl-C) makes fit write a backup at the next batch
    boundary before it returns. ``delete_checkpoint``: remove the backup when training completes
    (True), or keep it (a later fit with the same callback then returns at once, with the full
    History). ``double_checkpoint`` (True by default in hpcnn; False in Keras): keep two
    generations, the newest backup and the one before it; when the newest is damaged on disk
    (its checksums do not match: truncated, overwritten, a dataset missing), fit resumes from the
    previous one with a warning naming the skipped file and why. False keeps one file.

    What is in a backup and how it is written: hpcnn.formats.backup_file. A new backup is written
    whole (to ``backup-next.h5``: a temporary file flushed to disk and renamed) before the newest
    becomes the previous one and it the newest, so the directory holds two complete generations at
    every moment; a disk that fills up meanwhile is an OSError (errno kept) that leaves both as
    they were. The directory needs room for three backups.

    One training at a time: fit locks the directory (``backup.lock``, an OS lock that dies with
    the process: a job killed by SIGKILL never blocks its requeued self); a second job pointed at
    it is a ValueError naming the directory and the holder (host, pid, Slurm job). Under a
    multi-process strategy the chief holds the lock and writes; an error on it stops every rank.

    Resuming needs the same model (config), the same optimizer class and the same data shape
    (batches per epoch, batch size, rows); anything else (checked on the newest backup: it is not
    damage, so the previous one is not tried), a damaged backup with no good previous one (the
    ValueError names both files), or a directory holding files that are not backups is a
    ValueError before anything trains: never a silent fresh start.
    The epochs passed to fit may differ (training longer than first planned is fine). The replica
    count may differ too (a backup of 2 ranks resumed on 1 or 3, within 1e-5 relative of the
    uninterrupted run: docs/distributed.md), when it divides the backup's global batch; else a
    ValueError naming the backup and both counts, before any weight changes."""

    def __init__(self, backup_dir: Any, save_freq: Union[str, int, bool] = "epoch", double_checkpoint: bool = True,
                 delete_checkpoint: bool = True, **kwargs: Any) -> None:
        super().__init__()
        where = "BackupAndRestore"
        validation.no_other_arguments(kwargs, where)
        self.backup_dir = path_argument(backup_dir, "backup_dir", "directory name", where)
        self.save_freq = save_freq_argument(save_freq, where, allow_false=True)
        self.double_checkpoint = validation.boolean(double_checkpoint, "double_checkpoint", where)
        self.delete_checkpoint = validation.boolean(delete_checkpoint, "delete_checkpoint", where)
        self.write_seconds: List[float] = []  # how long each backup took to write (seconds)
        self.resumed_from: Optional[Dict[str, int]] = None  # {'epoch', 'batch'} after a resume
        self._batches_since_save = 0
        self._last_position: Optional[Tuple[int, int]] = None
        self._run: Optional[FitRun] = None  # the fit being backed up (restore_training sets it)
        self._lock: Optional[BackupLock] = None  # held from restore_training to end_training (the writer)
        # Whether backup.h5 may become the previous generation: False when the resume found it damaged.
        self._newest_good = True

    @property
    def path(self) -> str:
        """The backup file."""
        return os.path.join(self.backup_dir, BACKUP_FILE)

    @property
    def previous_path(self) -> str:
        """The backup before the newest (double_checkpoint)."""
        return os.path.join(self.backup_dir, PREVIOUS_FILE)

    @property
    def next_path(self) -> str:
        """Where a new backup is written before it becomes the newest (double_checkpoint)."""
        return os.path.join(self.backup_dir, NEXT_FILE)

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
        backups = (BACKUP_FILE, PREVIOUS_FILE, NEXT_FILE)
        foreign = sorted(n for n in os.listdir(d) if n not in backups + (LOCK_FILE,)
                         and not any(n.startswith(b + ".tmp-") for b in backups))
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise ValueError(f"BackupAndRestore: backup_dir '{d}' holds files that are not hpcnn backups ({shown}): "
                             "give BackupAndRestore a directory of its own (a backup is never read from, nor written "
                             "into, a directory with other files)")
        if not os.access(d, os.W_OK | os.X_OK):
            raise ValueError(f"BackupAndRestore: backup_dir '{d}' is not writable: backups could not be written")
        return any(os.path.exists(os.path.join(d, n)) for n in backups)

    def _delete(self) -> None:
        for p in (self.next_path, self.path, self.previous_path):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass
        self.end_training()  # (removes the lock file)
        try:
            os.rmdir(self.backup_dir)  # only when empty
        except OSError:
            pass

    # ---- fit's hooks
    restores_training = True  # fit takes at most one such callback

    def uneven_split_error(self, batch_size: int, replicas: int) -> Optional[str]:
        """fit found that its global batch does not split among its replicas: when this directory
        holds a backup, the message for resuming it on this replica count (None when it holds
        none: fit's own message applies). Called before anything is read into the model."""
        if not os.path.isdir(self.backup_dir):
            return None
        path = next((p for p in (self.next_path, self.path, self.previous_path) if os.path.exists(p)), None)
        if path is None:
            return None
        fit = backup_fit(path)
        old = fit.get("replicas")
        old_batch = fit.get("batch_size") or batch_size
        written = (f"written on {old} replica{'s' if old != 1 else ''}" if validation.is_integer(old)
                   else "written on a replica count it does not record")
        fits = [n for n in range(1, int(old_batch) + 1) if int(old_batch) % n == 0] if validation.is_integer(
            old_batch) else []
        counts = ", ".join(map(str, fits[:8])) + (", ..." if len(fits) > 8 else "")
        return (f"BackupAndRestore cannot resume the backup '{path}' ({written}, global batch {old_batch}) on "
                f"{replicas} replicas: the global batch {batch_size} must be divisible by the replica count, and a "
                f"resumed fit keeps the backup's batch size. Resume it on a replica count that divides "
                f"{old_batch} ({counts}), or delete '{self.backup_dir}' to train from the start with a global "
                f"batch divisible by {replicas}. Nothing was changed: the model and the backup are as they were")

    def on_train_position(self, position: Dict[str, Any], epoch_end: bool) -> None:
        """A backup at the end of each epoch (save_freq='epoch') or every save_freq batches."""
        if epoch_end:
            if self.save_freq == "epoch":
                self._write(position)
            return
        if isinstance(self.save_freq, int) and not isinstance(self.save_freq, bool):
            self._batches_since_save += 1
            if self._batches_since_save >= self.save_freq:
                self._write(position)

    def on_stop_signal(self, position: Dict[str, Any], logs: Dict[str, float]) -> Optional[str]:
        """A backup of the point reached (unless the last one is of it), whatever save_freq says."""
        if self._last_position != (position["epoch"], position["batch"]):
            self._write(position)
        return f"Backup written to '{self.backup_dir}': a fit with the same BackupAndRestore continues from there"

    def on_training_complete(self) -> None:
        """Training ran to its end: the backup is deleted (delete_checkpoint)."""
        if self.delete_checkpoint and distribute.writes_files(self.model):
            self._delete()

    def end_training(self) -> None:
        """fit returns or raises: the directory's lock is released."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _write(self, position: Dict[str, Any]) -> None:
        """Writes a backup of the model, its optimizer, the random state, the callbacks' states and
        the training position (epoch, batch, partial sums). In a multi-process run only the
        chief writes (every rank restores the same backup)."""
        if distribute.writes_files(self.model):
            assert self._run is not None, "BackupAndRestore: a backup is written during a fit only"
            t0 = time.perf_counter()
            with interrupts.writing_guard():  # a stop signal meanwhile is only recorded
                os.makedirs(self.backup_dir, exist_ok=True)
                target = self.next_path if self.double_checkpoint else self.path
                try:
                    write_backup(target, self.model, self._run.callbacks, self, self._run.signature, position)
                except OSError as e:
                    raise self._write_failure(e, position) from None
                if self.double_checkpoint:
                    self._rotate()
            self.write_seconds.append(time.perf_counter() - t0)
        # (the other ranks of a multi-process run count as if they had written: the chief did)
        self._batches_since_save = 0
        self._last_position = (int(position["epoch"]), int(position["batch"]))

    def _rotate(self) -> None:
        """The new backup (complete on disk as backup-next.h5) becomes the newest, the newest the
        previous one. A crash between the two renames leaves two complete generations either way
        (restore_training reads backup-next.h5 first)."""
        if os.path.exists(self.path):
            if self._newest_good:
                os.replace(self.path, self.previous_path)
            else:  # found damaged when resuming: never kept as the previous generation
                os.remove(self.path)
        os.replace(self.next_path, self.path)
        self._newest_good = True
        _sync_directory(self.backup_dir)

    def _write_failure(self, e: OSError, position: Dict[str, Any]) -> OSError:
        """The OSError of a backup that could not be written (disk full, ...), saying what is left."""
        kept = [p for p in (self.path, self.previous_path) if os.path.exists(p)]
        left = (f"the backups already there ({', '.join(repr(p) for p in kept)}) are intact, and a later fit resumes "
                "from the newest" if kept else "no backup was there before")
        # ("BackupAndRestore: cannot write 'x': the disk is full (...). Nothing was replaced: ...")
        text = (e.strerror or str(e)).replace("BackupAndRestore: ", "", 1).split(". Nothing was replaced")[0]
        return OSError(e.errno, f"BackupAndRestore: cannot write a backup (to continue from {_where(position)}) "
                                f"in '{self.backup_dir}': {text}. Nothing was "
                                f"replaced: {left}; no temporary file is left", e.filename)

    def restore_training(self, run: FitRun) -> Optional[Dict[str, Any]]:
        """Called by fit after every callback's on_train_begin: when a backup is there, puts the
        model, optimizer, random state, data seed and callback states back and returns the
        position to continue from; None for a first run. Prints what it did. The writer (the
        chief) first takes the directory's lock (released by end_training)."""
        self._run = run
        callbacks, signature, dataset = run.callbacks, run.signature, run.dataset
        self._batches_since_save = 0
        self._last_position = None
        self.resumed_from = None
        self._newest_good = True
        has_backups = self._check_dir()
        if distribute.writes_files(self.model) and self._lock is None:
            # Before anything is read: a second job on this directory is refused, not interleaved.
            self._lock = BackupLock.acquire(self.backup_dir, self)
        if not has_backups:
            self._say(f"BackupAndRestore: no backup in '{self.backup_dir}' yet: training from the start")
            return None
        model = self.model
        # Newest first: backup-next.h5 exists only when a job died between its write and its rename.
        candidates = ([self.next_path, self.path, self.previous_path] if self.double_checkpoint else [self.path])
        problems: List[str] = []
        skipped: List[str] = []
        found = None
        for path in candidates:
            if not os.path.exists(path):
                if path == self.path:
                    problems.append(f"'{path}' (missing)")
                continue
            try:
                found = read_backup(path, model, signature, self.backup_dir)
                break
            except OtherTraining:
                raise  # readable, but of another model or data: not damage, no fallback hides that
            except FileProblem as e:
                problems.append(f"'{path}' (damaged: {e})")
                skipped.append(path)
            except ValueError as e:  # not readable as a backup at all (not HDF5, truncated, ...)
                problems.append(f"'{path}' ({str(e).replace('BackupAndRestore: ', '', 1)})")
                skipped.append(path)
        if found is None:
            if not any(os.path.exists(p) for p in candidates):
                self._say(f"BackupAndRestore: no backup in '{self.backup_dir}' yet: training from the start")
                return None
            raise ValueError("BackupAndRestore: cannot resume: no backup in '" + self.backup_dir + "' is usable: "
                             + "; ".join(problems) + ". Nothing was changed (the model is as it was). Training does "
                             f"not start from the beginning by itself: delete '{self.backup_dir}' to do that")
        if self.path in skipped:
            self._newest_good = False  # damaged: the next backup replaces it, the good one stays the previous
        if problems:
            pos = found["meta"]["position"]
            # A warning whatever verbose is: the run continues from an older point than the user may think.
            warnings.warn(f"BackupAndRestore: skipped {'; '.join(problems)}. Resuming from the previous backup "
                          f"'{found['path']}' (written {found['meta'].get('written', '?')}, continuing from "
                          f"{_where(pos)}): the batches after it are trained again", RuntimeWarning,
                          stacklevel=2)
        # Everything was read and checked: now put it back.
        try:
            model.set_weights(found["weights"])
            restore_rng_state(model, found["meta"]["rng"])
            if found["optimizer"] is not None:
                restore_optimizer_state(model, found["optimizer"], found["buffers"])
        except FileProblem as e:
            raise ValueError(f"BackupAndRestore: the backup '{found['path']}' is damaged: {e}") from None
        data_seed = found["meta"]["fit"].get("data_seed")
        if data_seed is not None and hasattr(dataset, "set_seed"):
            dataset.set_seed(int(data_seed))
        restored = []
        for key, cb in keyed(callbacks):
            if cb is not self and key in found["states"]:
                cb.set_state(found["states"][key])
                restored.append(key.split("#")[0])
        pos = found["position"]
        self.resumed_from = {"epoch": int(pos["epoch"]), "batch": int(pos["batch"])}
        self._last_position = (int(pos["epoch"]), int(pos["batch"]))
        where = (f"epoch {pos['epoch'] + 1}, batch {pos['batch'] + 1} of {signature['steps']}" if pos["batch"]
                 else f"the start of epoch {pos['epoch'] + 1}")
        old, now = found["meta"]["fit"].get("replicas"), signature.get("replicas")
        count = (f" (written on {old} replicas, resumed on {now}: the same batches, float sums in another order)"
                 if validation.is_integer(old) and validation.is_integer(now) and old != now else "")
        self._say(f"BackupAndRestore: resuming from '{found['path']}' (written {found['meta'].get('written', '?')}) "
                  f"at {where}{count}; restored weights, optimizer state, random state"
                  + (f", states of {', '.join(restored)}" if restored else ""))
        return dict(pos)

    def _say(self, line: str) -> None:
        if self.params.get("verbose"):
            print(line, flush=True)


def _where(position: Dict[str, Any]) -> str:
    """Where a backup continues from: 'the start of epoch 3', 'epoch 2 after batch 6'."""
    epoch, batch = int(position["epoch"]) + 1, int(position["batch"])
    return f"epoch {epoch} after batch {batch}" if batch else f"the start of epoch {epoch}"


def _sync_directory(path: str) -> None:
    """Flushes a directory's entries (the renames) to disk; best effort (some file systems cannot)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["BackupAndRestore"]
