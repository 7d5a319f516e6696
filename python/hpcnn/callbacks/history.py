"""``History``: what ``fit`` returns, the logs of every epoch."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from .base import Callback


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
