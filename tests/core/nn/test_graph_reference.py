"""Training steps of functional graphs (Add, Concatenate, a tensor read by several layers, one
tensor given twice to a layer, frozen layers) against the float64 NumPy reference of the same
graph (tests/support/reference.py): the loss, every gradient and the weights over three Adam steps; the
gradients also against central differences of the reference's loss. A Sequential is the chain
special case: the same layers as a functional model train bit for bit alike."""
import numpy as np
import pytest

import hpcnn
from hpcnn.layers import Conv2D, Dense, Dropout, Flatten, MaxPooling2D, ReLU

from tests.support import reference as ref
from tests.support.small_models import GRAPHS, small_model

GRAPH_NAMES = sorted(GRAPHS)


def batches(in_shape, classes=3, steps=3, n=4, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        x = rng.random((n,) + in_shape, dtype=np.float32)
        out.append((x, np.eye(classes, dtype=np.float32)[rng.integers(0, classes, n)]))
    return out


def keras_gradients(model, shapes):
    """The last step's gradients from the one gradient buffer, split into Keras-shaped arrays."""
    flat = model.core.gradient_buffer(keras_layout=True)
    out, off = [], 0
    for s in shapes:
        size = int(np.prod(s))
        out.append(flat[off:off + size].reshape(s))
        off += size
    assert off == flat.size
    return out


def close(got, want, rtol=1e-3, what=""):
    scale = max(float(np.abs(want).max()), 1e-12)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


@pytest.mark.parametrize("name", GRAPH_NAMES)
def test_three_adam_steps_match_the_float64_reference(name):
    build, in_shape, graph = GRAPHS[name]
    model = build()
    assert model.core.node_inputs == [inputs for _, inputs in graph]  # the reference describes this graph
    model.compile(hpcnn.optimizers.Adam(learning_rate=1e-3), "categorical_crossentropy", ["accuracy"])
    w0 = [w.astype(np.float64) for w in model.get_weights()]
    data = batches(in_shape)
    f64 = [(x.astype(np.float64), y.astype(np.float64)) for x, y in data]
    losses, history = ref.graph_adam_steps(graph, w0, f64)
    _, grads0 = ref.graph_train_step(graph, w0, *f64[0])
    for step, (x, y) in enumerate(data):
        loss, _ = model.train_on_batch(x, y)
        assert loss == pytest.approx(losses[step], rel=1e-4), f"{name}: loss of step {step + 1}"
        if step == 0:
            for i, (g, g_ref) in enumerate(zip(keras_gradients(model, [w.shape for w in w0]), grads0)):
                close(g, g_ref, what=f"{name}: gradient {i}")
        for i, (w, w_ref) in enumerate(zip(model.get_weights(), history[step])):
            np.testing.assert_allclose(w, w_ref, rtol=0, atol=5e-5, err_msg=f"{name}: weight {i} after step {step + 1}")


@pytest.mark.parametrize("name", GRAPH_NAMES)
def test_gradients_match_finite_differences(name):
    """The core's analytic gradients (float32) against central differences of the float64
    reference loss, on a sample of coordinates of every weight array: through Add (a gradient
    passed to every input), Concatenate (split) and tensors read several times (summed). Random
    inputs put no ReLU input or max-pool tie within a step of 1e-5 (probability ~0)."""
    build, in_shape, graph = GRAPHS[name]
    model = build()
    model.compile(hpcnn.optimizers.SGD(learning_rate=1e-3), "categorical_crossentropy")
    (x, y), = batches(in_shape, steps=1, seed=11)
    w0 = [w.astype(np.float64) for w in model.get_weights()]
    model.train_on_batch(x, y)
    grads = keras_gradients(model, [w.shape for w in w0])
    rng = np.random.default_rng(3)
    eps = 1e-5
    for k, (g, w) in enumerate(zip(grads, w0)):
        idx = rng.choice(w.size, size=min(10, w.size), replace=False)
        for i in idx:
            pos = np.unravel_index(i, w.shape)
            up = [a.copy() for a in w0]
            down = [a.copy() for a in w0]
            up[k][pos] += eps
            down[k][pos] -= eps
            num = (ref.graph_loss(graph, up, x, y) - ref.graph_loss(graph, down, x, y)) / (2 * eps)
            scale = max(float(np.abs(g).max()), 1e-3)
            assert g[pos] == pytest.approx(num, rel=2e-3, abs=2e-3 * scale), f"{name}: weight {k} at {pos}"


def _same_layers_functional(seed):
    """small_model()'s layers as a functional chain."""
    x = hpcnn.Input(shape=(8, 8, 2))
    y = Conv2D(4, 3, padding="same", activation="relu")(x)
    y = MaxPooling2D(2, padding="same")(y)
    y = Flatten()(y)
    y = ReLU()(Dense(8)(y))
    y = Dropout(0.1)(y)
    y = Dense(3, activation="softmax")(y)
    return hpcnn.Model(x, y, seed=seed)


def test_a_functional_chain_trains_bit_for_bit_like_the_sequential():
    seq, fun = small_model(seed=3), _same_layers_functional(seed=3)
    assert fun.core.node_inputs == seq.core.node_inputs == [[-1], [0], [1], [2], [3], [4], [5], [6]]
    for a, b in zip(seq.get_weights(), fun.get_weights()):
        np.testing.assert_array_equal(a, b)  # the same seed draws the same weights
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 8, 8, 2), dtype=np.float32), rng.integers(0, 3, 64)
    for m in (seq, fun):
        m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    h_seq = seq.fit(x, y, batch_size=16, epochs=2, verbose=0).history
    h_fun = fun.fit(x, y, batch_size=16, epochs=2, verbose=0).history
    assert h_seq["loss"] == h_fun["loss"]  # dropout masks keyed by the same layer positions
    for a, b in zip(seq.get_weights(), fun.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(seq.predict(x[:5]), fun.predict(x[:5]))


@pytest.mark.parametrize("frozen", ["conv2d", "conv2d_1", "dense"])
def test_frozen_layers_in_a_graph(frozen):
    """A frozen stem (first layer: no backward before it), a frozen layer inside the residual
    branch (the gradient still flows through it to the stem) and a frozen output layer: the frozen
    weights stay, every other gradient equals the reference's."""
    build, in_shape, graph = GRAPHS["residual"]
    model = build()
    model.get_layer(frozen).trainable = False
    model.compile(hpcnn.optimizers.SGD(learning_rate=0.1), "categorical_crossentropy")
    names = model.weight_names()
    w0 = model.get_weights()
    (x, y), = batches(in_shape, steps=1, seed=4)
    model.train_on_batch(x, y)
    _, grads = ref.graph_train_step(graph, [w.astype(np.float64) for w in w0], x.astype(np.float64),
                                    y.astype(np.float64))
    for name, before, after, g in zip(names, w0, model.get_weights(), grads):
        if name.startswith(frozen + "/"):
            np.testing.assert_array_equal(after, before, err_msg=name)
        else:
            close((before - after) / 0.1, g, what=name)  # SGD: the update is lr * gradient


def test_weight_regularizers_in_a_graph():
    """An L2 kernel regularizer inside the residual branch: the loss is the reference's plus the
    penalty, and the kernel's gradient gains 2 * l2 * w (nn/regularization.h on a graph model)."""
    from hpcnn.layers import Add
    from hpcnn.regularizers import l2
    x = hpcnn.Input(shape=(6, 6, 3))
    s = Conv2D(4, 3, padding="same", activation="relu")(x)
    a = Conv2D(4, 3, padding="same", activation="relu", kernel_regularizer=l2(0.05))(s)
    a = Conv2D(4, 3, padding="same")(a)
    out = Dense(3, activation="softmax")(Flatten()(ReLU()(Add()([a, s]))))
    model = hpcnn.Model(x, out, seed=5)
    _, in_shape, graph = GRAPHS["residual"]
    model.compile(hpcnn.optimizers.SGD(learning_rate=0.1), "categorical_crossentropy")
    w0 = [w.astype(np.float64) for w in model.get_weights()]
    (xb, yb), = batches(in_shape, steps=1, seed=2)
    loss = model.train_on_batch(xb, yb)  # compiled without metrics: the loss alone
    loss_ref, grads = ref.graph_train_step(graph, w0, xb.astype(np.float64), yb.astype(np.float64))
    assert loss == pytest.approx(loss_ref + 0.05 * float((w0[2] ** 2).sum()), rel=1e-4)
    got = keras_gradients(model, [w.shape for w in w0])
    close(got[2], grads[2] + 2 * 0.05 * w0[2], what="regularized kernel")
    close(got[3], grads[3], what="its bias (not regularized)")
