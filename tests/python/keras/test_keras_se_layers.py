"""The layers EfficientNet needs besides the depthwise convolution (issue 38), against live Keras 3
(jax CPU backend) on the same weights: Reshape, Multiply (squeeze-and-excitation's broadcast),
GlobalAveragePooling2D(keepdims=True), Dropout(noise_shape=(None, 1, 1, 1)), Rescaling with an
offset and a per-channel scale list, Normalization (mean/variance given, adapt() on an array and
on batches, its weights mean/variance/count from Keras). An EfficientNet-style stem and
squeeze-and-excitation block saved by Keras (.keras, .h5) loads in hpcnn and predicts the same,
hpcnn's saves load in Keras, and the block trains. Needs keras; CI sets HPCNN_EXPECT_KERAS=1."""
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


def images(n=4, h=6, w=5, c=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, h, w, c)).astype(np.float32)


def se_model(lib, c=6, with_dropout=True):
    """A stem (Rescaling, Normalization, Rescaling by a per-channel list) and a
    squeeze-and-excitation block as EfficientNet builds them, in `lib` (keras.layers or hpcnn's)."""
    inp = (keras.Input if lib is keras.layers else hpcnn.Input)(shape=(8, 8, 3))
    x = lib.Rescaling(1.0 / 255.0)(inp)
    x = lib.Normalization(axis=-1)(x)
    x = lib.Rescaling([1.0 / np.sqrt(s) for s in (0.229, 0.224, 0.225)], offset=0.1)(x)
    x = lib.Conv2D(c, 3, padding="same", activation="swish")(x)
    se = lib.GlobalAveragePooling2D()(x)
    se = lib.Reshape((1, 1, c))(se)
    se = lib.Conv2D(2, 1, padding="same", activation="swish")(se)
    se = lib.Conv2D(c, 1, padding="same", activation="sigmoid")(se)
    x = lib.multiply([x, se])
    y = lib.Conv2D(c, 1, padding="same", use_bias=False)(x)
    if with_dropout:
        y = lib.Dropout(0.3, noise_shape=(None, 1, 1, 1))(y)
    x = lib.add([x, y])
    x = lib.GlobalAveragePooling2D(keepdims=True)(x)
    x = lib.Reshape((-1,))(x)
    out = lib.Dense(3, activation="softmax")(x)
    return (keras.Model if lib is keras.layers else hpcnn.Model)(inp, out)


@pytest.fixture(scope="module")
def pixels():
    return np.random.default_rng(1).uniform(0, 255, (6, 8, 8, 3)).astype(np.float32)


@pytest.fixture(scope="module")
def keras_se(pixels):
    keras.utils.set_random_seed(2)
    k = se_model(keras.layers)
    norm = [layer for layer in k.layers if type(layer).__name__ == "Normalization"][0]
    norm.adapt(pixels / 255.0)
    return k


def test_an_se_block_with_keras_weights_predicts_as_keras(keras_se, pixels):
    h = se_model(L)
    h.set_weights(keras_se.get_weights())
    np.testing.assert_allclose(h.predict(pixels), keras_se.predict(pixels, verbose=0), rtol=1e-4, atol=TOL)
    assert h.count_params() == keras_se.count_params()
    names = [w.name for layer in h.layers for w in layer.weights]
    assert [n for n in names if n in ("mean", "variance", "count")] == ["mean", "variance", "count"]


def test_keras_files_of_an_se_block_load_both_ways(tmp_path, keras_se, pixels):
    want = keras_se.predict(pixels, verbose=0)
    keras_se.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    for name in ("k.keras", "k.h5"):
        keras_se.save(tmp_path / name)
        m = load_model(tmp_path / name)
        np.testing.assert_allclose(m.predict(pixels), want, rtol=1e-4, atol=TOL, err_msg=name)
    for name in ("h.keras", "h.h5"):
        m.save(tmp_path / name)
        with warnings.catch_warnings():
            warnings.simplefilter("always")  # Keras' notice about optimizer variables it does not find
            back = keras.models.load_model(tmp_path / name)
        np.testing.assert_allclose(back.predict(pixels, verbose=0), want, rtol=1e-4, atol=TOL, err_msg=name)


def test_the_se_block_trains(pixels):
    x = np.concatenate([pixels * 0.5, pixels * 0.5 + 127])  # dark and bright images
    y = np.array([0] * len(pixels) + [1] * len(pixels), np.int32)
    h = se_model(L)
    norm = [layer for layer in h.layers if type(layer).__name__ == "Normalization"][0]
    norm.adapt(x / 255.0)
    h.compile(optimizer=hpcnn.optimizers.Adam(learning_rate=0.01), loss="sparse_categorical_crossentropy")
    hist = h.fit(x, y, batch_size=4, epochs=10, verbose=0, shuffle=False)
    assert hist.history["loss"][-1] < 0.5 * hist.history["loss"][0], hist.history["loss"]


def test_dropout_noise_shape_drops_whole_samples():
    x = np.ones((64, 3, 3, 4), np.float32)
    m = hpcnn.Sequential([L.InputLayer(input_shape=(3, 3, 4)), L.Dropout(0.5, noise_shape=(None, 1, 1, 1))], seed=3)
    np.testing.assert_array_equal(m.predict(x), x)  # inference: the identity
    y = np.asarray(m(x, training=True))
    per_sample = y.reshape(64, -1)
    assert set(np.unique(per_sample)) <= {0.0, 2.0}
    assert (per_sample == per_sample[:, :1]).all()  # one mask value per sample
    assert 10 < (per_sample[:, 0] == 0).sum() < 54
    m2 = hpcnn.Sequential([L.InputLayer(input_shape=(3, 3, 4)), L.Dropout(0.5, noise_shape=(None, 3, 1, None))],
                          seed=3)
    y2 = np.asarray(m2(x, training=True))
    assert (y2 == y2[:, :, :1, :]).all() and not (y2 == y2[:, :1]).all()  # shared along the width only


@pytest.mark.parametrize("layer", [lambda m: m.Rescaling([0.5, 2.0, -1.0], offset=0.25),
                                   lambda m: m.Rescaling(1 / 255.0, offset=-1.0),
                                   lambda m: m.Normalization(mean=[0.1, 0.2, 0.3], variance=[1.0, 4.0, 0.0]),
                                   lambda m: m.Normalization(mean=2.0, variance=9.0),
                                   lambda m: m.GlobalAveragePooling2D(keepdims=True),
                                   lambda m: m.Reshape((-1, 3)),
                                   lambda m: m.Reshape((5, 6, 3))])
def test_single_layers_match_keras(layer):
    x = images(h=6, w=5)
    k = keras.Sequential([keras.Input(shape=x.shape[1:]), layer(keras.layers)])
    h = hpcnn.Sequential([L.InputLayer(input_shape=x.shape[1:]), layer(L)])
    np.testing.assert_allclose(h.predict(x), k.predict(x, verbose=0), rtol=1e-5, atol=1e-5)
    assert h.output_shape == k.output_shape
    assert h.count_params() == k.count_params() == 0


def test_normalization_adapt_on_an_array_and_on_batches_matches_keras():
    x = images(40, 4, 4, 3, seed=5) * 3 + 1
    k = keras.layers.Normalization()
    k.adapt(x)
    a = L.Normalization()
    a.adapt(x)
    b = L.Normalization()
    b.adapt([(x[i:i + 7], None) for i in range(0, 40, 7)])  # (x, y) batches of an uneven size
    for layer in (a, b):
        for got, want in zip(layer.get_weights(), k.get_weights()):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    m = hpcnn.Sequential([L.InputLayer(input_shape=(4, 4, 3)), a])
    np.testing.assert_allclose(m.predict(x), np.asarray(k(x)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make,message", [
    (lambda: L.Reshape((2, -1, -1)), "at most one -1"),
    (lambda: L.Reshape((0, 3)), "positive integers"),
    (lambda: L.Normalization(mean=[1.0]), "both `mean` and `variance`"),
    (lambda: L.Normalization(invert=True), "invert=True"),
    (lambda: L.Normalization(axis=(1, 2)), "axis"),
    (lambda: L.Dropout(0.2, noise_shape=(4, 1, 1, 1)), "noise_shape"),
])
def test_bad_arguments_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("layers,message", [
    ([L.Reshape((7, 7))], "total size of the new array must be unchanged"),
    ([L.Dropout(0.2, noise_shape=(None, 2, 1, 1))], "noise_shape axis 1 is 2"),
])
def test_shapes_that_do_not_fit_are_refused(layers, message):
    with pytest.raises(ValueError, match=message):
        hpcnn.Sequential([L.InputLayer(input_shape=(6, 5, 3))] + layers).predict(images())


def test_a_multiply_of_shapes_that_do_not_fit_is_refused():
    inp = hpcnn.Input(shape=(6, 6, 4))
    other = L.Conv2D(3, 1)(inp)
    with pytest.raises(ValueError, match="Multiply: inputs have incompatible shapes"):
        L.multiply([inp, other])
    with pytest.raises(ValueError, match="exactly two inputs"):
        L.Multiply()([inp, inp, inp])


def test_configs_round_trip():
    for layer in (L.Reshape((1, 1, -1)), L.Multiply(), L.Normalization(), L.Normalization(mean=[1.0, 2.0],
                  variance=[3.0, 4.0]), L.Dropout(0.2, noise_shape=(None, 1, 1, 1))):
        back = L.deserialize(L.serialize(layer))
        assert back.get_config() == layer.get_config()
