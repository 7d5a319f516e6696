"""A ResNet basic block as a functional graph, what hpcnn's ResNets are made of (issue 13):
Conv-BN-ReLU-Conv-BN plus a shortcut (the identity, or a 1x1 stride-2 convolution with BN), Add,
ReLU; then global average pooling and a softmax Dense.

  - one training step against the float64 NumPy reference of the same graph (tests/support/reference.py:
    batch normalization with the batch's statistics, a gradient through both the block and the
    shortcut): the loss, every gradient, the moving statistics after the step, and predict in
    inference mode (the moving statistics) after it;
  - the gradients against central differences of the reference's loss;
  - through the public API: summary with "Connected to" and the non-trainable count, fit with
    the optimizers of issue 13c and an L2 kernel regularizer, save / load_model (the same
    predictions, and fit continues bit for bit as the uninterrupted run would), BackupAndRestore
    after a stop signal (bit for bit too), and the memory plan (less memory than one buffer per
    activation, and the same bits as without reuse);
  - the shortcut's gradient sharing the Add's gradient buffer (no copy, nn/step_plan.cpp
    can_share_dy), also where the block's input has a reader between the BN and the Add (which
    must stop the sharing): the same gradients as a graph where an Activation('linear') keeps the
    buffers apart."""
import os
import signal

import numpy as np
import pytest

import hpcnn
from hpcnn import optimizers
from hpcnn.callbacks import BackupAndRestore, Callback
from hpcnn.layers import Activation, Add, BatchNormalization, Conv2D, Dense, GlobalAveragePooling2D, ReLU
from hpcnn.regularizers import l2

from tests.support import reference as ref
from tests.support.small_models import resnet_block_model

NON_TRAINABLE = ("moving_mean", "moving_variance")


def reference_graph(model):
    """The model as reference.py's graph, in the core's node order (a softmax Dense is two core
    nodes: the Dense, then the softmax fused into the loss)."""
    graph, core_of = [], []  # core_of[position]: the core node that outputs it
    for layer, parents in model.graph_nodes():
        inputs = [-1 if p < 0 else core_of[p] for p in parents]
        cfg = layer.get_config()
        if isinstance(layer, Conv2D):
            spec = ("conv", cfg["strides"][0], cfg["padding"], cfg["activation"] == "relu", cfg["use_bias"])
        elif isinstance(layer, BatchNormalization):
            spec = ("bn", cfg["epsilon"])
        elif isinstance(layer, ReLU):
            spec = ("relu",)
        elif isinstance(layer, Add):
            spec = ("add",)
        elif isinstance(layer, GlobalAveragePooling2D):
            spec = ("gap",)
        elif isinstance(layer, Dense):
            spec = ("dense", cfg["activation"] == "relu")
        else:
            raise AssertionError(type(layer).__name__)
        graph.append((spec, inputs))
        if isinstance(layer, Dense) and cfg["activation"] == "softmax":
            graph.append((("softmax",), [len(graph) - 1]))
        core_of.append(len(graph) - 1)
    assert model.core.node_inputs == [inputs for _, inputs in graph]
    return graph


def gradients(model):
    """The last step's gradients as Keras-shaped arrays in get_weights order (the flat buffer holds
    the trainable weights first, then the non-trainable ones: nn/param_layout.h)."""
    flat = model.core.gradient_buffer(keras_layout=True)
    names, shapes = model.weight_names(), [w.shape for w in model.get_weights()]
    order = [i for i, n in enumerate(names) if not n.endswith(NON_TRAINABLE)] + \
            [i for i, n in enumerate(names) if n.endswith(NON_TRAINABLE)]
    out, off = [None] * len(names), 0
    for i in order:
        size = int(np.prod(shapes[i]))
        out[i] = flat[off:off + size].reshape(shapes[i])
        off += size
    assert off == flat.size
    return out


def batch(n=6, shape=(8, 8, 3), classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n,) + shape).astype(np.float32), np.eye(classes, dtype=np.float32)[
        rng.integers(0, classes, n)]


def close(got, want, rtol=1e-3, what=""):
    scale = max(float(np.abs(want).max()), 1e-12)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


# ------------------------------------------------------------------ against the float64 reference
@pytest.mark.parametrize("projection", [False, True])
def test_one_step_matches_the_float64_reference(projection):
    model = resnet_block_model(projection=projection)
    graph = reference_graph(model)
    model.compile(optimizers.SGD(learning_rate=0.1), "categorical_crossentropy")
    names = model.weight_names()
    w0 = [w.astype(np.float64) for w in model.get_weights()]
    x, y = batch()
    stats = {}
    ref.graph_forward(graph, w0, x.astype(np.float64), bn_stats=stats)
    loss_ref, grads_ref = ref.graph_train_step(graph, w0, x.astype(np.float64), y.astype(np.float64))
    loss = model.train_on_batch(x, y)
    assert loss == pytest.approx(loss_ref, rel=1e-4)
    for name, g, g_ref in zip(names, gradients(model), grads_ref):
        if name.endswith(NON_TRAINABLE):
            np.testing.assert_array_equal(g, 0, err_msg=name)  # no gradient for the moving statistics
        else:
            close(g, g_ref, what=name)
    # The weights after the step: SGD for the trainable ones; Keras' moving-average formula (the
    # biased batch variance) for the moving statistics, which no optimizer touches.
    after = model.get_weights()
    bn_nodes = [i for i, (spec, _) in enumerate(graph) if spec[0] == "bn"]
    starts = ref._weight_starts(graph)
    moving = {}
    for i in bn_nodes:
        mean, var = stats[i]
        moving[starts[i] + 2] = 0.99 * w0[starts[i] + 2] + 0.01 * mean
        moving[starts[i] + 3] = 0.99 * w0[starts[i] + 3] + 0.01 * var
    assert len(moving) == 2 * sum(isinstance(la, BatchNormalization) for la in model.layers)
    for k, (name, w) in enumerate(zip(names, after)):
        want = moving[k] if k in moving else w0[k] - 0.1 * grads_ref[k]
        np.testing.assert_allclose(w, want, rtol=1e-5, atol=2e-5, err_msg=name)
    # predict: batch normalization in inference mode, with the moving statistics.
    logits = ref.graph_forward(graph, [w.astype(np.float64) for w in after], x.astype(np.float64),
                               training=False)[-1]
    np.testing.assert_allclose(model.predict(x), ref.op.softmax(logits), rtol=1e-4, atol=1e-6)


def test_gradients_match_finite_differences():
    """Float32 gradients against central differences of the float64 reference loss (training-mode
    batch normalization), sampled coordinates of every trainable weight."""
    model = resnet_block_model(projection=True, seed=8)
    graph = reference_graph(model)
    model.compile(optimizers.SGD(learning_rate=1e-3), "categorical_crossentropy")
    names = model.weight_names()
    w0 = [w.astype(np.float64) for w in model.get_weights()]
    x, y = batch(seed=5)
    model.train_on_batch(x, y)
    rng = np.random.default_rng(1)
    eps = 1e-5
    for k, (name, g, w) in enumerate(zip(names, gradients(model), w0)):
        if name.endswith(NON_TRAINABLE):
            continue
        scale = max(float(np.abs(g).max()), 1e-3)
        for i in rng.choice(w.size, size=min(6, w.size), replace=False):
            pos = np.unravel_index(i, w.shape)
            up, down = [a.copy() for a in w0], [a.copy() for a in w0]
            up[k][pos] += eps
            down[k][pos] -= eps
            num = (ref.graph_loss(graph, up, x, y) - ref.graph_loss(graph, down, x, y)) / (2 * eps)
            assert g[pos] == pytest.approx(num, rel=3e-3, abs=3e-3 * scale), f"{name} at {pos}"


# ------------------------------------------------------------------ the public API
def learnable(n=96, classes=3, seed=0):
    """Class k: a brighter band of rows (learnable in a few epochs)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = (rng.random((n, 8, 8, 3)) * 0.5).astype(np.float32)
    for i, k in enumerate(y):
        x[i, 2 * k:2 * k + 3] += 1.0
    return x, y


def test_summary_connects_both_paths_and_counts_the_moving_statistics():
    model = resnet_block_model()
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "Connected to" in text
    add_row = next(i for i, line in enumerate(lines) if line.startswith(" add_1 (Add)"))
    # add_1 reads the block's second BN and the projection's BN (two rows of "Connected to").
    assert lines[add_row].rstrip().endswith("batch_normalization_4[0][0]")
    assert lines[add_row + 1].strip() == "batch_normalization_5[0][0]"
    bns = [la for la in model.layers if isinstance(la, BatchNormalization)]
    channels = [4, 4, 4, 8, 8, 8]
    assert len(bns) == len(channels)
    moving = 2 * sum(channels)
    total = model.count_params()
    assert f"Non-trainable params: {moving:,}" in text and f"Trainable params: {total - moving:,}" in text


OPTIMIZERS = {
    "sgd nesterov": lambda: optimizers.SGD(0.05, momentum=0.9, nesterov=True),
    "adamw": lambda: optimizers.AdamW(0.01, weight_decay=0.05),
    "rmsprop": lambda: optimizers.RMSprop(0.005, momentum=0.5),
    "adam, cosine decay": lambda: optimizers.Adam(optimizers.schedules.CosineDecay(0.01, 40)),
}


def make(name, seed=4):
    m = resnet_block_model(seed=seed, kernel_regularizer=l2(1e-3))
    m.compile(OPTIMIZERS[name](), "sparse_categorical_crossentropy", ["accuracy"])
    return m


def same_weights(a, b):
    return all(np.array_equal(p, q) for p, q in zip(a.get_weights(), b.get_weights()))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_trains_saves_loads_and_continues_exactly(tmp_path, name):
    x, y = learnable()
    reference = make(name)
    h = reference.fit(x, y, batch_size=16, epochs=4, verbose=0).history
    assert h["loss"][-1] < h["loss"][0]
    m = make(name)
    m.fit(x, y, batch_size=16, epochs=2, verbose=0)
    path = str(tmp_path / "block.h5")
    m.save(path)
    loaded = hpcnn.load_model(path)
    assert type(loaded) is hpcnn.Model and loaded.get_config() == m.get_config()
    for a, b in zip(loaded.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(a, b)  # the moving statistics too
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))
    assert loaded.core.iterations == m.core.iterations == 12
    loaded.fit(x, y, batch_size=16, epochs=4, initial_epoch=2, verbose=0)
    assert same_weights(loaded, reference)
    moving = [w for n, w in zip(loaded.weight_names(), loaded.get_weights()) if n.endswith("moving_mean")]
    assert all(np.abs(w).max() > 0 for w in moving)  # the moving statistics were trained


def test_weights_files_of_a_graph(tmp_path):
    """save_weights / load_weights by position (the moving statistics included); a model of
    another graph is refused and keeps its weights."""
    x, _ = learnable(8)
    m = make("adamw")
    m.fit(*learnable(32), batch_size=16, epochs=1, verbose=0)
    path = str(tmp_path / "w.h5")
    m.save_weights(path)
    fresh = resnet_block_model(seed=11)
    fresh.load_weights(path)
    np.testing.assert_array_equal(fresh.predict(x), m.predict(x))
    other = resnet_block_model(seed=11, projection=False)
    before = other.get_weights()
    with pytest.raises(ValueError, match="does not fit this model"):
        other.load_weights(path)
    assert all(np.array_equal(a, b) for a, b in zip(before, other.get_weights()))


class SignalAt(Callback):
    """Sends SIGTERM to this process after the model's training step `step`."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if self.model.core.step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def test_backup_and_restore_resumes_bit_for_bit(tmp_path):
    x, y = learnable()
    reference = make("sgd nesterov")
    h_ref = reference.fit(x, y, batch_size=16, epochs=3, verbose=0, validation_data=(x[:16], y[:16]))
    d = tmp_path / "backup"
    first = make("sgd nesterov")
    h1 = first.fit(x, y, batch_size=16, epochs=3, verbose=0, validation_data=(x[:16], y[:16]),
                   callbacks=[BackupAndRestore(d, save_freq=4), SignalAt(9)])
    assert h1.interrupted and first.core.step == 9
    second = make("sgd nesterov", seed=77)  # the backup's weights and random state replace these
    cb = BackupAndRestore(d, save_freq=4)
    h2 = second.fit(x, y, batch_size=16, epochs=3, verbose=0, validation_data=(x[:16], y[:16]), callbacks=[cb])
    assert cb.resumed_from == {"epoch": 1, "batch": 3}
    assert same_weights(second, reference)
    assert h2.history["loss"] == h_ref.history["loss"] and h2.history["val_loss"] == h_ref.history["val_loss"]


def test_a_backup_of_another_graph_is_refused(tmp_path):
    x, y = learnable(32)
    m = make("adamw")
    assert m.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[BackupAndRestore(tmp_path / "b", save_freq=1),
                                                                        SignalAt(1)]).interrupted
    other = resnet_block_model(projection=False)
    other.compile(OPTIMIZERS["adamw"](), "sparse_categorical_crossentropy", ["accuracy"])
    with pytest.raises(ValueError, match="was written for another model"):
        other.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[BackupAndRestore(tmp_path / "b")])


def test_the_memory_plan_of_the_block():
    """Less step memory than one buffer per activation, and the same bits as with every buffer
    kept apart (no layer reads an activation whose memory was reused)."""
    x, y = learnable(32)
    models = []
    for reuse in (True, False):
        m = make("adamw")
        m.core.memory_reuse = reuse
        m.fit(x, y, batch_size=16, epochs=2, verbose=0)
        models.append(m)
    assert same_weights(*models)
    report = models[0].core.memory_report(16)
    assert report["allocated"] == max(report["train"], report["test"], report["predict"])
    # train_keep_all is what the step allocates when it keeps every buffer (no reuse).
    assert models[1].core.memory_report(16)["allocated"] == report["train_keep_all"]
    assert report["train"] < 0.6 * report["train_keep_all"]
    assert report["train"] < report["one_buffer_per_activation"]


def shortcut_graph(apart: bool, late_reader: bool) -> hpcnn.Model:
    """A block whose Add takes a BatchNormalization (which only reads its output gradient) and the
    block's input x, so the shortcut may share the Add's gradient buffer; `apart`: an
    Activation('linear') after the BN (a layer that may write its dy) keeps them apart, computing
    the same function. `late_reader`: x is also read by a 1x1 convolution placed between the BN and
    the Add (nodes are ordered by depth, as Keras does: it feeds a second Add with the first), whose
    backward runs before the BN's and would add its contribution into the shared buffer before the
    BN read it."""
    inp = hpcnn.Input((6, 6, 4))
    x = ReLU()(BatchNormalization()(Conv2D(4, 3, padding="same", use_bias=False)(inp)))
    y = BatchNormalization()(Conv2D(4, 3, padding="same", use_bias=False)(x))
    if apart:
        y = Activation("linear")(y)
    if late_reader:  # the 1x1 convolution at the BN's depth, after it; its BN at the first Add's
        late = BatchNormalization()(Conv2D(4, 1, use_bias=False)(x))
        out = ReLU()(Add()([Add()([y, x]), late]))
    else:
        out = ReLU()(Add()([y, x]))
    return hpcnn.Model(inp, Dense(3, activation="softmax")(GlobalAveragePooling2D()(out)), seed=2)


@pytest.mark.parametrize("late_reader", [False, True], ids=["identity-block", "input-read-between-the-bn-and-the-add"])
def test_the_shortcut_shares_the_adds_gradient_only_where_safe(late_reader):
    shared, apart = shortcut_graph(False, late_reader), shortcut_graph(True, late_reader)
    apart.set_weights(shared.get_weights())
    r = np.random.default_rng(1)
    x = r.standard_normal((5, 6, 6, 4)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[r.integers(0, 3, 5)]
    for m in (shared, apart):
        m.compile(optimizers.SGD(0.1), "categorical_crossentropy")
    for step in range(3):
        assert shared.train_on_batch(x, y) == pytest.approx(apart.train_on_batch(x, y), rel=1e-6), step
        for a, b in zip(shared.get_weights(), apart.get_weights()):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the copy is gone where sharing is safe: the step keeping every buffer needs one buffer less
    if not late_reader:
        assert shared.core.memory_report(5)["train_keep_all"] < apart.core.memory_report(5)["train_keep_all"]
