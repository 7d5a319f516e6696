"""The functional API (issue 13, part b): hpcnn.Input, layers called on symbolic tensors,
hpcnn.Model(inputs, outputs), Add and Concatenate; layer order and names as Keras gives them,
summary with "Connected to", config / save / load / clone round trips, training through the
public API, and clear errors for graphs hpcnn cannot build."""
import json

import numpy as np
import pytest

import hpcnn
from hpcnn import _core
from hpcnn.formats import hpcnn_files
from hpcnn.data import read_dataset, write_hdf5
from hpcnn.layers import (Activation, Add, Concatenate, Conv2D, Dense, Flatten, InputLayer, KerasTensor,
                          MaxPooling2D)

from tests.support.small_models import GRAPHS, concat_model, residual_model, small_model


def data(n=48, shape=(6, 6, 3), classes=3, seed=0):
    """Class k: a brighter band of rows k (learnable in a few epochs)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = (rng.random((n,) + shape) * 0.3).astype(np.float32)
    for i, k in enumerate(y):
        x[i, 2 * k:2 * k + 2] += 0.7
    return x, y


def summary_lines(model):
    lines = []
    model.summary(print_fn=lines.append)
    return lines


# ------------------------------------------------------------------ building
def test_names_and_symbolic_tensors():
    assert hpcnn.Model is hpcnn.models.Model and hpcnn.Input is hpcnn.layers.Input
    assert issubclass(hpcnn.Sequential, hpcnn.Model)
    x = hpcnn.Input(shape=(8, 8, 3), name="images")
    assert isinstance(x, KerasTensor) and x.shape == (None, 8, 8, 3) and x.dtype == "float32" and x.ndim == 4
    assert repr(x) == "<KerasTensor shape=(None, 8, 8, 3), dtype=float32, name=images>"
    y = Conv2D(5, 3, strides=2, padding="same")(x)
    assert y.shape == (None, 4, 4, 5)
    assert Concatenate()([y, Conv2D(2, 1, strides=2)(x)]).shape == (None, 4, 4, 7)
    assert Concatenate(axis=1)([y, y]).shape == (None, 8, 4, 5)
    assert Add()([y, y, y]).shape == (None, 4, 4, 5)
    assert hpcnn.Input((4,), dtype="uint8").dtype == "uint8"
    with pytest.raises(TypeError, match="symbolic"):
        np.asarray(x)


def test_layers_in_keras_order_with_keras_names():
    """model.layers: the InputLayer first, then by decreasing depth, ties in the order of a
    depth-first walk from the output (what Keras 3 gives for the same graph; checked against
    Keras 3.15), unnamed layers named per model."""
    m = residual_model()
    assert [la.name for la in m.layers] == ["input_layer", "conv2d", "conv2d_1", "conv2d_2", "add", "re_lu",
                                            "flatten", "dense"]
    assert m.weight_names() == ["conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "conv2d_1/bias",
                                 "conv2d_2/kernel", "conv2d_2/bias", "dense/kernel", "dense/bias"]
    assert m.get_layer("add") is m.layers[4] and m.get_layer(index=-1) is m.layers[-1]
    assert m.input is m.inputs[0] is m.layers[0].output and m.output is m.outputs[0] is m.layers[-1].output
    assert m.get_layer("add").input == [m.get_layer("conv2d_2").output, m.get_layer("conv2d").output]
    assert m.input_shape == (None, 6, 6, 3) and m.output_shape == (None, 3)
    assert isinstance(m.layers[0], InputLayer) and m.name == "residual"
    c = concat_model()
    assert [la.name for la in c.layers] == ["input_layer", "conv2d", "conv2d_1", "conv2d_2", "concatenate",
                                            "max_pooling2d", "flatten", "dense"]
    with pytest.raises(ValueError, match="No such layer: nope"):
        m.get_layer("nope")


def test_explicit_names_are_kept_and_auto_names_avoid_them():
    x = hpcnn.Input((4,))
    a = Dense(3, name="dense")(x)
    b = Dense(3)(a)
    m = hpcnn.Model(x, Dense(2, activation="softmax", name="dense_1")(Add()([a, b])))
    assert [la.name for la in m.layers] == ["input_layer", "dense", "dense_2", "add", "dense_1"]


def test_summary_has_keras_connected_to_column():
    lines = summary_lines(residual_model())
    assert lines[0] == 'Model: "residual"'
    assert lines[2].split() == ["Layer", "(type)", "Output", "Shape", "Param", "#", "Connected", "to"]
    table = "\n".join(lines)
    assert " input_layer (InputLayer)         (None, 6, 6, 3)           0           -" in table
    assert " conv2d_1 (Conv2D)                (None, 6, 6, 4)           148         conv2d[0][0]" in table
    i = next(k for k, line in enumerate(lines) if line.startswith(" add (Add)"))
    assert lines[i].endswith("conv2d_2[0][0]") and lines[i + 1].strip() == "conv2d[0][0]"  # one source per line
    assert "Total params: 843 (0.00 MB)" in table


def test_a_chain_prints_like_keras_without_connected_to():
    """A functional chain has no "Connected to" column (as in Keras) but lists its InputLayer; a
    Sequential's summary is exactly what it was before graphs."""
    x = hpcnn.Input((4,))
    lines = summary_lines(hpcnn.Model(x, Dense(2, activation="softmax")(x)))
    assert "Connected to" not in "\n".join(lines)
    assert lines[4].startswith(" input_layer (InputLayer)") and lines[5].startswith(" dense (Dense)")
    assert summary_lines(small_model())[:13] == [
        'Model: "sequential"',
        "_" * 76,
        " Layer (type)                     Output Shape              Param #",
        "=" * 76,
        " conv2d (Conv2D)                  (None, 8, 8, 4)           76",
        " max_pooling2d (MaxPooling2D)     (None, 4, 4, 4)           0",
        " flatten (Flatten)                (None, 64)                0",
        " dense (Dense)                    (None, 8)                 520",
        " re_lu (ReLU)                     (None, 8)                 0",
        " dropout (Dropout)                (None, 8)                 0",
        " dense_1 (Dense)                  (None, 3)                 27",
        "=" * 76,
        "Total params: 623 (0.00 MB)"]


def test_sequential_starts_with_input_and_refuses_merging_layers():
    m = hpcnn.Sequential([hpcnn.Input(shape=(4,)), Dense(3, activation="softmax")])
    assert m.input_shape == (None, 4) and m.count_params() == 15 and [la.name for la in m.layers] == ["dense"]
    with pytest.raises(ValueError, match="Add takes several inputs and cannot be part of a Sequential"):
        m.add(Add())
    with pytest.raises(TypeError, match="add\\(\\) takes an hpcnn layer or the tensor of hpcnn.Input"):
        m.add(Dense(2)(hpcnn.Input((4,))))


# ------------------------------------------------------------------ training
@pytest.mark.parametrize("build", [residual_model, concat_model])
def test_fit_evaluate_predict_through_the_public_api(build):
    x, y = data()
    m = build(seed=2)
    m.compile(hpcnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    h = m.fit(x, y, batch_size=12, epochs=6, verbose=0, validation_split=0.25)
    assert h.history["loss"][-1] < h.history["loss"][0]
    loss, acc = m.evaluate(x, y, verbose=0)
    assert np.isfinite(loss) and 0 <= acc <= 1
    p = m.predict(x[:7], batch_size=3)
    assert p.shape == (7, 3) and np.allclose(p.sum(axis=1), 1, atol=1e-5)
    assert m.predict_classes(x[:7]).shape == (7,)
    assert np.isfinite(m.train_on_batch(x[:4], y[:4])[0]) and np.isfinite(m.test_on_batch(x[:4], y[:4])[0])
    np.testing.assert_array_equal(m.predict_on_batch(x[:3]), m.predict(x[:3]))


def test_uint8_images_into_a_graph():
    x8 = (np.random.default_rng(1).random((16, 6, 6, 3)) * 255).astype(np.uint8)
    inp = hpcnn.Input((6, 6, 3), dtype="uint8")
    m = hpcnn.Model(inp, Dense(3, activation="softmax")(Flatten()(Conv2D(2, 3)(inp))), seed=1)
    np.testing.assert_allclose(m.predict(x8), m.predict(x8.astype(np.float32)), rtol=1e-6)


def test_model_trainable_false_freezes_the_graph():
    x, y = data(16)
    m = residual_model(seed=3)
    m.trainable = False
    m.compile("adam", "sparse_categorical_crossentropy")
    w0 = m.get_weights()
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    for a, b in zip(w0, m.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert "Trainable params: 0 (0.00 MB)" in summary_lines(m)


def test_two_models_of_one_graph_share_their_layers_weights():
    """Layers hold their weights (Keras): two models built from the same tensors share them, so
    training one changes the other's (hpcnn.layers.weight_home)."""
    x = hpcnn.Input((4,))
    out = Dense(2, activation="softmax")(Dense(3)(x))
    a, b = hpcnn.Model(x, out, seed=1), hpcnn.Model(x, out, seed=1)
    b.compile(hpcnn.optimizers.SGD(0.5), "sparse_categorical_crossentropy")
    before = a.get_weights()
    b.fit(np.ones((4, 4), np.float32), np.array([0, 1, 0, 1]), verbose=0)
    assert not np.array_equal(before[0], b.get_weights()[0])
    for w0, w1 in zip(b.get_weights(), a.get_weights()):
        np.testing.assert_array_equal(w0, w1)


# ------------------------------------------------------------------ config, save, load, clone
def test_config_has_keras_functional_shape_and_round_trips():
    m = residual_model(seed=4)
    cfg = m.get_config()
    assert json.loads(json.dumps(cfg)) == cfg  # plain JSON
    assert set(cfg) == {"name", "trainable", "layers", "input_layers", "output_layers"}
    assert cfg["input_layers"] == [["input_layer", 0, 0]] and cfg["output_layers"] == [["dense", 0, 0]]
    add = next(e for e in cfg["layers"] if e["name"] == "add")
    assert add["class_name"] == "Add" and add["config"]["name"] == "add"
    (node,) = add["inbound_nodes"]
    assert [t["config"]["keras_history"] for t in node["args"][0]] == [["conv2d_2", 0, 0], ["conv2d", 0, 0]]
    assert node["args"][0][0] == {"class_name": "__keras_tensor__", "config": {
        "shape": [None, 6, 6, 4], "dtype": "float32", "keras_history": ["conv2d_2", 0, 0]}}
    assert cfg["layers"][0]["inbound_nodes"] == []



@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_config_round_trips_predict_the_same(name):
    build, in_shape, _ = GRAPHS[name]
    m = build()
    cfg = m.get_config()
    again = hpcnn.Model.from_config(json.loads(json.dumps(cfg)))
    assert again.get_config() == cfg  # Concatenate's axis included
    assert again.core.node_inputs == m.core.node_inputs
    again.set_weights(m.get_weights())
    x = np.random.default_rng(0).random((5,) + in_shape, dtype=np.float32)
    np.testing.assert_array_equal(again.predict(x), m.predict(x))


def test_from_config_takes_keras2_inbound_nodes_and_any_layer_order():
    cfg = concat_model(seed=1).get_config()
    for e in cfg["layers"]:  # Keras 2's form: [[[name, node, index, kwargs], ...]]
        if e["inbound_nodes"]:
            args = e["inbound_nodes"][0]["args"][0]
            e["inbound_nodes"] = [[[t["config"]["keras_history"][0], 0, 0, {}] for t in
                                   (args if isinstance(args, list) else [args])]]
    cfg["layers"].reverse()
    m = hpcnn.Model.from_config(cfg)
    assert [la.name for la in m.layers] == [la.name for la in concat_model(seed=1).layers]


@pytest.mark.parametrize("compiled", [True, False])
def test_save_and_load_a_graph(tmp_path, compiled):
    x, y = data(24)
    m = residual_model(seed=9)
    if compiled:
        m.compile(hpcnn.optimizers.SGD(0.05, momentum=0.5), "sparse_categorical_crossentropy", ["accuracy"])
        m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = str(tmp_path / "res.h5")
    m.save(path)
    assert json.loads(bytes(read_dataset(path, hpcnn_files.META_DATASET)).decode())["class_name"] == "Functional"
    back = hpcnn.load_model(path)
    assert type(back) is hpcnn.Model and back.get_config() == m.get_config() and back.seed == m.seed
    np.testing.assert_array_equal(back.predict(x), m.predict(x))
    assert back.compiled == compiled
    if compiled:
        assert type(back.optimizer).__name__ == "SGD" and back.optimizer.momentum == 0.5
        back.fit(x, y, batch_size=8, epochs=1, verbose=0)  # trains on


def test_files_of_sequential_models_without_a_class_name_still_load(tmp_path):
    """Files written before graphs carry no class_name: they are Sequential."""
    m = small_model(seed=2)
    path = str(tmp_path / "seq.h5")
    m.save(path)
    meta = json.loads(bytes(read_dataset(path, hpcnn_files.META_DATASET)).decode())
    assert meta.pop("class_name") == "Sequential"
    meta.pop("weights")  # as hpcnn wrote them before Keras' layouts: format_version 2, weight_000, ...
    meta["format_version"] = 2
    arrays = {hpcnn_files.META_DATASET: np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    arrays.update({hpcnn_files.weight_dataset(i): w for i, w in enumerate(m.get_weights())})
    old = str(tmp_path / "old.h5")
    write_hdf5(old, arrays)
    back = hpcnn.load_model(old)
    assert type(back) is hpcnn.Sequential
    x = np.random.default_rng(0).random((3, 8, 8, 2), dtype=np.float32)
    np.testing.assert_array_equal(back.predict(x), m.predict(x))


def test_unknown_model_class_in_a_file_is_a_clear_error(tmp_path):
    m = small_model()
    path = str(tmp_path / "m.h5")
    m.save(path)
    meta = json.loads(bytes(read_dataset(path, hpcnn_files.META_DATASET)).decode())
    meta["class_name"] = "Subclassed"
    meta.pop("weights")
    meta["format_version"] = 2
    arrays = {hpcnn_files.META_DATASET: np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    arrays.update({hpcnn_files.weight_dataset(i): w for i, w in enumerate(m.get_weights())})
    write_hdf5(path, arrays)
    with pytest.raises(ValueError, match="is damaged: its model class 'Subclassed' is not one hpcnn has"):
        hpcnn.load_model(path)


def test_clone_model_of_a_graph():
    m = residual_model(seed=1)
    c = hpcnn.clone_model(m)
    assert type(c) is hpcnn.Model and c.get_config() == m.get_config()
    assert all(a is not b for a, b in zip(c.layers, m.layers))  # new layers
    assert c.seed != m.seed and any(not np.array_equal(a, b) for a, b in zip(c.get_weights(), m.get_weights()))


# ------------------------------------------------------------------ graphs that cannot be built
def test_a_layer_used_at_a_second_position_is_refused():
    x = hpcnn.Input((4,))
    d = Dense(4, name="shared")
    y = d(x)
    with pytest.raises(NotImplementedError, match="layer 'shared' \\(Dense\\) is already used at another position"):
        d(y)
    unnamed = Dense(4)
    unnamed(x)
    with pytest.raises(NotImplementedError, match="layer Dense \\(Dense\\) is already used.*create a new Dense"):
        unnamed(x)


def test_a_disconnected_graph_is_refused():
    a, b = hpcnn.Input((4,)), hpcnn.Input((4,), name="other")
    out = Dense(2, activation="softmax")(Add()([Dense(3)(a), Dense(3)(b)]))
    with pytest.raises(ValueError, match="Graph disconnected: .*name=other"):
        hpcnn.Model(a, out)
    with pytest.raises(NotImplementedError, match="one input and one output for now; got 2 inputs"):
        hpcnn.Model([a, b], out)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda x: Add()([Conv2D(4, 1)(x), Conv2D(5, 1)(x)]), ValueError,
     r"Add: inputs have incompatible shapes: \(None, 6, 6, 4\), \(None, 6, 6, 5\)"),
    (lambda x: Concatenate()([Conv2D(4, 1)(x), Conv2D(4, 2)(x)]), ValueError,
     r"requires inputs with matching shapes except for the concatenation axis.*\(None, 6, 6, 4\), \(None, 5, 5, 4\)"),
    (lambda x: Concatenate(axis=4)([x, x]), ValueError, r"Concatenate: axis=4 is out of range"),
    (lambda x: Concatenate(axis=-5)([x, x]), ValueError, r"Concatenate: axis=-5 is out of range"),
    (lambda x: Concatenate(axis=0), ValueError, r"0 is the batch axis"),
    (lambda x: Concatenate(axis=1.5), ValueError, r"Invalid value for argument `axis`.*Received: axis=1.5"),
    (lambda x: Add()(x), ValueError, r"Add layer should be called on a list of at least 2 inputs"),
    (lambda x: Add()([x]), ValueError, r"at least 2 inputs. Received 1 input"),
    (lambda x: Dense(3)([x, x]), ValueError, r"Dense takes one tensor, got a list of 2"),
    (lambda x: Dense(3)(x), ValueError, r"Dense expects a flat input .* \(called on InputLayer \(None, 6, 6, 3\)\)"),
    (lambda x: Conv2D(4, 3)("x"), TypeError, r"Conv2D was called on str.*or on a NumPy array"),
    (lambda x: Conv2D(4, 3)(x, training=True), ValueError, r"training=True is not supported"),
    (lambda x: Conv2D(4, 3)(x, scale=2), TypeError, r"Unrecognized keyword arguments passed to Conv2D.__call__"),
    (lambda x: InputLayer(input_shape=(3,))(x), TypeError, r"an InputLayer is not called"),
    (lambda x: Dense(3, input_shape=(5,))(Flatten()(x)), ValueError, r"input_shape=\(5,\) does not match"),
    (lambda x: Add(input_shape=(3,)), ValueError, r"input_shape= is not taken"),
    (lambda x: hpcnn.Model(x, x), ValueError, r"the output is the input itself"),
    (lambda x: hpcnn.Model(Conv2D(2, 1)(x), Flatten()(x)), ValueError, r"inputs must be the tensor of hpcnn.Input"),
    (lambda x: hpcnn.Model(x, np.zeros(3)), TypeError, r"outputs must be hpcnn tensors"),
    (lambda x: hpcnn.Model(), NotImplementedError, r"subclassing Model"),
    (lambda x: hpcnn.Model(x, Flatten()(x), run_eagerly=True), TypeError, r"Unrecognized keyword arguments"),
    (lambda x: hpcnn.Model(x, Add()([Conv2D(2, 1, name="c")(x), Conv2D(2, 1, name="c")(x)])), ValueError,
     r'The name "c" is used 2 times in the model'),
])
def test_bad_graphs_are_clear_errors(call, exc, pattern):
    x = hpcnn.Input((6, 6, 3))
    with pytest.raises(exc, match=pattern) as info:
        call(x)
    assert type(info.value) is exc


def test_a_cycle_is_refused():
    """A cycle cannot be made through the API (a layer only takes tensors that exist); a graph
    mended into one by hand is refused, by the graph walk and by the core."""
    x = hpcnn.Input((4,))
    a = Dense(4)(x)
    b = Dense(4)(a)
    a.layer.inbound_tensors = [b]  # a reads b, b reads a
    with pytest.raises(ValueError, match="is part of a cycle"):
        hpcnn.Model(x, Dense(2, activation="softmax")(b))
    dense = {"class_name": "Dense", "units": 4, "activation": "linear"}
    with pytest.raises(ValueError, match="layer 0 \\(Dense\\): input 0 refers to node 1, which does not come before"):
        _core.Model([4], [dense, dense], 1, [[1], [0]])


DENSE = {"class_name": "Dense", "units": 4, "activation": "linear"}


@pytest.mark.parametrize("inputs,pattern", [
    ([[-1], [-1], [0]], r"layer 1 \(Dense\) is not connected to the output"),
    ([[-1], [0], [1, 0]], r"layer 2 \(Dense\): Dense takes one input, got 2"),
    ([[-1], [0]], r"inputs: one list per layer, got 2 for 3 layers"),
    ([[-1], [0], []], r"layer 2 \(Dense\) has no inputs"),
    ([[-1], [-2], [1]], r"input 0 refers to node -2"),
])
def test_the_core_checks_the_graph_it_is_given(inputs, pattern):
    with pytest.raises(ValueError, match=pattern):
        _core.Model([4], [DENSE] * 3, 1, inputs)


def test_the_core_counts_a_merge_layers_inputs():
    with pytest.raises(ValueError, match=r"layer 1 \(Add\): Add takes a list of at least two inputs, got 1"):
        _core.Model([4], [DENSE, {"class_name": "Add"}, DENSE], 1, [[-1], [0], [1]])
    m = _core.Model([4], [DENSE, {"class_name": "Add"}, DENSE], 1, [[-1], [0, 0, 0, 0], [1]])  # one tensor 4 times
    assert m.node_inputs == [[-1], [0, 0, 0, 0], [1]] and m.output_shapes == [[4], [4], [4]]


def test_from_config_errors_name_the_problem():
    cfg = residual_model().get_config()
    with pytest.raises(ValueError, match="needs 'input_layers'.*Sequential.from_config"):
        hpcnn.Model.from_config({"name": "m", "layers": []})
    broken = json.loads(json.dumps(cfg))
    broken["layers"] = [e for e in broken["layers"] if e["name"] != "conv2d_1"]
    with pytest.raises(ValueError, match="layer 'conv2d_2' reads \\['conv2d_1'\\], which no layer of the config"):
        hpcnn.Model.from_config(broken)
    shared = json.loads(json.dumps(cfg))
    shared["layers"][1]["inbound_nodes"] *= 2
    with pytest.raises(NotImplementedError, match="layer 'conv2d' is used at 2 positions"):
        hpcnn.Model.from_config(shared)
    two_in = json.loads(json.dumps(cfg))
    two_in["input_layers"] *= 2
    with pytest.raises(NotImplementedError, match="one input and one output"):
        hpcnn.Model.from_config(two_in)


def test_activation_layers_in_a_graph_and_softmax_from_logits():
    """A softmax Activation at the output is fused into the loss as in a Sequential; a graph
    ending in logits trains with from_logits=True."""
    x = hpcnn.Input((6, 6, 3))
    y = Flatten()(MaxPooling2D(2)(Activation("relu")(Conv2D(3, 3)(x))))
    logits = Dense(3)(y)
    xs, ys = data(16)
    m = hpcnn.Model(x, logits, seed=1)
    m.compile("adam", hpcnn.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert np.isfinite(m.fit(xs, ys, verbose=0).history["loss"][0])
    probs = hpcnn.Model(x, Activation("softmax")(logits), seed=1)
    probs.compile("adam", "sparse_categorical_crossentropy")
    assert np.isfinite(probs.fit(xs, ys, verbose=0).history["loss"][0])
    np.testing.assert_allclose(probs.predict(xs).sum(axis=1), 1, atol=1e-5)
