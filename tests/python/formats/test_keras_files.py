"""Keras' file formats as hpcnn reads and writes them, without Keras (tests/python/keras/test_keras_interop.py
checks the same files against real Keras): the layouts (checked with h5py, a test-only
dependency), round trips, hpcnn's older files, Keras-shaped configs of Keras 2 and 3, and
damaged or hostile files (each a ValueError naming the file and what is wrong; never a crash, a
hang, or weights loaded half-way)."""
import json
import os
import zipfile

import h5py
import numpy as np
import pytest

import hpcnn
from hpcnn.formats import hpcnn_files, keras_archive, keras_config
from hpcnn.formats.keras_objects import KERAS_VERSION
from hpcnn.data import write_hdf5
from hpcnn.layers import Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D, ReLU
from hpcnn.models import load_model, model_from_json
from tests.support.small_models import small_model


def x_of(model, n=5, seed=1):
    return np.random.default_rng(seed).random((n,) + model.input_shape[1:], dtype=np.float32)


def trained(seed=3):
    m = small_model(seed=seed)
    m.compile(hpcnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    rng = np.random.default_rng(0)
    m.fit(rng.random((16, 8, 8, 2), dtype=np.float32), rng.integers(0, 3, 16), batch_size=8, verbose=0)
    return m


def h5_tree(path):
    """{path: (kind, shape, attrs)} of an HDF5 file, read by h5py."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in obj.attrs.items()}
            out[name] = ("dataset", obj.shape, attrs) if isinstance(obj, h5py.Dataset) else ("group", None, attrs)
        out["/"] = ("group", None, dict(f.attrs))
        f.visititems(visit)
    return out


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("name", ["m.h5", "m.hdf5", "m.keras", "model_without_extension"])
def test_save_and_load_model_give_the_same_model(tmp_path, name):
    m = trained()
    x = x_of(m)
    path = tmp_path / name
    m.save(path)
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))
    assert loaded.get_config() == m.get_config() and loaded.seed == m.seed
    assert type(loaded.optimizer).__name__ == "Adam" and loaded.optimizer.learning_rate == pytest.approx(0.01)
    assert loaded.compile_settings["loss"] == "sparse_categorical_crossentropy" and loaded.compile_settings["accuracy"]
    assert not load_model(path, compile=False).compiled


@pytest.mark.parametrize("name", ["w.weights.h5", "w.h5", "w.hdf5"])
def test_save_and_load_weights(tmp_path, name):
    m = trained()
    m.save_weights(tmp_path / name)
    other = small_model(seed=9)
    assert not np.array_equal(other.get_weights()[0], m.get_weights()[0])
    other.load_weights(tmp_path / name)
    for a, b in zip(other.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["m.h5", "m.keras"])
def test_load_weights_reads_model_files(tmp_path, name):
    m = trained()
    m.save(tmp_path / name)
    other = small_model(seed=9)
    other.load_weights(tmp_path / name)
    x = x_of(m)
    np.testing.assert_array_equal(other.predict(x), m.predict(x))


def test_save_format_argument(tmp_path):
    m = trained()
    m.save(tmp_path / "a.bin", save_format="keras")
    assert zipfile.is_zipfile(tmp_path / "a.bin")
    m.save(tmp_path / "b.keras", save_format="h5")
    assert h5py.is_hdf5(tmp_path / "b.keras")
    for p in ("a.bin", "b.keras"):
        np.testing.assert_array_equal(load_model(tmp_path / p).get_weights()[0], m.get_weights()[0])
    with pytest.raises(NotImplementedError, match="SavedModel"):
        m.save(tmp_path / "c", save_format="tf")
    with pytest.raises(ValueError, match="save_format must be"):
        m.save(tmp_path / "c", save_format="json")


def test_models_with_equal_layer_names_across_classes_and_frozen_layers(tmp_path):
    """Keras 3 names a layer's group by class and position: conv2d, conv2d_1, dense, dense_1, ...
    whatever the layers are called; trainable=False survives the round trip."""
    m = hpcnn.Sequential([InputLayer(input_shape=[6, 6, 1]), Conv2D(2, 3, name="first"), Conv2D(3, 2, name="second"),
                          Flatten(name="flat"), Dense(4, name="conv2d"), Dense(2, activation="softmax")], seed=1)
    m.layers[1].trainable = False
    m.save_weights(tmp_path / "w.weights.h5")
    tree = h5_tree(tmp_path / "w.weights.h5")
    assert tree["layers/conv2d/vars"][2]["name"] == "first"
    assert tree["layers/conv2d_1/vars"][2]["name"] == "second"
    assert tree["layers/dense/vars"][2]["name"] == "conv2d"  # named like a Conv2D, stored as the first Dense
    assert tree["layers/dense_1/vars/0"][1] == (4, 2)
    m.save(tmp_path / "m.keras")
    loaded = load_model(tmp_path / "m.keras")
    assert [layer.name for layer in loaded.layers] == [layer.name for layer in m.layers]
    assert loaded.layers[1].trainable is False


# ------------------------------------------------------------------ the layouts, as Keras names them
def test_keras3_weights_layout(tmp_path):
    m = small_model()
    m.save_weights(tmp_path / "w.weights.h5")
    tree = h5_tree(tmp_path / "w.weights.h5")
    weights = m.get_weights()
    assert tree["vars"] == ("group", None, {"name": m.name})
    expected = {"layers/conv2d/vars/0": weights[0], "layers/conv2d/vars/1": weights[1],
                "layers/dense/vars/0": weights[2], "layers/dense/vars/1": weights[3],
                "layers/dense_1/vars/0": weights[4], "layers/dense_1/vars/1": weights[5]}
    with h5py.File(tmp_path / "w.weights.h5", "r") as f:
        for path, w in expected.items():
            assert f[path].dtype == np.float32
            np.testing.assert_array_equal(f[path][()], w)
    for weightless in ("max_pooling2d", "flatten", "re_lu", "dropout"):
        assert tree[f"layers/{weightless}/vars"][0] == "group"  # Keras writes an empty group for each
    assert not [p for p in tree if p.startswith("optimizer")]


def test_legacy_weights_layout(tmp_path):
    m = small_model()
    m.save_weights(tmp_path / "w.h5")
    with h5py.File(tmp_path / "w.h5", "r") as f:
        names = [n.decode() if isinstance(n, bytes) else n for n in f.attrs["layer_names"]]
        assert names == [layer.name for layer in m.layers]
        assert list(f["conv2d"].attrs["weight_names"]) == ["conv2d/kernel:0", "conv2d/bias:0"]
        assert f["flatten"].attrs["weight_names"].shape == (0,)  # Keras' empty list
        np.testing.assert_array_equal(f["dense_1/dense_1/kernel:0"][()], m.get_weights()[4])


def test_legacy_model_file_layout(tmp_path):
    m = trained()
    m.save(tmp_path / "m.h5")
    with h5py.File(tmp_path / "m.h5", "r") as f:
        config = json.loads(f.attrs["model_config"])
        training = json.loads(f.attrs["training_config"])
        assert "model_weights" in f and hpcnn_files.META_DATASET in f
        assert list(f["model_weights"].attrs["layer_names"]) == [layer.name for layer in m.layers]
    assert config["class_name"] == "Sequential"
    layers = config["config"]["layers"]
    assert layers[0] == {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 8, 8, 2], "dtype": "float32",
                                                                "sparse": False, "ragged": False, "name": "input_layer"}}
    conv = layers[1]["config"]
    assert conv["kernel_initializer"] == {"class_name": "GlorotUniform", "config": {"seed": None}}
    assert conv["dtype"] == "float32" and conv["data_format"] == "channels_last" and conv["filters"] == 4
    assert training["loss"] == "sparse_categorical_crossentropy" and training["metrics"] == ["accuracy"]
    assert training["optimizer_config"]["class_name"] == "Adam"
    assert training["optimizer_config"]["config"]["learning_rate"] == pytest.approx(0.01)


def test_keras_archive_layout(tmp_path):
    m = trained()
    m.save(tmp_path / "m.keras")
    with zipfile.ZipFile(tmp_path / "m.keras") as z:
        assert z.namelist()[:3] == ["metadata.json", "config.json", "model.weights.h5"]
        config = json.loads(z.read("config.json"))
        metadata = json.loads(z.read("metadata.json"))
        (tmp_path / "inner.h5").write_bytes(z.read("model.weights.h5"))
    assert metadata["keras_version"] == KERAS_VERSION
    assert config["module"] == "keras" and config["class_name"] == "Sequential"
    assert config["build_config"] == {"input_shape": [None, 8, 8, 2]}
    first = config["config"]["layers"][0]
    assert first["class_name"] == "InputLayer" and first["config"]["batch_shape"] == [None, 8, 8, 2]
    conv = config["config"]["layers"][1]
    assert conv["module"] == "keras.layers" and conv["build_config"] == {"input_shape": [None, 8, 8, 2]}
    assert conv["config"]["dtype"]["class_name"] == "DTypePolicy"
    comp = config["compile_config"]
    assert comp["optimizer"]["class_name"] == "Adam" and comp["loss"] == "sparse_categorical_crossentropy"
    np.testing.assert_array_equal(h5py.File(tmp_path / "inner.h5", "r")["layers/dense/vars/0"][()], m.get_weights()[2])


def test_to_json_and_model_from_json():
    m = trained()
    text = m.to_json()
    assert json.loads(text) == keras_config.model_to_keras(m)
    fresh = model_from_json(text)
    assert fresh.get_config()["layers"] == m.get_config()["layers"]
    assert fresh.compiled and type(fresh.optimizer).__name__ == "Adam"  # compile_config, as Keras
    assert model_from_json(json.dumps(m.get_config())).get_config() == m.get_config()  # hpcnn's own config
    assert "\n" in m.to_json(indent=2)
    with pytest.raises(ValueError, match="model_from_json: the JSON text is not valid JSON"):
        model_from_json("{")
    with pytest.raises(ValueError, match="expected a JSON string"):
        model_from_json(3)
    with pytest.raises(NotImplementedError, match="custom_objects"):
        model_from_json(text, custom_objects={"X": object})


# ------------------------------------------------------------------ Keras' configs, both shapes
KERAS2_CONFIG = {  # as tf.keras 2.x wrote `model_config` for the TensorFlow MNIST classifier
    "class_name": "Sequential", "config": {"name": "sequential", "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 28, 28, 1], "dtype": "float32",
                                                "sparse": False, "ragged": False, "name": "flatten_input"}},
        {"class_name": "Flatten", "config": {"name": "flatten", "trainable": True, "batch_input_shape": [None, 28, 28, 1],
                                             "dtype": "float32", "data_format": "channels_last"}},
        {"class_name": "Dense", "config": {"name": "dense", "trainable": True, "dtype": "float32", "units": 128,
                                           "activation": "relu", "use_bias": True,
                                           "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": None}},
                                           "bias_initializer": {"class_name": "Zeros", "config": {}},
                                           "kernel_regularizer": {"class_name": "L2", "config": {"l2": 0.001}},
                                           "bias_regularizer": None, "activity_regularizer": None,
                                           "kernel_constraint": None, "bias_constraint": None}},
        {"class_name": "Dropout", "config": {"name": "dropout", "trainable": True, "dtype": "float32", "rate": 0.2,
                                             "noise_shape": None, "seed": None}},
        {"class_name": "Dense", "config": {"name": "dense_1", "trainable": True, "dtype": "float32", "units": 10,
                                           "activation": "linear", "use_bias": True,
                                           "kernel_initializer": {"class_name": "GlorotUniform", "config": {"seed": None}},
                                           "bias_initializer": {"class_name": "Zeros", "config": {}},
                                           "kernel_regularizer": None, "bias_regularizer": None,
                                           "activity_regularizer": None, "kernel_constraint": None,
                                           "bias_constraint": None}}]},
    "keras_version": "2.4.0", "backend": "tensorflow"}


def test_model_from_a_keras2_config():
    m = model_from_json(json.dumps(KERAS2_CONFIG))
    assert m.input_shape == (None, 28, 28, 1)
    assert [type(layer).__name__ for layer in m.layers] == ["Flatten", "Dense", "Dropout", "Dense"]
    assert m.layers[1].kernel_regularizer == hpcnn.regularizers.L2(0.001)
    assert m.layers[3].activation == "linear" and m.count_params() == 784 * 128 + 128 + 1290


def test_model_from_a_keras3_config_without_an_input_layer():
    """Keras 3 records the input shape of a Sequential built by model.build() as build_input_shape."""
    m = small_model()
    cfg = keras_config.model_to_keras(m)
    cfg["config"]["layers"] = cfg["config"]["layers"][1:]
    assert model_from_json(json.dumps(cfg)).input_shape == (None, 8, 8, 2)


@pytest.mark.parametrize("edit, expect", [
    (lambda c: c["config"]["layers"][2]["config"].update(kernel_initializer={"class_name": "HeNormal", "config": {}}),
     r"layer 'dense' \(Dense\): kernel_initializer=.*HeNormal.* is not supported"),
    (lambda c: c["config"]["layers"][2]["config"].update(kernel_constraint={"class_name": "MaxNorm", "config": {}}),
     r"kernel_constraint=.*MaxNorm.* is not supported"),
    (lambda c: c["config"]["layers"][2]["config"].update(dtype="int32"), r"dtype 'int32' is not a float type"),
    (lambda c: c["config"]["layers"][0]["config"].update(batch_input_shape=[None, None, None, 1]),
     r"has unknown dimensions; hpcnn builds models for one fixed input shape"),
    (lambda c: c["config"]["layers"][2]["config"].update(units=-3), r"invalid value for `units`"),
    (lambda c: c["config"]["layers"][2]["config"].update(dilation=2), r"Unrecognized keyword arguments"),
    (lambda c: c["config"]["layers"].insert(2, {"class_name": "LSTM", "config": {}}),
     r"uses layer classes hpcnn does not have: LSTM"),
    (lambda c: c.update(class_name="Dense"), r"describes a 'Dense', not a model"),
    (lambda c: c["config"].pop("layers"), r"has no 'layers' list"),
    (lambda c: c["config"]["layers"].__setitem__(1, "Flatten"), r"layer #1 is not a dict with a 'class_name'"),
])
def test_keras_configs_hpcnn_cannot_build_the_same_way_are_refused(edit, expect):
    cfg = json.loads(json.dumps(KERAS2_CONFIG))
    edit(cfg)
    with pytest.raises(ValueError, match=expect):
        model_from_json(json.dumps(cfg))


def test_missing_layer_classes_are_listed_together():
    cfg = json.loads(json.dumps(KERAS2_CONFIG))
    cfg["config"]["layers"][2:2] = [{"class_name": "Conv2DTranspose", "config": {}},
                                    {"class_name": "LSTM", "config": {}}, {"class_name": "LSTM", "config": {}},
                                    {"class_name": "MyBlock", "config": {}, "registered_name": "Custom>MyBlock",
                                     "module": "mylib"},
                                    {"class_name": "Sequential",  # a nested model: its layers are checked too
                                     "config": {"layers": [{"class_name": "UpSampling2D", "config": {}}]}}]
    with pytest.raises(ValueError) as info:
        model_from_json(json.dumps(cfg))
    msg = str(info.value)
    assert "Conv2DTranspose, LSTM, MyBlock (custom: Custom>MyBlock), UpSampling2D" in msg, msg
    assert "hpcnn has Activation, Add, AveragePooling2D, BatchNormalization, Concatenate, Conv2D, Dense" in msg


def test_initializers_do_not_matter_when_weights_follow(tmp_path):
    """A Keras model with other initializers loads (its weights come from the file)."""
    m = small_model()
    path = tmp_path / "m.h5"
    m.save(path)
    with h5py.File(path, "r+") as f:
        del f[hpcnn_files.META_DATASET]  # as Keras wrote it: only Keras' config
        cfg = json.loads(f.attrs["model_config"])
        cfg["config"]["layers"][1]["config"]["kernel_initializer"] = {"class_name": "HeNormal", "config": {"seed": 4}}
        cfg["config"]["layers"][6]["config"]["seed"] = 1337  # Dropout(seed=...): hpcnn draws from the model's seed
        f.attrs["model_config"] = json.dumps(cfg)
    loaded = load_model(path)
    x = x_of(m)
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))
    assert not loaded.compiled  # saved uncompiled: no training_config


def test_keras_compile_settings_hpcnn_lacks_load_the_model_uncompiled_with_a_warning(tmp_path):
    m = trained()
    path = tmp_path / "m.h5"
    m.save(path)
    with h5py.File(path, "r+") as f:
        del f[hpcnn_files.META_DATASET]
        training = json.loads(f.attrs["training_config"])
        training["loss"] = "huber"  # a loss hpcnn does not have
        f.attrs["training_config"] = json.dumps(training)
    with pytest.warns(UserWarning, match=r"loaded but not compiled: .*huber"):
        loaded = load_model(path)
    assert not loaded.compiled
    np.testing.assert_array_equal(loaded.get_weights()[2], m.get_weights()[2])


# ------------------------------------------------------------------ hpcnn's older files
def test_format_version_1_files_still_load(tmp_path):
    """hpcnn before the Keras layout: hpcnn_model_json and weight_000, ..."""
    m = trained()
    meta, _ = hpcnn_files.description(m)
    meta.update(format_version=1)
    for key in ("weights", "rng", "optimizer_state"):  # what format_version 1 did not have
        meta.pop(key)
    arrays = {hpcnn_files.META_DATASET: np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    arrays.update({hpcnn_files.weight_dataset(i): w for i, w in enumerate(m.get_weights())})
    write_hdf5(tmp_path / "old.h5", arrays)
    loaded = load_model(tmp_path / "old.h5")
    x = x_of(m)
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))
    assert type(loaded.optimizer).__name__ == "Adam"
    other = small_model(seed=9)
    other.load_weights(tmp_path / "old.h5")
    np.testing.assert_array_equal(other.predict(x), m.predict(x))


# ------------------------------------------------------------------ files that do not fit
def test_weights_of_another_architecture_are_refused_and_nothing_is_set(tmp_path):
    m = small_model()
    m.save_weights(tmp_path / "w.weights.h5")
    m.save_weights(tmp_path / "w.h5")
    wider = hpcnn.Sequential([InputLayer(input_shape=[8, 8, 2]), Conv2D(4, 3, padding="same", activation="relu"),
                              MaxPooling2D(2, padding="same"), Flatten(), Dense(9), ReLU(), Dropout(0.1),
                              Dense(3, activation="softmax")], seed=5)
    before = wider.get_weights()
    with pytest.raises(ValueError, match=r"load_weights: '.*w.weights.h5' does not fit this model: layer 'dense' "
                                         r"\(Dense\) kernel has shape \(64, 8\) in the file, the model needs \(64, 9\)"):
        wider.load_weights(tmp_path / "w.weights.h5")
    with pytest.raises(ValueError, match=r"does not fit this model: layer 'dense' \(Dense\) kernel has shape"):
        wider.load_weights(tmp_path / "w.h5")
    for a, b in zip(wider.get_weights(), before):
        np.testing.assert_array_equal(a, b)  # the conv2d layer, which fitted, was not set either
    shallow = hpcnn.Sequential([InputLayer(input_shape=[8, 8, 2]), Flatten(), Dense(3)], seed=1)
    with pytest.raises(ValueError, match=r"the file holds weights for 3 layer\(s\), the model has 1 layer"):
        shallow.load_weights(tmp_path / "w.h5")
    with pytest.raises(ValueError, match=r"layer 'dense' \(Dense\) kernel has shape \(64, 8\) in the file"):
        shallow.load_weights(tmp_path / "w.weights.h5")


def test_skip_mismatch_keeps_the_layers_that_do_not_fit(tmp_path):
    m = small_model()
    m.save_weights(tmp_path / "w.weights.h5")
    m.save_weights(tmp_path / "w.h5")
    for name in ("w.weights.h5", "w.h5"):
        wider = hpcnn.Sequential([InputLayer(input_shape=[8, 8, 2]), Conv2D(4, 3, padding="same", activation="relu"),
                                  MaxPooling2D(2, padding="same"), Flatten(), Dense(9), ReLU(), Dropout(0.1),
                                  Dense(3, activation="softmax")], seed=5)
        before = wider.get_weights()
        with pytest.warns(UserWarning, match=r"skipping layer 'dense(_1)?' \(Dense\)") as record:
            wider.load_weights(tmp_path / name, skip_mismatch=True)
        assert len(record) == 2  # dense and dense_1 (9 inputs, the file's has 8)
        after = wider.get_weights()
        np.testing.assert_array_equal(after[0], m.get_weights()[0])  # conv2d loaded
        for i in (2, 3, 4, 5):
            np.testing.assert_array_equal(after[i], before[i])


def test_by_name_matches_legacy_layers_by_name(tmp_path):
    m = small_model()
    m.save_weights(tmp_path / "w.h5")
    renamed = small_model(seed=9)
    renamed.layers[3].name = "other"  # the first Dense: not in the file, keeps its weights
    before = renamed.get_weights()
    renamed.load_weights(tmp_path / "w.h5", by_name=True)
    after = renamed.get_weights()
    np.testing.assert_array_equal(after[0], m.get_weights()[0])
    np.testing.assert_array_equal(after[2], before[2])
    np.testing.assert_array_equal(after[4], m.get_weights()[4])
    m.save_weights(tmp_path / "w.weights.h5")
    with pytest.raises(ValueError, match="`by_name` only supports loading legacy"):
        renamed.load_weights(tmp_path / "w.weights.h5", by_name=True)


def test_a_file_with_weights_of_more_layers_is_refused(tmp_path):
    """Keras 3 weights of a deeper model: loading only the first layers would be a silent half-load."""
    deep = hpcnn.Sequential([InputLayer(input_shape=[8, 8, 2]), Conv2D(4, 3, padding="same"),
                             Conv2D(4, 3, padding="same"), Flatten(), Dense(3)], seed=1)
    deep.save_weights(tmp_path / "w.weights.h5")
    shallow = hpcnn.Sequential([InputLayer(input_shape=[8, 8, 2]), Conv2D(4, 3, padding="same"), Flatten(),
                                Dense(3)], seed=1)
    before = shallow.get_weights()  # every array of `shallow` fits one in the file
    with pytest.raises(ValueError, match=r"does not fit this model: the file holds weights for layers this model does "
                                         r"not have: conv2d_1"):
        shallow.load_weights(tmp_path / "w.weights.h5")
    np.testing.assert_array_equal(shallow.get_weights()[0], before[0])
    with pytest.warns(UserWarning, match=r"the file's weights of conv2d_1 fit no layer of this model"):
        shallow.load_weights(tmp_path / "w.weights.h5", skip_mismatch=True)
    np.testing.assert_array_equal(shallow.get_weights()[0], deep.get_weights()[0])


# ------------------------------------------------------------------ damaged and hostile files
def edit_h5(path, fn):
    with h5py.File(path, "r+") as f:
        fn(f)


def replace(f, name, data):
    del f[name]
    f[name] = data


DAMAGE = {  # (file kind, edit, expected message)
    "NaN weight": ("weights.h5", lambda f: replace(f, "layers/dense/vars/0", np.full((64, 8), np.nan, np.float32)),
                   r"is damaged: layer 'dense' \(Dense\) kernel \('/layers/dense/vars/0'\) holds 512 NaN/inf"),
    "float64 beyond float32": ("weights.h5", lambda f: replace(f, "layers/dense/vars/1", np.full(8, 1e300)),
                               r"holds 8 NaN/inf value\(s\) \(a float64 value beyond float32's range reads as inf\)"),
    "int weight": ("weights.h5", lambda f: replace(f, "layers/conv2d/vars/1", np.zeros(4, np.int32)),
                   r"is damaged: layer 'conv2d' \(Conv2D\) bias: '/layers/conv2d/vars/1' holds int32 values, not floats"),
    "string weight": ("weights.h5", lambda f: replace(f, "layers/conv2d/vars/1", "abc"),
                      r"holds string values, not floats"),
    "missing weight": ("weights.h5", lambda f: f.__delitem__("layers/dense_1/vars/1"),
                       r"does not fit this model: layer 'dense_1' \(Dense\) has 2 weight\(s\), the file has 1"),
    "missing layer group": ("weights.h5", lambda f: f.__delitem__("layers/dense"),
                            r"layer 'dense' \(Dense\) has 2 weight\(s\), the file has 0 at '/layers/dense/vars' "
                            r"\(no such group"),
    "no layers group": ("weights.h5", lambda f: f.__delitem__("layers"), r"holds no weights hpcnn recognizes"),
    "external link": ("weights.h5", lambda f: (f.__delitem__("layers/dense/vars/0"),
                                              f.__setitem__("layers/dense/vars/0", h5py.ExternalLink("/etc/passwd", "x"))),
                      r"'/layers/dense/vars/0' is an external link to object 'x' of file '/etc/passwd': hpcnn "
                      r"follows hard links only"),
    "soft link loop": ("weights.h5", lambda f: f.__setitem__("layers/loop", h5py.SoftLink("/layers")),
                       r"'/layers/loop' is a soft link to '/layers': hpcnn follows hard links only"),
    "hard link cycle": ("weights.h5", lambda f: f["layers/dense"].__setitem__("up", f["layers"]),
                        r"group '/layers/dense/up' is group '/layers' again \(a group linked into itself"),
    "layer_names not names": ("h5", lambda f: f.attrs.__setitem__("layer_names", np.arange(3.0)),
                              r"attribute 'layer_names' of '/' is not a list of names"),
    "listed layer missing": ("h5", lambda f: f.__delitem__("conv2d"),
                             r"layer 'conv2d' is listed in 'layer_names' but its group '/conv2d' is missing"),
    "weight_names naming nothing": ("h5", lambda f: f["dense"].attrs.__setitem__("weight_names", ["a:0", "b:0"]),
                                    r"does not fit this model: layer 'dense' \(Dense\) kernel: '/dense/a:0' is missing"),
    "Keras 1 file": ("h5", lambda f: f.attrs.__setitem__("keras_version", "1.2.2"),
                     r"written by Keras 1.2.2 .*convolution kernels are laid out differently"),
    "transposed kernel": ("h5", lambda f: replace(f, "dense/dense/kernel:0", np.zeros((8, 64), np.float32)),
                          r"layer 'dense' \(Dense\) kernel has shape \(8, 64\) in the file, the model needs \(64, 8\)"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_load_weights_on_damaged_files(tmp_path, kind):
    suffix, edit, expect = DAMAGE[kind]
    m = small_model()
    path = tmp_path / f"w.{suffix}"
    m.save_weights(path)
    edit_h5(path, edit)
    other = small_model(seed=9)
    before = other.get_weights()
    if expect is None:
        other.load_weights(path)
        np.testing.assert_array_equal(other.get_weights()[0], m.get_weights()[0])
        return
    with pytest.raises(ValueError) as info:
        other.load_weights(path)
    assert type(info.value) is ValueError
    msg = str(info.value)
    assert msg.startswith(f"load_weights: '{path}'"), msg
    assert __import__("re").search(expect, msg), msg
    for a, b in zip(other.get_weights(), before):
        np.testing.assert_array_equal(a, b)


MODEL_DAMAGE = {
    "model_config not JSON": (lambda f: f.attrs.__setitem__("model_config", "{oops"),
                              r"is damaged: its 'model_config' attribute is not valid JSON"),
    "model_config nested deeply": (lambda f: f.attrs.__setitem__("model_config", "[" * 100000 + "]" * 100000),
                                   r"is nested \d+ levels deep, more than the 100 hpcnn reads \(file_limits.MAX_CONFIG_DEPTH\)"),
    "model_config a number": (lambda f: f.attrs.__setitem__("model_config", "3"),
                              r"a Keras model config is a dict with 'class_name' and 'config'"),
    "model_config not a text": (lambda f: f.attrs.__setitem__("model_config", np.arange(4.0)),
                                r"attribute 'model_config' of '/' is not a text"),
    "Lambda layer": (lambda f: f.attrs.__setitem__("model_config", json.dumps(
        {"class_name": "Sequential", "config": {"layers": [{"class_name": "Lambda", "config": {"function": "x"}}]}})),
                     r"uses layer classes hpcnn does not have: Lambda"),
    "no model_weights": (lambda f: f.__delitem__("model_weights"),
                         r"neither a 'layer_names' attribute nor a 'model_weights' group"),
    "no model_config": (lambda f: f.attrs.__delitem__("model_config"), r"holds weights only \(a save_weights file\)"),
}


@pytest.mark.parametrize("kind", sorted(MODEL_DAMAGE))
def test_load_model_on_damaged_keras_model_files(tmp_path, kind):
    edit, expect = MODEL_DAMAGE[kind]
    m = small_model()
    path = tmp_path / "m.h5"
    m.save(path)

    def as_keras_wrote_it(f):
        del f[hpcnn_files.META_DATASET]
        edit(f)
    edit_h5(path, as_keras_wrote_it)
    with pytest.raises(ValueError) as info:
        load_model(path)
    msg = str(info.value)
    assert msg.startswith(f"load_model: '{path}'"), msg
    assert __import__("re").search(expect, msg), msg


def archive_with(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if name == "bomb" else zipfile.ZIP_STORED)


def test_damaged_keras_archives(tmp_path):
    m = small_model()
    good = tmp_path / "good.keras"
    m.save(good)
    with zipfile.ZipFile(good) as z:
        members = {n: z.read(n) for n in z.namelist()}
    cases = {
        "truncated.keras": (good.read_bytes()[:200], r"is damaged: it is not a valid zip archive"),
        "no_config.keras": ({"metadata.json": "{}", "model.weights.h5": members["model.weights.h5"]},
                            r"it has no 'config.json': not a Keras model archive"),
        "bad_json.keras": ({"config.json": "{", "model.weights.h5": members["model.weights.h5"]},
                           r"its 'config.json' is not valid JSON"),
        "no_weights.keras": ({"config.json": members["config.json"]}, r"it has no 'model.weights.h5'"),
        "npz.keras": ({"config.json": members["config.json"], "model.weights.npz": b""},
                      r"npz format \(weights_format='npz'\)"),
        "weights_not_h5.keras": ({"config.json": members["config.json"], "model.weights.h5": b"garbage" * 10},
                                 r"model.weights.h5' is not an HDF5 file"),
        "truncated_weights.keras": ({"config.json": members["config.json"],
                                     "model.weights.h5": members["model.weights.h5"][:3000]},
                                    r"cannot open '.*model.weights.h5' \(a damaged or truncated HDF5 file"),
        "huge_config.keras": ({"config.json": b" " * (keras_archive.MAX_CONFIG_BYTES + 1)},
                              r"its 'config.json' is \d+ bytes, more than the \d+ hpcnn reads \(file_limits.MAX_CONFIG_BYTES\)"),
    }
    for name, (content, expect) in cases.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            archive_with(path, content)
        with pytest.raises(ValueError) as info:
            load_model(path)
        msg = str(info.value)
        assert msg.startswith(f"load_model: '{path}'"), (name, msg)
        assert __import__("re").search(expect, msg), (name, msg)


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path):
    path = tmp_path / "bomb.keras"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", "{}")
        z.writestr("model.weights.h5", b"\0" * (50 << 20), compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(ValueError, match=r"its 'model.weights.h5' inflates \d+-fold: a zip bomb"):
        small_model().load_weights(path)


def test_files_that_are_not_model_files(tmp_path):
    (tmp_path / "text.h5").write_text("not a model")
    with pytest.raises(ValueError, match=r"load_model: '.*text.h5' is not an hpcnn model file: neither HDF5"):
        load_model(tmp_path / "text.h5")
    with pytest.raises(ValueError, match=r"load_weights: '.*text.h5' is neither an hpcnn weights file nor a Keras "):
        small_model().load_weights(tmp_path / "text.h5")
    with pytest.raises(FileNotFoundError, match=r"load_model: no such file: '.*missing.h5'"):
        load_model(tmp_path / "missing.h5")
    with pytest.raises(ValueError, match=r"is a directory"):
        load_model(tmp_path)
    write_hdf5(tmp_path / "data.h5", {"x": np.zeros((4, 2), np.uint8)})
    with pytest.raises(ValueError, match=r"not an hpcnn model file, nor a Keras HDF5 model file"):
        load_model(tmp_path / "data.h5")
    with pytest.raises(ValueError, match=r"holds no weights hpcnn recognizes"):
        small_model().load_weights(tmp_path / "data.h5")
    small_model().save_weights(tmp_path / "w.weights.h5")
    with pytest.raises(ValueError, match=r"holds weights only \(a save_weights file\), not a model"):
        load_model(tmp_path / "w.weights.h5")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="is not a regular file"):
        load_model(fifo)
    with pytest.raises(ValueError, match="is not a regular file"):
        small_model().load_weights(fifo)


def test_saving_onto_odd_targets_is_refused_atomically(tmp_path):
    m = small_model()
    target = tmp_path / "ro.keras"
    target.write_bytes(b"keep me")
    target.chmod(0o444)
    try:
        (tmp_path / "ro.weights.h5").write_bytes(b"keep me")
        (tmp_path / "ro.weights.h5").chmod(0o444)
        for call in (lambda: m.save(target), lambda: m.save_weights(tmp_path / "ro.weights.h5")):
            with pytest.raises(ValueError, match="read-only"):
                call()
    finally:
        target.chmod(0o644)
        (tmp_path / "ro.weights.h5").chmod(0o644)
    assert target.read_bytes() == b"keep me" and (tmp_path / "ro.weights.h5").read_bytes() == b"keep me"
    link = tmp_path / "link.weights.h5"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="symbolic link"):
        m.save_weights(link)
    assert not (tmp_path / "elsewhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.weights.h5", "ro.keras", "ro.weights.h5"]  # no temporary


def test_save_weights_arguments(tmp_path):
    m = small_model()
    with pytest.raises(ValueError, match=r"names a .keras archive, which holds a whole model"):
        m.save_weights(tmp_path / "w.keras")
    with pytest.raises(NotImplementedError, match="max_shard_size"):
        m.save_weights(tmp_path / "w.weights.json", max_shard_size=1)
    m.save_weights(tmp_path / "w.weights.h5")
    with pytest.raises(FileExistsError):
        m.save_weights(tmp_path / "w.weights.h5", overwrite=False)


def test_duplicate_layer_names_are_refused_in_the_legacy_layout(tmp_path):
    m = hpcnn.Sequential([InputLayer(input_shape=[4]), Dense(3, name="d"), Dense(2)], seed=1)
    m.layers[1].name = "d"
    with pytest.raises(ValueError, match=r"layers with the same name \(\['d'\]\)"):
        m.save_weights(tmp_path / "w.h5")
    m.save_weights(tmp_path / "w.weights.h5")  # Keras 3's layout names groups by class and position
    assert not (tmp_path / "w.h5").exists()
