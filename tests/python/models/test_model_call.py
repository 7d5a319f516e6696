"""model(x) on arrays, Keras 3's eager call: training=False (the default) is the inference forward
(predict's), training=True one forward pass in training mode (Dropout draws masks, BatchNormalization
normalizes with the batch's statistics and moves its moving statistics), without a weight update;
compared with NumPy, and with live Keras where the `keras` extra is installed."""
import os

import numpy as np
import pytest

import hpcnn.keras as keras
from tests.support.gpu_target import KINDS
from hpcnn.keras import layers
from tests.support.live_keras import keras_or_skip

os.environ.setdefault("KERAS_BACKEND", "jax")


def sequential_guide_model():
    # The Sequential guide's first snippet (keras.io/guides/sequential_model).
    return keras.Sequential([
        keras.Input(shape=(4,)),
        layers.Dense(2, activation="relu", name="layer1"),
        layers.Dense(3, activation="relu", name="layer2"),
        layers.Dense(4, name="layer3"),
    ])


def test_sequential_guide_first_snippet():
    model = sequential_guide_model()
    x = np.ones((3, 4))  # float64, as the guide's ops.ones
    y = model(x)
    assert y.shape == (3, 4)
    np.testing.assert_array_equal(y, model.predict(x))
    np.testing.assert_array_equal(model(x, training=False), y)


def test_call_returns_numpy_with_keras_numpy_method():
    model = sequential_guide_model()
    x = np.random.default_rng(0).random((5, 4)).astype("float32")
    y = model(x)
    assert isinstance(y, np.ndarray)
    assert type(y.numpy()) is np.ndarray and type(np.array(y)) is np.ndarray
    np.testing.assert_array_equal(y.numpy(), model.predict(x))
    assert model(x.tolist()).shape == (5, 4)  # lists, any batch size
    assert model(x[:1]).shape == (1, 4)


def test_call_checks_the_input_shape():
    model = sequential_guide_model()
    with pytest.raises(ValueError, match="batch"):
        model(np.ones(4))
    with pytest.raises(ValueError, match="incompatible"):
        model(np.ones((2, 5)))
    with pytest.raises(TypeError, match="Unrecognized"):
        model(np.ones((2, 4)), foo=1)


def bn_dropout_model(rate=0.5, momentum=0.9):
    return keras.Sequential([keras.Input((6,)), layers.BatchNormalization(momentum=momentum, name="bn"),
                             layers.Dropout(rate, name="drop")], seed=3)


def numpy_batchnorm(x, gamma, beta, mean, var, eps=1e-3):
    return gamma * (x - mean) / np.sqrt(var + eps) + beta


@pytest.mark.parametrize("kind", KINDS)
def test_training_true_batchnorm_statistics_and_moving_update(kind):
    model = keras.Sequential([keras.Input((6,)), layers.BatchNormalization(momentum=0.9)], seed=1)
    if kind != "cpu":
        model.to(kind)
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((16, 6)) * 3 + 2).astype("float32")
    gamma, beta = rng.random(6).astype("float32") + 0.5, rng.random(6).astype("float32")
    mm, mv = rng.random(6).astype("float32"), rng.random(6).astype("float32") + 0.5
    model.set_weights([gamma, beta, mm, mv])
    # training=False: the moving statistics, nothing changes
    np.testing.assert_allclose(model(x), numpy_batchnorm(x, gamma, beta, mm, mv), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(model.get_weights()[2], mm)
    # training=True: the batch's statistics (biased variance), then Keras' moving update
    mean, var = x.astype(np.float64).mean(0), x.astype(np.float64).var(0)
    y = model(x, training=True)
    np.testing.assert_allclose(y, numpy_batchnorm(x, gamma, beta, mean, var), rtol=1e-4, atol=1e-4)
    w = model.get_weights()
    np.testing.assert_allclose(w[2], mm * 0.9 + mean * 0.1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w[3], mv * 0.9 + var * 0.1, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(w[0], gamma)  # no weight update
    np.testing.assert_array_equal(w[1], beta)


def test_training_true_on_a_frozen_batchnorm_is_inference():
    """Keras: a BatchNormalization with trainable=False runs in inference mode (taken at compile)."""
    model = keras.Sequential([keras.Input((6,)), layers.BatchNormalization(trainable=False)])
    model.compile("sgd", "mse")
    x = np.random.default_rng(2).random((8, 6)).astype("float32") * 4
    np.testing.assert_array_equal(model(x, training=True), model(x))
    np.testing.assert_array_equal(model.get_weights()[2], np.zeros(6, np.float32))


def test_training_true_dropout_masks():
    model = keras.Sequential([keras.Input((1000,)), layers.Dropout(0.25)], seed=5)
    x = np.ones((4, 1000), np.float32)
    a, b = model(x, training=True), model(x, training=True)
    kept = a[a != 0]
    np.testing.assert_allclose(kept, 1 / 0.75, rtol=1e-6)  # inverted dropout
    assert abs(float((a == 0).mean()) - 0.25) < 0.03
    assert not np.array_equal(a, b)  # each call draws its own masks
    np.testing.assert_array_equal(model(x), x)  # inference: the identity


def test_calls_do_not_change_fits_random_draws():
    """fit's dropout masks are keyed by its steps; calls in training mode draw from a stream of
    their own, so a fit after them trains exactly as one without them."""
    def run(calls):
        m = keras.Sequential([keras.Input((8,)), layers.Dense(16, activation="relu"), layers.Dropout(0.5),
                              layers.Dense(1)], seed=11)
        m.compile("sgd", "mse")
        rng = np.random.default_rng(0)
        x, y = rng.random((32, 8)).astype("float32"), rng.random((32, 1)).astype("float32")
        for _ in range(calls):
            m(x, training=True)
        m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
        return m.get_weights()
    for a, b in zip(run(0), run(3)):
        np.testing.assert_array_equal(a, b)


def test_calls_from_a_callback_inside_fit_change_nothing():
    """A callback calling model(x) and model(x, training=True) between steps (the staged batch is
    dropped and staged again): fit trains exactly as without it."""
    rng = np.random.default_rng(1)
    x, y = rng.random((40, 8)).astype("float32"), rng.random((40, 1)).astype("float32")

    class Probe(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            self.model(x[:5], training=True)
            self.model(x[:3])

    def run(callbacks):
        m = keras.Sequential([keras.Input((8,)), layers.Dense(16, activation="relu"), layers.Dropout(0.5),
                              layers.Dense(1)], seed=4)
        m.compile("adam", "mse")
        m.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=callbacks)
        return m.get_weights()
    for a, b in zip(run([]), run([Probe()])):
        np.testing.assert_array_equal(a, b)


def test_training_true_needs_no_compile_and_keeps_fit_working():
    model = bn_dropout_model()
    x = np.random.default_rng(3).random((10, 6)).astype("float32")
    model(x, training=True)
    model.compile("adam", "mse")
    model.fit(x, x, epochs=1, verbose=0)
    model(x, training=True)
    assert model.predict(x).shape == (10, 6)


def test_call_builds_a_sequential_without_input_shape():
    model = keras.Sequential([layers.Dense(3)])
    assert model(np.ones((2, 5))).shape == (2, 3)
    assert model.input_shape == (None, 5)


def test_training_call_keeps_replicas_alike():
    """Under a strategy the call runs on replica 0; the other replicas take its moving statistics."""
    from hpcnn.distribute import MirroredStrategy
    with MirroredStrategy(["cpu", "cpu"]).scope():
        model = keras.Sequential([keras.Input((6,)), layers.Dense(4), layers.BatchNormalization()], seed=2)
        model.compile("sgd", "mse")
    x = np.random.default_rng(6).random((8, 6)).astype("float32")
    model.fit(x, np.zeros((8, 4), np.float32), batch_size=4, epochs=1, verbose=0)
    model(x, training=True)
    core = model.core
    for a, b in zip(core.replica_weights(0), core.replica_weights(1)):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(model.get_weights()[4], np.zeros(4, np.float32))


# ---------------------------------------------------------------------- live Keras

def test_training_true_matcheskeras_or_skip():
    real = keras_or_skip()
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((12, 5, 5, 3)) * 2 + 1).astype("float32")
    ours = keras.Sequential([keras.Input((5, 5, 3)), layers.Conv2D(4, 3, name="c"),
                             layers.BatchNormalization(momentum=0.8, name="bn"), layers.ReLU(), layers.Flatten(),
                             layers.Dense(3, name="d")])
    theirs = real.Sequential([real.Input((5, 5, 3)), real.layers.Conv2D(4, 3, name="c"),
                              real.layers.BatchNormalization(momentum=0.8, name="bn"), real.layers.ReLU(),
                              real.layers.Flatten(), real.layers.Dense(3, name="d")])
    weights = [rng.standard_normal(w.shape).astype("float32") * 0.5 for w in ours.get_weights()]
    weights[5] = np.abs(weights[5]) + 0.5  # a moving variance
    ours.set_weights(weights)
    theirs.set_weights(weights)
    for training in (False, True, True):
        np.testing.assert_allclose(ours(x, training=training), np.asarray(theirs(x, training=training)),
                                   rtol=1e-4, atol=1e-4)
        for a, b in zip(ours.get_weights(), theirs.get_weights()):  # the moving statistics after each call
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_a_model_of_augmentation_layers_augments_when_called_as_in_keras():
    """TensorFlow's image classification tutorial shows `data_augmentation(images)`: Keras 3's
    augmentation layers default to training=True, so the call augments. A model of augmentation
    layers (and Rescaling) only does the same here; training=False is the identity; a model with
    other layers keeps the inference forward (Keras would augment there while its Dropout stays off)."""
    x = np.random.default_rng(0).random((4, 12, 12, 3)).astype("float32") * 255
    aug = keras.Sequential([layers.RandomFlip("horizontal", input_shape=(12, 12, 3)), layers.RandomRotation(0.1),
                            layers.RandomZoom(0.1)])
    assert np.abs(aug(x) - x).max() > 1 and np.abs(aug(x, training=False) - x).max() == 0
    full = keras.Sequential([layers.RandomFlip("horizontal", input_shape=(12, 12, 3)), layers.Dropout(0.5),
                             layers.Flatten(), layers.Dense(2)])
    np.testing.assert_array_equal(full(x), full.predict(x, verbose=0))
