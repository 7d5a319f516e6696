"""``History``: what ``fit`` returns, the logs of every epoch, and hpcnn's timings beside them."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from .base import Callback


class History(Callback):
    """What ``fit`` returns. ``history.history`` maps each logged value to its per-epoch values,
    exactly the keys Keras logs: loss, the compiled metrics, their ``val_`` values (and
    learning_rate where a callback logs it), so ``pd.DataFrame(history.history).plot()`` draws what
    it draws on Keras. ``history.epoch`` lists the epoch numbers.

    hpcnn's timings are kept beside, per epoch, not in ``.history`` (nor in the logs callbacks see):
    ``history.seconds`` (wall-clock seconds of the epoch's training batches, validation excluded)
    and ``history.images_per_second`` (training rows over those seconds). ``fit`` records an epoch's
    timings before the callbacks' ``on_epoch_end``, and gives the model its History at the start
    of fit (``model.history``, as Keras does after the first epoch), so a callback reads the
    epoch's figures as ``self.model.history.seconds[-1]``.

    ``interrupted`` is True when training was stopped by a signal (Ctrl-C = SIGINT, SIGTERM,
    SIGUSR1) before its last epoch, and ``interrupted_by`` then names the signal. A fit resumed by
    BackupAndRestore returns the epochs (and the timings) of the interrupted run too."""

    def __init__(self) -> None:
        super().__init__()
        self.history: Dict[str, List[float]] = {}
        self.epoch: List[int] = []
        self.seconds: List[float] = []
        self.images_per_second: List[float] = []
        self.interrupted = False
        self.interrupted_by: Optional[str] = None

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        if self.model is not None:
            self.model.history = self

    def record_timing(self, seconds: float, images_per_second: float) -> None:
        """fit: the epoch just trained took `seconds` at `images_per_second`."""
        self.seconds.append(float(seconds))
        self.images_per_second.append(float(images_per_second))

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)

    def get_state(self) -> Dict[str, Any]:
        return {"epoch": list(self.epoch), "history": {k: list(v) for k, v in self.history.items()},
                "seconds": list(self.seconds), "images_per_second": list(self.images_per_second)}

    def set_state(self, state: Dict[str, Any]) -> None:
        self.epoch = [int(e) for e in state["epoch"]]
        history = {str(k): list(v) for k, v in state["history"].items()}
        # A backup written when the timings were in .history: they move to their own lists.
        seconds, rates = history.pop("seconds", []), history.pop("images_per_second", [])
        self.history = history
        self.seconds = [float(v) for v in state.get("seconds", seconds)]
        self.images_per_second = [float(v) for v in state.get("images_per_second", rates)]

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"
