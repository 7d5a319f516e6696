"""The base ``Callback``: Keras' hooks, the state protocol, and the hooks through which fit lets a
callback checkpoint the training (``restore_training``, ``on_train_position``, ``on_stop_signal``,
``on_training_complete``, ``end_training``: BackupAndRestore and ModelCheckpoint use them; fit names no callback).

Callbacks whose behaviour depends on what they saw earlier in training (EarlyStopping's counters,
ReduceLROnPlateau's, ModelCheckpoint's best value, History's epochs) implement the state protocol,
``get_state()`` / ``set_state(state)``: BackupAndRestore saves their states with its backups and
gives them back when a later ``fit`` resumes (after every callback's ``on_train_begin``), so a
resumed run decides exactly as an uninterrupted one."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional


@dataclass
class FitRun:
    """The fit a checkpointing callback works for (``restore_training``'s argument)."""

    callbacks: List["Callback"]  # every callback of the fit, History included, in fit's order
    signature: Dict[str, Any]  # what the data looked like: a backup is resumed by a fit over the same batches
    dataset: Any  # the training dataset (a backup restores its shuffle seed), or None for arrays


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

    # ---- checkpointing the training (hpcnn's hooks; fit calls them on every callback)
    # A callback that puts a whole training back (BackupAndRestore) says so; fit takes at most one.
    restores_training = False

    def restore_training(self, run: FitRun) -> Optional[Dict[str, Any]]:
        """Called by fit after every callback's on_train_begin: a callback that keeps backups puts
        the last one back (model, optimizer, random state, callback states) and returns the
        training position to continue from; None (the default) for nothing to resume."""
        return None

    def on_train_position(self, position: Dict[str, Any], epoch_end: bool) -> None:
        """After each trained batch (``epoch_end`` False) and after each epoch's on_epoch_end
        (True): the training position a backup written now would continue from (epoch, batch,
        the epoch's running sums). A stop signal meanwhile is only recorded."""

    def on_stop_signal(self, position: Dict[str, Any], logs: Dict[str, float]) -> Optional[str]:
        """fit was stopped by a signal (SIGTERM, SIGUSR1, Ctrl-C) at `position`: a last checkpoint
        here; returns what was done for fit's closing message, or None."""
        return None

    def on_training_complete(self) -> None:
        """fit ran to its end (not stopped by a signal or an error)."""

    def end_training(self) -> None:
        """fit returns or raises (after on_train_end when it returns): release what
        restore_training took (BackupAndRestore's lock of its directory)."""
