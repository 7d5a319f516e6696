"""``LambdaCallback``: hooks given as functions."""
from __future__ import annotations

from typing import Callable, Optional

from .base import Callback


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
