"""Weights that live on layers (issue 23): layer.get_weights/set_weights, weights,
trainable_weights, non_trainable_weights, kernel/bias/gamma/..., the Variable object,
count_params() without arguments, model.weights and friends; one set of values for a layer
shared by several models (hpcnn.layers.weight_home); the core's per-position get/set on every
replica and on the model's device. Live Keras comparisons skip without the `keras` extra."""

import numpy as np
import pytest

import hpcnn
from tests.support.gpu_target import KINDS, GPU
from hpcnn.distribute import MirroredStrategy
from hpcnn.layers import BatchNormalization, Conv2D, Dense, Flatten, MaxPooling2D
from hpcnn.models import tutorial_cnn
from tests.support.live_keras import keras_or_skip


@pytest.fixture(scope="module")
def keras():
    return keras_or_skip()


def small_cnn(seed=1, name=None):
    return hpcnn.Sequential([hpcnn.Input((8, 8, 2)), Conv2D(4, 3, activation="relu", name="conv1"),
                             BatchNormalization(), MaxPooling2D(), Flatten(), Dense(3, activation="softmax")],
                            seed=seed, name=name)


def data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 8, 8, 2), np.float32), rng.integers(0, 3, n)


# ------------------------------------------------------------------ one layer
def test_layer_weights_are_the_models_slices_in_keras_order():
    m = small_cnn()
    per_layer = [w for layer in m.layers for w in layer.get_weights()]
    for a, b in zip(per_layer, m.get_weights()):
        np.testing.assert_array_equal(a, b)
    conv, bn = m.layers[0], m.layers[1]
    assert [v.name for v in conv.weights] == ["kernel", "bias"]
    assert conv.kernel.shape == (3, 3, 2, 4) and conv.bias.shape == (4,)
    assert [v.name for v in bn.weights] == ["gamma", "beta", "moving_mean", "moving_variance"]
    np.testing.assert_array_equal(bn.moving_variance.numpy(), np.ones(4, np.float32))
    assert m.layers[2].weights == [] and m.layers[2].get_weights() == []
    assert conv.count_params() == 3 * 3 * 2 * 4 + 4 and m.layers[4].count_params() == 36 * 3 + 3
    assert conv.count_params((8, 8, 2)) == 76  # the form with a shape still works
    assert sum(layer.count_params() for layer in m.layers) == m.count_params()


def test_set_weights_on_a_layer_changes_the_model_and_checks_like_keras():
    m = small_cnn()
    x, _ = data(4)
    conv = m.get_layer("conv1")
    k = np.arange(72, dtype=np.float32).reshape(3, 3, 2, 4) / 100
    conv.set_weights([k, np.full(4, 0.5)])
    np.testing.assert_array_equal(m.get_weights()[0], k)
    np.testing.assert_array_equal(conv.bias.numpy(), np.full(4, 0.5, np.float32))
    before = m.predict(x)
    with pytest.raises(ValueError, match=r"Layer conv1 weight shape \(3, 3, 2, 4\) is not compatible with provided "
                                         r"weight shape \(3, 3, 2, 5\)"):
        conv.set_weights([np.zeros((3, 3, 2, 5)), np.zeros(4)])
    with pytest.raises(ValueError, match="on layer 'conv1' with a weight list of length 1, but the layer was "
                                         "expecting 2 weights.*kernel"):
        conv.set_weights([k])
    with pytest.raises(ValueError, match="expected a list of arrays"):
        conv.set_weights(k)
    np.testing.assert_array_equal(m.predict(x), before)  # nothing changed


def test_variable_reads_writes_and_computes_like_an_array():
    m = small_cnn()
    conv, bn = m.layers[0], m.layers[1]
    v = conv.kernel
    assert (v.name, v.path, v.shape, v.dtype, v.trainable, v.ndim) == (
        "kernel", "sequential/conv1/kernel", (3, 3, 2, 4), "float32", True, 4)
    a = v.numpy()
    np.testing.assert_array_equal(np.asarray(v), a)
    np.testing.assert_array_equal(v.value, a)
    np.testing.assert_allclose(v * 2, a * 2)
    np.testing.assert_allclose(1 - v, 1 - a)
    assert np.mean(v) == pytest.approx(float(a.mean()))
    np.testing.assert_array_equal(v[0], a[0])
    assert "path=sequential/conv1/kernel" in repr(v)
    v.assign(np.ones((3, 3, 2, 4)))
    np.testing.assert_array_equal(conv.get_weights()[0], np.ones((3, 3, 2, 4), np.float32))
    conv.bias.assign_add(np.full(4, 2.0))
    np.testing.assert_array_equal(m.get_weights()[1], np.full(4, 2.0, np.float32))
    with pytest.raises(ValueError, match="must match"):
        v.assign(np.ones(3))
    assert bn.moving_mean.trainable is False and bn.gamma.trainable is True
    assert bn.gamma.path == "sequential/batch_normalization/gamma"


def test_functional_paths_have_no_model_prefix_and_no_bias_is_none():
    x = hpcnn.Input((4,))
    m = hpcnn.Model(x, Dense(2, use_bias=False, name="d")(Dense(3, name="h")(x)))
    assert [v.path for v in m.weights] == ["h/kernel", "h/bias", "d/kernel"]
    assert m.get_layer("d").bias is None


def test_trainable_false_moves_weights_to_non_trainable():
    m = small_cnn()
    m.layers[1].trainable = False
    assert [v.path for v in m.trainable_weights] == ["sequential/conv1/kernel", "sequential/conv1/bias",
                                                     "sequential/dense/kernel", "sequential/dense/bias"]
    assert [v.name for v in m.non_trainable_weights] == ["gamma", "beta", "moving_mean", "moving_variance"]
    assert m.layers[1].trainable_weights == []
    assert [v.path for v in m.trainable_variables] == [v.path for v in m.trainable_weights]
    m.trainable = False
    assert m.trainable_weights == [] and len(m.non_trainable_weights) == len(m.weights) == 8


def test_unbuilt_layers_have_no_weights_as_in_keras():
    d = Dense(3)
    assert d.weights == [] and d.get_weights() == [] and d.trainable_weights == [] and not d.built
    with pytest.raises(AttributeError, match="build the layer before accessing `kernel`"):
        d.kernel
    with pytest.raises(ValueError, match="isn't built"):
        d.count_params()
    with pytest.raises(ValueError, match="with a weight list of length 1, but the layer was expecting 0 weights"):
        d.set_weights([np.zeros((2, 3))])
    s = hpcnn.Sequential([Dense(3)])
    assert s.weights == [] and s.trainable_weights == []
    # Called on a tensor, a layer is built (Keras builds it at its call) and keeps those weights
    # when a model is made of it.
    x = hpcnn.Input((5,))
    e = Dense(2)
    y = e(x)
    w = e.get_weights()
    assert [a.shape for a in w] == [(5, 2), (2,)]
    np.testing.assert_array_equal(hpcnn.Model(x, y).get_weights()[0], w[0])


def test_model_weight_lists_follow_keras_order_for_the_tutorial_cnn(keras):
    """Variable paths, names, shapes and order of the tutorial CNN as Keras 3 lists them."""
    m = tutorial_cnn(seed=0)
    k = keras.models.model_from_json(m.to_json())
    assert [(v.path, tuple(v.shape), v.trainable) for v in m.weights] == \
        [(v.path, tuple(v.shape), v.trainable) for v in k.weights]
    assert [v.path for v in m.trainable_weights] == [v.path for v in k.trainable_weights]
    assert [v.path for v in m.non_trainable_weights] == [v.path for v in k.non_trainable_weights]
    assert [layer.count_params() for layer in m.layers] == [layer.count_params() for layer in k.layers]


def test_keras_weights_set_layer_by_layer_give_keras_predictions(keras):
    x, _ = data(6)
    k = keras.Sequential([keras.Input((8, 8, 2)), keras.layers.Conv2D(4, 3, activation="relu"),
                          keras.layers.BatchNormalization(), keras.layers.MaxPooling2D(), keras.layers.Flatten(),
                          keras.layers.Dense(3, activation="softmax")])
    rng = np.random.default_rng(3)
    bn = k.layers[1]
    bn.set_weights([w + rng.random(w.shape).astype(np.float32) for w in bn.get_weights()])
    m = small_cnn(seed=7)
    for mine, theirs in zip(m.layers, k.layers):
        mine.set_weights(theirs.get_weights())
    for v, kv in zip(m.weights, k.weights):
        np.testing.assert_array_equal(v.numpy(), np.asarray(kv))
    np.testing.assert_allclose(m.predict(x), np.asarray(k.predict(x, verbose=0)), atol=1e-5)


# ------------------------------------------------------------------ shared between models
def test_a_layer_in_two_models_has_one_set_of_values():
    a = small_cnn(seed=1)
    x, y = data()
    a.compile("adam", "sparse_categorical_crossentropy")
    extractor = hpcnn.Model(a.input, a.get_layer("conv1").output)
    extractor.predict(x[:2])  # built now: it took the conv's values from `a`
    a.fit(x, y, epochs=1, batch_size=8, verbose=0)
    np.testing.assert_array_equal(extractor.get_weights()[0], a.get_weights()[0])
    extractor.get_layer("conv1").set_weights([np.zeros((3, 3, 2, 4)), np.ones(4)])
    np.testing.assert_array_equal(a.get_weights()[1], np.ones(4, np.float32))
    # A second model holding the same layers trains them for both.
    b = hpcnn.Model(a.input, a.output)
    b.compile("sgd", "sparse_categorical_crossentropy")
    b.fit(x, y, epochs=1, batch_size=8, verbose=0)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    # b's training reached a: the kernel set to zeros moved. (Not the bias: with a zero kernel the
    # conv's output is constant, and the BatchNormalization after it removes a constant, so the
    # bias's gradient is zero up to rounding.)
    assert not np.array_equal(a.get_weights()[0], np.zeros((3, 3, 2, 4), np.float32))


def test_sequential_add_and_pop_keep_the_layers_weights():
    m = small_cnn()
    m.get_layer("conv1").set_weights([np.ones((3, 3, 2, 4)), np.zeros(4)])
    dense = m.pop()
    m.add(Dense(5))
    np.testing.assert_array_equal(m.get_weights()[0], np.ones((3, 3, 2, 4), np.float32))
    assert m.output.shape == (None, 5) and dense.weights[0].shape == (36, 3)


def test_per_position_get_and_set_in_the_core():
    m = small_cnn()
    core = m.core
    assert [w.shape for w in core.get_layer_weights(1)] == [(4,)] * 4
    with pytest.raises(ValueError, match=r"layer 1 \(BatchNormalization\) expects 4 weight\(s\) \[gamma \(4,\)"):
        core.set_layer_weights(1, [np.ones(4)] * 3)
    core.set_layer_weights(1, [np.full(4, i, np.float32) for i in range(4)])
    np.testing.assert_array_equal(m.get_weights()[5], np.full(4, 3, np.float32))


@pytest.mark.usefixtures("tf32_off")
@pytest.mark.parametrize("kind", KINDS)
def test_layer_weights_round_trip_on_the_models_device(kind):
    """On a GPU the kernels are held in another layout (OHWI): the layer's weights still come and go
    in Keras' layout."""
    device = "cpu" if kind == "cpu" else GPU
    m = small_cnn()
    x, _ = data(4)
    want = m.predict(x)
    m.to(device)
    conv = m.get_layer("conv1")
    k = np.random.default_rng(1).random((3, 3, 2, 4)).astype(np.float32)
    conv.set_weights([k, conv.bias.numpy()])
    np.testing.assert_array_equal(conv.kernel.numpy(), k)
    ref = small_cnn()
    ref.set_weights(m.get_weights())
    np.testing.assert_allclose(m.predict(x), ref.predict(x), atol=1e-5)
    assert not np.allclose(want, ref.predict(x))
    # A model on the device shares the layer with an extractor built on the CPU.
    extractor = hpcnn.Model(m.input, conv.output)
    kernel, bias = conv.get_weights()
    np.testing.assert_allclose(extractor.predict(x), hpcnn.Model(ref.input, ref.get_layer("conv1").output).predict(x),
                               atol=1e-5)
    extractor.get_layer("conv1").set_weights([kernel * 2, bias])
    np.testing.assert_array_equal(m.get_layer("conv1").kernel.numpy(), kernel * 2)


def test_setting_a_layers_weights_reaches_every_replica():
    x, y = data(16)
    with MirroredStrategy(["cpu", "cpu"]).scope():
        m = small_cnn()
        m.compile("sgd", "sparse_categorical_crossentropy")
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    m.get_layer("conv1").set_weights([np.full((3, 3, 2, 4), 0.25), np.zeros(4)])
    core = m.core
    for r in range(2):
        np.testing.assert_array_equal(core.replica_weights(r)[0], np.full((3, 3, 2, 4), 0.25, np.float32))
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    np.testing.assert_array_equal(core.replica_weights(0)[0], core.replica_weights(1)[0])


def test_sharing_costs_nothing_per_step(monkeypatch):
    """The bookkeeping runs per call (fit, predict), never per training step: a fit of 8 steps and
    one of 2 steps pull the same number of times."""
    from hpcnn.layers import weight_home

    calls = []
    original = weight_home.CoreWeights.pull
    monkeypatch.setattr(weight_home.CoreWeights, "pull", lambda self: calls.append(1) or original(self))
    m = small_cnn()
    hpcnn.Model(m.input, m.get_layer("conv1").output).predict(data(2)[0])  # a second model shares the conv
    m.compile("sgd", "sparse_categorical_crossentropy")
    counts = []
    for batch in (16, 4):
        calls.clear()
        m.fit(*data(32), batch_size=batch, epochs=1, verbose=0)
        counts.append(len(calls))
    assert counts[0] == counts[1]
