"""The data a training, evaluation or prediction loop takes, as batches for the core: arrays
(sliced, or gathered by row indices when shuffled), hpcnn's HDF5 datasets, PyDataset /
keras.utils.Sequence-style objects and Python generators; each batch checked and converted once,
and fit's data checked against the model before the first epoch.

A batch is the tuple ``(x, y, rows, decode, sample_weight)`` the core takes: ``rows`` selects
rows of x, y and the sample weights (a shuffled epoch over arrays), ``decode`` is ``(scale, shift)``
for a uint8 x that the model is to decode itself (an HDF5Dataset feeding a GPU model), else None;
``sample_weight`` is None or float32 (n,)."""
from __future__ import annotations

import itertools
from typing import Any, Iterator, Optional, Tuple

import numpy as np

from .. import validation
from .checks import target_shape_problem

ArrayLike = Any


def is_generator(obj: Any) -> bool:
    """A Python generator or iterator of batches (no __len__: its steps are given by the caller)."""
    return (hasattr(obj, "__next__") and hasattr(obj, "__iter__") and not hasattr(obj, "__len__")
            and not isinstance(obj, (np.ndarray, list, tuple, str, bytes)))


def is_dataset(obj: Any) -> bool:
    """A batch source: a native hpcnn dataset, a PyDataset / keras.utils.Sequence-style object, or a
    Python generator of batches."""
    return hasattr(obj, "epoch_batches") or is_generator(obj) or (
        hasattr(obj, "__getitem__") and hasattr(obj, "__len__") and not isinstance(obj, (np.ndarray, list, tuple)))


def batch_count(x: Any, steps: Optional[int], caller: str, steps_name: str, generator: bool) -> int:
    """The batches of a dataset (its len), or `steps` for a generator (which has no len)."""
    if generator:
        if steps is None:
            raise ValueError(f"{caller}: a Python generator has no length: pass {steps_name}=... (the batches to "
                             "take from it), or give an hpcnn.utils.PyDataset (__len__ and __getitem__)")
        return steps
    return len(x)


def prepare_targets(model: Any, y: ArrayLike, where: str = "", y_name: str = "y") -> np.ndarray:
    """Targets as the compiled loss wants them: float32 one-hot rows or int32 class indices. Class
    indices are range-checked on their own type before the cast to int32 (an int64 label 2**32+3
    must not become class 3)."""
    comp = model.require_compiled("fit")
    y = np.asarray(y)
    classes = int(model.core.output_shapes[-1][-1])
    # The shape is checked here, on the targets as given: an error names their own dtype (uint8
    # labels are not "float32" in it), for evaluate, *_on_batch and dataset batches too.
    problem = target_shape_problem(comp["loss"], classes, tuple(y.shape), y_name,
                                   y.dtype if y.dtype.kind in "iub" else None)  # integers: named
    if problem:
        raise ValueError(f"{where}: {problem}" if where else problem)
    if comp["loss"] != "sparse_categorical_crossentropy":
        if y.dtype.kind not in "fiub":
            what = "one-hot rows" if comp["loss"] == "categorical_crossentropy" else "numbers"
            raise ValueError(f"targets have dtype {y.dtype}; expected {what}")
        if classes == 1 and y.ndim == 1:  # Keras: (n,) targets of a one-unit output are (n, 1)
            y = y.reshape(-1, 1)
        return np.ascontiguousarray(y, dtype=np.float32)
    return validation.class_indices(y, classes)


def prepare_sample_weight(w: Any, rows: int, caller: str, name: str = "sample_weight") -> Optional[np.ndarray]:
    """Sample weights as the core takes them: float32 (n,), finite, >= 0 (None passes)."""
    if w is None:
        return None
    w = np.asarray(w)
    if w.dtype.kind not in "fiub":
        raise ValueError(f"{caller}: {name} has dtype {w.dtype}; expected numbers")
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.ndim != 1 or len(w) != rows:
        raise ValueError(f"{caller}: {name} must have shape ({rows},) (one weight per sample), got {w.shape}")
    w = np.ascontiguousarray(w, dtype=np.float32)
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{caller}: {name} must be finite numbers >= 0; row {row} has {w[row]}")
    return w


def prepare_inputs(x: ArrayLike) -> np.ndarray:
    """Inputs as the core takes them: contiguous uint8 (unscaled) or float32."""
    x = np.asarray(x)
    if x.dtype == np.uint8 or x.dtype == np.float32:
        return np.ascontiguousarray(x)
    if x.dtype.kind not in "fiub":
        raise ValueError(f"inputs have dtype {x.dtype}; expected numbers")
    return np.ascontiguousarray(x, dtype=np.float32)


def prepare_arrays(model: Any, x: ArrayLike, y: Optional[ArrayLike], sample_weight: Any,
                   caller: str) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """fit's and evaluate's array data as (x, y, sample_weight) ready for the core: targets required,
    one row of y (and one weight) per row of x, at least one row."""
    if y is None:
        raise ValueError(f"{caller}: targets y are required with array inputs")
    x = prepare_inputs(x)
    y = prepare_targets(model, y, caller)
    if len(x) != len(y):
        raise ValueError(f"{caller}: x has {len(x)} rows but y has {len(y)}")
    if len(x) == 0:
        raise ValueError(f"{caller}: x is empty")
    return x, y, prepare_sample_weight(sample_weight, len(x), caller)


# (x, y, rows, decode, w[, first_row, global_rows]): the core's batch tuple (w: the sample weights or
# None; first_row/global_rows: this rank's share of a global batch, from a sharded HDF5Dataset).
Batch = Tuple[Any, ...]


def array_batches(model: Any, x: np.ndarray, y: Optional[np.ndarray], batch_size: int, shuffle: bool,
                  epoch: int, first_batch: int = 0, w: Optional[np.ndarray] = None) -> Iterator[Batch]:
    """(x, y, rows, None, w) per batch: contiguous slices, or the full arrays plus row indices that
    the core gathers (no NumPy copy) when shuffling. The order is a pure function of the model's
    seed and the epoch; `first_batch` starts the epoch there (a resumed run). `w`: the sample
    weights (None: none)."""
    n = len(x)
    if shuffle:
        order = np.random.default_rng([model.seed or 0, epoch]).permutation(n)
        for b in range(first_batch * batch_size, n, batch_size):
            yield x, y, order[b:b + batch_size], None, w
    else:
        for b in range(first_batch * batch_size, n, batch_size):
            yield (x[b:b + batch_size], (y[b:b + batch_size] if y is not None else None), None, None,
                   (w[b:b + batch_size] if w is not None else None))


def dataset_batches(model: Any, ds: Any, epoch: int, shuffle: bool, first_batch: int = 0,
                    x_only: bool = False, shard: bool = True, generator: bool = False) -> Iterator[Batch]:
    """(x, y, None, decode, None) per batch of a native dataset (made for the model's device: on a GPU a
    uint8 dataset's x as stored, with the decode the model applies there) or of a Sequence-style
    object (its items in order, or shuffled by the model's seed and the epoch; decode None).
    `first_batch` starts the epoch there (a resumed run): an HDF5Dataset does not read the batches
    before it; other datasets with ``epoch_batches`` are iterated past them. `shard` (fit,
    evaluate): with a multi-process strategy an HDF5Dataset reads only this rank's share of each
    batch, yielded as (x, y, None, decode, None, first_row, global_rows); other data is passed whole
    and the core takes this rank's rows. A Sequence's or generator's (x, y, sample_weight) item
    comes as (x, WithWeights(y, w), None, None, None); `x_only` (predict) also takes x alone.
    `generator`: ds is a Python generator (the caller asked its kind once)."""
    if hasattr(ds, "model_batches"):
        strategy = model.distribute_strategy
        rank_share = strategy.shard() if shard and strategy is not None else None
        for item in ds.model_batches(epoch, device=model.core.device, first_batch=first_batch,
                                      shard=rank_share):
            yield (item[0], item[1], None, item[2], None) + tuple(item[3:])
        return
    if hasattr(ds, "epoch_batches"):
        for xb, yb in itertools.islice(ds.epoch_batches(epoch, device=model.core.device), first_batch, None):
            yield xb, yb, None, None, None
        return
    if generator:
        # A generator continues where the last epoch stopped (the caller takes its steps).
        for i, item in enumerate(ds):
            xb, yb = split_item(item, f"the generator's batch {i}", x_only)
            yield xb, yb, None, None, None
        return
    order = np.arange(len(ds))
    if shuffle:
        order = np.random.default_rng([model.seed or 0, epoch, 1]).permutation(len(ds))
    for i in order[first_batch:]:
        xb, yb = split_item(ds[int(i)], f"the dataset's item {i}", x_only)
        yield xb, yb, None, None, None
    if hasattr(ds, "on_epoch_end"):
        ds.on_epoch_end()


class WithWeights:
    """The targets of a dataset's (x, y, sample_weight) item, with its weights (dataset_batches)."""
    __slots__ = ("y", "w")

    def __init__(self, y: Any, w: Any) -> None:
        self.y, self.w = y, w


def split_item(item: Any, where: str, x_only: bool = False) -> Tuple[Any, Any]:
    """A dataset's or a generator's batch: (x, y) or (x, y, sample_weight), as (x, targets); for
    prediction (x_only) also x alone or (x,)."""
    if x_only and not isinstance(item, (tuple, list)):
        return item, None
    if x_only and len(item) == 1:
        return item[0], None
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise ValueError(f"{where} is not an (x, y) or (x, y, sample_weight) tuple")
    if len(item) == 3 and item[2] is not None:
        return item[0], WithWeights(item[1], item[2])
    return item[0], item[1]


# ---------------------------------------------------------------------- early shape checks
# fit checks the shapes of its data against the model before the first epoch, so a wrong shape
# is one clear ValueError before anything is printed or trained, not an error at "batch 1".
def check_shapes(model: Any, where: str, x: Any, y: Any, x_name: str, y_name: str, is_ds: bool) -> None:
    """ValueError naming `x_name`/`y_name` when x's per-sample shape is not the model's input
    shape, or y's shape does not fit the compiled loss. Arrays are checked fully; a dataset by
    its declared row shape (``x_shape``) when it has one (`is_ds`: x is a dataset or a generator)."""
    want_x = tuple(model.sample_shape or ())
    expects = (None,) + want_x

    def fits(per_sample: Tuple[int, ...]) -> bool:  # as the core: (H, W) samples fit an (H, W, 1) input
        return per_sample == want_x or per_sample + (1,) == want_x

    if is_ds:
        got = getattr(x, "x_shape", None)
        if got is not None and want_x and not fits(tuple(got)):
            raise ValueError(f"{where}: input shape mismatch: the model expects {expects} but got "
                             f"{(None,) + tuple(got)} ({x_name} delivers samples of shape {tuple(got)})")
        return
    xs = tuple(np.shape(x))
    if want_x and not fits(xs[1:]):
        raise ValueError(f"{where}: input shape mismatch: the model expects {expects} but got {xs} ({x_name})")
    if y is None:
        return
    ys = tuple(np.shape(y))
    problem = target_shape_problem(model.require_compiled(where)["loss"], int(model.output_shape[-1]), ys, y_name)
    if problem:
        raise ValueError(f"{where}: {problem}")


def check_validation_data(model: Any, validation_data: Any, is_ds: bool) -> Optional[Tuple[Any, Any, Any]]:
    """fit's validation_data as (x, y, sample_weight) ready for evaluate_loss_metrics ((dataset,
    None, None) for a dataset: `is_ds`), checked before the first epoch rather than after it."""
    if validation_data is None:
        return None
    if is_ds:
        return validation_data, None, None
    if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
        raise ValueError("fit: validation_data must be a tuple (x_val, y_val) or (x_val, y_val, sample_weight) or a "
                         f"dataset, got {type(validation_data).__name__}")
    vx, vy = prepare_inputs(validation_data[0]), prepare_targets(model, validation_data[1], "fit", "validation_data y")
    if len(vx) != len(vy):
        raise ValueError(f"fit: validation_data has {len(vx)} rows of x but {len(vy)} of y")
    if len(vx) == 0:
        raise ValueError("fit: validation_data is empty")
    vw = prepare_sample_weight(validation_data[2] if len(validation_data) == 3 else None, len(vx), "fit",
                               "validation_data's sample_weight")
    return vx, vy, vw
