"""Feature maps (issue 23): a Sequential with an input shape is a symbolic graph (layer.input /
layer.output, model.inputs / outputs / input / output, kept current by add and pop); a model
built from a trained model's tensors computes with the trained weights (the silently wrong
answer's regression test); extractors with several outputs predict a list (or dict) of arrays.
Compared with NumPy, and with live Keras where the `keras` extra is installed."""

import numpy as np
import pytest

import hpcnn
from hpcnn.layers import Conv2D, Dense, Flatten, InputLayer, MaxPooling2D
from tests.support.live_keras import keras_or_skip


@pytest.fixture(scope="module")
def keras():
    return keras_or_skip()


def conv_relu(x, kernel, bias):
    """NumPy's 'valid' convolution of NHWC x with a (kh, kw, in, out) kernel, then ReLU."""
    kh, kw = kernel.shape[:2]
    h, w = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], h, w, kernel.shape[3]), np.float64)
    for i in range(h):
        for j in range(w):
            out[:, i, j, :] = np.einsum("nhwc,hwco->no", x[:, i:i + kh, j:j + kw, :].astype(np.float64), kernel)
    return np.maximum(out + bias, 0)


def data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 8, 8, 2), np.float32), rng.integers(0, 3, n)


def sequential(first):
    return hpcnn.Sequential([first, Conv2D(4, 3, activation="relu", name="conv1"), MaxPooling2D(), Flatten(),
                             Dense(3, activation="softmax")], seed=2)


def functional():
    x = hpcnn.Input((8, 8, 2))
    y = Conv2D(4, 3, activation="relu", name="conv1")(x)
    return hpcnn.Model(x, Dense(3, activation="softmax")(Flatten()(MaxPooling2D()(y))), seed=2)


@pytest.mark.parametrize("build", ["Input", "InputLayer", "input_shape", "functional"])
def test_feature_maps_of_a_trained_model_use_its_trained_weights(build):
    """The issue's silently wrong answer: the extractor computed with fresh random weights."""
    if build == "functional":
        model = functional()
    elif build == "input_shape":
        model = hpcnn.Sequential([Conv2D(4, 3, activation="relu", name="conv1", input_shape=(8, 8, 2)),
                                  MaxPooling2D(), Flatten(), Dense(3, activation="softmax")], seed=2)
    else:
        model = sequential(hpcnn.Input((8, 8, 2)) if build == "Input" else InputLayer(input_shape=(8, 8, 2)))
    x, y = data()
    model.compile("adam", "sparse_categorical_crossentropy")
    initial = model.get_layer("conv1").get_weights()
    model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    extractor = hpcnn.Model(model.input, model.get_layer("conv1").output)
    kernel, bias = model.get_layer("conv1").get_weights()
    assert not np.allclose(kernel, initial[0])
    maps = extractor.predict(x[:5])
    np.testing.assert_allclose(maps, conv_relu(x[:5], kernel, bias), atol=1e-5)
    # ...and the extractor's layer is the model's: setting it is seen by the model.
    extractor.get_layer("conv1").set_weights([kernel * 0, bias * 0 + 1])
    np.testing.assert_array_equal(model.get_layer("conv1").get_weights()[1], np.ones(4, np.float32))
    np.testing.assert_allclose(extractor.predict(x[:1]), np.ones((1, 6, 6, 4)), atol=0)


def test_an_extractor_sees_the_weights_during_fit():
    """Used in a callback mid-fit, an extractor computes with the weights of that moment."""
    model = sequential(hpcnn.Input((8, 8, 2)))
    extractor = hpcnn.Model(model.input, model.get_layer("conv1").output)
    x, y = data()
    seen = []

    class Probe(hpcnn.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            kernel, bias = model.get_layer("conv1").get_weights()
            seen.append(np.abs(extractor.predict(x[:3]) - conv_relu(x[:3], kernel, bias)).max())

    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=3, batch_size=16, verbose=0, callbacks=[Probe()])
    assert max(seen) < 1e-5


def test_sequential_symbolic_tensors_follow_add_and_pop():
    model = sequential(hpcnn.Input((8, 8, 2)))
    conv = model.get_layer("conv1")
    assert model.input.shape == (None, 8, 8, 2) and model.inputs == [model.input]
    assert conv.input is model.input and conv.output.shape == (None, 6, 6, 4)
    assert model.layers[1].input is conv.output
    assert model.output.shape == (None, 3) and model.outputs == [model.output]
    dense = model.pop()
    assert model.output is model.layers[-1].output and model.output.shape == (None, 36)
    with pytest.raises(AttributeError, match="never been called"):
        dense.output
    model.add(Dense(5))
    assert model.output.shape == (None, 5)
    x, _ = data(2)
    np.testing.assert_allclose(hpcnn.Model(model.input, model.output).predict(x), model.predict(x), atol=1e-6)


def test_sequential_without_an_input_shape_has_no_tensors_as_in_keras():
    model = hpcnn.Sequential([Dense(3)])
    with pytest.raises(AttributeError, match="has no defined inputs yet"):
        model.inputs
    with pytest.raises(AttributeError, match="never been called and thus has no defined output"):
        model.output
    with pytest.raises(AttributeError, match="never been called"):
        model.layers[0].output
    model.build((None, 4))
    assert model.input.shape == (None, 4) and model.output.shape == (None, 3)


@pytest.mark.parametrize("as_dict", [False, True])
def test_an_extractor_of_every_layer_predicts_a_list(as_dict):
    model = sequential(hpcnn.Input((8, 8, 2)))
    x, y = data()
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    outs = [layer.output for layer in model.layers]
    extractor = hpcnn.Model(model.inputs, {layer.name: layer.output for layer in model.layers} if as_dict else outs)
    maps = extractor.predict(x[:4])
    if as_dict:
        assert list(maps) == [layer.name for layer in model.layers]
        maps = list(maps.values())
    assert [m.shape for m in maps] == [(4, 6, 6, 4), (4, 3, 3, 4), (4, 36), (4, 3)]
    kernel, bias = model.get_layer("conv1").get_weights()
    np.testing.assert_allclose(maps[0], conv_relu(x[:4], kernel, bias), atol=1e-5)
    np.testing.assert_allclose(maps[1], maps[0].reshape(4, 3, 2, 3, 2, 4).max(axis=(2, 4)), atol=0)
    np.testing.assert_allclose(maps[-1], model.predict(x[:4]), atol=1e-6)
    assert [layer.name for layer in extractor.layers] == ["input_layer", "conv1", "max_pooling2d", "flatten", "dense"]
    for a, b in zip(extractor.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    for refused in (lambda: extractor.compile("adam", "mse"), lambda: extractor.fit(x, y),
                    lambda: extractor.evaluate(x, y)):
        with pytest.raises(NotImplementedError, match="4 outputs.*predict\\(\\) works.*one output"):
            refused()


def test_extractor_outputs_match_keras(keras):
    model = sequential(hpcnn.Input((8, 8, 2)))
    k = keras.models.model_from_json(model.to_json())
    k.set_weights(model.get_weights())
    x, _ = data(3)
    mine = hpcnn.Model(model.inputs, [layer.output for layer in model.layers]).predict(x)
    theirs = keras.Model(k.inputs, [layer.output for layer in k.layers]).predict(x, verbose=0)
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, np.asarray(b), atol=1e-5)
