"""The event files of the ``TensorBoard`` callback: one writer per run folder (``train/``,
``validation/``), and the summaries it writes (scalars, weight histograms, the model's graph)
in the form TensorFlow 2's ``tf.summary`` writes them, so TensorBoard shows them as it shows Keras'.

Written with the ``tensorboard`` package itself (``pip install tensorboard``; no TensorFlow needed):
its ``EventFileWriter`` (the writer PyTorch's ``torch.utils.tensorboard`` is built on) appends
length-prefixed, CRC-checked records to ``events.out.tfevents.*`` from a background thread, and the
summaries are its own protobuf classes filled by its own helpers (``scalar_pb``, ``make_tensor_proto``,
the plugins' ``create_summary_metadata``). It was chosen over tensorboardX because the student needs
``tensorboard`` anyway to look at the logs: one maintained package, from the project that defines
the format, both writes and reads them; tensorboardX would be a second package doing the same.
The package is imported only when a TensorBoard callback is made (``import hpcnn`` does not need it).

A killed job leaves readable events: records are appended whole (each one written by a single
call, as the writer thread takes it), the callback flushes at the end of every epoch, the writer
thread at least every ``FLUSH_SECONDS``, and TensorBoard's reader stops quietly at a record cut
short by the kill."""
from __future__ import annotations

import os
import time
from types import SimpleNamespace
from typing import Any

import numpy as np

INSTALL = ('pip install tensorboard (or, from the hpcnn clone: pip install --no-build-isolation '
           '".[tensorboard]")')
FLUSH_SECONDS = 10  # batch-level events reach the file at least this often
HISTOGRAM_BUCKETS = 30  # tf.summary.histogram's default


def load_tensorboard(caller: str) -> SimpleNamespace:
    """The parts of the ``tensorboard`` package the writer uses; ImportError naming the install."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.graph import metadata as graph_metadata
        from tensorboard.plugins.histogram import metadata as histogram_metadata
        from tensorboard.plugins.scalar import summary_v2 as scalar_summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        from tensorboard.util import tensor_util
    except ImportError as e:
        raise ImportError(f"{caller} writes TensorBoard's event files with the `tensorboard` package, which is not "
                          f"installed ({e}): {INSTALL}") from e
    return SimpleNamespace(event_pb2=event_pb2, summary_pb2=summary_pb2, EventFileWriter=EventFileWriter,
                           scalar_pb=scalar_summary.scalar_pb, histogram_metadata=histogram_metadata,
                           graph_metadata=graph_metadata, tensor_util=tensor_util)


def histogram_buckets(values: Any, bucket_count: int = HISTOGRAM_BUCKETS) -> np.ndarray:
    """(bucket_count, 3) rows of [left edge, right edge, count], as TensorFlow 2's
    ``tf.summary.histogram`` buckets them: equal widths from the minimum to the maximum, the
    maximum in the last bucket; a constant array puts all its values in the last bucket. Counted
    with ``np.bincount`` (tensorboard's NumPy ``histogram_pb`` makes a values-by-buckets matrix,
    too large for a big kernel)."""
    data = np.asarray(values, dtype=np.float64).ravel()
    if data.size == 0:
        return np.zeros((bucket_count, 3))
    low, high = float(data.min()), float(data.max())
    if high == low:
        counts = np.zeros(bucket_count)
        counts[-1] = data.size
        return np.stack([np.full(bucket_count, high), np.full(bucket_count, high), counts], axis=1)
    index = np.minimum(np.floor((data - low) / ((high - low) / bucket_count)).astype(np.int64), bucket_count - 1)
    counts = np.bincount(index, minlength=bucket_count).astype(np.float64)
    edges = np.linspace(low, high, bucket_count + 1)
    edges[-1] = high
    return np.stack([edges[:-1], edges[1:], counts], axis=1)


class RunWriter:
    """The event file of one run folder (``<log_dir>/train``, ``<log_dir>/validation``), created at
    its first event, as Keras creates its writers lazily."""

    def __init__(self, tb: SimpleNamespace, folder: str) -> None:
        self.tb, self.folder = tb, folder
        self._writer: Any = None

    def _add(self, summary: Any, step: int) -> None:
        if self._writer is None:
            os.makedirs(self.folder, exist_ok=True)
            self._writer = self.tb.EventFileWriter(self.folder, max_queue_size=100, flush_secs=FLUSH_SECONDS)
        self._writer.add_event(self.tb.event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

    def scalar(self, tag: str, value: float, step: int) -> None:
        """A float32 scalar tensor with the scalars plugin's metadata (``tf.summary.scalar``'s form)."""
        self._add(self.tb.scalar_pb(tag, np.float32(value)), step)

    def histogram(self, tag: str, values: Any, step: int) -> None:
        """A float64 [k, 3] bucket tensor with the histograms plugin's metadata (``tf.summary.histogram``)."""
        tensor = self.tb.tensor_util.make_tensor_proto(histogram_buckets(values), dtype=np.float64)
        summary = self.tb.summary_pb2.Summary()
        summary.value.add(tag=tag, tensor=tensor,
                          metadata=self.tb.histogram_metadata.create_summary_metadata(display_name=None,
                                                                                       description=None))
        self._add(summary, step)

    def keras_model(self, tag: str, model_json: str, step: int) -> None:
        """The model's Keras JSON as a string tensor with the ``graph_keras_model`` plugin's metadata,
        as Keras' ``keras_model_summary`` writes it: TensorBoard's Graphs dashboard draws the layers
        from it (its "conceptual graph", tensorboard.plugins.graph.keras_util)."""
        meta = self.tb.summary_pb2.SummaryMetadata()
        meta.plugin_data.plugin_name = self.tb.graph_metadata.PLUGIN_NAME_KERAS_MODEL
        meta.plugin_data.content = b"1"  # the plugin's version, as Keras writes it
        summary = self.tb.summary_pb2.Summary()
        summary.value.add(tag=tag, metadata=meta, tensor=self.tb.tensor_util.make_tensor_proto(model_json))
        self._add(summary, step)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

