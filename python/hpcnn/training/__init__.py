"""Compile, fit, evaluate and predict for ``Model`` (``Sequential`` too): the loops of one C++ call
per batch and the data plumbing around them. ``Model``'s methods own the public signatures and
defaults and call these functions with the model as the first argument.

Each batch is one C++ call (``train_step``, ``test_step`` or ``predict_step``, GIL released) that
runs the step on its batch and stages the next one (staging.py). One EpochIterator
(epoch_iterator.py) holds the data's kind, asked once, and the stepping loop that fit, evaluate
and predict share; Python only slices or fetches batches, prepares them for the core
(data_adapters.py), and calls its CallbackList (one call per hook) and the progress bar. The loss,
its weights and the metrics are computed in the core; Python adds up the per-batch sums each step
returns with its loss (metric_sums.py).
"""
from .compile import compile_model, follow_device_scope, sync_learning_rate
from .data_adapters import prepare_inputs, prepare_targets
from .evaluation import evaluate, evaluate_loss_metrics, predict, predict_on_batch, test_on_batch, train_on_batch
from .fit_loop import fit

__all__ = ["compile_model", "fit", "evaluate", "predict", "train_on_batch", "test_on_batch", "predict_on_batch",
           "evaluate_loss_metrics", "prepare_inputs", "prepare_targets", "follow_device_scope", "sync_learning_rate"]
