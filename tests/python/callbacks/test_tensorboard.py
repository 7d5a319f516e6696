"""The TensorBoard callback (python/hpcnn/callbacks/tensorboard.py): fits small models with it and
reads the event files back with TensorBoard's own code (its plugin event accumulator for scalars
and histograms, its Graphs plugin for the model graph), checking tags, steps and values against
history.history, the learning rate and the weights; the tag names against what Keras 3.15 writes
(live when the `keras` extra is installed, and recorded here); refusals; a killed job's files;
only the chief writing under MPI. Needs `pip install tensorboard` (the `tensorboard` extra): the
tests that read event files skip without it, except in CI (HPCNN_EXPECT_TENSORBOARD=1)."""
import contextlib
import importlib
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "jax")  # before any import of keras (the live comparison)

import hpcnn  # noqa: E402
import hpcnn.keras as hk  # noqa: E402
from hpcnn.callbacks import LambdaCallback, TensorBoard  # noqa: E402
from hpcnn.callbacks.tensorboard_events import histogram_buckets  # noqa: E402
from hpcnn.layers import Add, Conv2D, Dense, Flatten, InputLayer  # noqa: E402

HAS_TENSORBOARD = importlib.util.find_spec("tensorboard") is not None
if os.environ.get("HPCNN_EXPECT_TENSORBOARD") == "1":
    assert HAS_TENSORBOARD, "HPCNN_EXPECT_TENSORBOARD=1 but the tensorboard package is not installed"
needs_tensorboard = pytest.mark.skipif(not HAS_TENSORBOARD, reason="the TensorBoard callback needs "
                                       "`pip install tensorboard` (the `tensorboard` extra)")

ROWS, BATCH, EPOCHS = 40, 8, 3  # validation_split=0.2: 32 training rows, 4 batches per epoch

# What Keras 3.15's TensorBoard callback writes for SEQUENTIAL() below (a Sequential named
# "sequential"), fit with validation_split and histogram_freq=1, update_freq="batch": run ->
# tag -> steps, for 4 batches per epoch and EPOCHS epochs. Recorded from keras/src/callbacks/
# tensorboard.py on the jax backend (test_tags_match_keras checks it live); "keras" is the model
# JSON keras_model_summary writes at step 0 (Keras needs TensorFlow for that one, so it is not in
# the live run).
KERAS_TAGS = {
    "train": {
        "keras": [0],
        "batch_loss": list(range(1, 4 * EPOCHS + 1)), "batch_accuracy": list(range(1, 4 * EPOCHS + 1)),
        "epoch_loss": list(range(EPOCHS)), "epoch_accuracy": list(range(EPOCHS)),
        "epoch_learning_rate": list(range(EPOCHS)),
        **{f"sequential/{w}/histogram": list(range(EPOCHS))
           for w in ("conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias")},
    },
    "validation": {
        "epoch_loss": list(range(EPOCHS)), "epoch_accuracy": list(range(EPOCHS)),
        "evaluation_loss_vs_iterations": [4 * (e + 1) for e in range(EPOCHS)],
        "evaluation_accuracy_vs_iterations": [4 * (e + 1) for e in range(EPOCHS)],
    },
}
# History's timings, which hpcnn's logs carried beside the metrics (until they move to the History
# object): the callback writes whatever the logs hold, as Keras does.
TIMING_TAGS = {"epoch_seconds", "epoch_images_per_second"}


def data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((ROWS, 6, 6, 1), dtype=np.float32), rng.integers(0, 3, ROWS)


def sequential(lib=hk, optimizer=None):
    """The same small Sequential in hpcnn.keras or in Keras: conv2d, flatten, dense."""
    model = lib.Sequential([lib.Input((6, 6, 1)), lib.layers.Conv2D(2, 3, activation="relu"), lib.layers.Flatten(),
                            lib.layers.Dense(3, activation="softmax")])
    model.compile(optimizer or lib.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def residual():
    """A functional model with a branch (Add), for the graph and the weight paths."""
    x = hpcnn.Input(shape=(6, 6, 1))
    a = Conv2D(2, 3, padding="same", name="stem")(x)
    b = Conv2D(2, 3, padding="same", name="branch")(a)
    s = Add(name="sum")([a, b])
    out = Dense(3, activation="softmax", name="head")(Flatten(name="flat")(s))
    model = hpcnn.Model(x, out, seed=1)
    model.compile(hpcnn.optimizers.SGD(0.05), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def read(folder):
    """{tag: [(step, value array), ...]} of one run folder, read by TensorBoard's plugin event
    accumulator (the reader its data provider uses), and {tag: plugin name}."""
    from tensorboard.backend.event_processing import plugin_event_accumulator
    acc = plugin_event_accumulator.EventAccumulator(str(folder), size_guidance={"tensors": 0})
    acc.Reload()
    events = {}
    plugins = {}
    for tag in acc.Tags()["tensors"]:
        events[tag] = [(e.step, _value(e.tensor_proto)) for e in acc.Tensors(tag)]
        plugins[tag] = acc.SummaryMetadata(tag).plugin_data.plugin_name
    return events, plugins


def _value(proto):
    from tensorboard.util import tensor_util
    return tensor_util.make_ndarray(proto)


def steps(events):
    return {tag: [s for s, _ in evs] for tag, evs in events.items()}


# ---------------------------------------------------------------------- import and installation
def test_import_hpcnn_does_not_import_tensorboard():
    # Modules loaded (an entry of None is a name recorded as not importable, not an import).
    code = ("import hpcnn, sys; print(sorted(m for m, mod in sys.modules.items() "
            "if mod is not None and m.split('.')[0] == 'tensorboard'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_the_package_the_error_names_the_install(monkeypatch):
    for name in [m for m in sys.modules if m.split(".")[0] == "tensorboard"] + ["tensorboard"]:
        monkeypatch.setitem(sys.modules, name, None)  # `import tensorboard...` raises ImportError
    with pytest.raises(ImportError, match=r"TensorBoard writes TensorBoard's event files with the `tensorboard` "
                                          r"package.*pip install tensorboard.*\.\[tensorboard\]"):
        TensorBoard("logs")


def test_keras_name_is_hpcnn_callback():
    assert hk.callbacks.TensorBoard is TensorBoard is hpcnn.callbacks.TensorBoard


# ---------------------------------------------------------------------- refusals
@pytest.mark.parametrize("kwargs, message", [
    ({"profile_batch": 5}, r"profile_batch=5 is not supported: .*hpcnn bench.*nsys profile"),
    ({"profile_batch": (10, 20)}, r"profile_batch=\(10, 20\) is not supported"),
    ({"profile_batch": "2,4"}, r"profile_batch='2,4' is not supported"),
    ({"write_images": True}, r"write_images=True is not supported: .*histogram_freq=1.*get_weights"),
    ({"embeddings_freq": 1}, r"embeddings_freq=1 is not supported: hpcnn has no Embedding layer"),
    ({"embeddings_metadata": {"emb": "meta.tsv"}}, r"embeddings_metadata=.* is not supported: .*Embedding"),
    ({"update_freq": "step"}, r"update_freq.*'epoch', 'batch' or a positive integer.*Received: update_freq='step'"),
    ({"update_freq": 0}, r"update_freq.*Received: update_freq=0"),
    ({"histogram_freq": -1}, r"histogram_freq.*non-negative integer"),
    ({"write_graph": "yes"}, r"write_graph.*boolean"),
])
def test_unsupported_arguments_are_refused_naming_the_nearest(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TensorBoard("logs", **kwargs)


@needs_tensorboard
def test_keras_defaults_are_accepted(tmp_path):
    cb = TensorBoard(tmp_path, histogram_freq=0, write_graph=True, write_images=False, write_steps_per_second=False,
                     update_freq="epoch", profile_batch=0, embeddings_freq=0, embeddings_metadata=None)
    assert (cb.log_dir, cb.update_freq, cb.histogram_freq) == (str(tmp_path), "epoch", 0)
    assert TensorBoard(update_freq="batch").update_freq == 1 and TensorBoard().log_dir == "logs"
    assert not os.path.exists(tmp_path / "train")  # nothing written before training


# ---------------------------------------------------------------------- scalars
@needs_tensorboard
def test_epoch_scalars_match_history_and_the_learning_rate(tmp_path):
    x, y = data()
    schedule = hpcnn.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    model = sequential(optimizer=hpcnn.optimizers.SGD(schedule))
    rates = []
    record_rate = LambdaCallback(on_epoch_end=lambda epoch, logs: rates.append(model.optimizer.learning_rate))
    history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_split=0.2, verbose=0,
                        callbacks=[TensorBoard(tmp_path / "logs"), record_rate])
    train, train_plugins = read(tmp_path / "logs" / "train")
    val, _ = read(tmp_path / "logs" / "validation")
    for name in ("loss", "accuracy"):
        assert steps(train)[f"epoch_{name}"] == list(range(EPOCHS))
        np.testing.assert_allclose([v for _, v in train[f"epoch_{name}"]], history.history[name], rtol=1e-6)
        assert steps(val)[f"epoch_{name}"] == list(range(EPOCHS))
        np.testing.assert_allclose([v for _, v in val[f"epoch_{name}"]], history.history[f"val_{name}"], rtol=1e-6)
        # Keras' on_test_end of the validation: the same values against the optimizer's steps.
        assert steps(val)[f"evaluation_{name}_vs_iterations"] == [4, 8, 12]
        np.testing.assert_allclose([v for _, v in val[f"evaluation_{name}_vs_iterations"]],
                                   history.history[f"val_{name}"], rtol=1e-6)
    # The schedule's rate at each epoch's end: 0.1 * 0.5 ** (iterations / 2), iterations = 4, 8, 12.
    np.testing.assert_allclose(rates, [0.1 * 0.5 ** (4 * (e + 1) / 2) for e in range(EPOCHS)], rtol=1e-6)
    np.testing.assert_allclose([v for _, v in train["epoch_learning_rate"]], rates, rtol=1e-6)
    assert not any(t.startswith("batch_") for t in train)  # update_freq="epoch"
    assert not any(t.startswith("val_") or t.startswith("epoch_val") for t in set(train) | set(val))
    assert {train_plugins[t] for t in train if t.startswith("epoch_")} == {"scalars"}


@needs_tensorboard
def test_batch_scalars_every_batch_and_every_n(tmp_path):
    x, y = data()
    for update_freq, expected in (("batch", list(range(1, 13))), (3, [3, 6, 9, 12]), (5, [5, 10])):
        model = sequential()
        batch_logs = {}
        counter = iter(range(1, 100))
        keep = LambdaCallback(on_batch_end=lambda batch, logs: batch_logs.__setitem__(next(counter), dict(logs)))
        folder = tmp_path / str(update_freq)
        history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_split=0.2, verbose=0,
                            callbacks=[TensorBoard(folder, update_freq=update_freq), keep])
        train, _ = read(folder / "train")
        for name in ("loss", "accuracy"):
            assert steps(train)[f"batch_{name}"] == expected, update_freq
            np.testing.assert_allclose([v for _, v in train[f"batch_{name}"]],
                                       [batch_logs[s][name] for s in expected], rtol=1e-6)
            # Every epoch's summaries, whatever the interval (Keras 3.15 loses them when the epoch's
            # last batch number is not a multiple of an integer update_freq: not copied).
            np.testing.assert_allclose([v for _, v in train[f"epoch_{name}"]], history.history[name], rtol=1e-6)
        # The epoch's running values, as the last batch of each epoch shows the epoch's loss.
        np.testing.assert_allclose(batch_logs[4]["loss"], history.history["loss"][0], rtol=1e-6)


@needs_tensorboard
def test_steps_per_second(tmp_path):
    x, y = data()
    sequential().fit(x, y, batch_size=BATCH, epochs=2, verbose=0,
                     callbacks=[TensorBoard(tmp_path, update_freq="batch", write_steps_per_second=True)])
    train, _ = read(tmp_path / "train")
    assert steps(train)["epoch_steps_per_second"] == [0, 1]
    assert steps(train)["batch_steps_per_second"] == list(range(1, 11))
    assert all(v > 0 for _, v in train["epoch_steps_per_second"] + train["batch_steps_per_second"])


# ---------------------------------------------------------------------- histograms
@needs_tensorboard
@pytest.mark.parametrize("build, prefix", [(sequential, "sequential/"), (residual, "")])
def test_weight_histograms(tmp_path, build, prefix):
    x, y = data()
    model = build()
    weights = {}
    keep = LambdaCallback(on_epoch_end=lambda epoch, logs: weights.__setitem__(epoch, model.get_weights()))
    model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0, callbacks=[TensorBoard(tmp_path, histogram_freq=2),
                                                                          keep])
    train, plugins = read(tmp_path / "train")
    names = model.weight_names()
    assert [t for t in train if t.endswith("/histogram")] == [f"{prefix}{n}/histogram" for n in names]
    for i, name in enumerate(names):
        tag = f"{prefix}{name}/histogram"
        assert plugins[tag] == "histograms"
        assert steps(train)[tag] == [0, 2]  # every second epoch
        for step, buckets in train[tag]:
            w = weights[step][i]
            assert buckets.shape == (30, 3)
            assert buckets[:, 2].sum() == w.size  # every value in a bucket
            np.testing.assert_allclose(buckets[[0, -1], [0, 1]], [w.min(), w.max()], rtol=1e-6)


def test_histogram_buckets_as_tensorflow():
    rng = np.random.default_rng(3)
    w = rng.standard_normal(1000).astype(np.float32)
    b = histogram_buckets(w)
    assert b.shape == (30, 3) and b[:, 2].sum() == 1000 and b[-1, 1] == w.max() and b[0, 0] == w.min()
    np.testing.assert_array_equal(b[:, 2], np.histogram(w, bins=30, range=(w.min(), w.max()))[0])
    const = histogram_buckets(np.full(7, 0.25))  # a constant array: all in the last bucket
    assert const[-1, 2] == 7 and const[:-1, 2].sum() == 0 and np.all(const[:, :2] == 0.25)
    assert histogram_buckets(np.zeros(0)).sum() == 0
    if HAS_TENSORBOARD:
        from tensorboard.plugins.histogram import summary_v2
        if hasattr(summary_v2, "histogram_pb"):  # tensorboard's own NumPy version of the same buckets
            from tensorboard.util import tensor_util
            theirs = tensor_util.make_ndarray(summary_v2.histogram_pb("w", w).value[0].tensor)
            np.testing.assert_allclose(b, theirs, rtol=1e-12)


# ---------------------------------------------------------------------- the graph
@needs_tensorboard
@pytest.mark.parametrize("build, nodes", [
    (sequential, {"sequential/input_layer": [], "sequential/conv2d": ["sequential/input_layer"],
                  "sequential/flatten": ["sequential/conv2d"], "sequential/dense": ["sequential/flatten"]}),
    (residual, {"functional/input_layer": [], "functional/stem": ["functional/input_layer"],
                "functional/branch": ["functional/stem"], "functional/sum": ["functional/stem", "functional/branch"],
                "functional/flat": ["functional/sum"], "functional/head": ["functional/flat"]}),
])
def test_the_graph_loads_in_tensorboards_graphs_plugin(tmp_path, build, nodes):
    from google.protobuf import text_format
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.compat.proto import graph_pb2
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.graph import graphs_plugin

    x, y = data()
    model = build()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[TensorBoard(tmp_path)])
    train, plugins = read(tmp_path / "train")
    assert plugins["keras"] == "graph_keras_model" and steps(train)["keras"] == [0]
    # What TensorBoard's Graphs dashboard does: list the runs' graphs, draw the conceptual graph.
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(tmp_path))
    mux.Reload()
    plugin = graphs_plugin.GraphsPlugin(base_plugin.TBContext(
        data_provider=data_provider.MultiplexerDataProvider(mux, str(tmp_path))))
    ctx = context.RequestContext()
    info = plugin.info_impl(ctx, "")
    assert info["train"]["tags"]["keras"]["conceptual_graph"]
    body, _ = plugin.graph_impl(ctx, "train", "keras", True, "")
    graph = text_format.Parse(body, graph_pb2.GraphDef())
    assert {n.name: list(n.input) for n in graph.node} == nodes
    classes = {n.name.split("/")[-1]: n.attr["keras_class"].s.decode() for n in graph.node}
    assert {layer.name: type(layer).__name__ for layer in model.layers if layer.name in classes}.items() <= \
        classes.items()


@needs_tensorboard
def test_write_graph_false_writes_no_graph(tmp_path):
    x, y = data()
    sequential().fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[TensorBoard(tmp_path, write_graph=False)])
    train, _ = read(tmp_path / "train")
    assert "keras" not in train and "epoch_loss" in train


# ---------------------------------------------------------------------- Keras' names
@needs_tensorboard
def test_tags_and_steps_as_keras_writes_them(tmp_path):
    x, y = data()
    sequential().fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_split=0.2, verbose=0,
                     callbacks=[TensorBoard(tmp_path, histogram_freq=1, update_freq="batch")])
    for run, expected in KERAS_TAGS.items():
        got = steps(read(tmp_path / run)[0])
        extra = set(got) - set(expected)
        assert extra <= TIMING_TAGS, extra
        assert {t: s for t, s in got.items() if t in expected} == expected


class _RecordingSummary:
    """Stands in for `tensorflow.summary` in Keras' TensorBoard callback (Keras on jax imports
    TensorFlow's summary module, which is not installed): records (run, tag, step) where TF would
    write, honouring the default writer and `record_if`, as TF does."""

    def __init__(self):
        self.steps = {}
        self._writers = [None]
        self._conditions = [lambda: True]

    def create_file_writer(self, folder):
        summary = self

        class Writer:
            @contextlib.contextmanager
            def as_default(self, step=None):
                summary._writers.append(os.path.basename(folder))
                try:
                    yield self
                finally:
                    summary._writers.pop()

            def flush(self):
                pass

            def close(self):
                pass

        return Writer()

    @contextlib.contextmanager
    def record_if(self, condition):
        self._conditions.append(condition)
        try:
            yield
        finally:
            self._conditions.pop()

    def _write(self, tag, step):
        run = self._writers[-1]
        if run is None or not self._conditions[-1]():
            return False
        self.steps.setdefault(run, {}).setdefault(tag, []).append(int(step))
        return True

    def scalar(self, name, data, step=None):
        return self._write(name, step)

    def histogram(self, name, data, step=None):
        return self._write(name, step)


def test_recorded_tags_match_keras_live(tmp_path):
    """KERAS_TAGS is what Keras 3's callback writes for the same model and fit."""
    if os.environ.get("HPCNN_EXPECT_KERAS") == "1":
        import keras
    else:
        keras = pytest.importorskip("keras", reason='the live Keras comparison needs `pip install --no-build-isolation ".[keras]"`')
    x, y = data()
    keras.backend.clear_session()  # Keras' layer names count per session: conv2d, not conv2d_3
    keras.utils.set_random_seed(0)
    cb = keras.callbacks.TensorBoard(str(tmp_path), histogram_freq=1, update_freq="batch", write_graph=False)
    cb._summary_module = summary = _RecordingSummary()  # Keras' lazily imported tensorflow.summary
    sequential(keras, keras.optimizers.SGD(0.1)).fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_split=0.2,
                                                     verbose=0, callbacks=[cb])
    expected = {run: {t: s for t, s in tags.items() if t != "keras"} for run, tags in KERAS_TAGS.items()}
    assert summary.steps == expected


# ---------------------------------------------------------------------- robustness
@needs_tensorboard
def test_a_killed_job_leaves_readable_events(tmp_path):
    """SIGKILL at the end of the third epoch (no on_train_end, no close): the events of every
    finished epoch can be read."""
    script = f"""
import os, signal, numpy as np, hpcnn
from hpcnn.callbacks import LambdaCallback, TensorBoard
rng = np.random.default_rng(0)
x, y = rng.random((32, 6, 6, 1), dtype=np.float32), rng.integers(0, 3, 32)
model = hpcnn.Sequential([hpcnn.Input((6, 6, 1)), hpcnn.layers.Flatten(), hpcnn.layers.Dense(3, activation="softmax")])
model.compile("sgd", "sparse_categorical_crossentropy")
kill = LambdaCallback(on_epoch_end=lambda e, logs: e == 2 and os.kill(os.getpid(), signal.SIGKILL))
model.fit(x, y, batch_size=8, epochs=10, verbose=0, callbacks=[TensorBoard({str(tmp_path)!r}, update_freq=3), kill])
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    train, _ = read(tmp_path / "train")
    assert steps(train)["epoch_loss"] == [0, 1, 2] and steps(train)["epoch_learning_rate"] == [0, 1, 2]
    assert steps(train)["batch_loss"] == [3, 6, 9, 12]
    # A kill in the middle of a record (here: its last bytes cut): the reader drops that record only.
    (events,) = (tmp_path / "train").iterdir()
    with open(events, "r+b") as f:
        f.truncate(events.stat().st_size - 5)
    train, _ = read(tmp_path / "train")
    assert steps(train)["epoch_loss"] == [0, 1, 2] and steps(train)["epoch_learning_rate"] == [0, 1]


def fit_twice_with_one_callback(tmp_path):
    """Two one-epoch fits with the same TensorBoard callback, logging per batch to tmp_path/again."""
    x, y = data()
    model = sequential()
    cb = TensorBoard(tmp_path / "again", update_freq="batch")
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[cb])
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[cb])


def fit_interrupted_then_resumed(tmp_path):
    """A 3-epoch fit stopped as by Ctrl-C after the first epoch's backup, then resumed by
    BackupAndRestore, both logging per batch to tmp_path/resumed."""
    x, y = data()

    class Interrupt(hpcnn.callbacks.Callback):  # as a Ctrl-C after the first epoch's backup
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise KeyboardInterrupt

    backup = str(tmp_path / "backup")
    model = sequential()
    model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0,
              callbacks=[TensorBoard(tmp_path / "resumed", update_freq="batch"),
                         hpcnn.callbacks.BackupAndRestore(backup), Interrupt()])
    model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0,
              callbacks=[TensorBoard(tmp_path / "resumed", update_freq="batch"),
                         hpcnn.callbacks.BackupAndRestore(backup)])


@needs_tensorboard
def test_a_second_fit_and_a_resumed_fit(tmp_path):
    """A second fit with the same callback starts the batch count again (as Keras: a new event file
    in the same runs); BackupAndRestore's resume continues it (the callback's state)."""
    fit_twice_with_one_callback(tmp_path)
    assert steps(read(tmp_path / "again" / "train")[0])["batch_loss"] == [1, 2, 3, 4, 5] * 2
    assert len(os.listdir(tmp_path / "again" / "train")) == 2

    fit_interrupted_then_resumed(tmp_path)
    got = steps(read(tmp_path / "resumed" / "train")[0])
    assert got["batch_loss"] == list(range(1, 5 * 3 + 1)) and got["epoch_loss"] == [0, 1, 2]  # 5 batches an epoch


@needs_tensorboard
def test_only_the_chief_writes_under_mpi(tmp_path):
    from tests.support import mpi_runs
    missing = mpi_runs.mpi_missing()
    if missing:
        pytest.skip(missing)
    mpi_runs.checked(mpi_runs.mpirun("tensorboard", tmp_path))
    for run in ("train", "validation"):
        files = os.listdir(tmp_path / "tb" / run)
        assert len(files) == 1, files  # one writer: the chief's
    train, _ = read(tmp_path / "tb" / "train")
    assert steps(train)["epoch_loss"] == [0, 1] and "keras" in train


# ---------------------------------------------------------------------- steps, without the package
class RecordingWriter:
    """Stands in for tensorboard_events.RunWriter (the same methods) where the callback is given
    no tensorboard package: records each summary's step by run folder and tag. The callback's
    steps are checked with it in any environment; the event files' form (with the package) by
    the tests above, which skip without it."""

    def __init__(self, written, folder):
        self.tags = written.setdefault(os.path.basename(folder), {})

    def _add(self, tag, step):
        assert isinstance(step, int), (tag, step)
        self.tags.setdefault(tag, []).append(step)

    def scalar(self, tag, value, step):
        self._add(tag, step)

    def histogram(self, tag, values, step):
        self._add(tag, step)

    def keras_model(self, tag, model_json, step):
        self._add(tag, step)

    def flush(self):
        pass

    def close(self):
        pass


@pytest.fixture
def recorded(monkeypatch):
    """{run: {tag: [steps]}} of every TensorBoard callback made in the test, written without the
    tensorboard package (its import is blocked)."""
    module = importlib.import_module("hpcnn.callbacks.tensorboard")
    for name in [m for m in sys.modules if m.split(".")[0] == "tensorboard"] + ["tensorboard"]:
        monkeypatch.setitem(sys.modules, name, None)
    written = {}
    monkeypatch.setattr(module, "load_tensorboard", lambda caller: None)
    monkeypatch.setattr(module, "RunWriter", lambda tb, folder: RecordingWriter(written, folder))
    return written


def test_steps_as_keras_writes_them_without_the_package(tmp_path, recorded):
    x, y = data()
    sequential().fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_split=0.2, verbose=0,
                     callbacks=[TensorBoard(tmp_path, histogram_freq=1, update_freq="batch")])
    assert set(recorded) == set(KERAS_TAGS)
    for run, expected in KERAS_TAGS.items():
        got = recorded[run]
        assert set(got) - set(expected) <= TIMING_TAGS, set(got) - set(expected)
        assert {t: s for t, s in got.items() if t in expected} == expected
        assert all(s == list(range(EPOCHS)) for t, s in got.items() if t in TIMING_TAGS)


@pytest.mark.parametrize("kwargs, batch_steps, histogram_steps", [
    ({"update_freq": 3}, [3, 6, 9, 12], []),
    ({"update_freq": 5, "histogram_freq": 2}, [5, 10], [0, 2]),
    ({}, None, []),  # update_freq="epoch": no batch summaries
])
def test_batch_and_histogram_steps_without_the_package(tmp_path, recorded, kwargs, batch_steps, histogram_steps):
    x, y = data()
    sequential().fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_split=0.2, verbose=0,
                     callbacks=[TensorBoard(tmp_path, write_steps_per_second=True, **kwargs)])
    train = recorded["train"]
    assert train.get("batch_loss") == batch_steps and train.get("batch_steps_per_second") == batch_steps
    assert train["epoch_loss"] == train["epoch_learning_rate"] == train["epoch_steps_per_second"] == [0, 1, 2]
    assert train.get("sequential/dense/kernel/histogram", []) == histogram_steps
    assert recorded["validation"]["evaluation_loss_vs_iterations"] == [4, 8, 12]


def test_a_second_fit_and_a_resumed_fit_without_the_package(tmp_path, recorded):
    """A second fit with the same callback counts batches from 1 again; a fit resumed by
    BackupAndRestore continues the count, and its epochs keep their numbers."""
    fit_twice_with_one_callback(tmp_path)
    assert recorded["train"]["batch_loss"] == [1, 2, 3, 4, 5] * 2
    recorded.clear()

    fit_interrupted_then_resumed(tmp_path)
    assert recorded["train"]["batch_loss"] == list(range(1, 5 * 3 + 1))  # 5 batches an epoch
    assert recorded["train"]["epoch_loss"] == [0, 1, 2]
