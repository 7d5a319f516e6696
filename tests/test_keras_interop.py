"""hpcnn against real Keras 3 (the jax CPU backend): the tutorial CNN saved by Keras in each of its
formats loads in hpcnn and predicts the same (<= 1e-5), and the files hpcnn saves load in Keras and
predict the same. Needs `pip install '.[keras]'` (keras, jax[cpu]); CI installs it and sets
HPCNN_EXPECT_KERAS=1, so there these tests never skip."""
import json
import os
import warnings

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "jax")
if os.environ.get("HPCNN_EXPECT_KERAS") == "1":
    import keras  # CI: a missing extra is an error, not a skip
else:
    keras = pytest.importorskip("keras", reason="the Keras interop tests need `pip install '.[keras]'`")

import hpcnn  # noqa: E402
from hpcnn.models import load_model, model_from_json, tutorial_cnn  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    # Keras' own notices about its legacy HDF5 format and unbuilt metrics, not hpcnn's.
    "ignore:.*HDF5 file via `model.save\\(\\)`.*:UserWarning",
)
TOL = 1e-5


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(7).random((6, 32, 32, 3), dtype=np.float32)


def keras_tutorial_cnn():
    """The seed tutorial's model, built by Keras."""
    L = keras.layers
    model = keras.Sequential()
    model.add(keras.Input(shape=(32, 32, 3)))
    for filters in (32, 64, 128, 256):
        model.add(L.Conv2D(filters=filters, kernel_size=3, padding="same", activation="relu"))
        model.add(L.MaxPooling2D(pool_size=[2, 2], strides=[2, 2], padding="same"))
    model.add(L.Flatten())
    model.add(L.Dense(256, activation="relu"))
    model.add(L.Dropout(0.2))
    model.add(L.Dense(512, activation="relu"))
    model.add(L.Dropout(0.2))
    model.add(L.Dense(10, activation="softmax"))
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="categorical_crossentropy",
                  metrics=["accuracy"])
    return model


@pytest.fixture(scope="module")
def keras_model(x):
    keras.utils.set_random_seed(5)
    model = keras_tutorial_cnn()
    y = np.eye(10, dtype=np.float32)[np.arange(len(x)) % 10]
    model.fit(x, y, epochs=1, batch_size=3, verbose=0)  # trained: an optimizer state in its files
    return model


def test_keras_files_load_in_hpcnn(tmp_path, keras_model, x):
    expected = keras_model.predict(x, verbose=0)
    keras_model.save(tmp_path / "k.keras")
    keras_model.save(tmp_path / "k.h5")
    keras_model.save_weights(tmp_path / "k.weights.h5")
    for name in ("k.keras", "k.h5"):
        m = load_model(tmp_path / name)
        assert np.abs(m.predict(x) - expected).max() <= TOL, name
        assert m.count_params() == keras_model.count_params() == 787_530
        assert type(m.optimizer).__name__ == "Adam" and m._compiled["loss"] == "categorical_crossentropy"
    m = tutorial_cnn()
    m.load_weights(tmp_path / "k.weights.h5")
    assert np.abs(m.predict(x) - expected).max() <= TOL
    assert json.loads(json.dumps(keras_model.get_weights()[0].shape)) == list(m.get_weights()[0].shape)


def test_hpcnn_files_load_in_keras(tmp_path, x):
    m = tutorial_cnn(seed=3)
    m.compile(optimizer=hpcnn.optimizers.Adam(learning_rate=0.002), loss="categorical_crossentropy",
              metrics=["accuracy"])
    m.fit(x, np.eye(10, dtype=np.float32)[np.arange(len(x)) % 10], epochs=1, batch_size=3, verbose=0)
    expected = m.predict(x)
    m.save(tmp_path / "h.h5")
    m.save(tmp_path / "h.keras")
    m.save_weights(tmp_path / "h.weights.h5")
    m.save_weights(tmp_path / "h_legacy.h5")
    k = keras.models.load_model(tmp_path / "h.h5")
    assert np.abs(k.predict(x, verbose=0) - expected).max() <= TOL
    assert type(k.optimizer).__name__ == "Adam" and float(k.optimizer.learning_rate) == pytest.approx(0.002)
    # hpcnn does not save the optimizer's moments yet: Keras says so and starts them fresh, as hpcnn does
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # Keras turns an error raised from its warning into a load failure
        k = keras.models.load_model(tmp_path / "h.keras")
    assert any("Skipping variable loading for optimizer" in str(w.message) for w in caught)
    assert np.abs(k.predict(x, verbose=0) - expected).max() <= TOL
    assert [layer.name for layer in k.layers] == [layer.name for layer in m.layers]
    for name in ("h.weights.h5", "h_legacy.h5"):
        keras.utils.set_random_seed(11)
        fresh = keras_tutorial_cnn()
        assert np.abs(fresh.predict(x, verbose=0) - expected).max() > TOL
        with warnings.catch_warnings():
            warnings.simplefilter("always")  # the optimizer-state notice again (a compiled Keras model)
            fresh.load_weights(tmp_path / name)
        assert np.abs(fresh.predict(x, verbose=0) - expected).max() <= TOL, name


def test_to_json_and_model_from_json_both_ways():
    m = tutorial_cnn(seed=1)
    k = keras.models.model_from_json(m.to_json())
    assert [type(layer).__name__ for layer in k.layers] == [type(layer).__name__ for layer in m.layers]
    assert k.count_params() == m.count_params()
    back = model_from_json(k.to_json())
    assert back.get_config()["layers"][1:] == m.get_config()["layers"][1:]


def test_an_hpcnn_model_trained_after_loading_keras_weights_saves_back(tmp_path, keras_model, x):
    """Keras in, train in hpcnn, Keras out."""
    keras_model.save(tmp_path / "k.keras")
    m = load_model(tmp_path / "k.keras")
    y = np.eye(10, dtype=np.float32)[np.arange(len(x)) % 10]
    m.fit(x, y, epochs=1, batch_size=3, verbose=0)
    m.save(tmp_path / "back.h5")
    k = keras.models.load_model(tmp_path / "back.h5")
    assert np.abs(k.predict(x, verbose=0) - m.predict(x)).max() <= TOL
