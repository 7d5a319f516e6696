"""A layer called on a batch of data computes now, as Keras' eager call: each inference-capable layer
on a NumPy array gives Keras' output shape and values (live Keras on the same weights), a layer
without weights is built by the call and a model built later from it starts from them, a layer of a
trained model computes with its trained values, `training` follows Keras, and bad calls say what is
wrong."""
import numpy as np
import pytest

from tests.support.live_keras import keras_or_skip

import hpcnn
from hpcnn.keras import layers

RNG = np.random.default_rng(0)
IMAGES = RNG.uniform(-1, 1, (2, 8, 8, 3)).astype(np.float32)
FLAT = RNG.uniform(-1, 1, (3, 7)).astype(np.float32)

# (class name, args, kwargs, input): every inference-capable single-input layer of hpcnn.
CASES = [
    ("Conv2D", (4, 3), {"padding": "same", "activation": "relu"}, IMAGES),
    ("Conv2D", (5, 3), {"strides": 2}, IMAGES),
    ("DepthwiseConv2D", (3,), {"depth_multiplier": 2, "padding": "same"}, IMAGES),
    ("SeparableConv2D", (4, 3), {}, IMAGES),
    ("MaxPooling2D", (), {}, IMAGES),
    ("AveragePooling2D", (2,), {}, IMAGES),
    ("GlobalAveragePooling2D", (), {}, IMAGES),
    ("GlobalAveragePooling2D", (), {"keepdims": True}, IMAGES),
    ("GlobalMaxPooling2D", (), {}, IMAGES),
    ("ZeroPadding2D", (1,), {}, IMAGES),
    ("Flatten", (), {}, IMAGES),
    ("Reshape", ((16, 12),), {}, IMAGES),
    ("Dense", (5,), {"activation": "sigmoid"}, FLAT),
    ("Dropout", (0.5,), {}, FLAT),
    ("Activation", ("tanh",), {}, FLAT),
    ("ReLU", (6.0,), {}, FLAT * 10),
    ("LeakyReLU", (), {}, FLAT),
    ("ELU", (), {}, FLAT),
    ("Softmax", (), {}, FLAT),
    ("BatchNormalization", (), {}, IMAGES),
    ("Normalization", (), {"mean": [0.1, 0.2, 0.3], "variance": [1.0, 2.0, 4.0]}, IMAGES),
    ("Rescaling", (1 / 127.5,), {"offset": -1}, IMAGES * 127.5 + 127.5),
]


@pytest.mark.parametrize("name, args, kwargs, x", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_each_layer_on_a_batch_equals_keras(name, args, kwargs, x):
    keras = keras_or_skip()
    ours = getattr(layers, name)(*args, **kwargs)
    y = ours(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    theirs = getattr(keras.layers, name)(*args, **kwargs)
    theirs.build(x.shape)
    weights = ours.get_weights()
    if name == "BatchNormalization":   # moving statistics away from 0 and 1, so inference mode shows
        weights = [RNG.uniform(0.5, 1.5, w.shape).astype(np.float32) for w in weights]
        ours.set_weights(weights)
        y = ours(x)
    if weights:
        theirs.set_weights(weights)
    expected = np.asarray(theirs(x))
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y.numpy(), y)   # Keras' tensor.numpy()


def test_the_weights_the_call_draws_are_the_models():
    """The tutorial's head: GlobalAveragePooling2D and Dense called on features, then used in a model."""
    features = RNG.uniform(0, 6, (4, 5, 5, 16)).astype(np.float32)
    pool, head = layers.GlobalAveragePooling2D(), layers.Dense(1, activation="sigmoid")
    pooled = pool(features)
    out = head(pooled)
    assert pooled.shape == (4, 16) and out.shape == (4, 1) and len(head.get_weights()) == 2
    kernel, bias = head.get_weights()
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-(features.mean(axis=(1, 2)) @ kernel + bias))), rtol=1e-5)
    inputs = hpcnn.Input((5, 5, 16))
    model = hpcnn.Model(inputs, head(pool(inputs)))
    np.testing.assert_allclose(model.predict(features, verbose=0), out, rtol=1e-6)
    model.compile("adam", "binary_crossentropy")
    model.fit(features, np.array([0, 1, 0, 1]), epochs=2, verbose=0)
    trained = model.predict(features, verbose=0)
    np.testing.assert_allclose(head(pool(features)), trained, rtol=1e-6)   # the trained values, pulled
    assert not np.allclose(trained, out)


def test_a_layer_of_a_trained_model_computes_with_its_values():
    model = hpcnn.Sequential([layers.Input((7,)), layers.Dense(4, activation="relu", name="hidden"), layers.Dense(2)])
    model.compile("adam", "mse")
    model.fit(FLAT, np.ones((3, 2), np.float32), epochs=3, verbose=0)
    hidden = model.get_layer("hidden")
    kernel, bias = hidden.get_weights()
    np.testing.assert_allclose(hidden(FLAT), np.maximum(FLAT @ kernel + bias, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.layers[-1](hidden(FLAT)), model.predict(FLAT, verbose=0), rtol=1e-5, atol=1e-6)


def test_training_as_keras():
    x = np.ones((4, 100), np.float32)
    drop = layers.Dropout(0.5)
    np.testing.assert_array_equal(drop(x), x)   # inference by default
    y = drop(x, training=True)
    assert 0 < (y == 0).mean() < 1 and np.allclose(y[y != 0], 2.0)
    flip = layers.RandomFlip("horizontal", seed=1)   # Keras 3's augmentation layers augment by default
    images = np.arange(2 * 4 * 6 * 1, dtype=np.float32).reshape(2, 4, 6, 1)
    flips = [flip(images) for _ in range(8)]
    assert any(not np.array_equal(f, images) for f in flips)
    assert all(np.array_equal(f[i], images[i]) or np.array_equal(f[i], images[i, :, ::-1]) for f in flips for i in (0, 1))
    np.testing.assert_array_equal(flip(images, training=False), images)


def test_called_on_several_shapes_and_symbolically_after():
    pool = layers.GlobalAveragePooling2D()
    assert pool(IMAGES).shape == (2, 3) and pool(np.zeros((5, 4, 4, 9), np.float32)).shape == (5, 9)
    assert pool(np.zeros((1, 3, 3, 2), np.uint8)).shape == (1, 2)
    out = pool(hpcnn.Input((6, 6, 3)))   # the data calls took no position in a graph
    assert out.shape == (None, 3)


@pytest.mark.parametrize("call, exc, message", [
    (lambda: layers.Dense(3)(np.zeros(4, np.float32)), ValueError, r"shape \(4,\): layers take a batch.*x\[None\]"),
    (lambda: layers.Flatten()(np.zeros((0, 2, 2))), ValueError, "empty batch"),
    (lambda: layers.Dense(3)(np.array([["a", "b"]])), ValueError, "dtype <U1; expected numbers"),
    (lambda: layers.Dense(3, input_shape=(5,))(FLAT), ValueError, r"expected shape \(None, 5\), got \(3, 7\)"),
    (lambda: layers.Dense(3)(IMAGES), ValueError, r"Dense expects a flat input.*called on a batch of shape"),
    (lambda: layers.Add()(FLAT), NotImplementedError, "merges several inputs"),
    (lambda: layers.Dense(3)(FLAT, mask=FLAT), TypeError, "Unrecognized keyword arguments"),
    (lambda: layers.Dropout(0.5)(FLAT, training="yes"), (TypeError, ValueError), "training"),
])
def test_bad_calls_say_what_is_wrong(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


def test_a_built_layer_refuses_other_inputs():
    head = layers.Dense(2)
    head(FLAT)
    with pytest.raises(ValueError, match=r"was built for other inputs .*\(7, 2\).*\(batch,\) \+ \(9,\)"):
        head(np.zeros((2, 9), np.float32))
