"""``TerminateOnNaN``: stop training at the first batch whose loss is NaN or inf."""
from __future__ import annotations

import math
from typing import Dict, Optional

from .. import validation
from .base import Callback


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
