"""Functional models (hpcnn.Model(inputs, outputs)) in Keras' formats, both ways: to_json /
model_from_json, `.keras` archives and legacy `.h5` model files written by hpcnn and read back
(also through Keras' config alone, as a file Keras wrote), and a ResNet basic block saved by real
Keras 3 (tests/data/keras/make_fixtures.py keras3_functional; tf.keras 2's legacy .h5 of it:
tf2_functional) loaded by hpcnn with the same
predictions (<= 1e-5). tests/python/keras/test_keras_interop.py checks hpcnn's files in live Keras."""
import io
import json
import zipfile

import numpy as np
import pytest

import hpcnn
from hpcnn.models import load_model, model_from_json
from tests.support.keras_file_models import resnet_block, trained_block
from tests.support import paths

DATA = paths.KERAS_DATA
K3F = np.load(DATA / "expected_k3_func.npz")
TFK2F = np.load(DATA / "expected_tfk2_func.npz")
TOL = 1e-5
RESBLOCK_CLASSES = ["InputLayer", "Conv2D", "BatchNormalization", "ReLU", "Conv2D", "BatchNormalization",
                    "Activation", "Conv2D", "Conv2D", "BatchNormalization", "BatchNormalization", "Add", "ReLU",
                    "Conv2D", "Concatenate", "GlobalAveragePooling2D", "Dense"]


def same_predictions(a, b, x=K3F["x_cnn"]):
    pa, pb = a.predict(x), b.predict(x)
    assert pa.shape == pb.shape == (len(x), 3)
    assert np.abs(pa - pb).max() <= TOL


def classes(model):
    return [type(layer).__name__ for layer in model.layers]


def inbound(model):
    """Each layer's inbound layer names, by layer name."""
    return {layer.name: [t.layer.name for t in layer.inbound_tensors or []] for layer in model.layers}


# ---------------------------------------------------------------------- hpcnn -> hpcnn
def test_to_json_is_keras_functional_config_and_round_trips():
    m = trained_block()
    cfg = json.loads(m.to_json())
    assert cfg["class_name"] == "Functional" and cfg["registered_name"] == "Functional"
    inner = cfg["config"]
    assert inner["input_layers"] == ["input_layer", 0, 0] and inner["output_layers"] == ["dense", 0, 0]
    add = next(entry for entry in inner["layers"] if entry["class_name"] == "Add")
    args = add["inbound_nodes"][0]["args"][0]
    assert [t["config"]["keras_history"][0] for t in args] == ["batch_normalization_2", "batch_normalization_3"]
    assert add["build_config"] == {"input_shape": [[None, 4, 4, 6], [None, 4, 4, 6]]}
    assert cfg["compile_config"]["loss"] == "sparse_categorical_crossentropy"

    back = model_from_json(m.to_json())
    assert type(back) is hpcnn.Model and classes(back) == classes(m) == RESBLOCK_CLASSES
    assert inbound(back) == inbound(m)
    assert back.compile_settings["loss"] == "sparse_categorical_crossentropy"  # compiled as the JSON says
    back.set_weights(m.get_weights())  # model_from_json: fresh weights; the same ones predict the same
    same_predictions(back, m)


def test_model_from_json_reads_hpcnns_own_functional_get_config():
    m = resnet_block()
    back = model_from_json(json.dumps(m.get_config()))
    assert type(back) is hpcnn.Model and inbound(back) == inbound(m)


@pytest.mark.parametrize("name", ["m.keras", "m.h5"])
def test_functional_model_files_round_trip(tmp_path, name):
    m = trained_block()
    m.save(tmp_path / name)
    back = load_model(tmp_path / name)
    assert type(back) is hpcnn.Model and classes(back) == RESBLOCK_CLASSES and inbound(back) == inbound(m)
    same_predictions(back, m)
    assert type(back.optimizer).__name__ == "Adam"


def test_functional_h5_has_keras_model_config(tmp_path):
    """The legacy .h5 holds Keras 2's functional config (what Keras reads), not only hpcnn's own."""
    from hpcnn.formats import h5tree
    m = trained_block()
    m.save(tmp_path / "m.h5")
    with h5tree.H5Tree.open(str(tmp_path / "m.h5")) as tree:
        cfg = json.loads(tree.text("/", "model_config"))
    assert cfg["class_name"] == "Functional"
    assert cfg["config"]["input_layers"] == [["input_layer", 0, 0]]
    add = next(entry for entry in cfg["config"]["layers"] if entry["class_name"] == "Add")
    assert add["inbound_nodes"] == [[["batch_normalization_2", 0, 0, {}], ["batch_normalization_3", 0, 0, {}]]]


def test_functional_archive_read_through_keras_config_alone(tmp_path):
    """Without hpcnn's own description (as Keras writes archives) the model comes from config.json
    and model.weights.h5 alone: the functional config and the weight layout are Keras'."""
    m = trained_block()
    m.save(tmp_path / "m.keras")
    with zipfile.ZipFile(tmp_path / "m.keras") as src:
        members = {n: src.read(n) for n in src.namelist() if not n.startswith("hpcnn")}
    assert set(members) == {"config.json", "metadata.json", "model.weights.h5"}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as dst:
        for n, data in members.items():
            dst.writestr(n, data)
    (tmp_path / "keras_only.keras").write_bytes(buf.getvalue())
    back = load_model(tmp_path / "keras_only.keras")
    assert classes(back) == RESBLOCK_CLASSES and inbound(back) == inbound(m)
    same_predictions(back, m)
    assert back.compile_settings["loss"] == "sparse_categorical_crossentropy"


# ---------------------------------------------------------------------- Keras -> hpcnn
@pytest.mark.parametrize("name", ["k3_resblock.keras", "k3_resblock.h5"])
def test_keras_saved_functional_resnet_block_loads_and_predicts_the_same(name):
    m = load_model(DATA / name)
    assert type(m) is hpcnn.Model and m.name == "resnet_block"
    assert classes(m) == RESBLOCK_CLASSES
    assert inbound(m)["add"] == ["batch_normalization_2", "batch_normalization_3"]
    assert inbound(m)["concatenate"] == ["re_lu_1", "conv2d_4"]
    got = m.predict(K3F["x_cnn"])
    assert np.abs(got - K3F["resblock"]).max() <= TOL
    assert type(m.optimizer).__name__ == "Adam" and m.optimizer.learning_rate == pytest.approx(0.001)
    assert m.compile_settings["loss"] == "sparse_categorical_crossentropy" and m.compile_settings["accuracy"]
    loss, acc = m.evaluate(K3F["x_cnn"], np.array([0, 1, 2, 0, 1, 2]), verbose=0)
    assert np.isfinite(loss) and 0 <= acc <= 1


def test_tf_keras_2_saved_functional_resnet_block_loads_and_predicts_the_same():
    """tf.keras 2's legacy .h5: Keras 2's functional config (nested [[name, 0, 0, {}]] inbound
    lists, batch_input_shape, 'input_1'), weights by layer name."""
    m = load_model(DATA / "tfk2_resblock.h5")
    assert type(m) is hpcnn.Model and classes(m) == RESBLOCK_CLASSES
    assert m.layers[0].name == "input_1"
    assert inbound(m)["add"] == ["batch_normalization_2", "batch_normalization_3"]
    assert np.abs(m.predict(TFK2F["x_cnn"]) - TFK2F["resblock"]).max() <= TOL
    assert type(m.optimizer).__name__ == "Adam" and m.compile_settings["loss"] == "sparse_categorical_crossentropy"


def test_keras_saved_functional_model_round_trips_through_hpcnn(tmp_path):
    m = load_model(DATA / "k3_resblock.keras")
    for name in ("again.keras", "again.h5"):
        m.save(tmp_path / name)
        assert np.abs(load_model(tmp_path / name).predict(K3F["x_cnn"]) - K3F["resblock"]).max() <= TOL


def test_keras_saved_functional_weights_load_into_hpcnns_own_block(tmp_path):
    """The same architecture built in hpcnn reads the Keras archive's weights (Keras' layer order
    and names for the weight groups)."""
    m = resnet_block(seed=9)
    assert np.abs(m.predict(K3F["x_cnn"]) - K3F["resblock"]).max() > TOL
    m.load_weights(DATA / "k3_resblock.keras")
    assert np.abs(m.predict(K3F["x_cnn"]) - K3F["resblock"]).max() <= TOL


def test_functional_config_with_several_inputs_is_refused_clearly():
    m = resnet_block()
    cfg = json.loads(m.to_json())
    cfg["config"]["input_layers"] = [["input_layer", 0, 0], ["input_layer", 0, 0]]
    with pytest.raises(NotImplementedError, match="one input and one output"):
        model_from_json(json.dumps(cfg))
