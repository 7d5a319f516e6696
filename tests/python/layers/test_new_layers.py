"""The layers of issue 13 other than BatchNormalization (test_batchnorm.py), in Sequential models:
AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D, ZeroPadding2D, Rescaling, LeakyReLU,
ELU, Softmax, ReLU's max_value / negative_slope forms, every activation name on Conv2D / Dense and
as Activation layers, and Conv2D / Dense with use_bias=False. Each model's predictions are checked
against the float64 reference composed from the layers' Keras definitions; configs round-trip
through get_config / from_config and model files."""
import numpy as np
import pytest

import hpcnn
from tests.support import ops_reference as ref
from hpcnn import optimizers
from hpcnn.layers import (ELU, Activation, AveragePooling2D, AvgPool2D, BatchNormalization, Conv2D, Dense, Flatten,
                          GlobalAveragePooling2D, GlobalAvgPool2D, GlobalMaxPool2D, GlobalMaxPooling2D, InputLayer,
                          LeakyReLU, ReLU, Rescaling, Softmax, ZeroPadding2D, deserialize, serialize)


def images(n=6, h=7, w=6, c=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, h, w, c)).astype(np.float32)


def predict(layers, x, seed=1):
    m = hpcnn.Sequential([InputLayer(input_shape=x.shape[1:])] + layers, seed=seed)
    return m, m.predict(x)


def close(got, want, rtol=1e-5):
    ref.close(got, want, rtol)


# ------------------------------------------------------------------ pooling and padding layers
@pytest.mark.parametrize("pool,strides,padding", [(2, None, "valid"), (2, None, "same"), (3, 2, "same"), ((2, 3), 1,
                                                                                                          "valid")])
def test_average_pooling2d(pool, strides, padding):
    x = images()
    layer = AveragePooling2D(pool, strides=strides, padding=padding)
    _, y = predict([layer], x)
    p = (pool, pool) if isinstance(pool, int) else pool
    s = p if strides is None else (strides, strides)
    close(y, ref.avgpool2d_forward(x, p, s, padding))
    assert AvgPool2D is AveragePooling2D


@pytest.mark.parametrize("keepdims", [False, True])
def test_global_pooling_layers(keepdims):
    x = images()
    m, y = predict([GlobalAveragePooling2D(keepdims=keepdims)], x)
    want = ref.global_pool2d(x, "avg")
    assert m.output_shape == ((None, 1, 1, 3) if keepdims else (None, 3))
    close(y.reshape(want.shape), want)
    _, y = predict([GlobalMaxPooling2D(keepdims=keepdims)], x)
    close(y.reshape(want.shape), ref.global_pool2d(x, "max"))
    assert GlobalAvgPool2D is GlobalAveragePooling2D and GlobalMaxPool2D is GlobalMaxPooling2D


@pytest.mark.parametrize("padding,want", [(1, ((1, 1), (1, 1))), ((2, 0), ((2, 2), (0, 0))),
                                          (((0, 1), (2, 3)), ((0, 1), (2, 3)))])
def test_zero_padding2d(padding, want):
    x = images()
    layer = ZeroPadding2D(padding)
    assert layer.padding == want
    m, y = predict([layer], x)
    (t, b), (l, r) = want
    np.testing.assert_array_equal(y, ref.zero_pad2d(x, t, b, l, r).astype(np.float32))
    assert m.output_shape == (None, 7 + t + b, 6 + l + r, 3)


# ------------------------------------------------------------------ Rescaling
def test_rescaling_scalar_and_per_channel():
    x = images()
    _, y = predict([Rescaling(1 / 255)], x)
    close(y, x.astype(np.float64) / 255)
    scale, offset = [1.0, 2.0, -0.5], [0.0, 1.0, 2.0]
    _, y = predict([Rescaling(scale, offset=offset)], x)
    close(y, x.astype(np.float64) * scale + offset)


def test_rescaling_of_uint8_input_as_first_layer():
    """The tutorial's images as uint8 with Rescaling(1/255) in the model: what dividing first gives."""
    xu = np.random.default_rng(1).integers(0, 256, (5, 4, 4, 3), dtype=np.uint8)
    layers = [Rescaling(1.0 / 255), Conv2D(2, 3), Flatten(), Dense(3, activation="softmax")]
    m = hpcnn.Sequential([InputLayer(input_shape=(4, 4, 3), dtype="uint8")] + layers, seed=2)
    m2 = hpcnn.Sequential([InputLayer(input_shape=(4, 4, 3))] + [Conv2D(2, 3), Flatten(),
                                                                  Dense(3, activation="softmax")], seed=2)
    m2.set_weights(m.get_weights())
    np.testing.assert_allclose(m.predict(xu), m2.predict(xu.astype(np.float32) / 255), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ activations
ACT_NAMES = [n for n in ref.ACTIVATIONS]


@pytest.mark.parametrize("name", ACT_NAMES + ["softmax"])
def test_every_activation_on_dense_conv_and_as_a_layer(name):
    x = images(c=2)
    alpha = {"leaky_relu": 0.2, "elu": 1.0}.get(name, 0.0)  # keras.activations' defaults for a NAME

    def act(z):
        return ref.softmax(z) if name == "softmax" else ref.activation(name, z, alpha)

    m, y = predict([Conv2D(4, 3, activation=name), Flatten(), Dense(5, activation=name)], x)
    k, kb, d, db = m.get_weights()
    h = act(ref.conv2d_forward(x, k, kb)).reshape(len(x), -1)
    close(y, act(h @ d + db), 1e-4)
    m, y = predict([Flatten(), Dense(5), Activation(name)], x)
    d, db = m.get_weights()
    close(y, act(x.reshape(len(x), -1) @ d + db), 1e-4)


def test_activation_callables_by_name():
    class Fn:  # a function object named like Keras' keras.activations.gelu
        __name__ = "gelu"

        def __call__(self, x):
            return x

    assert Dense(3, activation=Fn()).activation == "gelu"
    assert Activation("SWISH").activation == "swish"


def test_leaky_relu_elu_softmax_and_relu_forms():
    x = images()
    assert LeakyReLU().negative_slope == 0.3  # Keras 3's default
    assert LeakyReLU(alpha=0.1).negative_slope == 0.1  # Keras 2's name
    assert LeakyReLU(alpha=0.1).get_config()["negative_slope"] == 0.1
    _, y = predict([LeakyReLU()], x)
    close(y, ref.activation("leaky_relu", x, 0.3))
    _, y = predict([ELU(0.5)], x)
    close(y, ref.activation("elu", x, 0.5))
    _, y = predict([Softmax()], x)
    close(y, ref.softmax(x))
    _, y = predict([ReLU(max_value=6.0)], x * 5)
    close(y, np.clip(x.astype(np.float64) * 5, 0, 6))
    _, y = predict([ReLU(negative_slope=0.05)], x)
    close(y, ref.activation("leaky_relu", x, 0.05))


def test_softmax_in_the_middle_and_training_through_every_new_layer():
    x = images(n=24, c=3, seed=3)
    y = np.arange(24) % 4
    m = hpcnn.Sequential([
        InputLayer(input_shape=(7, 6, 3)), Rescaling(0.5, offset=0.1), ZeroPadding2D(((0, 1), (1, 1))),
        Conv2D(8, 3, strides=2, padding="same", use_bias=False), BatchNormalization(), LeakyReLU(),
        Conv2D(8, 1, activation="gelu"), AveragePooling2D(2, padding="same"), Softmax(), ELU(),
        Conv2D(8, 3, padding="same", activation="swish"), GlobalMaxPooling2D(keepdims=True), Flatten(),
        Dense(6, activation="tanh", use_bias=False), Dense(4, activation="softmax")], seed=5)
    m.compile(optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    before = m.get_weights()
    h = m.fit(x, y, batch_size=8, epochs=6, verbose=0)
    assert np.isfinite(h.history["loss"]).all()
    assert h.history["loss"][-1] < h.history["loss"][0]
    for a, b in zip(m.get_weights(), before):
        assert (a != b).any()


# ------------------------------------------------------------------ use_bias=False
def test_conv2d_and_dense_without_bias():
    x = images()
    m, y = predict([Conv2D(4, 3, strides=2, padding="same", use_bias=False), Flatten(), Dense(3, use_bias=False)], x)
    assert [w.shape for w in m.get_weights()] == [(3, 3, 3, 4), (48, 3)]  # 7x6 -> 4x3 (stride 2, same)
    assert m.weight_names() == ["conv2d/kernel", "dense/kernel"]
    assert m.count_params() == 3 * 3 * 3 * 4 + 48 * 3
    k, d = m.get_weights()
    close(y, ref.conv2d_forward(x, k, np.zeros(4), (2, 2), "same").reshape(6, -1) @ d, 1e-4)
    cfg = m.layers[0].get_config()
    assert cfg["use_bias"] is False and Conv2D.from_config(cfg).use_bias is False


# ------------------------------------------------------------------ config and files
ALL_NEW = [AveragePooling2D(3, strides=(1, 2), padding="same"), GlobalAveragePooling2D(), GlobalMaxPooling2D(True),
           ZeroPadding2D(((1, 0), (2, 1))), Rescaling([1.0, 0.5, 2.0], offset=-1.0), LeakyReLU(0.1), ELU(0.3),
           Softmax(), ReLU(max_value=6), BatchNormalization(momentum=0.9, epsilon=1e-4, center=False),
           Conv2D(4, 3, use_bias=False, activation="mish"), Dense(3, use_bias=False, activation="selu"),
           Activation("gelu_approximate")]


@pytest.mark.parametrize("layer", ALL_NEW, ids=[type(x).__name__ for x in ALL_NEW])
def test_layer_config_round_trip(layer):
    again = deserialize(serialize(layer))
    assert type(again) is type(layer)
    assert again.get_config() == layer.get_config()
    assert again.core_config() == layer.core_config()


def test_model_with_the_new_layers_saves_and_loads(tmp_path):
    x = images(n=8, h=8, w=8, c=3)
    m = hpcnn.Sequential([
        InputLayer(input_shape=(8, 8, 3)), Rescaling(1 / 4), ZeroPadding2D(1), Conv2D(6, 3, strides=2, use_bias=False),
        BatchNormalization(), ReLU(), AveragePooling2D(2, padding="same"), Conv2D(6, 1, activation="elu"),
        LeakyReLU(), GlobalAveragePooling2D(), Dense(5, activation="sigmoid"), Dense(3), Softmax()], seed=3)
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x, np.arange(8) % 3, batch_size=4, epochs=2, verbose=0)
    path = str(tmp_path / "m.h5")
    m.save(path)
    loaded = hpcnn.models.load_model(path)
    assert loaded.get_config() == m.get_config()
    assert loaded.weight_names() == m.weight_names()
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))
    # The file's weight names are the model's (BatchNormalization's four included).
    assert "batch_normalization/moving_variance" in m.weight_names()
