"""The layers the ImageNet backbones need (issue 38), against live Keras 3 (jax CPU backend) on the
same weights: DepthwiseConv2D (strides, padding, depth_multiplier, dilation, use_bias, activation),
SeparableConv2D, and the activations relu6 / hard_silu / swish on them. Each: predictions equal
Keras' (1e-5), weights in Keras' names, shapes and order; Keras' .keras and .h5 files of a small
model with them load in hpcnn and predict the same, and hpcnn's saves load in Keras; a tiny model
with them trains (its loss falls). Needs keras (the `keras` extra); CI sets HPCNN_EXPECT_KERAS=1."""
import os
import warnings

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "jax")
if os.environ.get("HPCNN_EXPECT_KERAS") == "1":
    import keras
else:
    keras = pytest.importorskip("keras", reason='the Keras interop tests need `pip install --no-build-isolation ".[keras]"`')

import hpcnn  # noqa: E402
from hpcnn import layers as L  # noqa: E402
from hpcnn.models import load_model  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*HDF5 file via `model.save\\(\\)`.*:UserWarning")
TOL = 1e-5


def images(n=3, h=9, w=8, c=4, seed=0):
    return np.random.default_rng(seed).standard_normal((n, h, w, c)).astype(np.float32)


def both(make, x):
    """A one-layer model in Keras and in hpcnn (`make(module)` builds the layer from either layers
    module), the Keras weights randomized (biases too) and copied into hpcnn's model."""
    k = keras.Sequential([keras.Input(shape=x.shape[1:]), make(keras.layers)])
    r = np.random.default_rng(4)
    k.set_weights([r.standard_normal(w.shape).astype(np.float32) for w in k.get_weights()])
    h = hpcnn.Sequential([L.InputLayer(input_shape=x.shape[1:]), make(L)])
    h.set_weights(k.get_weights())
    return k, h


DEPTHWISE = [
    dict(kernel_size=3, padding="same"),
    dict(kernel_size=3, strides=2, padding="same"),
    dict(kernel_size=(3, 2), strides=(2, 1), padding="valid", depth_multiplier=3),
    dict(kernel_size=3, padding="same", dilation_rate=2, use_bias=False),
    dict(kernel_size=5, strides=2, padding="same", activation="relu6"),
    dict(kernel_size=3, padding="same", depth_multiplier=2, activation="hard_silu"),
    dict(kernel_size=3, padding="valid", activation="swish"),
]


@pytest.mark.parametrize("kwargs", DEPTHWISE, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_depthwise_conv2d_matches_keras(kwargs):
    x = images()
    k, h = both(lambda m: m.DepthwiseConv2D(**kwargs), x)
    np.testing.assert_allclose(h.predict(x), k.predict(x, verbose=0), rtol=TOL, atol=TOL)
    assert [w.shape for w in h.get_weights()] == [w.shape for w in k.get_weights()]
    assert [w.name for w in h.layers[0].weights] == [w.name for w in k.layers[0].weights]
    assert h.count_params() == k.count_params()
    assert h.output_shape == k.output_shape


@pytest.mark.parametrize("kwargs", [dict(filters=6, kernel_size=3, padding="same"),
                                    dict(filters=5, kernel_size=3, strides=2, depth_multiplier=2, activation="relu"),
                                    dict(filters=3, kernel_size=(2, 3), dilation_rate=(2, 1), use_bias=False,
                                         activation="hard_swish")])
def test_separable_conv2d_matches_keras(kwargs):
    x = images()
    k, h = both(lambda m: m.SeparableConv2D(**kwargs), x)
    np.testing.assert_allclose(h.predict(x), k.predict(x, verbose=0), rtol=TOL, atol=TOL)
    assert [w.name for w in h.layers[0].weights] == [w.name for w in k.layers[0].weights]
    assert [w.shape for w in h.get_weights()] == [w.shape for w in k.get_weights()]


def keras_mobile_block():
    """A MobileNetV2-style block: 1x1 expand, BN, ReLU6, padded stride-2 depthwise, BN, ReLU6,
    1x1 project, a separable conv, the classifier."""
    Lk = keras.layers
    inp = keras.Input(shape=(12, 12, 3))
    t = Lk.Conv2D(8, 1, use_bias=False)(inp)
    t = Lk.BatchNormalization()(t)
    t = Lk.ReLU(6.0)(t)
    t = Lk.ZeroPadding2D(((0, 1), (0, 1)))(t)
    t = Lk.DepthwiseConv2D(3, strides=2, use_bias=False)(t)
    t = Lk.BatchNormalization()(t)
    t = Lk.ReLU(6.0)(t)
    t = Lk.SeparableConv2D(6, 3, padding="same", activation="hard_silu")(t)
    t = Lk.GlobalAveragePooling2D()(t)
    out = Lk.Dense(3, activation="softmax")(t)
    model = keras.Model(inp, out)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def test_keras_files_of_a_mobile_block_load_in_hpcnn_and_back(tmp_path):
    x = images(6, 12, 12, 3, seed=2)
    keras.utils.set_random_seed(3)
    k = keras_mobile_block()
    k.fit(x, np.arange(6) % 3, epochs=1, batch_size=3, verbose=0)  # non-trivial BN statistics
    want = k.predict(x, verbose=0)
    for name in ("k.keras", "k.h5"):
        k.save(tmp_path / name)
        m = load_model(tmp_path / name)
        np.testing.assert_allclose(m.predict(x), want, rtol=1e-4, atol=TOL, err_msg=name)
        assert m.count_params() == k.count_params()
    m.save(tmp_path / "h.keras")
    m.save(tmp_path / "h.h5")
    for name in ("h.keras", "h.h5"):
        with warnings.catch_warnings():
            warnings.simplefilter("always")  # Keras' notice about the optimizer variables it does not find
            back = keras.models.load_model(tmp_path / name)
        np.testing.assert_allclose(back.predict(x, verbose=0), want, rtol=1e-4, atol=TOL, err_msg=name)


def test_a_tiny_depthwise_model_trains():
    r = np.random.default_rng(0)
    x = r.standard_normal((48, 8, 8, 3)).astype(np.float32)
    x[:, :, :, 0] += np.where(np.arange(48) % 2 == 0, 0.5, -0.5)[:, None, None]  # the class shifts channel 0
    y = (np.arange(48) % 2).astype(np.int32)
    m = hpcnn.Sequential([L.InputLayer(input_shape=(8, 8, 3)), L.Conv2D(8, 1), L.DepthwiseConv2D(3, padding="same",
                          activation="relu6"), L.SeparableConv2D(8, 3, activation="hard_silu"),
                          L.GlobalAveragePooling2D(), L.Dense(2, activation="softmax")], seed=1)
    m.compile(optimizer=hpcnn.optimizers.Adam(learning_rate=0.01), loss="sparse_categorical_crossentropy")
    h = m.fit(x, y, batch_size=8, epochs=8, verbose=0)
    assert h.history["loss"][-1] < 0.5 * h.history["loss"][0]


@pytest.mark.parametrize("make,message", [
    (lambda: L.DepthwiseConv2D(3, depth_multiplier=0), "depth_multiplier"),
    (lambda: L.DepthwiseConv2D(3, dilation_rate=0), "dilation_rate"),
    (lambda: L.DepthwiseConv2D(0), "kernel_size"),
    (lambda: L.DepthwiseConv2D(3, depthwise_initializer="he_normal"), "depthwise_initializer"),
    (lambda: L.DepthwiseConv2D(3, data_format="channels_first"), "data_format"),
    (lambda: L.SeparableConv2D(0, 3), "filters"),
    (lambda: L.SeparableConv2D(4, 3, pointwise_regularizer="l2"), "pointwise_regularizer"),
    (lambda: L.DepthwiseConv2D(3, activation="no_such"), "unknown activation"),
])
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_kernel_larger_than_the_input_is_refused():
    with pytest.raises(ValueError, match="does not fit"):
        hpcnn.Sequential([L.InputLayer(input_shape=(4, 4, 2)), L.DepthwiseConv2D(5)]).predict(images(1, 4, 4, 2))


def test_a_tf_keras_2_config_with_groups_1_is_taken():
    layer = L.deserialize({"class_name": "DepthwiseConv2D", "config": {"kernel_size": [3, 3], "groups": 1,
                                                                       "depthwise_initializer": "glorot_uniform"}})
    assert layer.kernel_size == (3, 3)
    with pytest.raises(ValueError, match="groups=2 is not supported"):
        L.DepthwiseConv2D(3, groups=2)


def test_config_round_trip():
    layer = L.DepthwiseConv2D((3, 2), strides=2, padding="same", depth_multiplier=2, dilation_rate=1,
                              activation="relu6", use_bias=False, name="dw")
    back = L.deserialize(L.serialize(layer))
    assert back.get_config() == layer.get_config()
    sep = L.SeparableConv2D(4, 3, depth_multiplier=2, activation="hard_silu", name="sep")
    assert L.deserialize(L.serialize(sep)).get_config() == sep.get_config()


@pytest.mark.parametrize("kwargs", [dict(max_value=6.0), dict(max_value=4.5), dict(threshold=0.5),
                                    dict(max_value=2.0, negative_slope=0.1, threshold=0.5),
                                    dict(negative_slope=0.2), dict(negative_slope=0.2, threshold=1.0)],
                         ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_relu_forms_match_keras_and_train(kwargs):
    x = images() * 3
    k = keras.Sequential([keras.Input(shape=x.shape[1:]), keras.layers.ReLU(**kwargs)])
    h = hpcnn.Sequential([L.InputLayer(input_shape=x.shape[1:]), L.ReLU(**kwargs)])
    np.testing.assert_allclose(h.predict(x), k.predict(x, verbose=0), rtol=1e-6, atol=1e-6)
    m = hpcnn.Sequential([L.InputLayer(input_shape=x.shape[1:]), L.Conv2D(4, 3), L.ReLU(**kwargs),
                          L.GlobalAveragePooling2D(), L.Dense(2, activation="softmax")], seed=2)
    m.compile(optimizer=hpcnn.optimizers.SGD(learning_rate=0.05), loss="sparse_categorical_crossentropy")
    w0 = m.get_weights()[0].copy()
    m.fit(x, np.arange(len(x)) % 2, batch_size=3, epochs=1, verbose=0)
    assert np.abs(m.get_weights()[0] - w0).max() > 0  # the gradient reaches through the ReLU
