"""``TensorBoard``: the training curves, the learning rate, weight histograms and the model's graph
in TensorBoard's event files, with Keras 3.15's arguments, folders and tag names.

What it writes, as Keras' callback does (same tags, same steps):

- ``<log_dir>/train``: ``epoch_<name>`` for every training entry of the epoch's logs (``epoch_loss``,
  ``epoch_accuracy``, ...) and ``epoch_learning_rate`` (the optimizer's rate at the epoch's end),
  at step = the epoch (0-based); with ``update_freq`` ``"batch"`` or N, ``batch_<name>`` (the
  epoch's running values, as the progress bar shows them) every N-th batch, at step = the batch
  count since ``fit`` began (1-based); with ``histogram_freq`` N, every N-th epoch, a histogram of
  each weight, tagged ``<weight path>/histogram`` (``sequential/conv2d/kernel/histogram`` in a
  Sequential model named "sequential", ``conv2d/kernel/histogram`` in a functional one: Keras'
  ``weight.path``); with ``write_graph``, the model's Keras JSON under the tag ``keras`` at step 0,
  from which TensorBoard's Graphs dashboard draws the layers (Keras on JAX writes just that).
- ``<log_dir>/validation``: ``epoch_<name>`` for the ``val_`` entries, prefix removed, and
  ``evaluation_<name>_vs_iterations`` at step = the optimizer's iterations (Keras writes those from
  the validation's ``on_test_end``).
- ``write_steps_per_second``: ``epoch_steps_per_second`` and, with batch logging, ``batch_steps_per_second``.

One difference, deliberate: Keras 3.15 with an integer ``update_freq`` drops the epoch summaries
and histograms of an epoch whose last batch number is not a multiple of it (its batch-level
``record_if`` is still in force at the epoch's end); hpcnn writes them every epoch.

Only the chief process of a multi-process strategy writes (as for CSVLogger and ModelCheckpoint).
With BackupAndRestore, a resumed fit continues the batch count (its state), so batch steps go on.
How the files are written, and why with the ``tensorboard`` package: tensorboard_events.py.
"""
from __future__ import annotations

import os
import time
import warnings
from typing import Any, Dict, Optional, Union

from .. import distribute, validation
from .base import Callback
from .tensorboard_events import RunWriter, load_tensorboard

_PROFILE = ("hpcnn's training steps run in its C++ core, which TensorFlow's and JAX's profilers do not see: "
            "`hpcnn bench` times the steps per device, and on a GPU NVIDIA Nsight Systems (`nsys profile python "
            "train.py`) shows each step's CUDA kernels; leave profile_batch=0")
_IMAGES = ("hpcnn does not draw weights as images: histogram_freq=1 writes every weight's histogram (the "
           "Histograms and Distributions dashboards), and model.get_weights() gives the arrays to draw with "
           "matplotlib; leave write_images=False")
_EMBEDDINGS = ("hpcnn has no Embedding layer (keras.layers.Embedding is not available), so there are no "
               "embeddings to project; leave embeddings_freq=0 and embeddings_metadata=None")


class TensorBoard(Callback):
    """Keras' ``TensorBoard`` callback: scalars per epoch (and per batch with ``update_freq``), the
    learning rate, weight histograms (``histogram_freq``) and the model graph (``write_graph``) in
    ``log_dir/train`` and ``log_dir/validation``; view them with ``tensorboard --logdir log_dir``.
    Needs the ``tensorboard`` package (the ``tensorboard`` extra). ``profile_batch``,
    ``write_images``, ``embeddings_freq`` and ``embeddings_metadata`` are accepted at their
    defaults only (ValueError otherwise, naming what to use instead)."""

    def __init__(self, log_dir: Union[str, "os.PathLike[str]"] = "logs", histogram_freq: int = 0,
                 write_graph: bool = True, write_images: bool = False, write_steps_per_second: bool = False,
                 update_freq: Union[str, int] = "epoch", profile_batch: Any = 0, embeddings_freq: int = 0,
                 embeddings_metadata: Any = None) -> None:
        super().__init__()
        if not isinstance(log_dir, (str, os.PathLike)):
            raise ValueError(f"TensorBoard: log_dir must be a path (a str or os.PathLike), got {log_dir!r}")
        self.log_dir = os.fspath(log_dir)
        self.histogram_freq = validation.integer(histogram_freq, "histogram_freq", "TensorBoard", minimum=0,
                                                 maximum=None)
        self.write_graph = validation.boolean(write_graph, "write_graph", "TensorBoard")
        self.write_images = validation.boolean(write_images, "write_images", "TensorBoard")
        self.write_steps_per_second = validation.boolean(write_steps_per_second, "write_steps_per_second",
                                                         "TensorBoard")
        self.update_freq = _update_freq(update_freq)
        self.embeddings_freq = validation.integer(embeddings_freq, "embeddings_freq", "TensorBoard", minimum=0,
                                                  maximum=None)
        self.embeddings_metadata = embeddings_metadata
        self.profile_batch = profile_batch
        if profile_batch not in (0, "0", "0,0", (0, 0), [0, 0]):
            raise ValueError(f"TensorBoard: profile_batch={profile_batch!r} is not supported: {_PROFILE}")
        if self.write_images:
            raise ValueError(f"TensorBoard: write_images=True is not supported: {_IMAGES}")
        if self.embeddings_freq or embeddings_metadata is not None:
            what = (f"embeddings_freq={embeddings_freq!r}" if self.embeddings_freq
                    else f"embeddings_metadata={embeddings_metadata!r}")
            raise ValueError(f"TensorBoard: {what} is not supported: {_EMBEDDINGS}")
        self._tb = load_tensorboard("TensorBoard")  # after the arguments: their mistakes come first
        self._global_train_batch = 0  # batches since fit began: the step of batch-level summaries
        self._writers: Dict[str, RunWriter] = {}
        self._writes = True  # False on the ranks other than the chief
        self._batch_start = 0.0
        self._epoch_start = (0.0, 0)  # (time, optimizer iterations) at the epoch's beginning

    # ------------------------------------------------------------------ writers
    def _writer(self, run: str) -> RunWriter:
        """The run folder's writer ("train" or "validation"), made at its first summary."""
        if run not in self._writers:
            self._writers[run] = RunWriter(self._tb, os.path.join(self.log_dir, run))
        return self._writers[run]

    def _close_writers(self) -> None:
        for w in self._writers.values():
            w.close()
        self._writers = {}

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        if not self._keep_restored_state():
            self._global_train_batch = 0
        self._writes = self.model is None or distribute.writes_files(self.model)
        if self._writes and self.write_graph and self.model is not None:
            self._write_model_graph()

    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None:
        self._restored = False
        self._close_writers()

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        if self.write_steps_per_second:
            self._epoch_start = (time.perf_counter(), self._iterations())

    def on_train_batch_begin(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        self._global_train_batch += 1
        if self.write_steps_per_second:
            self._batch_start = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        step = self._global_train_batch
        if self.update_freq == "epoch" or not self._writes or step % self.update_freq:
            return
        train = self._writer("train")
        if self.write_steps_per_second:
            seconds = time.perf_counter() - self._batch_start
            train.scalar("batch_steps_per_second", 1.0 / seconds if seconds > 0 else 0.0, step)
        for name, value in (logs or {}).items():
            train.scalar(f"batch_{name}", value, step)

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        if not self._writes:
            return
        logs = logs or {}
        train_logs = {k: v for k, v in logs.items() if not k.startswith("val_")}
        val_logs = {k[len("val_"):]: v for k, v in logs.items() if k.startswith("val_")}
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None:
            train_logs["learning_rate"] = float(optimizer.learning_rate)
        if self.write_steps_per_second:
            start, iterations = self._epoch_start
            seconds = time.perf_counter() - start
            train_logs["steps_per_second"] = (self._iterations() - iterations) / seconds if seconds > 0 else 0.0
        train = self._writer("train")
        for name, value in train_logs.items():
            train.scalar(f"epoch_{name}", value, epoch)
        if val_logs:
            val = self._writer("validation")
            for name, value in val_logs.items():
                val.scalar(f"epoch_{name}", value, epoch)
            # Keras' on_test_end of the validation: the metrics against the optimizer's steps.
            iterations = self._iterations()
            for name, value in val_logs.items():
                val.scalar(f"evaluation_{name}_vs_iterations", value, iterations)
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            self._write_histograms(epoch)
        for w in self._writers.values():
            w.flush()  # a job killed later keeps this epoch

    # ------------------------------------------------------------------ the state protocol
    def get_state(self) -> Dict[str, Any]:
        return {"global_train_batch": self._global_train_batch}

    def set_state(self, state: Dict[str, Any]) -> None:
        self._global_train_batch = int(state["global_train_batch"])
        self._restored = True

    # ------------------------------------------------------------------ what is written
    def _iterations(self) -> int:
        optimizer = getattr(self.model, "optimizer", None)
        return int(optimizer.iterations) if optimizer is not None else self._global_train_batch

    def _write_model_graph(self) -> None:
        """The model's Keras JSON (tag ``keras``, step 0), as Keras' keras_model_summary; a model
        that cannot be written as JSON is skipped with a warning, as Keras does."""
        try:
            model_json = self.model.to_json()
        except Exception as e:  # noqa: BLE001 - as Keras: the graph is a convenience, never a reason to stop
            warnings.warn(f"TensorBoard: the model graph is not written: the model failed to serialize as JSON ({e})",
                          UserWarning, stacklevel=2)
            return
        self._writer("train").keras_model("keras", model_json, 0)

    def _write_histograms(self, epoch: int) -> None:
        """Each weight's histogram, tagged with Keras' weight path: the model's name before the
        layer's in a Sequential model (Keras builds its layers in the model's name scope)."""
        prefix = f"{self.model.name}/" if getattr(self.model, "is_sequential", False) else ""
        train = self._writer("train")
        for name, values in zip(self.model.weight_names(), self.model.get_weights()):
            train.histogram(f"{prefix}{name}/histogram", values, epoch)


def _update_freq(value: Any) -> Union[str, int]:
    """'epoch', or the batch interval ('batch' is 1), as Keras takes it."""
    if value == "batch":
        return 1
    if value == "epoch":
        return "epoch"
    if validation.is_integer(value) and value >= 1:
        return int(value)
    raise ValueError(f"TensorBoard: Invalid value for argument `update_freq`. Expected 'epoch', 'batch' or a "
                     f"positive integer (log every that many batches). Received: update_freq={value!r}")
