"""hpcnn against real Keras 3 (the jax CPU backend): the tutorial CNN saved by Keras in each of its
formats loads in hpcnn and predicts the same (<= 1e-5), and the files hpcnn saves load in Keras and
predict the same. Needs `pip install --no-build-isolation ".[keras]"` (keras, jax[cpu]); CI installs it and sets
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
    keras = pytest.importorskip("keras", reason='the Keras interop tests need `pip install --no-build-isolation ".[keras]"`')

import hpcnn  # noqa: E402
from tests.support import keras_api_models  # noqa: E402
from hpcnn.models import load_model, model_from_json, tutorial_cnn  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    # Keras' own notices about its legacy HDF5 format and unbuilt metrics, not hpcnn's.
    "ignore:.*HDF5 file via `model.save\\(\\)`.*:UserWarning",
)
TOL = 1e-5


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(7).random((6, 32, 32, 3), dtype=np.float32)


def save_in_every_format(model, directory, stem):
    """Saves `model` (Keras' or hpcnn's: the same calls) as <stem>.keras, <stem>.h5 and
    <stem>.weights.h5 in `directory`; returns the names of the two whole-model files."""
    model.save(directory / f"{stem}.keras")
    model.save(directory / f"{stem}.h5")
    model.save_weights(directory / f"{stem}.weights.h5")
    return f"{stem}.keras", f"{stem}.h5"


def keras_load_hpcnn_file(path):
    """keras.models.load_model on a file hpcnn saved. Keras warns that it finds no optimizer variables
    of its own (hpcnn keeps the moments beside Keras' layout); pytest's warnings-as-errors would turn
    that notice into an exception that Keras reports as a failed load."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        return keras.models.load_model(path)


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
    for name in save_in_every_format(keras_model, tmp_path, "k"):
        m = load_model(tmp_path / name)
        assert np.abs(m.predict(x) - expected).max() <= TOL, name
        assert m.count_params() == keras_model.count_params() == 787_530
        assert type(m.optimizer).__name__ == "Adam" and m.compile_settings["loss"] == "categorical_crossentropy"
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
    # hpcnn keeps the optimizer's moments beside Keras' layout (for itself): Keras says it finds none of
    # its own and starts them fresh
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


# ------------------------------------------------------------------ the ResNet layers and the other optimizers
def keras_bn_cnn():
    """tests/data/keras/make_fixtures.py's bn_cnn, in Keras."""
    L = keras.layers
    return keras.Sequential([
        keras.Input((8, 8, 3)), L.Rescaling(2.0, offset=-1.0), L.ZeroPadding2D(1), L.Conv2D(6, 3, strides=2, use_bias=False),
        L.BatchNormalization(momentum=0.5), L.ReLU(), L.AveragePooling2D(2, padding="same"), L.Conv2D(5, 3, padding="same"),
        L.BatchNormalization(center=False, momentum=0.5), L.LeakyReLU(0.1), L.GlobalAveragePooling2D(), L.Dense(6),
        L.ELU(), L.Dense(3), L.Softmax()])


def bn_data():
    rng = np.random.default_rng(3)
    return rng.random((16, 8, 8, 3), dtype=np.float32), rng.integers(0, 3, 16), rng.random((5, 8, 8, 3), dtype=np.float32)


def test_keras_batch_normalization_models_load_in_hpcnn(tmp_path):
    x, y, xt = bn_data()
    keras.utils.set_random_seed(2)
    k = keras_bn_cnn()
    k.compile(optimizer=keras.optimizers.AdamW(learning_rate=keras.optimizers.schedules.CosineDecay(0.01, 50),
                                               weight_decay=0.01),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    k.fit(x, y, epochs=2, batch_size=4, verbose=0)  # the moving statistics move
    expected = k.predict(xt, verbose=0)
    for name in save_in_every_format(k, tmp_path, "k"):
        m = load_model(tmp_path / name)
        assert np.abs(m.predict(xt) - expected).max() <= TOL, name
        assert [type(a).__name__ for a in m.layers] == [type(b).__name__ for b in k.layers], name
        assert type(m.optimizer).__name__ == "AdamW" and m.optimizer.get_config()["weight_decay"] == pytest.approx(0.01)
        assert m.optimizer.get_config()["learning_rate"]["class_name"] == "CosineDecay"
    fresh = hpcnn.models.clone_model(load_model(tmp_path / "k.keras", compile=False))
    fresh.load_weights(tmp_path / "k.weights.h5")
    assert np.abs(fresh.predict(xt) - expected).max() <= TOL


@pytest.mark.parametrize("optimizer", ["rmsprop", "adamw", "sgd"])
def test_hpcnn_batch_normalization_models_load_in_keras(tmp_path, optimizer):
    from tests.support.keras_file_models import OPTIMIZERS, bn_model
    x, y, xt = bn_data()
    m = bn_model(seed=6)
    opt = OPTIMIZERS[{"rmsprop": "RMSprop", "adamw": "AdamW", "sgd": "SGD"}[optimizer]]()
    m.compile(opt, "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x, y, batch_size=4, epochs=2, verbose=0)
    expected = m.predict(xt)
    for name in save_in_every_format(m, tmp_path, "h"):
        k = keras_load_hpcnn_file(tmp_path / name)
        assert np.abs(k.predict(xt, verbose=0) - expected).max() <= TOL, name
        assert type(k.optimizer).__name__ == type(m.optimizer).__name__, name
        kcfg, hcfg = k.optimizer.get_config(), m.optimizer.get_config()
        for key, value in hcfg.items():
            if key == "learning_rate" and isinstance(value, dict):
                assert kcfg[key]["class_name"] == value["class_name"] and kcfg[key]["config"] == value["config"], name
            elif key != "name":
                assert kcfg[key] == pytest.approx(value) if isinstance(value, float) else kcfg[key] == value, (name, key)
    keras.utils.set_random_seed(12)
    fresh = keras_bn_cnn()
    fresh.load_weights(tmp_path / "h.weights.h5")
    assert np.abs(fresh.predict(xt, verbose=0) - expected).max() <= TOL


# ------------------------------------------------------------------ functional models (hpcnn.Model)
def test_hpcnn_functional_models_load_in_keras(tmp_path):
    from tests.support.keras_file_models import trained_block
    x, _, xt = bn_data()
    m = trained_block()
    expected = m.predict(xt)
    for name in save_in_every_format(m, tmp_path, "h"):
        k = keras_load_hpcnn_file(tmp_path / name)
        assert type(k).__name__ == "Functional", name
        got = k.predict(xt, verbose=0)
        assert isinstance(got, np.ndarray) and got.shape == expected.shape, name  # one output, not a list of one
        assert np.abs(got - expected).max() <= TOL, name
        assert [layer.name for layer in k.layers] == [layer.name for layer in m.layers], name
        assert type(k.optimizer).__name__ == "Adam", name
    k = keras.models.model_from_json(m.to_json())
    assert [type(layer).__name__ for layer in k.layers] == [type(layer).__name__ for layer in m.layers]
    assert k.count_params() == m.count_params()
    keras.utils.set_random_seed(12)
    fresh = keras_api_models.resnet_block(keras)
    fresh.load_weights(tmp_path / "h.weights.h5")
    assert np.abs(fresh.predict(xt, verbose=0) - expected).max() <= TOL


def test_keras_functional_models_load_in_hpcnn(tmp_path):
    x, y, xt = bn_data()
    keras.utils.set_random_seed(2)
    k = keras_api_models.resnet_block(keras)
    k.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    k.fit(x, y, epochs=2, batch_size=4, verbose=0)
    expected = k.predict(xt, verbose=0)
    k.save(tmp_path / "k.keras")
    k.save(tmp_path / "k.h5")
    for name in ("k.keras", "k.h5"):
        m = load_model(tmp_path / name)
        assert type(m) is hpcnn.Model, name
        assert np.abs(m.predict(xt) - expected).max() <= TOL, name
    back = model_from_json(k.to_json())
    assert [type(a).__name__ for a in back.layers] == [type(b).__name__ for b in k.layers]
