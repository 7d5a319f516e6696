"""``CallbackList``: the callbacks of one ``fit`` called as one (as Keras' ``CallbackList``), so the
training loop makes one call per hook and never walks the callbacks itself. Each hook passes to
every callback in the list's order (the user's callbacks, then the History); a hook whose
callbacks answer (``restore_training``, ``on_stop_signal``) gathers the answers here, so the loop
sees one answer and names no concrete callback."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence

from .base import Callback, FitRun


class CallbackList(Callback):
    """Every hook of ``Callback``, passed on to each callback of `callbacks` in order."""

    def __init__(self, callbacks: Sequence[Callback]) -> None:
        super().__init__()
        self.callbacks: List[Callback] = list(callbacks)

    def __iter__(self) -> Iterator[Callback]:
        return iter(self.callbacks)

    def __len__(self) -> int:
        return len(self.callbacks)

    def restorers(self) -> List[Callback]:
        """The callbacks that put a whole training back (BackupAndRestore): fit takes at most one."""
        return [cb for cb in self.callbacks if cb.restores_training]

    # ---- setup
    def set_model(self, model: Any) -> None:
        super().set_model(model)
        for cb in self.callbacks:
            cb.set_model(model)

    def set_params(self, params: Dict[str, Any]) -> None:
        super().set_params(params)
        for cb in self.callbacks:
            cb.set_params(params)

    # ---- Keras' hooks
    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        for cb in self.callbacks:
            cb.on_train_begin(logs)

    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None:
        for cb in self.callbacks:
            cb.on_train_end(logs)

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        for cb in self.callbacks:
            cb.on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        for cb in self.callbacks:
            cb.on_epoch_end(epoch, logs)

    def on_train_batch_begin(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        for cb in self.callbacks:
            cb.on_train_batch_begin(batch, logs)

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        for cb in self.callbacks:
            cb.on_train_batch_end(batch, logs)

    # ---- checkpointing the training (base.py's hpcnn hooks)
    def restore_training(self, run: FitRun) -> Optional[Dict[str, Any]]:
        """Every callback's restore_training, in order; the last position one returned (fit takes at
        most one restoring callback, so at most one answers)."""
        start = None
        for cb in self.callbacks:
            position = cb.restore_training(run)
            if position is not None:
                start = position
        return start

    def on_train_position(self, position: Dict[str, Any], epoch_end: bool) -> None:
        for cb in self.callbacks:
            cb.on_train_position(position, epoch_end)

    def on_stop_signal(self, position: Dict[str, Any], logs: Dict[str, float]) -> Optional[str]:
        """Every callback's last checkpoint; what they did, as sentences joined by '. ', or None."""
        notes = [note for note in (cb.on_stop_signal(position, logs) for cb in self.callbacks) if note]
        return ". ".join(notes) if notes else None

    def on_training_complete(self) -> None:
        for cb in self.callbacks:
            cb.on_training_complete()

    def end_training(self) -> None:
        for cb in self.callbacks:
            cb.end_training()
