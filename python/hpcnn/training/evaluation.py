"""``Model.evaluate`` / ``predict`` / ``train_on_batch`` / ``test_on_batch`` / ``predict_on_batch``,
and the evaluation loop fit's validation runs."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, List, Optional

import numpy as np

from .. import metrics, progress, validation
from .data_adapters import ArrayLike
from .checks import check_callbacks, check_unsupported, check_verbose
from .class_weights import ClassWeights, class_weight_table
from .compile import follow_device_scope, sync_learning_rate
from .data_adapters import batch_count, prepare_arrays, prepare_inputs, prepare_sample_weight, prepare_targets
from .epoch_iterator import ARRAYS, EVALUATE, GENERATOR, PREDICT, EpochIterator, data_kind
from .metric_sums import add_step, batch_result, metric_logs, result, zero_sums


class StopInValidation(Exception):
    """A stop signal arrived while fit validated: the epoch ends there (its training is done)."""


#: The accuracy logs whose value can be compared with chance (one class per sample).
ACCURACY_NAMES = ("accuracy", "acc", "categorical_accuracy", "sparse_categorical_accuracy", "binary_accuracy")


def chance_summary(model: Any, logs: Dict[str, float], samples: int) -> str:
    """evaluate's words when its accuracy is no better than guessing (metrics.chance_note), for a
    model with one class per sample ((batch, classes) outputs); '' otherwise."""
    shape = getattr(model, "output_shape", None)
    if not isinstance(shape, tuple) or len(shape) != 2 or not shape[1]:
        return ""
    for name in ACCURACY_NAMES:
        if name in logs:
            return metrics.chance_note(logs[name], shape[1], samples)
    return ""

def evaluate_loss_metrics(model: Any, x: Any, y: Any, batch_size: int,
                          verbose: int = 0, steps: Optional[int] = None,
                          should_stop: Optional[Any] = None, sample_weight: Optional[np.ndarray] = None,
                          kind: Optional[str] = None, note_chance: bool = False) -> Dict[str, float]:
    """{'loss': mean loss, metric name: mean, ...} over arrays or a dataset (its first `steps`
    batches when given): one ``test_step`` call per batch. `should_stop` (fit's validation):
    looked at after each batch; when it returns True the evaluation ends with StopInValidation.
    `kind`: the data's kind when the caller has asked it (epoch_iterator.data_kind).
    `note_chance` (evaluate): the summary line says so when the accuracy is chance level."""
    core = model.core
    comp = model.require_compiled("evaluate")
    kind = kind if kind is not None else data_kind(x)
    if kind != ARRAYS:
        if y is not None:
            raise ValueError("evaluate: y must be None when x is a dataset")
        if sample_weight is not None:
            raise ValueError("evaluate: `sample_weight` argument is not supported when x is a dataset or a "
                             "generator: yield (x, y, sample_weight) batches instead")
        total = batch_count(x, steps, "evaluate", "steps", kind == GENERATOR)
    else:
        x, y, sample_weight = prepare_arrays(model, x, y, sample_weight, "evaluate")
        total = (len(x) + batch_size - 1) // batch_size
    if steps is not None:
        total = min(total, steps)
    batches = EpochIterator(model, x, y, sample_weight, mode=EVALUATE, steps=total, batch_size=batch_size, kind=kind)
    bar = progress.ProgressBar(total, verbose)
    sums = zero_sums(comp)
    with contextlib.closing(batches.steps_of()) as each:
        for step in each:
            sums = add_step(sums, step.run(core.test_step))
            bar.update(step.batch + 1, {"loss": sums[0] / sums[2]})
            if should_stop is not None and should_stop():
                raise StopInValidation()
    if sums[2] == 0:
        raise ValueError("evaluate: no data")
    result = {"loss": sums[0] / sums[2], **metric_logs(comp, sums)}
    bar.finish(result, note=chance_summary(model, result, int(sums[2])) if note_chance and verbose else "")
    return result


def evaluate(model: Any, x: Any, y: Any, batch_size: Optional[int], verbose: Any, return_dict: bool,
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
    kind = data_kind(x)
    if batch_size is not None and kind != ARRAYS:
        raise ValueError("evaluate: the `batch_size` argument must not be specified when x is a dataset")
    follow_device_scope(model)
    model.require_compiled("evaluate")
    verbose = progress.resolve_verbose(verbose)
    strategy = model.distribute_strategy
    if strategy is not None and strategy.multi_process and not strategy.is_chief:
        verbose = 0  # every rank gets the same numbers; only the chief prints them
    try:
        res = evaluate_loss_metrics(model, x, y, batch_size or 32, verbose, steps, sample_weight=sample_weight,
                                    kind=kind, note_chance=True)
    except BaseException as err:
        if strategy is not None:
            strategy.abort(f"{type(err).__name__}: {err}")
        raise
    return result(res, return_dict)


def predict(model: Any, x: Any, batch_size: Optional[int], verbose: Any,
            kwargs: Dict[str, Any]) -> np.ndarray:
    """``Model.predict``: one ``predict_step`` call per batch (the first `steps` batches when
    given), outputs concatenated; ``verbose=1``/``2`` shows progress."""
    steps = validation.integer(kwargs.pop("steps", None), "steps", "predict", maximum=None, allow_none=True)
    if check_callbacks(kwargs.pop("callbacks", None), "predict"):
        raise ValueError("predict: callbacks are not supported (fit's callbacks are)")
    check_unsupported(kwargs, "predict", ())
    batch_size = validation.integer(batch_size, "batch_size", "predict", allow_none=True)
    verbose = progress.resolve_verbose(check_verbose(verbose, "predict"))
    kind = data_kind(x)
    if batch_size is not None and kind != ARRAYS:
        raise ValueError("predict: the `batch_size` argument must not be specified when x is a dataset")
    follow_device_scope(model)
    core = model.core
    bs = batch_size or 32
    if kind != ARRAYS:
        if hasattr(x, "epoch_batches") and getattr(x, "shuffle", False):
            # Its batches come in a shuffled order: predictions would not line up with the rows.
            raise ValueError("predict: this dataset shuffles its rows, so the predictions would come back in a "
                             "shuffled order; create it with shuffle=False for prediction")
        total = batch_count(x, steps, "predict", "steps", kind == GENERATOR)
    else:
        x = prepare_inputs(x)
        if len(x) == 0:
            raise ValueError("predict: x is empty")
        total = (len(x) + bs - 1) // bs
    total = total if steps is None else min(total, steps)
    batches = EpochIterator(model, x, mode=PREDICT, steps=total, batch_size=bs, kind=kind)
    bar = progress.ProgressBar(total, verbose)
    outs: List[np.ndarray] = []
    with contextlib.closing(batches.steps_of()) as each:
        for step in each:
            outs.append(step.run(core.predict_step))
            bar.update(step.batch + 1, {})
    if not outs:
        raise ValueError("predict: no data")
    bar.finish({})
    return np.concatenate(outs, axis=0)


def train_on_batch(model: Any, x: ArrayLike, y: ArrayLike, sample_weight: Any, class_weight: Any,
                   return_dict: bool):
    return_dict = validation.boolean(return_dict, "return_dict", "train_on_batch")
    model.require_compiled("train_on_batch")
    if sample_weight is not None and class_weight is not None:
        raise ValueError("train_on_batch: You cannot use `class_weight` and `sample_weight` at the same time.")
    table = class_weight_table(model, class_weight, "train_on_batch")
    follow_device_scope(model)
    sync_learning_rate(model)
    x, y = prepare_inputs(x), prepare_targets(model, y)
    w = prepare_sample_weight(sample_weight, len(x), "train_on_batch")
    core = model.core
    with ClassWeights(core, table):
        step = core.train_step((x, y, None, None, w))
    return batch_result(model, step, return_dict)


def test_on_batch(model: Any, x: ArrayLike, y: ArrayLike, sample_weight: Any, return_dict: bool):
    return_dict = validation.boolean(return_dict, "return_dict", "test_on_batch")
    model.require_compiled("test_on_batch")
    follow_device_scope(model)
    x, y = prepare_inputs(x), prepare_targets(model, y)
    w = prepare_sample_weight(sample_weight, len(x), "test_on_batch")
    return batch_result(model, model.core.test_step((x, y, None, None, w)), return_dict)


def predict_on_batch(model: Any, x: ArrayLike) -> np.ndarray:
    follow_device_scope(model)
    return model.core.predict_step((prepare_inputs(x),))
