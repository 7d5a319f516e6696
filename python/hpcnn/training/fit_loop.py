"""``Model.fit``: the epochs, the batch loop over the EpochIterator's steps (one ``train_step``
core call per batch, which also stages the next batch), the callbacks through one CallbackList
(one call per hook), the progress bar, validation, stop signals and the training position that
checkpoint callbacks save and restore."""
from __future__ import annotations

import contextlib
import sys
import time
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from .. import _core, distribute, interrupts, progress, threads, validation
from ..callbacks import Callback, CallbackList, FitRun, History
from .checks import check_callbacks, check_global_batch, check_unsupported, check_verbose
from .class_weights import ClassWeights, class_weight_table
from .compile import follow_device_scope, sync_learning_rate
from .data_adapters import batch_count, check_shapes, check_validation_data, prepare_arrays
from . import evaluation
from .epoch_iterator import ARRAYS, FIT, GENERATOR, EpochIterator, data_kind
from .evaluation import StopInValidation
from .input_scaling import warn_double_scaling
from .metric_sums import Sums, add_step, metric_logs, restored_metric_sums, zero_sums


# ---------------------------------------------------------------------- training
def fit(model: Any, **arguments: Any) -> History:
    """``Model.fit`` (arguments as ``_fit``). With a multi-process strategy, an error on this
    rank (a bad batch, a callback that raises, Ctrl-C) stops the other ranks at once, with an error
    naming this one, instead of leaving them waiting in their next collective."""
    strategy = model.distribute_strategy
    try:
        return _fit(model, **arguments)
    except BaseException as err:
        if strategy is not None and not isinstance(err, distribute.RanksDisagree):  # that one is every rank's
            strategy.abort(f"{type(err).__name__}: {err}")
        raise


def _windows(x: Any) -> Optional[list]:
    """[lanes, window blocks, block rows] of an HDF5Dataset's order; None for other data."""
    stats = getattr(x, "stats", None) if hasattr(x, "shuffle_mode") else None
    return [int(stats["lanes"]), int(stats["window_blocks"]), int(stats["block_rows"])] if stats else None


def training_description(x: Any, y: Any, batch_size: Optional[int], is_ds: bool, steps: int, epochs: int,
                         initial_epoch: int) -> Dict[str, Any]:
    """What of fit's data and loop every rank must share (each passes the whole data; a dataset
    reads its rank's share itself): the rows, the global batch, one row's shapes, a dataset's
    shuffle mode (its order: the global batches), the steps and epochs. Rows unknown to a dataset (a Sequence, a generator) are None: its steps are compared."""
    if is_ds:
        rows = getattr(x, "num_rows", None)  # a Sequence's length is its batches: compared as the steps
        shape = getattr(x, "x_shape", None)
        return {"training rows": rows, "batch size": getattr(x, "batch_size", None),
                "dataset shuffle": getattr(x, "shuffle_mode", None),
                # The order's shape (memory_budget and the memory cache decide it): another one
                # makes other batches.
                "dataset windows": _windows(x),
                "x row shape": list(shape) if shape is not None else None, "steps per epoch": steps,
                "epochs": epochs, "initial epoch": initial_epoch}
    return {"training rows": len(x), "batch size": batch_size, "x row shape": list(np.shape(x)[1:]),
            "y row shape": list(np.shape(y)[1:]) if y is not None else None, "steps per epoch": steps,
            "epochs": epochs, "initial epoch": initial_epoch}


def _fit(model: Any, *, x: Any, y: Any, batch_size: Optional[int], epochs: int, verbose: Any,
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
    comp = model.require_compiled("fit")
    if epochs < initial_epoch:
        raise ValueError(f"fit: epochs ({epochs}) must be >= initial_epoch ({initial_epoch})")
    if sample_weight is not None and class_weight is not None:
        raise ValueError("fit: You cannot use `class_weight` and `sample_weight` at the same time.")
    class_table = class_weight_table(model, class_weight)
    if model.trainable_changed_since_compile():
        warnings.warn("fit: a layer's `trainable` was changed after compile(); as in Keras, fit trains with the "
                      "setting of the last compile(): call compile() again to apply it", UserWarning, stacklevel=3)
    follow_device_scope(model)
    core = model.core
    verbose = progress.resolve_verbose(verbose)
    strategy = model.distribute_strategy if core.distributed else None
    if strategy is not None and strategy.multi_process and not strategy.is_chief:
        verbose = 0  # only the chief prints progress

    if x is None:
        raise ValueError("fit: no training data (x)")
    kind = data_kind(x)  # asked once: the EpochIterator carries it from here
    is_ds = kind != ARRAYS
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
        steps = batch_count(x, steps_per_epoch, "fit", "steps_per_epoch", kind == GENERATOR)
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
    history = History()
    cbs = CallbackList(user_callbacks + [history])
    restorers = cbs.restorers()
    if strategy is not None:
        check_global_batch(strategy, x, batch_size, is_ds, "fit", restorers[0] if restorers else None)
        if strategy.multi_process:  # ranks given other data or lengths would part ways in some later step
            strategy.agree(training_description(x, y, batch_size, is_ds, steps, epochs, initial_epoch))
        if strategy.multi_process and is_ds and hasattr(x, "set_seed"):
            seed = strategy.broadcast_int(x.seed)  # every rank follows rank 0's shuffle
            if seed != x.seed:
                x.set_seed(seed)
    check_shapes(model, "fit", x, y, "x", "y", is_ds)
    if kind != GENERATOR:  # a generator is not peeked at: its first batch belongs to the first step
        warn_double_scaling(model, x, is_ds, batch_size)
    # The validation data's kind, asked once: a dataset, or a tuple of arrays.
    validation_kind = None if validation_data is None else (
        ARRAYS if isinstance(validation_data, tuple) else data_kind(validation_data))
    if validation_kind not in (None, ARRAYS):
        check_shapes(model, "fit", validation_data, None, "validation_data", "", True)
    elif validation_data is not None and isinstance(validation_data, (tuple, list)) and len(validation_data) >= 2:
        check_shapes(model, "fit", validation_data[0], validation_data[1], "validation_data x", "validation_data y",
                     data_kind(validation_data[0]) != ARRAYS)
    validation_data = check_validation_data(model, validation_data, validation_kind not in (None, ARRAYS))
    if validation_kind == GENERATOR and validation_steps is None:
        raise ValueError("fit: validation_data is a Python generator, which has no length: pass "
                         "validation_steps=... (or give an hpcnn.utils.PyDataset)")

    if len(restorers) > 1:
        raise ValueError(f"fit: at most one {type(restorers[0]).__name__} callback, got {len(restorers)}")
    cbs.set_model(model)
    cbs.set_params({"epochs": epochs, "steps": steps, "verbose": verbose, "batch_size": batch_size})
    model.stop_training = False
    batches = EpochIterator(model, x, y, sample_weight, mode=FIT, steps=steps, batch_size=batch_size,
                            shuffle=shuffle, kind=kind)
    run = _Run(model, cbs, history, batches, epochs, initial_epoch, verbose, validation_data,
               validation_batch_size, validation_freq, comp)
    run.validation_steps, run.validation_kind = validation_steps, validation_kind
    # SIGTERM, SIGUSR1 and SIGINT stop training at the next batch boundary while fit runs
    # (interrupts.py); the previous handlers are back when fit returns.
    with interrupts.StopRequests() as stop, ClassWeights(core, class_table):
        run.stop = stop
        # Printed once the handlers are in place: a job script (and its test) may signal from here.
        if verbose:  # on the CPU, the thread count, and why when it is below the CPUs this process may use
            print(f"Training on {core.device} with {threads.describe()}" if core.device == "cpu"
                  else f"Training on {core.device}", flush=True)
        try:
            cbs.on_train_begin({})  # logs passed as Keras does: LambdaCallback functions take them
            try:
                run.train()
            except KeyboardInterrupt:
                # A second Ctrl-C (or a callback raising KeyboardInterrupt): stop now, without a final
                # checkpoint (the last backup stays valid), as Ctrl-C always stopped fit.
                history.interrupted, history.interrupted_by = True, "SIGINT"
                print("\nTraining interrupted (Ctrl-C): the model keeps the weights of the last completed batch; "
                      f"history has {len(history.epoch)} complete epoch(s).", flush=True)
            if not history.interrupted:
                cbs.on_training_complete()
            cbs.on_train_end({k: v[-1] for k, v in history.history.items()})  # the last epoch's logs, as Keras
        finally:  # returned or raised: what restore_training took (a lock) is released
            cbs.end_training()
    model.history = history
    return history


class _Run:
    """One fit's epochs: the batch loop, validation, callbacks, backups and stop signals. The
    training position is (epoch, batch): the next batch to train; a partly trained epoch also
    carries its running sums (loss, correct, rows seen, seconds), which backups save so that a
    resumed epoch logs what the uninterrupted one would."""

    def __init__(self, model: Any, cbs: CallbackList, history: History, batches: EpochIterator, epochs: int,
                 initial_epoch: int, verbose: int, validation_data: Any, validation_batch_size: Optional[int],
                 validation_freq: int, comp: Dict[str, Any]) -> None:
        self.model, self.core, self.cbs, self.history = model, model.core, cbs, history
        self.batches, self.x, self.steps, self.batch_size = batches, batches.x, batches.steps, batches.batch_size
        is_ds, x, shuffle, steps, batch_size = batches.is_dataset, batches.x, batches.shuffle, self.steps, self.batch_size
        self.epochs, self.initial_epoch, self.verbose = epochs, initial_epoch, verbose
        self.validation_data, self.validation_batch_size = validation_data, validation_batch_size
        self.validation_freq, self.comp = validation_freq, comp
        self.validation_steps: Optional[int] = None
        self.validation_kind: Optional[str] = None
        strategy = model.distribute_strategy
        # A multi-process run: stop signals and stop_training must end every rank at the same batch.
        self.strategy = strategy if strategy is not None and strategy.multi_process else None
        self.stop: interrupts.StopRequests = interrupts.StopRequests()
        self.bar: Any = None
        # What the data looked like: a backup is resumed only by a fit over the same batches.
        self.signature = {"data": type(x).__name__ if is_ds else "arrays", "steps": steps, "batch_size": batch_size,
                          "rows": int(getattr(x, "num_rows", 0)) or None if is_ds else int(len(x)),
                          "shuffle": bool(shuffle),
                          "data_seed": int(x.seed) if is_ds and hasattr(x, "set_seed") else None,
                          # The dataset's order ('rows', 'chunk_groups'): another one makes other batches.
                          "data_shuffle": str(x.shuffle_mode) if is_ds and hasattr(x, "shuffle_mode") else None,
                          # Recorded, not compared: a backup resumes on another replica count
                          # (docs/distributed.md); the number names the old count in messages.
                          "replicas": int(strategy.num_replicas_in_sync) if strategy is not None else 1}

    # ------------------------------------------------------------------ positions and checkpoints
    def position(self, epoch: int, batch: int, sums: Sums, seconds: float) -> Dict[str, Any]:
        return {"epoch": epoch, "batch": batch, "loss_sum": float(sums[0]), "correct": float(sums[1]),
                "seen": int(sums[2]), "metric_sums": [float(v) for v in sums[3]], "seconds": float(seconds),
                "stop_training": bool(self.model.stop_training)}

    def reached(self, position: Dict[str, Any], epoch_end: bool) -> None:
        """A batch boundary (or an epoch's end): the callbacks that checkpoint the training see the
        position to continue from (a stop signal meanwhile is only recorded)."""
        with self.stop.writing():
            self.cbs.on_train_position(position, epoch_end)

    def stopped(self, position: Dict[str, Any], logs: Dict[str, float]) -> None:
        """A stop signal was seen at `position`: final checkpoints, then the History is marked."""
        name = self.stop.requested or "SIGINT"
        with self.stop.writing():
            note = self.cbs.on_stop_signal(position, logs)
        self.history.interrupted, self.history.interrupted_by = True, name
        what = "interrupted (Ctrl-C)" if name == "SIGINT" else f"stopped by {name}"
        where = (f"after batch {position['batch']} of {self.steps} of epoch {position['epoch'] + 1}"
                 if position["batch"] else f"before epoch {position['epoch'] + 1}")
        print(f"\nTraining {what} {where}: the model keeps the weights of the last completed batch; "
              f"history has {len(self.history.epoch)} complete epoch(s)." + (f" {note}." if note else ""),
              flush=True)

    # ------------------------------------------------------------------ the epochs
    def train(self) -> None:
        model, core, cbs = self.model, self.core, self.cbs
        start_epoch, start = self.initial_epoch, None
        start = cbs.restore_training(FitRun(cbs.callbacks, self.signature,
                                            self.x if self.batches.is_dataset else None))
        if start is not None:
            start_epoch = int(start["epoch"])
            model.stop_training = bool(start.get("stop_training", False))
        resume_lr = None
        if start is not None and start["batch"] > 0 and model.optimizer.fixed_learning_rate is not None:
            resume_lr = (model.optimizer.fixed_learning_rate, core.learning_rate)  # what the epoch trained with
        for epoch in range(start_epoch, self.epochs):
            first = int(start["batch"]) if start is not None and epoch == start_epoch else 0
            sums = ((start["loss_sum"], start["correct"], int(start["seen"]), restored_metric_sums(self.comp, start))
                    if first else zero_sums(self.comp))
            seconds_before = float(start["seconds"]) if first else 0.0
            if self.stop.requested:  # arrived between epochs (or while resuming)
                return self.stopped(self.position(epoch, first, sums, seconds_before), {})
            # The bar prints "Epoch e/E" above itself (in Jupyter: inside its one display).
            bar = self.bar = progress.ProgressBar(self.steps, self.verbose, title=f"Epoch {epoch + 1}/{self.epochs}")
            cbs.on_epoch_begin(epoch, {})
            if first and resume_lr is not None:
                # The epoch began before the backup: a rate its on_epoch_begin set (LearningRateScheduler)
                # is in the restored rate, and setting it again here would apply the rule twice.
                model.optimizer.learning_rate = resume_lr[0]
                core.learning_rate = resume_lr[1]
            sync_learning_rate(model)
            t0 = time.perf_counter()
            done, sums, logs, stop_at, diverged = self.train_batches(epoch, first, sums, t0, seconds_before)
            if stop_at is not None:
                return self.stopped(stop_at, logs)
            if done < self.steps and diverged is None and not model.stop_training and self.batches.is_generator:
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
                    vres = evaluation.evaluate_loss_metrics(model, vx, vy, self.validation_batch_size or self.batch_size or 32,
                                                 steps=self.validation_steps,
                                                 should_stop=lambda: self.stop.requested is not None,
                                                 sample_weight=vw, kind=self.validation_kind)
                except StopInValidation:
                    return self.stopped(self.position(epoch, done, sums, seconds), logs)
                logs.update({"val_" + k: v for k, v in vres.items()})
            # The timings go to the History (and the bar), not into the logs: callbacks and
            # history.history see Keras' keys only.
            rate = seen / seconds if seconds > 0 else 0.0
            self.history.record_timing(seconds, rate)
            bar.finish(logs, images_per_second=rate)
            cbs.on_epoch_end(epoch, logs)
            self.reached(self.position(epoch + 1, 0, zero_sums(self.comp), 0.0), epoch_end=True)
            if model.stop_training:
                break
        # A stop signal after the last epoch's end changes nothing: training is complete.

    def peer_failure(self, epoch: int, batch: int, err: BaseException) -> RuntimeError:
        """The group stopped while this rank was at `batch` (0-based) of `epoch`: another rank failed or
        was lost (the transport's error names it). Said on stderr at once, as one line (a job log
        then shows every rank's), and returned with the step for the exception."""
        try:
            step = f" (training step {int(self.model.optimizer.iterations) + 1})"
        except Exception:  # noqa: BLE001 - the position without the count is still the message
            step = ""
        message = f"epoch {epoch + 1}, batch {batch + 1} of {self.steps}{step}: {err}"
        print(f"hpcnn: rank {self.strategy.worker_index} stopped at {message}", file=sys.stderr, flush=True)
        return RuntimeError(message)

    def train_batches(self, epoch: int, first: int, sums: Sums, t0: float,
                      seconds_before: float) -> Tuple[int, Sums, Dict[str, float], Any, Optional[float]]:
        """Batches first.. of the epoch, one core call each. Returns (batches done, sums, last
        logs, the position where a stop signal ended it or None, the non-finite loss of a batch a
        callback stopped training at or None)."""
        model, core, cbs = self.model, self.core, self.cbs
        logs: Dict[str, float] = {}
        b = first
        if model.stop_training:  # resumed from a backup written after a callback stopped training
            return b, sums, logs, None, None
        # One call per batch: train_step(batch b, batch b+1) trains on b and stages b+1, which on a
        # GPU uploads on the copy stream while b's backward pass still runs. An error of batch b+1
        # (fetching it, preparing it, or staging it in the core) is raised at that batch's turn,
        # with its number.
        try:
            # Each batch's on_train_batch_begin comes before the next batch is fetched (the loop's `before`).
            begin = lambda batch: cbs.on_train_batch_begin(batch, {})  # noqa: E731 - logs as Keras passes them
            with contextlib.closing(self.batches.steps_of(epoch, first, before=begin)) as steps:
                for step in steps:
                    b = step.batch
                    try:
                        out = step.run(core.train_step)
                    except _core.NonFiniteLossError as err:
                        # The core did not update the weights. As Keras, the callbacks see the
                        # batch's loss; one that stops training (TerminateOnNaN) ends fit quietly,
                        # else the error stands.
                        if not stop_on_non_finite(model, cbs, b, float(err.loss), logs):
                            raise ValueError(f"epoch {epoch + 1}, batch {b + 1}: {err}") from err
                        return b, sums, logs, None, float(err.loss)
                    except ValueError as err:
                        raise ValueError(f"epoch {epoch + 1}, batch {b + 1}: {err}") from err
                    sums = add_step(sums, out)
                    logs = {"loss": sums[0] / sums[2]}
                    logs.update(metric_logs(self.comp, sums))
                    self.bar.update(b + 1, logs)
                    cbs.on_train_batch_end(b, logs)
                    b += 1
                    # The batch boundary: a checkpoint when one is due, then a stop signal is looked at.
                    here = self.position(epoch, b, sums, seconds_before + time.perf_counter() - t0)
                    self.reached(here, epoch_end=False)
                    if self.strategy is not None:
                        signal, stopping = self.strategy.any_rank(self.stop.requested is not None,
                                                                  model.stop_training)
                        if signal:
                            self.stop.note_elsewhere()
                        model.stop_training = stopping
                    if self.stop.requested:
                        return b, sums, logs, here, None
                    if model.stop_training:
                        break
        except RuntimeError as err:
            if self.strategy is None or not self.strategy.group.failed:
                raise
            raise self.peer_failure(epoch, b, err) from err
        return b, sums, logs, None, None


def stop_on_non_finite(model: Any, cbs: CallbackList, batch: int, loss: float,
                       logs: Dict[str, float]) -> bool:
    """A batch's loss was NaN or inf (the core kept the weights): its logs, with that loss, go to the
    callbacks' on_train_batch_end as Keras gives them; True when one of them stopped training."""
    batch_logs = dict(logs)
    batch_logs["loss"] = loss
    cbs.on_train_batch_end(batch, batch_logs)
    return bool(model.stop_training)
