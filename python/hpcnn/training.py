"""The training, evaluation and prediction loops of ``Model`` (``Sequential`` too) and their data
plumbing.

``Model.fit`` / ``evaluate`` / ``predict`` / ``*_on_batch`` (models.py) own the public
signatures and defaults and call the functions here with the model as first argument. Each batch is
one C++ call (``train_step``, ``test_step`` or ``predict_step``, GIL released) that runs the step
on its batch and stages the next one (on a GPU the next batch's upload overlaps this step's
backward pass); the following call passes ``None`` for the batch the core already holds. Python
only slices or fetches batches, prepares them for the core, and runs callbacks and the progress
bar. A batch is the tuple ``(x, y, rows, decode, sample_weight)`` the core takes: ``rows`` selects
rows of x, y and the sample weights (a shuffled epoch over arrays), ``decode`` is ``(scale, shift)``
for a uint8 x that the model is to decode itself (an HDF5Dataset feeding a GPU model), else None;
``sample_weight`` is None or float32 (n,). The loss, its weights and the metrics are computed in the
core; Python adds up the per-batch sums it returns.
"""
from __future__ import annotations

import itertools
import time
import warnings
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from . import _core, interrupts, progress, saving, threads, validation
from .callbacks import BackupAndRestore, Callback, History, ModelCheckpoint

if TYPE_CHECKING:  # models.py imports this module; the model is only passed in
    from .models import Model

ArrayLike = Any

# Each step call also stages the next batch (see fit). Costs nothing measurable on the CPU (the
# staging work only moves from one call to the one before), so it is always on; the tests switch it
# off to compare (then every call stages its own batch).
STAGE_NEXT = True


def is_generator(obj: Any) -> bool:
    """A Python generator or iterator of batches (no __len__: its steps are given by the caller)."""
    return (hasattr(obj, "__next__") and hasattr(obj, "__iter__") and not hasattr(obj, "__len__")
            and not isinstance(obj, (np.ndarray, list, tuple, str, bytes)))


def is_dataset(obj: Any) -> bool:
    """A batch source: a native hpcnn dataset, a PyDataset / keras.utils.Sequence-style object, or a
    Python generator of batches."""
    return hasattr(obj, "epoch_batches") or is_generator(obj) or (
        hasattr(obj, "__getitem__") and hasattr(obj, "__len__") and not isinstance(obj, (np.ndarray, list, tuple)))


def batch_count(x: Any, steps: Optional[int], caller: str, steps_name: str) -> int:
    """The batches of a dataset (its len), or `steps` for a generator (which has no len)."""
    if is_generator(x):
        if steps is None:
            raise ValueError(f"{caller}: a Python generator has no length: pass {steps_name}=... (the batches to "
                             "take from it), or give an hpcnn.utils.PyDataset (__len__ and __getitem__)")
        return steps
    return len(x)


# ---------------------------------------------------------------------- data plumbing
def prepare_targets(model: "Model", y: ArrayLike, where: str = "", y_name: str = "y") -> np.ndarray:
    """Targets as the compiled loss wants them: float32 one-hot rows or int32 class indices. Class
    indices are range-checked on their own type before the cast to int32 (an int64 label 2**32+3
    must not become class 3)."""
    comp = model._require_compiled("fit")
    y = np.asarray(y)
    classes = int(model._model().output_shapes[-1][-1])
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


def class_weight_table(model: "Model", class_weight: Any, caller: str = "fit") -> List[float]:
    """fit's class_weight {class index: weight} as the core's per-class table (classes without an
    entry weigh 1, as in Keras); [] for None."""
    if class_weight is None:
        return []
    if not isinstance(class_weight, dict):
        raise ValueError(f"{caller}: class_weight must be a dict {{class index: weight}}, got "
                         f"{type(class_weight).__name__}")
    comp = model._require_compiled(caller)
    units = int(model._model().output_shapes[-1][-1])
    classes = 2 if units == 1 else units
    if comp["loss"] in ("mean_squared_error", "mean_absolute_error") and units > 1:
        raise ValueError(f"{caller}: class_weight needs class targets (a cross-entropy loss or a one-unit output)")
    table = [1.0] * classes
    for k, v in class_weight.items():
        if not validation.is_integer(k) or not 0 <= int(k) < classes:
            raise ValueError(f"{caller}: class_weight has the key {k!r}; expected class indices in [0, {classes})")
        table[int(k)] = validation.number(v, f"class_weight[{int(k)}]", caller, low=0.0,
                                          expected="a finite number >= 0")
    return table


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


def prepare_inputs(x: ArrayLike) -> np.ndarray:
    """Inputs as the core takes them: contiguous uint8 (unscaled) or float32."""
    x = np.asarray(x)
    if x.dtype == np.uint8 or x.dtype == np.float32:
        return np.ascontiguousarray(x)
    if x.dtype.kind not in "fiub":
        raise ValueError(f"inputs have dtype {x.dtype}; expected numbers")
    return np.ascontiguousarray(x, dtype=np.float32)


def prepare_arrays(model: "Model", x: ArrayLike, y: Optional[ArrayLike], sample_weight: Any,
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


def array_batches(model: "Model", x: np.ndarray, y: Optional[np.ndarray], batch_size: int, shuffle: bool,
                  epoch: int, first_batch: int = 0, w: Optional[np.ndarray] = None) -> Iterator[Batch]:
    """(x, y, rows, None, w) per batch: contiguous slices, or the full arrays plus row indices that
    the core gathers (no NumPy copy) when shuffling. The order is a pure function of the model's
    seed and the epoch; `first_batch` starts the epoch there (a resumed run). `w`: the sample
    weights (None: none)."""
    n = len(x)
    if shuffle:
        order = np.random.default_rng([model._seed or 0, epoch]).permutation(n)
        for b in range(first_batch * batch_size, n, batch_size):
            yield x, y, order[b:b + batch_size], None, w
    else:
        for b in range(first_batch * batch_size, n, batch_size):
            yield (x[b:b + batch_size], (y[b:b + batch_size] if y is not None else None), None, None,
                   (w[b:b + batch_size] if w is not None else None))


def dataset_batches(model: "Model", ds: Any, epoch: int, shuffle: bool, first_batch: int = 0,
                    x_only: bool = False, shard: bool = True) -> Iterator[Batch]:
    """(x, y, None, decode, None) per batch of a native dataset (made for the model's device: on a GPU a
    uint8 dataset's x as stored, with the decode the model applies there) or of a Sequence-style
    object (its items in order, or shuffled by the model's seed and the epoch; decode None).
    `first_batch` starts the epoch there (a resumed run): an HDF5Dataset does not read the batches
    before it; other datasets with ``epoch_batches`` are iterated past them. `shard` (fit,
    evaluate): with a multi-process strategy an HDF5Dataset reads only this rank's share of each
    batch, yielded as (x, y, None, decode, None, first_row, global_rows); other data is passed whole
    and the core takes this rank's rows. A Sequence's or generator's (x, y, sample_weight) item
    comes as (x, _WithWeights(y, w), None, None, None); `x_only` (predict) also takes x alone."""
    if hasattr(ds, "_model_batches"):
        strategy = getattr(model, "_strategy", None)
        rank_share = strategy._shard() if shard and strategy is not None else None
        for item in ds._model_batches(epoch, device=model._model().device, first_batch=first_batch,
                                      shard=rank_share):
            yield (item[0], item[1], None, item[2], None) + tuple(item[3:])
        return
    if hasattr(ds, "epoch_batches"):
        for xb, yb in itertools.islice(ds.epoch_batches(epoch, device=model._model().device), first_batch, None):
            yield xb, yb, None, None, None
        return
    if is_generator(ds):
        # A generator continues where the last epoch stopped (the caller takes its steps).
        for i, item in enumerate(ds):
            xb, yb = split_item(item, f"the generator's batch {i}", x_only)
            yield xb, yb, None, None, None
        return
    order = np.arange(len(ds))
    if shuffle:
        order = np.random.default_rng([model._seed or 0, epoch, 1]).permutation(len(ds))
    for i in order[first_batch:]:
        xb, yb = split_item(ds[int(i)], f"the dataset's item {i}", x_only)
        yield xb, yb, None, None, None
    if hasattr(ds, "on_epoch_end"):
        ds.on_epoch_end()


class _WithWeights:
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
        return item[0], _WithWeights(item[1], item[2])
    return item[0], item[1]


def fetch_batch(model: "Model", it: Iterator[Batch], is_ds: bool) -> Optional[Tuple[str, Any]]:
    """The next batch of `it` for fit: ("ok", (x, y, rows, decode, w[, first_row, global_rows])) prepared for the core, None at
    the end, or the exception that fetching ("next_error") or preparing ("prepare_error") raised,
    kept to be raised at the batch's turn."""
    try:
        item = next(it)
    except StopIteration:
        return None
    except Exception as err:  # Ctrl-C (KeyboardInterrupt) is not caught: it stops fit as before
        return ("next_error", err)
    xb, yb, rows, decode, wb = item[:5]
    share = tuple(item[5:])  # (first_row, global_rows): this rank's share of a global batch
    if is_ds:
        try:
            if isinstance(yb, _WithWeights):
                yb, wb = yb.y, yb.w
            xb = prepare_inputs(xb)
            yb = prepare_targets(model, yb)
            wb = prepare_sample_weight(wb, len(xb), "fit", "the batch's sample weights")
        except Exception as err:  # raised (and a ValueError numbered) at the batch's turn
            return ("prepare_error", err)
    return ("ok", (xb, yb, rows, decode, wb) + share)


# ---------------------------------------------------------------------- early shape checks
# fit checks the shapes of its data against the model before the first epoch, so a wrong shape
# is one clear ValueError before anything is printed or trained, not an error at "batch 1".
def check_shapes(model: "Model", where: str, x: Any, y: Any, x_name: str, y_name: str) -> None:
    """ValueError naming `x_name`/`y_name` when x's per-sample shape is not the model's input
    shape, or y's shape does not fit the compiled loss. Arrays are checked fully; a dataset by
    its declared row shape (``x_shape``) when it has one."""
    want_x = tuple(model._input_shape or ())
    expects = (None,) + want_x

    def fits(per_sample: Tuple[int, ...]) -> bool:  # as the core: (H, W) samples fit an (H, W, 1) input
        return per_sample == want_x or per_sample + (1,) == want_x

    if is_dataset(x):
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
    problem = target_shape_problem(model._require_compiled(where)["loss"], int(model.output_shape[-1]), ys, y_name)
    if problem:
        raise ValueError(f"{where}: {problem}")


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


# ---------------------------------------------------------------------- training
def fit(model: "Model", **arguments: Any) -> History:
    """``Model.fit`` (arguments as ``_fit``). With a multi-process strategy, an error on this
    rank (a bad batch, a callback that raises, Ctrl-C) stops the other ranks at once, with an error
    naming this one, instead of leaving them waiting in their next collective."""
    strategy = getattr(model, "_strategy", None)
    try:
        return _fit(model, **arguments)
    except BaseException as err:
        if strategy is not None:
            strategy._abort(f"{type(err).__name__}: {err}")
        raise


def _fit(model: "Model", *, x: Any, y: Any, batch_size: Optional[int], epochs: int, verbose: Any,
         callbacks: Optional[Sequence[Callback]], validation_split: float, validation_data: Any, shuffle: bool,
         initial_epoch: int, steps_per_epoch: Optional[int], validation_batch_size: Optional[int],
         validation_freq: int, kwargs: Dict[str, Any]) -> History:
    """Checks the arguments, then runs the epochs (one ``train_step`` call per batch, which also
    stages the next batch), the callbacks, the progress bar and validation."""
    sample_weight = kwargs.pop("sample_weight", None)
    class_weight = kwargs.pop("class_weight", None)
    validation_steps = validation.integer(kwargs.pop("validation_steps", None), "validation_steps", "fit",
                                          maximum=None, allow_none=True)
    check_unsupported(kwargs, "fit", (), ("workers", "use_multiprocessing", "max_queue_size"))
    batch_size = validation.integer(batch_size, "batch_size", "fit", allow_none=True)
    epochs = validation.integer(epochs, "epochs", "fit", minimum=0, maximum=None)
    initial_epoch = validation.integer(initial_epoch, "initial_epoch", "fit", minimum=0, maximum=None)
    steps_per_epoch = validation.integer(steps_per_epoch, "steps_per_epoch", "fit", maximum=None, allow_none=True)
    validation_batch_size = validation.integer(validation_batch_size, "validation_batch_size", "fit",
                                               allow_none=True)
    validation_freq = validation.integer(validation_freq, "validation_freq", "fit", maximum=None)
    validation_split = validation.number(validation_split, "validation_split", "fit", low=0.0, high=1.0,
                                         high_open=True, expected="a float between 0 and 1 (1 excluded)")
    shuffle = validation.boolean(shuffle, "shuffle", "fit")
    verbose = check_verbose(verbose, "fit")
    user_callbacks = check_callbacks(callbacks, "fit")
    comp = model._require_compiled("fit")
    if epochs < initial_epoch:
        raise ValueError(f"fit: epochs ({epochs}) must be >= initial_epoch ({initial_epoch})")
    if sample_weight is not None and class_weight is not None:
        raise ValueError("fit: You cannot use `class_weight` and `sample_weight` at the same time.")
    class_table = class_weight_table(model, class_weight)
    if model._trainable_changed_since_compile():
        warnings.warn("fit: a layer's `trainable` was changed after compile(); as in Keras, fit trains with the "
                      "setting of the last compile(): call compile() again to apply it", UserWarning, stacklevel=3)
    model._follow_device_scope()
    core = model._model()
    verbose = progress.resolve_verbose(verbose)
    strategy = model._strategy if core.distributed else None
    if strategy is not None and strategy._multi_process and not strategy.is_chief:
        verbose = 0  # only the chief prints progress

    if x is None:
        raise ValueError("fit: no training data (x)")
    is_ds = is_dataset(x)
    if is_ds:
        if y is not None:
            raise ValueError("fit: y must be None when x is a dataset (it yields (x, y) batches)")
        if batch_size is not None:
            raise ValueError("fit: the `batch_size` argument must not be specified when x is a dataset: its "
                             "batches are sized by the dataset (e.g. HDF5Dataset(..., batch_size=...))")
        if validation_split:
            raise ValueError("fit: Argument `validation_split` is only supported for NumPy arrays; pass "
                             "validation_data=... with a dataset")
        if sample_weight is not None:
            raise ValueError("fit: `sample_weight` argument is not supported when x is a dataset or a generator: "
                             "yield (x, y, sample_weight) batches instead")
        steps = batch_count(x, steps_per_epoch, "fit", "steps_per_epoch")
    else:
        x, y, sample_weight = prepare_arrays(model, x, y, sample_weight, "fit")
        if validation_split and validation_data is None:
            cut = int(len(x) * (1.0 - validation_split))
            if cut == 0 or cut == len(x):
                raise ValueError(f"fit: Training data contains {len(x)} samples, which is not sufficient to split it "
                                 f"into a validation and training set as specified by "
                                 f"`validation_split={validation_split}`. Either provide more data, or a different "
                                 "value for the `validation_split` argument.")
            # Keras' split: the last fraction of the rows (before any shuffling), weights with them.
            validation_data = (x[cut:], y[cut:]) if sample_weight is None else (x[cut:], y[cut:], sample_weight[cut:])
            x, y = x[:cut], y[:cut]
            sample_weight = sample_weight[:cut] if sample_weight is not None else None
        batch_size = batch_size or 32
        steps = (len(x) + batch_size - 1) // batch_size
    if steps_per_epoch is not None:
        steps = min(steps, steps_per_epoch)
    if steps == 0:
        raise ValueError("fit: the training data has no batches")
    if strategy is not None:
        check_global_batch(strategy, x, batch_size, is_ds, "fit")
        if strategy._multi_process and is_ds and hasattr(x, "_set_seed"):
            seed = strategy._broadcast_int(x.seed)  # every rank follows rank 0's shuffle
            if seed != x.seed:
                x._set_seed(seed)
    check_shapes(model, "fit", x, y, "x", "y")
    if validation_data is not None and is_dataset(validation_data) and not isinstance(validation_data, tuple):
        check_shapes(model, "fit", validation_data, None, "validation_data", "")
    elif validation_data is not None and isinstance(validation_data, (tuple, list)) and len(validation_data) >= 2:
        check_shapes(model, "fit", validation_data[0], validation_data[1], "validation_data x", "validation_data y")
    validation_data = check_validation_data(model, validation_data)
    if validation_data is not None and is_generator(validation_data[0]) and validation_steps is None:
        raise ValueError("fit: validation_data is a Python generator, which has no length: pass "
                         "validation_steps=... (or give an hpcnn.utils.PyDataset)")

    history = History()
    cbs: List[Callback] = user_callbacks + [history]
    backups = [cb for cb in user_callbacks if isinstance(cb, BackupAndRestore)]
    if len(backups) > 1:
        raise ValueError(f"fit: at most one BackupAndRestore callback, got {len(backups)}")
    params = {"epochs": epochs, "steps": steps, "verbose": verbose, "batch_size": batch_size}
    for cb in cbs:
        cb.set_model(model)
        cb.set_params(params)
    model.stop_training = False
    if verbose:  # on the CPU, the thread count, and why when it is below the CPUs this process may use
        print(f"Training on {core.device} with {threads.describe()}" if core.device == "cpu"
              else f"Training on {core.device}", flush=True)
    run = _Run(model, cbs, history, backups[0] if backups else None, x, y, is_ds, steps, batch_size, shuffle,
               epochs, initial_epoch, verbose, validation_data, validation_batch_size, validation_freq, comp)
    run.sample_weight, run.validation_steps = sample_weight, validation_steps
    # SIGTERM, SIGUSR1 and SIGINT stop training at the next batch boundary while fit runs
    # (interrupts.py); the previous handlers are back when fit returns.
    with interrupts.StopRequests() as stop, _ClassWeights(core, class_table):
        run.stop = stop
        for cb in cbs:
            cb.on_train_begin({})  # logs passed as Keras does: LambdaCallback functions take them
        try:
            run.train()
        except KeyboardInterrupt:
            # A second Ctrl-C (or a callback raising KeyboardInterrupt): stop now, without a final
            # checkpoint (the last backup stays valid), as Ctrl-C always stopped fit.
            history.interrupted, history.interrupted_by = True, "SIGINT"
            print("\nTraining interrupted (Ctrl-C): the model keeps the weights of the last completed batch; "
                  f"history has {len(history.epoch)} complete epoch(s).", flush=True)
        if not history.interrupted and run.backup is not None:
            run.backup._training_finished()
        for cb in cbs:
            cb.on_train_end({k: v[-1] for k, v in history.history.items()})  # the last epoch's logs, as Keras
    model.history = history
    return history


# A running sum over an epoch's batches: (loss sum, correct count, rows seen, the core metrics' sums).
Sums = Tuple[float, float, int, List[float]]


def core_metric_count(comp: Dict[str, Any]) -> int:
    return sum(1 for src, _ in comp.get("metric_sources", []) if src == "core")


def zero_sums(comp: Dict[str, Any]) -> Sums:
    return (0.0, 0.0, 0, [0.0] * core_metric_count(comp))


def restored_metric_sums(comp: Dict[str, Any], position: Dict[str, Any]) -> List[float]:
    """The core metrics' sums of a backup's partly trained epoch (zeros if it has none for them)."""
    saved = position.get("metric_sums")
    k = core_metric_count(comp)
    if isinstance(saved, list) and len(saved) == k and all(isinstance(v, (int, float)) for v in saved):
        return [float(v) for v in saved]
    return [0.0] * k


def metric_logs(comp: Dict[str, Any], sums: Sums) -> Dict[str, float]:
    """Each compiled metric's mean over the rows seen, under its name (compile's order)."""
    seen = max(sums[2], 1)
    return {name: (sums[1] if src == "correct" else sums[3][i]) / seen
            for name, (src, i) in zip(comp.get("metrics", []), comp.get("metric_sources", []))}


class _ClassWeights:
    """fit's class_weight: a per-class table in the core while fit runs, applied by training steps
    only (never by validation or evaluate, as in Keras); removed when fit returns."""

    def __init__(self, core: Any, table: List[float]) -> None:
        self.core, self.table = core, table

    def __enter__(self) -> "_ClassWeights":
        if self.table:
            self.core.set_class_weights(self.table)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.table:
            self.core.set_class_weights([])


class _StopInValidation(Exception):
    """A stop signal arrived while fit validated: the epoch ends there (its training is done)."""


class _Run:
    """One fit's epochs: the batch loop, validation, callbacks, backups and stop signals. The
    training position is (epoch, batch): the next batch to train; a partly trained epoch also
    carries its running sums (loss, correct, rows seen, seconds), which backups save so that a
    resumed epoch logs what the uninterrupted one would."""

    def __init__(self, model: "Model", cbs: List[Callback], history: History,
                 backup: Optional[BackupAndRestore], x: Any, y: Any, is_ds: bool, steps: int,
                 batch_size: Optional[int], shuffle: bool, epochs: int, initial_epoch: int, verbose: int,
                 validation_data: Any, validation_batch_size: Optional[int], validation_freq: int,
                 comp: Dict[str, Any]) -> None:
        self.model, self.core, self.cbs, self.history, self.backup = model, model._model(), cbs, history, backup
        self.checkpoints = [cb for cb in cbs if isinstance(cb, ModelCheckpoint)]
        self.x, self.y, self.is_ds, self.steps, self.batch_size, self.shuffle = x, y, is_ds, steps, batch_size, shuffle
        self.epochs, self.initial_epoch, self.verbose = epochs, initial_epoch, verbose
        self.validation_data, self.validation_batch_size = validation_data, validation_batch_size
        self.validation_freq, self.comp = validation_freq, comp
        self.sample_weight: Optional[np.ndarray] = None
        self.validation_steps: Optional[int] = None
        strategy = getattr(model, "_strategy", None)
        # A multi-process run: stop signals and stop_training must end every rank at the same batch.
        self.strategy = strategy if strategy is not None and strategy._multi_process else None
        self.stop: interrupts.StopRequests = interrupts.StopRequests()
        self.bar: Any = None
        # What the data looked like: a backup is resumed only by a fit over the same batches.
        self.signature = {"data": type(x).__name__ if is_ds else "arrays", "steps": steps, "batch_size": batch_size,
                          "rows": int(getattr(x, "num_rows", 0)) or None if is_ds else int(len(x)),
                          "shuffle": bool(shuffle),
                          "data_seed": int(x.seed) if is_ds and hasattr(x, "_set_seed") else None}

    # ------------------------------------------------------------------ positions and checkpoints
    def position(self, epoch: int, batch: int, sums: "Sums", seconds: float) -> Dict[str, Any]:
        return {"epoch": epoch, "batch": batch, "loss_sum": float(sums[0]), "correct": float(sums[1]),
                "seen": int(sums[2]), "metric_sums": [float(v) for v in sums[3]], "seconds": float(seconds),
                "stop_training": bool(self.model.stop_training)}

    def write_backup(self, position: Dict[str, Any]) -> None:
        assert self.backup is not None
        self.backup._write(self.cbs, self.signature, position)

    def stopped(self, position: Dict[str, Any], logs: Dict[str, float]) -> None:
        """A stop signal was seen at `position`: final checkpoints, then the History is marked."""
        name = self.stop.requested or "SIGINT"
        notes = []
        with self.stop.writing():
            if self.backup is not None:
                here = (position["epoch"], position["batch"])
                if self.backup._last_position != here:
                    self.write_backup(position)
                notes.append(f"Backup written to '{self.backup.backup_dir}': a fit with the same BackupAndRestore "
                             "continues from there")
            for mc in self.checkpoints:
                notes.append(mc._on_stop(position["epoch"], position["batch"], logs))
        self.history.interrupted, self.history.interrupted_by = True, name
        what = "interrupted (Ctrl-C)" if name == "SIGINT" else f"stopped by {name}"
        where = (f"after batch {position['batch']} of {self.steps} of epoch {position['epoch'] + 1}"
                 if position["batch"] else f"before epoch {position['epoch'] + 1}")
        print(f"\nTraining {what} {where}: the model keeps the weights of the last completed batch; "
              f"history has {len(self.history.epoch)} complete epoch(s)." + "".join(f" {n}." for n in notes),
              flush=True)

    # ------------------------------------------------------------------ the epochs
    def train(self) -> None:
        model, core, cbs = self.model, self.core, self.cbs
        start_epoch, start = self.initial_epoch, None
        if self.backup is not None:
            start = self.backup._restore(cbs, self.signature, self.x if self.is_ds else None)
            if start is not None:
                start_epoch = int(start["epoch"])
                model.stop_training = bool(start.get("stop_training", False))
        resume_lr = None
        if start is not None and start["batch"] > 0 and saving.fixed_rate(model.optimizer):
            resume_lr = (model.optimizer._learning_rate, core.learning_rate)  # what the epoch trained with
        for epoch in range(start_epoch, self.epochs):
            first = int(start["batch"]) if start is not None and epoch == start_epoch else 0
            sums = ((start["loss_sum"], start["correct"], int(start["seen"]), restored_metric_sums(self.comp, start))
                    if first else zero_sums(self.comp))
            seconds_before = float(start["seconds"]) if first else 0.0
            if self.stop.requested:  # arrived between epochs (or while resuming)
                return self.stopped(self.position(epoch, first, sums, seconds_before), {})
            # The bar prints "Epoch e/E" above itself (in Jupyter: inside its one display).
            bar = self.bar = progress.ProgressBar(self.steps, self.verbose, title=f"Epoch {epoch + 1}/{self.epochs}")
            for cb in cbs:
                cb.on_epoch_begin(epoch, {})
            if first and resume_lr is not None:
                # The epoch began before the backup: a rate its on_epoch_begin set (LearningRateScheduler)
                # is in the restored rate, and setting it again here would apply the rule twice.
                model.optimizer.learning_rate = resume_lr[0]
                core.learning_rate = resume_lr[1]
            model._sync_learning_rate()
            t0 = time.perf_counter()
            done, sums, logs, stop_at, diverged = self.train_batches(epoch, first, sums, t0, seconds_before)
            if stop_at is not None:
                return self.stopped(stop_at, logs)
            if done < self.steps and diverged is None and not model.stop_training and is_generator(self.x):
                # As Keras: a generator that ends before steps_per_epoch batches ends training.
                warnings.warn("fit: Your input ran out of data; interrupting training. Make sure that your dataset or "
                              "generator can generate at least `steps_per_epoch * epochs` batches.", UserWarning,
                              stacklevel=4)
                model.stop_training = True
            seconds = seconds_before + time.perf_counter() - t0
            logs = {"loss": sums[0] / max(sums[2], 1) if diverged is None else diverged}
            logs.update(metric_logs(self.comp, sums))
            seen = sums[2]
            if self.validation_data is not None and (epoch + 1 - self.initial_epoch) % self.validation_freq == 0:
                vx, vy, vw = self.validation_data
                try:
                    vres = evaluate_loss_metrics(model, vx, vy, self.validation_batch_size or self.batch_size or 32,
                                                 steps=self.validation_steps,
                                                 should_stop=lambda: self.stop.requested is not None,
                                                 sample_weight=vw)
                except _StopInValidation:
                    return self.stopped(self.position(epoch, done, sums, seconds), logs)
                logs.update({"val_" + k: v for k, v in vres.items()})
            logs["seconds"] = seconds
            logs["images_per_second"] = seen / seconds if seconds > 0 else 0.0
            bar.finish(logs)
            for cb in cbs:
                cb.on_epoch_end(epoch, logs)
            if self.backup is not None and self.backup.save_freq == "epoch":
                with self.stop.writing():
                    self.write_backup(self.position(epoch + 1, 0, zero_sums(self.comp), 0.0))
            if model.stop_training:
                break
        # A stop signal after the last epoch's end changes nothing: training is complete.

    def train_batches(self, epoch: int, first: int, sums: "Sums", t0: float,
                      seconds_before: float) -> Tuple[int, "Sums", Dict[str, float], Any, Optional[float]]:
        """Batches first.. of the epoch, one core call each. Returns (batches done, sums, last
        logs, the position where a stop signal ended it or None, the non-finite loss of a batch a
        callback stopped training at or None)."""
        model, core, cbs, steps = self.model, self.core, self.cbs, self.steps
        loss_sum, correct, seen, msums = sums[0], sums[1], sums[2], list(sums[3])
        batches: Iterator[Batch] = (
            dataset_batches(model, self.x, epoch, self.shuffle, first) if self.is_ds
            else array_batches(model, self.x, self.y, self.batch_size, self.shuffle, epoch, first, self.sample_weight))
        if is_generator(self.x):
            # Take no more than the epoch's batches from it: the next epoch continues where this one ends.
            batches = itertools.islice(batches, max(self.steps - first, 0))
        logs: Dict[str, float] = {}
        diverged: Optional[float] = None  # the non-finite loss of a batch a callback stopped at
        staged = False  # whether the core holds the batch of this step (staged by the last call)
        b = first
        try:
            if model.stop_training:  # resumed from a backup written after a callback stopped training
                return b, (loss_sum, correct, seen, msums), logs, None, None
            # One call per batch: train_step(batch b, batch b+1) trains on b and stages b+1,
            # which on a GPU uploads on the copy stream while b's backward pass still runs; the
            # next call passes None for it. An error of batch b+1 (fetching it, preparing it,
            # or staging it in the core) is raised at that batch's turn, with its number.
            it = iter(batches)
            current = fetch_batch(model, it, self.is_ds)
            while current is not None:
                kind, item = current
                if kind == "next_error":
                    raise item
                if b >= steps:
                    break
                for cb in cbs:
                    cb.on_train_batch_begin(b, {})
                upcoming = fetch_batch(model, it, self.is_ds)
                nxt = (upcoming[1] if STAGE_NEXT and b + 1 < steps and upcoming is not None
                       and upcoming[0] == "ok" else None)
                try:
                    if kind == "prepare_error":
                        raise item
                    ls, c, n = core.train_step(None if staged else item, nxt)
                except _core.NonFiniteLossError as err:
                    # The core did not update the weights. As Keras, the callbacks see the
                    # batch's loss; one that stops training (TerminateOnNaN) ends fit quietly,
                    # else the error stands.
                    staged = False  # the next batch was not staged: the step stopped before
                    if not stop_on_non_finite(model, cbs, b, float(err.loss), logs):
                        raise ValueError(f"epoch {epoch + 1}, batch {b + 1}: {err}") from err
                    diverged = float(err.loss)
                    break
                except ValueError as err:
                    raise ValueError(f"epoch {epoch + 1}, batch {b + 1}: {err}") from err
                staged = nxt is not None
                current = upcoming
                loss_sum += ls
                correct += c
                seen += n
                if msums:
                    msums = [a + v for a, v in zip(msums, core.last_metric_sums)]
                logs = {"loss": loss_sum / seen}
                logs.update(metric_logs(self.comp, (loss_sum, correct, seen, msums)))
                self.bar.update(b + 1, logs)
                for cb in cbs:
                    cb.on_train_batch_end(b, logs)
                b += 1
                # The batch boundary: a backup when one is due, then a stop signal is looked at.
                here = self.position(epoch, b, (loss_sum, correct, seen, msums),
                                     seconds_before + time.perf_counter() - t0)
                if self.backup is not None and self.backup._due_after_batch():
                    with self.stop.writing():
                        self.write_backup(here)
                if self.strategy is not None:
                    signal, stopping = self.strategy._any(self.stop.requested is not None, model.stop_training)
                    if signal:
                        self.stop.note_elsewhere()
                    model.stop_training = stopping
                if self.stop.requested:
                    return b, (loss_sum, correct, seen, msums), logs, here, None
                if model.stop_training:
                    break
        finally:
            if staged:
                core.drop_staged()  # left over when stopping early: release its arrays now
            if hasattr(batches, "close"):
                batches.close()  # stops a dataset's producer when we leave early
        return b, (loss_sum, correct, seen, msums), logs, None, diverged


def stop_on_non_finite(model: "Model", cbs: Sequence[Callback], batch: int, loss: float,
                       logs: Dict[str, float]) -> bool:
    """A batch's loss was NaN or inf (the core kept the weights): its logs, with that loss, go to the
    callbacks' on_train_batch_end as Keras gives them; True when one of them stopped training."""
    batch_logs = dict(logs)
    batch_logs["loss"] = loss
    for cb in cbs:
        cb.on_train_batch_end(batch, batch_logs)
    return bool(model.stop_training)


def check_global_batch(strategy: Any, x: Any, batch_size: Optional[int], is_ds: bool, caller: str) -> None:
    """A global batch must split evenly among the replicas (only the last batch of an epoch may be
    smaller): ValueError before anything trains."""
    size = getattr(x, "batch_size", None) if is_ds else batch_size
    replicas = strategy.num_replicas_in_sync
    if validation.is_integer(size) and int(size) % replicas:
        what = "the dataset's batch_size" if is_ds else "batch_size"
        raise ValueError(f"{caller}: {what} {size} is the global batch and must be divisible by the "
                         f"{replicas} replicas of {type(strategy).__name__} (e.g. {replicas * max(1, int(size) // replicas)})")


def check_validation_data(model: "Model", validation_data: Any) -> Optional[Tuple[Any, Any, Any]]:
    """fit's validation_data as (x, y, sample_weight) ready for evaluate_loss_metrics ((dataset,
    None, None) for a dataset), checked before the first epoch rather than after it."""
    if validation_data is None:
        return None
    if is_dataset(validation_data) and not isinstance(validation_data, tuple):
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


# ---------------------------------------------------------------------- evaluation and prediction
def first_batches(batches: Iterator[Batch], total: int) -> Iterator[Batch]:
    """The first `total` batches; the source (a dataset's producer) is closed when they are taken
    or the loop is left early."""
    try:
        yield from itertools.islice(batches, total)
    finally:
        if hasattr(batches, "close"):
            batches.close()


def run_steps(core: Any, step: Any, batches: Iterator[Batch]) -> Iterator[Any]:
    """step(batch, next) over `batches`, one call per batch: each call also stages the next batch
    (on a GPU its upload overlaps this step), which the following call takes by passing None."""
    it = iter(batches)
    current = next(it, None)
    staged = False
    try:
        while current is not None:
            upcoming = next(it, None)
            nxt = upcoming if STAGE_NEXT else None
            out = step(None if staged else current, nxt)
            staged = nxt is not None
            current = upcoming
            yield out
        staged = False
    finally:
        if staged:
            core.drop_staged()  # the loop was left early


def evaluate_loss_metrics(model: "Model", x: Any, y: Any, batch_size: int,
                          verbose: int = 0, steps: Optional[int] = None,
                          should_stop: Optional[Any] = None, sample_weight: Optional[np.ndarray] = None
                          ) -> Dict[str, float]:
    """{'loss': mean loss, metric name: mean, ...} over arrays or a dataset (its first `steps`
    batches when given): one ``test_step`` call per batch. `should_stop` (fit's validation):
    looked at after each batch; when it returns True the evaluation ends with _StopInValidation."""
    core = model._model()
    comp = model._require_compiled("evaluate")
    sums = zero_sums(comp)
    if is_dataset(x):
        if y is not None:
            raise ValueError("evaluate: y must be None when x is a dataset")
        if sample_weight is not None:
            raise ValueError("evaluate: `sample_weight` argument is not supported when x is a dataset or a "
                             "generator: yield (x, y, sample_weight) batches instead")
        total = batch_count(x, steps, "evaluate", "steps")
        batches: Iterator[Batch] = (prepare_dataset_batch(model, b) for b in dataset_batches(model, x, 0, False))
    else:
        x, y, sample_weight = prepare_arrays(model, x, y, sample_weight, "evaluate")
        batches = array_batches(model, x, y, batch_size, False, 0, w=sample_weight)
        total = (len(x) + batch_size - 1) // batch_size
    if steps is not None:
        total = min(total, steps)
    bar = progress.ProgressBar(total, verbose)
    loss_sum, correct, seen, msums = sums
    for b, (ls, c, n) in enumerate(run_steps(core, core.test_step, first_batches(batches, total))):
        loss_sum, correct, seen = loss_sum + ls, correct + c, seen + n
        if msums:
            msums = [a + v for a, v in zip(msums, core.last_metric_sums)]
        bar.update(b + 1, {"loss": loss_sum / seen})
        if should_stop is not None and should_stop():
            raise _StopInValidation()
    if seen == 0:
        raise ValueError("evaluate: no data")
    result = {"loss": loss_sum / seen, **metric_logs(comp, (loss_sum, correct, seen, msums))}
    bar.finish(result)
    return result


def prepare_dataset_batch(model: "Model", batch: Batch) -> Batch:
    """A dataset's batch prepared for the core (its (x, y, sample_weight) item's weights too)."""
    xb, yb, rows, decode, wb = batch[:5]
    if isinstance(yb, _WithWeights):
        yb, wb = yb.y, yb.w
    xb = prepare_inputs(xb)
    wb = prepare_sample_weight(wb, len(xb), "evaluate", "the batch's sample weights")
    return (xb, prepare_targets(model, yb), rows, decode, wb) + tuple(batch[5:])  # + (first_row, global_rows)


def evaluate(model: "Model", x: Any, y: Any, batch_size: Optional[int], verbose: Any, return_dict: bool,
             kwargs: Dict[str, Any]):
    """``Model.evaluate``: [loss, metrics...], loss alone, or a dict."""
    steps = validation.integer(kwargs.pop("steps", None), "steps", "evaluate", maximum=None, allow_none=True)
    if check_callbacks(kwargs.pop("callbacks", None), "evaluate"):
        raise ValueError("evaluate: callbacks are not supported (fit's callbacks are)")
    sample_weight = kwargs.pop("sample_weight", None)
    check_unsupported(kwargs, "evaluate", ())
    batch_size = validation.integer(batch_size, "batch_size", "evaluate", allow_none=True)
    verbose = check_verbose(verbose, "evaluate")
    return_dict = validation.boolean(return_dict, "return_dict", "evaluate")
    if batch_size is not None and is_dataset(x):
        raise ValueError("evaluate: the `batch_size` argument must not be specified when x is a dataset")
    model._follow_device_scope()
    comp = model._require_compiled("evaluate")
    verbose = progress.resolve_verbose(verbose)
    strategy = getattr(model, "_strategy", None)
    if strategy is not None and strategy._multi_process and not strategy.is_chief:
        verbose = 0  # every rank gets the same numbers; only the chief prints them
    try:
        res = evaluate_loss_metrics(model, x, y, batch_size or 32, verbose, steps, sample_weight=sample_weight)
    except BaseException as err:
        if strategy is not None:
            strategy._abort(f"{type(err).__name__}: {err}")
        raise
    return result(res, return_dict)


def predict(model: "Model", x: Any, batch_size: Optional[int], verbose: Any,
            kwargs: Dict[str, Any]) -> np.ndarray:
    """``Model.predict``: one ``predict_step`` call per batch (the first `steps` batches when
    given), outputs concatenated; ``verbose=1``/``2`` shows progress."""
    steps = validation.integer(kwargs.pop("steps", None), "steps", "predict", maximum=None, allow_none=True)
    if check_callbacks(kwargs.pop("callbacks", None), "predict"):
        raise ValueError("predict: callbacks are not supported (fit's callbacks are)")
    check_unsupported(kwargs, "predict", ())
    batch_size = validation.integer(batch_size, "batch_size", "predict", allow_none=True)
    verbose = progress.resolve_verbose(check_verbose(verbose, "predict"))
    if batch_size is not None and is_dataset(x):
        raise ValueError("predict: the `batch_size` argument must not be specified when x is a dataset")
    model._follow_device_scope()
    core = model._model()
    bs = batch_size or 32
    if is_dataset(x):
        if hasattr(x, "epoch_batches") and getattr(x, "shuffle", False):
            # Its batches come in a shuffled order: predictions would not line up with the rows.
            raise ValueError("predict: this dataset shuffles its rows, so the predictions would come back in a "
                             "shuffled order; create it with shuffle=False for prediction")
        total = batch_count(x, steps, "predict", "steps")
        total = total if steps is None else min(total, steps)
        batches: Iterator[Batch] = ((prepare_inputs(b[0]), None, None, b[3], None)
                                    for b in dataset_batches(model, x, 0, False, x_only=True, shard=False))
    else:
        x = prepare_inputs(x)
        if len(x) == 0:
            raise ValueError("predict: x is empty")
        total = (len(x) + bs - 1) // bs if steps is None else min((len(x) + bs - 1) // bs, steps)
        batches = ((x[b * bs:(b + 1) * bs], None, None, None, None) for b in range(total))
    bar = progress.ProgressBar(total, verbose)
    outs: List[np.ndarray] = []
    for b, out in enumerate(run_steps(core, core.predict_step, first_batches(batches, total))):
        outs.append(out)
        bar.update(b + 1, {})
    if not outs:
        raise ValueError("predict: no data")
    bar.finish({})
    return np.concatenate(outs, axis=0)


def train_on_batch(model: "Model", x: ArrayLike, y: ArrayLike, sample_weight: Any, class_weight: Any,
                   return_dict: bool):
    return_dict = validation.boolean(return_dict, "return_dict", "train_on_batch")
    model._require_compiled("train_on_batch")
    if sample_weight is not None and class_weight is not None:
        raise ValueError("train_on_batch: You cannot use `class_weight` and `sample_weight` at the same time.")
    table = class_weight_table(model, class_weight, "train_on_batch")
    model._follow_device_scope()
    model._sync_learning_rate()
    x, y = prepare_inputs(x), prepare_targets(model, y)
    w = prepare_sample_weight(sample_weight, len(x), "train_on_batch")
    core = model._model()
    with _ClassWeights(core, table):
        ls, c, n = core.train_step((x, y, None, None, w))
    return batch_result(model, ls, c, n, return_dict)


def test_on_batch(model: "Model", x: ArrayLike, y: ArrayLike, sample_weight: Any, return_dict: bool):
    return_dict = validation.boolean(return_dict, "return_dict", "test_on_batch")
    model._require_compiled("test_on_batch")
    model._follow_device_scope()
    x, y = prepare_inputs(x), prepare_targets(model, y)
    w = prepare_sample_weight(sample_weight, len(x), "test_on_batch")
    ls, c, n = model._model().test_step((x, y, None, None, w))
    return batch_result(model, ls, c, n, return_dict)


def predict_on_batch(model: "Model", x: ArrayLike) -> np.ndarray:
    model._follow_device_scope()
    return model._model().predict_step((prepare_inputs(x),))


def batch_result(model: "Model", ls: float, c: float, n: int, return_dict: bool):
    comp = model._compiled
    sums = (ls, c, n, list(model._model().last_metric_sums))
    return result({"loss": ls / n, **metric_logs(comp, sums)}, return_dict)


def result(res: Dict[str, float], return_dict: bool):
    """What evaluate and *_on_batch return, as Keras does: [loss, metrics...], the loss alone
    without metrics, or a dict."""
    if return_dict:
        return dict(res)
    values = list(res.values())
    return values if len(values) > 1 else values[0]
