"""Keras' file formats with what main gained after the first Keras file work: the ResNet layers
(BatchNormalization's four weights, moving statistics included; pooling, padding, activations,
Rescaling), the optimizers and schedules in Keras' compile configs, and the optimizer state in
model files (.h5 and .keras: fit after load_model continues exactly). Also: a functional Keras
model is a clear NotImplementedError today, and hpcnn's earlier files (format_version 2, the
``hpcnn-weights`` weights files) still load."""
import json
import zipfile

import h5py
import numpy as np
import pytest

import hpcnn
from hpcnn.formats import hpcnn_files, keras_config
from hpcnn.data import write_hdf5
from hpcnn.models import load_model, model_from_json
from tests.support.keras_file_models import OPTIMIZERS, bn_model

LAYER_CLASSES = ["Rescaling", "ZeroPadding2D", "Conv2D", "BatchNormalization", "ReLU", "AveragePooling2D", "Conv2D",
                 "BatchNormalization", "LeakyReLU", "GlobalAveragePooling2D", "Dense", "ELU", "Dense", "Softmax"]


def data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 8, 8, 3), dtype=np.float32), rng.integers(0, 3, n)


def trained_bn(optimizer=None, epochs=2):
    m = bn_model()
    m.compile(optimizer or hpcnn.optimizers.RMSprop(0.01, momentum=0.9), "sparse_categorical_crossentropy",
              ["accuracy"])
    x, y = data()
    m.fit(x, y, batch_size=8, epochs=epochs, verbose=0)
    return m


def same_weights(a, b):
    wa, wb = a.get_weights(), b.get_weights()
    return len(wa) == len(wb) and all(np.array_equal(p, q) for p, q in zip(wa, wb))


def without_member(path, member, out):
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            if item.filename != member:
                dst.writestr(item, src.read(item.filename))


# ------------------------------------------------------------------ the ResNet layers
@pytest.mark.parametrize("name", ["m.h5", "m.keras"])
def test_models_with_batch_normalization_round_trip(tmp_path, name):
    m = trained_bn()
    bn = dict(zip(m.weight_names(), m.get_weights()))
    assert not np.allclose(bn["batch_normalization/moving_mean"], 0)  # trained: the statistics moved
    assert not np.allclose(bn["batch_normalization_1/moving_variance"], 1)
    x, _ = data(5, seed=1)
    m.save(tmp_path / name)
    loaded = load_model(tmp_path / name)
    assert [type(layer).__name__ for layer in loaded.layers] == LAYER_CLASSES
    assert loaded.get_config() == m.get_config() and same_weights(loaded, m)
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))


@pytest.mark.parametrize("name", ["w.weights.h5", "w.h5"])
def test_batch_normalization_weights_files(tmp_path, name):
    m = trained_bn()
    m.save_weights(tmp_path / name)
    fresh = bn_model(seed=9)
    fresh.load_weights(tmp_path / name)
    assert same_weights(fresh, m)


def test_batch_normalization_in_keras3s_weights_layout(tmp_path):
    """Keras 3's order of BatchNormalization's variables: gamma, beta, moving_mean, moving_variance
    (gamma / beta left out with scale=False / center=False)."""
    m = trained_bn()
    w = dict(zip(m.weight_names(), m.get_weights()))
    m.save_weights(tmp_path / "w.weights.h5")
    with h5py.File(tmp_path / "w.weights.h5", "r") as f:
        g = f["layers/batch_normalization/vars"]
        assert sorted(g) == ["0", "1", "2", "3"]
        for i, kind in enumerate(["gamma", "beta", "moving_mean", "moving_variance"]):
            np.testing.assert_array_equal(g[str(i)][()], w[f"batch_normalization/{kind}"])
        g = f["layers/batch_normalization_1/vars"]  # center=False: no beta
        assert sorted(g) == ["0", "1", "2"]
        for i, kind in enumerate(["gamma", "moving_mean", "moving_variance"]):
            np.testing.assert_array_equal(g[str(i)][()], w[f"batch_normalization_1/{kind}"])
        assert sorted(f["layers/conv2d/vars"]) == ["0"]  # use_bias=False: the kernel only
        for weightless in ("rescaling", "zero_padding2d", "re_lu", "average_pooling2d", "leaky_re_lu",
                           "global_average_pooling2d", "elu", "softmax"):
            assert len(f[f"layers/{weightless}/vars"]) == 0


def test_batch_normalization_in_the_legacy_layout(tmp_path):
    m = trained_bn()
    m.save(tmp_path / "m.h5")
    with h5py.File(tmp_path / "m.h5", "r") as f:
        g = f["model_weights/batch_normalization"]
        assert [n.decode() if isinstance(n, bytes) else n for n in g.attrs["weight_names"]] == [
            "batch_normalization/gamma:0", "batch_normalization/beta:0", "batch_normalization/moving_mean:0",
            "batch_normalization/moving_variance:0"]
        np.testing.assert_array_equal(g["batch_normalization/moving_variance:0"][()],
                                      dict(zip(m.weight_names(), m.get_weights()))["batch_normalization/moving_variance"])
        config = json.loads(f.attrs["model_config"])
    layers = {entry["config"]["name"]: entry for entry in config["config"]["layers"]}
    assert layers["leaky_re_lu"]["config"]["alpha"] == pytest.approx(0.1)  # Keras 2's name (Keras 3 takes it too)
    bn = layers["batch_normalization_1"]["config"]
    assert bn["center"] is False and bn["momentum"] == 0.5 and bn["axis"] == -1
    assert bn["gamma_initializer"] == {"class_name": "Ones", "config": {}} and "synchronized" not in bn


def test_keras3_configs_of_the_new_layers():
    m = bn_model()
    m.build()
    cfg = keras_config.model_to_keras(m)
    layers = {entry["config"]["name"]: entry for entry in cfg["config"]["layers"]}
    bn = layers["batch_normalization"]
    assert bn["module"] == "keras.layers" and bn["build_config"] == {"input_shape": [None, 4, 4, 6]}
    assert {k: bn["config"][k] for k in ("axis", "momentum", "epsilon", "center", "scale", "synchronized")} == {
        "axis": -1, "momentum": 0.5, "epsilon": 1e-3, "center": True, "scale": True, "synchronized": False}
    assert bn["config"]["moving_variance_initializer"]["class_name"] == "Ones"
    assert layers["zero_padding2d"]["config"]["padding"] == [[1, 1], [1, 1]]
    assert layers["zero_padding2d"]["build_config"] == {"input_shape": [None, 8, 8, 3]}
    assert layers["global_average_pooling2d"]["config"]["keepdims"] is False
    assert layers["rescaling"]["config"]["scale"] == 2.0 and layers["rescaling"]["config"]["offset"] == -1.0
    assert layers["leaky_re_lu"]["config"]["negative_slope"] == pytest.approx(0.1)
    # Keras 3 builds these when they are made: their configs carry no build_config (as Keras writes them)
    for name in ("re_lu", "average_pooling2d", "leaky_re_lu", "global_average_pooling2d", "elu", "softmax"):
        assert "build_config" not in layers[name], name
    back = model_from_json(json.dumps(cfg))  # no weights follow: the default initializers are taken
    assert back.get_config()["layers"] == m.get_config()["layers"]


def test_a_keras2_batch_normalization_config_with_a_list_axis():
    """tf.keras 2 saves a built BatchNormalization's axis as a list of positive axes ([3])."""
    cfg = {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 4, 4, 2], "name": "in"}},
        {"class_name": "BatchNormalization", "config": {"name": "bn", "axis": [3], "momentum": 0.9, "epsilon": 0.001,
                                                         "center": True, "scale": True,
                                                         "beta_initializer": {"class_name": "Zeros", "config": {}},
                                                         "gamma_initializer": {"class_name": "Ones", "config": {}},
                                                         "moving_mean_initializer": {"class_name": "Zeros", "config": {}},
                                                         "moving_variance_initializer": {"class_name": "Ones", "config": {}},
                                                         "beta_regularizer": None, "gamma_regularizer": None,
                                                         "beta_constraint": None, "gamma_constraint": None}}]}}
    m = model_from_json(json.dumps(cfg))
    assert m.layers[0].axis == 3 and m.layers[0].momentum == 0.9
    assert m.predict(np.ones((2, 4, 4, 2), np.float32)).shape == (2, 4, 4, 2)


def test_initializers_other_than_keras_defaults_are_refused_without_weights():
    m = bn_model()
    cfg = keras_config.model_to_keras(m)
    cfg["config"]["layers"][4]["config"]["gamma_initializer"] = {"class_name": "Zeros", "config": {}}
    with pytest.raises(ValueError, match=r"BatchNormalization: only Keras' default gamma_initializer='ones'"):
        model_from_json(json.dumps(cfg))
    cfg = keras_config.model_to_keras(m)
    cfg["config"]["layers"][11]["config"]["kernel_initializer"] = {"class_name": "Zeros", "config": {}}
    with pytest.raises(ValueError, match=r"Dense: only Keras' default initializers.*kernel_initializer='zeros'"):
        model_from_json(json.dumps(cfg))


# ------------------------------------------------------------------ optimizers in Keras' compile configs
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("name", ["m.h5", "m.keras"])
def test_optimizer_configs_in_keras_files(tmp_path, optimizer, name):
    m = bn_model()
    m.compile(OPTIMIZERS[optimizer](), "sparse_categorical_crossentropy", ["accuracy"])
    m.save(tmp_path / name)
    if name.endswith(".keras"):
        with zipfile.ZipFile(tmp_path / name) as z:
            opt = json.loads(z.read("config.json"))["compile_config"]["optimizer"]
    else:
        with h5py.File(tmp_path / name, "r") as f:
            opt = json.loads(f.attrs["training_config"])["optimizer_config"]
    assert opt["class_name"] == optimizer
    lr, expected_lr = opt["config"]["learning_rate"], m.optimizer.get_config()["learning_rate"]
    if isinstance(expected_lr, dict):  # a schedule, serialized as Keras serializes one
        assert lr["class_name"] == expected_lr["class_name"] and lr["config"] == expected_lr["config"]
        assert name.endswith(".h5") or lr["module"] == "keras.optimizers.schedules"
    else:
        assert lr == pytest.approx(expected_lr)
    for source in ("hpcnn", "keras"):  # hpcnn's own description, and Keras' config alone
        path = tmp_path / name
        if source == "keras":
            path = tmp_path / ("keras_only" + name[1:])
            if name.endswith(".keras"):
                without_member(tmp_path / name, "hpcnn.json", path)
            else:
                with h5py.File(tmp_path / name, "r") as f, h5py.File(path, "w") as g:
                    for k, v in f.attrs.items():
                        g.attrs[k] = v
                    f.copy("model_weights", g)
        loaded = load_model(path)
        assert type(loaded.optimizer).__name__ == optimizer, source
        assert loaded.optimizer.get_config() == m.optimizer.get_config(), source


# ------------------------------------------------------------------ the optimizer state in Keras-format files
@pytest.mark.parametrize("name", ["m.h5", "m.keras"])
def test_fit_after_load_model_continues_exactly(tmp_path, name):
    """save + load_model + fit(epochs=2, initial_epoch=1) == two epochs uninterrupted, bitwise, with
    BatchNormalization's moving statistics and RMSprop's moments in the file."""
    x, y = data()
    ref = trained_bn(epochs=2)
    m = trained_bn(epochs=1)
    m.save(tmp_path / name)
    loaded = load_model(tmp_path / name)
    assert loaded.core.iterations == 4 and loaded.core.step == 4
    loaded.fit(x, y, batch_size=8, epochs=2, initial_epoch=1, verbose=0)
    assert same_weights(loaded, ref)


def test_the_archives_optimizer_state_member(tmp_path):
    m = trained_bn(epochs=1)
    m.save(tmp_path / "m.keras")
    with zipfile.ZipFile(tmp_path / "m.keras") as z:
        assert "hpcnn_state.h5" in z.namelist()
        meta = json.loads(z.read("hpcnn.json"))
    assert meta["format_version"] == hpcnn_files.FORMAT_VERSION == 3 and meta["weights"] == "keras"
    assert meta["optimizer_state"]["class"] == "RMSprop" and meta["optimizer_state"]["iterations"] == 4
    assert meta["rng"]["step"] == 4
    m.save(tmp_path / "fresh.keras", include_optimizer=False)
    with zipfile.ZipFile(tmp_path / "fresh.keras") as z:
        assert "hpcnn_state.h5" not in z.namelist()
    loaded = load_model(tmp_path / "fresh.keras")
    assert loaded.core.iterations == 0 and loaded.core.step == 4 and same_weights(loaded, m)
    without_member(tmp_path / "m.keras", "hpcnn_state.h5", tmp_path / "damaged.keras")
    with pytest.raises(ValueError, match=r"load_model: '.*damaged.keras' is damaged: it has no 'hpcnn_state.h5'"):
        load_model(tmp_path / "damaged.keras")
    assert load_model(tmp_path / "damaged.keras", compile=False).compiled is False  # weights need no state


def test_a_keras_written_file_compiles_with_a_fresh_optimizer_state(tmp_path):
    m = trained_bn(epochs=1)
    m.save(tmp_path / "m.keras")
    without_member(tmp_path / "m.keras", "hpcnn.json", tmp_path / "k.keras")
    loaded = load_model(tmp_path / "k.keras")
    assert loaded.compiled and loaded.core.iterations == 0 and same_weights(loaded, m)


# ------------------------------------------------------------------ hpcnn's earlier files
def test_a_format_version_2_file_loads_with_its_optimizer_state(tmp_path):
    """hpcnn's layout before the Keras layouts: weight_000, ... and optimizer_000, ..."""
    x, y = data()
    ref = trained_bn(epochs=2)
    m = trained_bn(epochs=1)
    meta, buffers = hpcnn_files.description(m)
    del meta["weights"]
    meta["format_version"] = 2
    arrays = {hpcnn_files.META_DATASET: hpcnn_files.json_bytes(meta)}
    arrays.update({hpcnn_files.weight_dataset(i): w for i, w in enumerate(m.get_weights())})
    arrays.update({hpcnn_files.optimizer_dataset(i): b for i, b in enumerate(buffers)})
    write_hdf5(tmp_path / "v2.h5", arrays)
    loaded = load_model(tmp_path / "v2.h5")
    assert loaded.core.iterations == 4 and same_weights(loaded, m)
    loaded.fit(x, y, batch_size=8, epochs=2, initial_epoch=1, verbose=0)
    assert same_weights(loaded, ref)
    other = bn_model(seed=8)
    other.load_weights(tmp_path / "v2.h5")
    assert same_weights(other, m)


def test_an_hpcnn_weights_file_of_the_earlier_layout_loads(tmp_path):
    m = trained_bn(epochs=1)
    meta = {"format": hpcnn_files.WEIGHTS_FORMAT, "format_version": 1, "hpcnn_version": "0.1.0",
            "weight_names": m.weight_names(), "weight_shapes": [list(w.shape) for w in m.get_weights()]}
    arrays = {hpcnn_files.WEIGHTS_META_DATASET: hpcnn_files.json_bytes(meta)}
    arrays.update({hpcnn_files.weight_dataset(i): w for i, w in enumerate(m.get_weights())})
    write_hdf5(tmp_path / "w.h5", arrays)
    other = bn_model(seed=8)
    other.load_weights(tmp_path / "w.h5")
    assert same_weights(other, m)
    meta["format"] = "something-else"
    arrays[hpcnn_files.WEIGHTS_META_DATASET] = hpcnn_files.json_bytes(meta)
    write_hdf5(tmp_path / "bad.h5", arrays)
    with pytest.raises(ValueError, match=r"load_weights: '.*bad.h5' is damaged: .*not an 'hpcnn-weights' description"):
        other.load_weights(tmp_path / "bad.h5")


# ------------------------------------------------------------------ functional models (a hand-written Keras 3 config)
FUNCTIONAL = {"module": "keras", "class_name": "Functional", "config": {
    "name": "f", "trainable": True,
    "layers": [
        {"module": "keras.layers", "class_name": "InputLayer", "name": "in",
         "config": {"batch_shape": [None, 4], "dtype": "float32", "sparse": False, "name": "in"}, "inbound_nodes": []},
        {"module": "keras.layers", "class_name": "Dense", "name": "d",
         "config": {"name": "d", "units": 2, "activation": "softmax", "use_bias": True},
         "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [None, 4],
                                                                                    "keras_history": ["in", 0, 0]}}],
                            "kwargs": {}}]}],
    "input_layers": [["in", 0, 0]], "output_layers": [["d", 0, 0]]}, "registered_name": None}


def test_a_functional_keras_config_builds_a_graph_model(tmp_path):
    """Keras 3's functional config (one input as a list of records here) builds an hpcnn.Model;
    tests/python/formats/test_keras_functional.py covers Keras-written files. An archive whose weights file is
    damaged is refused naming the file, after the config was understood."""
    m = model_from_json(json.dumps(FUNCTIONAL))
    assert type(m) is hpcnn.Model and [layer.name for layer in m.layers] == ["in", "d"]
    assert m.predict(np.ones((2, 4), np.float32)).shape == (2, 2)
    with zipfile.ZipFile(tmp_path / "f.keras", "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.15.1"}))
        z.writestr("config.json", json.dumps(FUNCTIONAL))
        z.writestr("model.weights.h5", b"")
    with pytest.raises(ValueError, match=r"load_model: '.*f.keras'"):
        load_model(tmp_path / "f.keras")
