"""The checks of fit's, evaluate's and predict's arguments that are not about the data itself:
verbose, callbacks, Keras arguments hpcnn does not take, a global batch that the replicas of a
strategy share, and what targets of a given shape mean for a loss."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import validation
from ..callbacks import Callback

def check_verbose(verbose: Any, caller: str) -> Any:
    """0, 1, 2 (or True/False), 'auto' or None, as Keras takes them."""
    if verbose is None or (isinstance(verbose, str) and verbose == "auto"):
        return verbose
    if isinstance(verbose, (bool, np.bool_)) or (validation.is_integer(verbose) and verbose in (0, 1, 2)):
        return int(verbose)
    raise ValueError(f"{caller}: Invalid value for argument `verbose`. Expected 'auto', 0, 1 or 2. "
                     f"Received: verbose={verbose!r}")


def check_callbacks(callbacks: Any, caller: str) -> List[Callback]:
    if callbacks is None:
        return []
    if isinstance(callbacks, Callback):
        return [callbacks]
    if isinstance(callbacks, (str, bytes)) or not isinstance(callbacks, (list, tuple)):
        raise ValueError(f"{caller}: callbacks must be a list of hpcnn.callbacks.Callback, got {callbacks!r}")
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise ValueError(f"{caller}: callbacks must be hpcnn.callbacks.Callback instances, got {cb!r}")
    return list(callbacks)


def check_unsupported(kwargs: Dict[str, Any], caller: str, unsupported: Sequence[str],
                      ignored: Sequence[str] = ()) -> None:
    """Keras arguments hpcnn does not implement raise when given a value; `ignored` ones (Keras'
    multiprocessing knobs: hpcnn's loader is native) may be given; anything else is a TypeError."""
    for k in unsupported:
        if kwargs.pop(k, None) is not None:
            raise ValueError(f"{caller}: {k} is not supported")
    for k in ignored:
        kwargs.pop(k, None)
    validation.no_other_arguments(kwargs, caller)


def target_shape_problem(loss: str, units: int, ys: Tuple[int, ...], y_name: str, dtype: Any = None) -> Optional[str]:
    """What is wrong with targets of shape `ys` (and `dtype`, named when given) for the loss, or None."""
    has = f"{y_name}" + (f" ({np.dtype(dtype).name})" if dtype is not None else "") + f" has shape {ys}"
    fits_outputs = (len(ys) == 2 and ys[1] == units) or (len(ys) == 1 and units == 1)
    if loss in ("binary_crossentropy", "mean_squared_error", "mean_absolute_error") and not fits_outputs:
        return f"{loss} needs targets of the outputs' shape (n, {units}), but {has}"
    if loss == "categorical_crossentropy" and (len(ys) != 2 or ys[1] != units):
        return (f"categorical_crossentropy needs one-hot targets of shape (n, {units}), but {has}: use "
                f"hpcnn.utils.to_categorical(y, {units}) (or HDF5Dataset(..., one_hot={units})), or "
                "loss='sparse_categorical_crossentropy' for class indices")
    if loss == "sparse_categorical_crossentropy" and not (len(ys) == 1 or (len(ys) == 2 and ys[1] == 1)):
        hint = "; these look one-hot: use loss='categorical_crossentropy'" if len(ys) == 2 else ""
        return f"sparse_categorical_crossentropy needs class indices of shape (n,) or (n, 1), but {has}{hint}"
    return None


def check_global_batch(strategy: Any, x: Any, batch_size: Optional[int], is_ds: bool, caller: str,
                       restoring: Any = None) -> None:
    """A global batch must split evenly among the replicas (only the last batch of an epoch may be
    smaller): ValueError before anything trains. `restoring`: fit's BackupAndRestore, if any; when
    it holds a backup, the error is about resuming that backup on this replica count (its batch
    size cannot change either), naming it, both counts and what to do."""
    size = getattr(x, "batch_size", None) if is_ds else batch_size
    replicas = strategy.num_replicas_in_sync
    if validation.is_integer(size) and int(size) % replicas:
        explain = getattr(restoring, "uneven_split_error", None)
        message = explain(int(size), replicas) if explain is not None else None
        if message:
            raise ValueError(f"{caller}: {message}")
        what = "the dataset's batch_size" if is_ds else "batch_size"
        raise ValueError(f"{caller}: {what} {size} is the global batch and must be divisible by the "
                         f"{replicas} replicas of {type(strategy).__name__} (e.g. {replicas * max(1, int(size) // replicas)})")
