"""Models used as layers (Keras' nesting): ``base_model(inputs, training=False)`` in a functional
graph, ``Sequential([base_model, Dense(10)])``, ``Sequential.add(model)``; freezing with
``base_model.trainable = False``; the transfer-learning recipe; summary rows; get_weights order;
files (.keras, .h5, .weights.h5, to_json) both ways. Live Keras comparisons skip without the
`keras` extra."""
import json
import os

import numpy as np
import pytest

import hpcnn.keras as keras
from tests.support.gpu_target import GPU, KINDS, UPDATE_TOL, assert_updates_close
from hpcnn import optimizers
from hpcnn.keras import layers
from tests.support.live_keras import keras_or_skip

os.environ.setdefault("KERAS_BACKEND", "jax")



def make_base(lib=keras, name="base"):
    L = lib.layers
    return lib.Sequential([lib.Input((8, 8, 3)), L.Conv2D(4, 3, name="c1"), L.BatchNormalization(name="bn"),
                           L.ReLU(name="relu"), L.Conv2D(2, 3, name="c2"), L.Dropout(0.3, name="drop"),
                           L.GlobalAveragePooling2D(name="gap")], name=name)


def make_outer(base, lib=keras, training=False):
    L = lib.layers
    inputs = lib.Input((8, 8, 3))
    x = base(inputs, training=training) if training is not None else base(inputs)
    x = L.Dropout(0.2, name="top_drop")(x)
    outputs = L.Dense(3, name="head")(x)
    return lib.Model(inputs, outputs)


def random_weights(model, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for name, w in zip(model.weight_names(), model.get_weights()):
        v = rng.standard_normal(w.shape).astype("float32") * 0.4
        out.append(np.abs(v) + 0.5 if name.endswith("moving_variance") else v)
    return out


def data(n=16, seed=1):
    rng = np.random.default_rng(seed)
    return rng.random((n, 8, 8, 3)).astype("float32"), rng.random((n, 3)).astype("float32")


# ---------------------------------------------------------------------- structure
def test_layers_keep_the_nested_model_graph_nodes_expand_it():
    base = make_base()
    outer = make_outer(base)
    assert [type(la).__name__ for la in outer.layers] == ["InputLayer", "Sequential", "Dropout", "Dense"]
    assert outer.layers[1] is base and outer.get_layer("base") is base
    assert [la.name for la, _ in outer.graph_nodes()] == ["c1", "bn", "relu", "c2", "drop", "gap", "top_drop", "head"]
    assert [p for _, p in outer.graph_nodes()] == [[-1], [0], [1], [2], [3], [4], [5], [6]]
    assert outer.weight_names()[:2] == ["base/c1/kernel", "base/c1/bias"]
    assert outer.output_shape == (None, 3)
    seq = keras.Sequential([make_base(name="b2"), layers.Dense(10)])
    assert [type(la).__name__ for la in seq.layers] == ["Sequential", "Dense"]
    assert seq.input_shape == (None, 8, 8, 3) and seq.output_shape == (None, 10)
    seq2 = keras.Sequential()
    seq2.add(make_base(name="b3"))
    seq2.add(layers.Dense(10))
    assert len(seq2.graph_nodes()) == 7


def test_nested_functional_inside_sequential_and_deeper():
    inner_in = keras.Input((8, 8, 3))
    inner = keras.Model(inner_in, layers.Flatten()(layers.Conv2D(2, 3)(inner_in)), name="inner")
    middle = keras.Sequential([inner, layers.Dense(5, name="mid_dense")], name="middle")
    outer = keras.Sequential([middle, layers.Dense(2, name="out")])
    assert len(outer.graph_nodes()) == 4
    assert outer.weight_names()[0] == "middle/inner/conv2d/kernel"
    x, _ = data(4)
    flat = keras.Sequential([keras.Input((8, 8, 3)), layers.Conv2D(2, 3), layers.Flatten(), layers.Dense(5),
                             layers.Dense(2)])
    flat.set_weights(outer.get_weights())
    np.testing.assert_allclose(outer.predict(x), flat.predict(x), rtol=1e-6, atol=1e-6)


def test_a_model_used_twice_in_one_graph_is_refused():
    base = make_base()
    inputs = keras.Input((8, 8, 3))
    a = base(inputs)
    with pytest.raises(NotImplementedError, match="used twice.*clone_model"):
        keras.Model(inputs, layers.Add()([a, base(inputs)]))
    with pytest.raises(NotImplementedError, match="clone_model"):
        keras.Sequential([base, base])


def test_symbolic_call_arguments():
    base = make_base()
    with pytest.raises(NotImplementedError, match="training=True"):
        base(keras.Input((8, 8, 3)), training=True)
    with pytest.raises(ValueError, match="incompatible"):
        base(keras.Input((9, 9, 3)))


def test_augmentation_inside_a_training_false_call_is_refused():
    aug = keras.Sequential([keras.Input((8, 8, 3)), layers.RandomFlip("horizontal")], name="aug")
    with pytest.raises(NotImplementedError, match="RandomFlip.*data_augmentation"):
        aug(keras.Input((8, 8, 3)), training=False)
    inputs = keras.Input((8, 8, 3))  # the Keras recipe: augmentation outside, base_model(x, training=False)
    x = aug(inputs)
    x = make_base()(x, training=False)
    model = keras.Model(inputs, layers.Dense(2)(x))
    assert model.output_shape == (None, 2)


def test_a_sequential_without_input_takes_the_tensors_shape():
    base = keras.Sequential([layers.Dense(4)], name="no_input")
    inputs = keras.Input((6,))
    model = keras.Model(inputs, layers.Dense(2)(base(inputs)))
    assert model.output_shape == (None, 2) and base.input_shape == (None, 6)


def test_nested_predictions_equal_the_flat_models():
    base = make_base()
    outer = keras.Sequential([base, layers.Dense(3, name="head")])
    outer.set_weights(random_weights(outer))
    flat = keras.Sequential([keras.Input((8, 8, 3)), layers.Conv2D(4, 3), layers.BatchNormalization(), layers.ReLU(),
                             layers.Conv2D(2, 3), layers.Dropout(0.3), layers.GlobalAveragePooling2D(),
                             layers.Dense(3)])
    flat.set_weights(outer.get_weights())
    x, _ = data()
    np.testing.assert_allclose(outer.predict(x), flat.predict(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outer(x), flat(x), rtol=1e-5, atol=1e-6)


def test_a_built_base_model_keeps_its_weights_when_nested():
    base = make_base()
    pretrained = random_weights(base, seed=7)
    base.set_weights(pretrained)
    outer = make_outer(base)
    for a, b in zip(outer.get_weights()[:len(pretrained)], pretrained):
        np.testing.assert_array_equal(a, b)
    x, _ = data()
    head = keras.Sequential([keras.Input((2,)), layers.Dense(3)])
    head.set_weights(outer.get_weights()[len(pretrained):])
    np.testing.assert_allclose(outer.predict(x), head.predict(base.predict(x)), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- summary
def test_summary_rows():
    base = make_base()
    outer = make_outer(base)
    lines = []
    outer.summary(print_fn=lines.append)
    text = "\n".join(lines)
    base_params = sum(w.size for w in base.get_weights())
    row = next(line for line in lines if line.startswith(" base (Sequential)"))
    assert "(None, 2)" in row and row.rstrip().endswith(f"{base_params:,}")
    assert " top_drop (Dropout)" in text and " c1 (Conv2D)" not in text
    total = base_params + 2 * 3 + 3
    assert f"Total params: {total:,}" in text
    assert f"Non-trainable params: {8:,}" in text  # the moving statistics
    base.trainable = False
    outer.compile("adam", "mse")
    lines.clear()
    outer.summary(print_fn=lines.append)
    assert f"Trainable params: {9:,}" in "\n".join(lines)
    inputs = keras.Input((8, 8, 3))
    fn = keras.Model(inputs, layers.GlobalAveragePooling2D()(layers.Conv2D(2, 3)(inputs)))
    seq = keras.Sequential([fn, layers.Dense(1)])
    lines.clear()
    seq.summary(print_fn=lines.append)
    assert any(line.startswith(" functional (Functional)") and "(None, 2)" in line for line in lines)


# ---------------------------------------------------------------------- freezing, training=False, transfer learning
def test_trainable_false_freezes_every_layer_inside():
    base = make_base()
    outer = make_outer(base)
    base.trainable = False
    assert all(not la.trainable for la in base.layers)
    outer.compile("sgd", "mse")
    assert outer.trainable_mask() == [False] * 6 + [True, True]
    base.layers[1].trainable = True  # a layer inside a frozen model stays frozen (Keras)
    assert outer.trainable_mask() == [False] * 6 + [True, True]


@pytest.mark.parametrize("kind", KINDS)
def test_transfer_learning_recipe(kind):
    """keras.io's transfer-learning guide: a pretrained base, frozen, called with training=False
    under a new head; fit trains only the head; then unfrozen and fine-tuned with a low rate, its
    BatchNormalization still in inference mode (its moving statistics unchanged)."""
    base = make_base()
    pretrained = random_weights(base, seed=3)
    base.set_weights(pretrained)
    base.trainable = False
    outer = make_outer(base, training=False)
    outer.compile(optimizers.Adam(1e-2), "mse", device=kind)
    x, y = data(32)
    outer.fit(x, y, batch_size=8, epochs=2, verbose=0)
    after = outer.get_weights()
    nb = len(pretrained)
    for a, b in zip(after[:nb], pretrained):
        np.testing.assert_array_equal(a, b)  # the base: untouched
    assert not np.allclose(after[nb], random_weights(outer)[nb])  # the head trained
    # fine-tuning: every layer trainable, the base's BatchNormalization in inference mode still
    base.trainable = True
    outer.compile(optimizers.Adam(1e-3), "mse", device=kind)
    outer.fit(x, y, batch_size=8, epochs=1, verbose=0)
    tuned = outer.get_weights()
    names = outer.weight_names()
    for name, a, b in zip(names[:nb], tuned[:nb], pretrained):
        if "moving" in name:
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:
            assert not np.array_equal(a, b), name  # gamma and beta too: gradients in inference mode
    # training=False also at the call: the base's Dropout and BatchNormalization in inference mode
    first = outer(x, training=True)
    head_only = outer(x, training=False)
    assert first.shape == head_only.shape
    for a, b in zip(outer.get_weights()[:nb], tuned[:nb]):
        np.testing.assert_array_equal(a, b)


def numpy_forward_backward(w, x, t, eps=1e-3):
    """Dense(3) -> BatchNormalization(inference, fused ReLU) -> Dense(2), mse: loss gradients."""
    k1, b1, gamma, beta, mm, mv, k2, b2 = [a.astype(np.float64) for a in w]
    x = x.astype(np.float64)
    h = x @ k1 + b1
    inv = 1 / np.sqrt(mv + eps)
    xhat = (h - mm) * inv
    z = gamma * xhat + beta
    r = np.maximum(z, 0)
    y = r @ k2 + b2
    dy = 2 * (y - t) / y.size
    g = {"k2": r.T @ dy, "b2": dy.sum(0)}
    dr = dy @ k2.T
    dz = dr * (z > 0)
    g["gamma"], g["beta"] = (dz * xhat).sum(0), dz.sum(0)
    dh = dz * gamma * inv
    g["k1"], g["b1"] = x.T @ dh, dh.sum(0)
    return g


@pytest.mark.parametrize("kind", KINDS)
def test_gradients_of_a_trainable_batchnorm_in_inference_mode(kind):
    """A trainable BatchNormalization inside a model called with training=False: fit normalizes with
    the moving statistics and still trains gamma and beta (and the layers before it), with the
    gradients of that function; the moving statistics stay. One SGD step against NumPy."""
    inner = keras.Sequential([keras.Input((3,)), layers.BatchNormalization(name="bn"), layers.ReLU()], name="inner")
    inputs = keras.Input((4,))
    h = layers.Dense(3, name="d1")(inputs)
    outputs = layers.Dense(2, name="d2")(inner(h, training=False))
    model = keras.Model(inputs, outputs)
    rng = np.random.default_rng(5)
    w = [rng.standard_normal(a.shape).astype("float32") * 0.7 for a in model.get_weights()]
    w[4] = rng.standard_normal(3).astype("float32")  # moving mean
    w[5] = (rng.random(3) + 0.5).astype("float32")  # moving variance
    model.set_weights(w)
    lr = 0.1
    model.compile(optimizers.SGD(lr), "mse", device=GPU if kind == "gpu" else "cpu")
    x = rng.standard_normal((10, 4)).astype("float32")
    t = rng.standard_normal((10, 2)).astype("float32")
    g = numpy_forward_backward(w, x, t)
    model.train_on_batch(x, t)
    got = model.get_weights()
    tol = 1e-5 if kind == "cpu" else 1e-4
    for i, key in [(0, "k1"), (1, "b1"), (2, "gamma"), (3, "beta"), (6, "k2"), (7, "b2")]:
        np.testing.assert_allclose(got[i], w[i] - lr * g[key], rtol=tol, atol=tol, err_msg=key)
    np.testing.assert_array_equal(got[4], w[4])
    np.testing.assert_array_equal(got[5], w[5])


@pytest.mark.parametrize("base_trainable", [True, False], ids=["trainable", "frozen"])
@pytest.mark.parametrize("kind", KINDS)
def test_batchnorm_in_inference_mode_first_and_in_training_mode_over_5_channels(kind, base_trainable):
    """A BatchNormalization with a fused ReLU as the first layer, in inference mode (a nested model
    called with training=False, trainable or frozen: its gamma/beta gradients, and the masked
    gradient with no dx to write), then a Conv2D and a BatchNormalization in training mode over 5
    channels (statistics arrays whose offsets c * 4 bytes are not even 16-byte aligned unless laid out
    apart). Two SGD steps on the device against the same on the CPU."""
    inner = keras.Sequential([keras.Input((6, 6, 5)), layers.BatchNormalization(name="bn0"), layers.ReLU()],
                             name="inner")
    inner.trainable = base_trainable
    inputs = keras.Input((6, 6, 5))
    h = inner(inputs, training=False)
    h = layers.Conv2D(5, 3, padding="same", name="c1")(h)
    h = layers.BatchNormalization(name="bn1")(h)
    h = layers.ReLU()(h)
    outputs = layers.Dense(2, name="head")(layers.GlobalAveragePooling2D()(h))
    rng = np.random.default_rng(8)
    x = rng.standard_normal((8, 6, 6, 5)).astype("float32")
    t = rng.standard_normal((8, 2)).astype("float32")
    results = {}
    for device in ("cpu", GPU if kind == "gpu" else "cpu"):
        model = keras.Model(inputs, outputs)
        if not results:
            w = [rng.standard_normal(a.shape).astype("float32") * 0.5 for a in model.get_weights()]
            for i, name in enumerate(model.weight_names()):
                if name.endswith("moving_variance"):
                    w[i] = np.abs(w[i]) + 0.5
        model.set_weights(w)
        model.compile(optimizers.SGD(0.1), "mse", device=device)
        for _ in range(2):
            model.train_on_batch(x, t)
        results[device if not results else "device"] = model.get_weights()
    assert_updates_close(results["device"], results["cpu"], w, UPDATE_TOL[kind], f"{kind} vs cpu")
    names = keras.Model(inputs, outputs).weight_names()
    for i, name in enumerate(names):
        if "bn0" in name and name.endswith(("gamma", "beta")):  # trained only where the base is trainable
            assert (not np.array_equal(results["device"][i], w[i])) == base_trainable, name
        if "bn0" in name and "moving" in name:  # inference mode: the moving statistics stay
            np.testing.assert_array_equal(results["device"][i], w[i], err_msg=name)


def test_inference_only_dropout_is_identity_in_fit_and_call():
    inner = keras.Sequential([keras.Input((50,)), layers.Dropout(0.5)], name="inner")
    inputs = keras.Input((50,))
    model = keras.Model(inputs, inner(inputs, training=False))
    x = np.ones((4, 50), np.float32)
    np.testing.assert_array_equal(model(x, training=True), x)
    inner2 = keras.Sequential([keras.Input((50,)), layers.Dropout(0.5)], name="inner2")
    inputs2 = keras.Input((50,))
    model2 = keras.Model(inputs2, inner2(inputs2))  # training unset: follows the outer call
    assert (model2(x, training=True) == 0).any()


# ---------------------------------------------------------------------- files
@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_save_and_load_round_trip(tmp_path, suffix):
    base = make_base()
    outer = make_outer(base)
    outer.set_weights(random_weights(outer))
    outer.compile("adam", "mse")
    x, y = data()
    path = str(tmp_path / f"nested{suffix}")
    outer.save(path)
    loaded = keras.models.load_model(path)
    assert [type(la).__name__ for la in loaded.layers] == ["InputLayer", "Sequential", "Dropout", "Dense"]
    assert loaded.weight_names() == outer.weight_names()
    np.testing.assert_array_equal(loaded.predict(x), outer.predict(x))
    # training=False at the nested call survives the file: fit leaves the moving statistics
    loaded.fit(x, y, epochs=1, verbose=0)
    np.testing.assert_array_equal(loaded.get_weights()[4], outer.get_weights()[4])


def test_weights_files_and_json_round_trip(tmp_path):
    outer = keras.Sequential([make_base(), layers.Dense(3, name="head")])
    outer.set_weights(random_weights(outer))
    x, _ = data()
    for name in ("w.weights.h5", "w.h5"):
        path = str(tmp_path / name)
        outer.save_weights(path)
        other = keras.Sequential([make_base(), layers.Dense(3, name="head")])
        other.load_weights(path)
        np.testing.assert_array_equal(other.predict(x), outer.predict(x))
    again = keras.models.model_from_json(outer.to_json())
    assert [type(la).__name__ for la in again.layers] == ["Sequential", "Dense"]
    assert [e["class_name"] for e in json.loads(outer.to_json())["config"]["layers"]][-2:] == ["Sequential", "Dense"]
    clone = keras.models.clone_model(outer)
    assert len(clone.graph_nodes()) == len(outer.graph_nodes())


# ---------------------------------------------------------------------- live Keras
def test_get_weights_order_and_predictions_matchkeras_or_skip():
    real = keras_or_skip()
    ours = make_outer(make_base())
    theirs = make_outer(make_base(real), lib=real)
    weights = random_weights(ours)
    assert [w.shape for w in theirs.get_weights()] == [w.shape for w in weights]
    assert [w.path for w in theirs.weights] == ours.weight_names()
    ours.set_weights(weights)
    theirs.set_weights(weights)
    x, _ = data()
    np.testing.assert_allclose(ours.predict(x), theirs.predict(x, verbose=0), rtol=1e-4, atol=1e-5)
    seq_ours = keras.Sequential([make_base(), layers.Dense(3, name="head")])
    seq_theirs = real.Sequential([make_base(real), real.layers.Dense(3, name="head")])
    assert [w.shape for w in seq_theirs.get_weights()] == [w.shape for w in seq_ours.get_weights()]


def test_summary_rows_matchkeras_or_skip():
    real = keras_or_skip()
    ours, theirs = make_outer(make_base()), make_outer(make_base(real), lib=real)
    lines = []
    theirs.summary(print_fn=lambda s, **k: lines.extend(s.split("\n")))
    keras_row = next(line for line in lines if "base (Sequential)" in line)
    mine = []
    ours.summary(print_fn=mine.append)
    my_row = next(line for line in mine if "base (Sequential)" in line)
    for cell in ("(None, 2)", "202"):
        assert cell in keras_row and cell in my_row


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_files_both_ways_with_keras(tmp_path, suffix):
    real = keras_or_skip()
    ours = make_outer(make_base())
    ours.set_weights(random_weights(ours))
    x, _ = data()
    want = ours.predict(x)
    path = str(tmp_path / f"ours{suffix}")
    ours.save(path)
    theirs = real.models.load_model(path)
    np.testing.assert_allclose(theirs.predict(x, verbose=0), want, rtol=1e-4, atol=1e-5)
    back = str(tmp_path / f"theirs{suffix}")
    theirs.save(back)
    again = keras.models.load_model(back)
    assert [type(la).__name__ for la in again.layers] == ["InputLayer", "Sequential", "Dropout", "Dense"]
    np.testing.assert_allclose(again.predict(x), want, rtol=1e-4, atol=1e-5)
    # a Keras-made nested Sequential (no hpcnn in its history)
    made = real.Sequential([make_base(real, name="kbase"), real.layers.Dense(2, name="top")])
    made_path = str(tmp_path / f"made{suffix}")
    made.save(made_path)
    mine = keras.models.load_model(made_path)
    np.testing.assert_allclose(mine.predict(x), made.predict(x, verbose=0), rtol=1e-4, atol=1e-5)
    weights_path = str(tmp_path / "made.weights.h5")
    made.save_weights(weights_path)
    mine2 = keras.Sequential([make_base(name="kbase"), layers.Dense(2, name="top")])
    mine2.load_weights(weights_path)
    np.testing.assert_allclose(mine2.predict(x), made.predict(x, verbose=0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_deeper_nesting_files_with_keras(tmp_path, suffix):
    """A functional model in a Sequential in a Sequential (BatchNormalization inside): Keras reads
    hpcnn's file with the same predictions, and hpcnn reads Keras' file of it."""
    real = keras_or_skip()
    inner_in = keras.Input((8, 8, 3))
    inner = keras.Model(inner_in, layers.Flatten()(layers.BatchNormalization()(layers.Conv2D(2, 3)(inner_in))),
                        name="inner")
    outer = keras.Sequential([keras.Sequential([inner, layers.Dense(5, name="mid_dense")], name="middle"),
                              layers.Dense(2, name="out")])
    rng = np.random.default_rng(0)
    outer.set_weights([np.abs(rng.standard_normal(w.shape)).astype("float32") * 0.3 + 0.2 for w in outer.get_weights()])
    x, _ = data(4)
    want = outer.predict(x)
    path = str(tmp_path / f"deep{suffix}")
    outer.save(path)
    theirs = real.models.load_model(path)
    np.testing.assert_allclose(theirs.predict(x, verbose=0), want, rtol=1e-5, atol=1e-6)
    back = str(tmp_path / f"deep_keras{suffix}")
    theirs.save(back)
    again = keras.models.load_model(back)
    assert type(again.layers[0].layers[0]).__name__ == "Model"
    np.testing.assert_allclose(again.predict(x), want, rtol=1e-5, atol=1e-6)


def test_inference_only_dropout_passes_gradients_unchanged():
    """Dropout inside a model called with training=False is the identity in fit, forward and
    backward: training equals that of the same model without the Dropout."""
    def build(with_dropout):
        inputs = keras.Input((4,))
        h = layers.Dense(3, name="d1")(inputs)
        if with_dropout:
            h = keras.Sequential([keras.Input((3,)), layers.Dropout(0.5)], name="inner")(h, training=False)
        return keras.Model(inputs, layers.Dense(2, name="d2")(h))
    a, b = build(True), build(False)
    b.set_weights(a.get_weights())
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((16, 4)).astype("float32"), rng.standard_normal((16, 2)).astype("float32")
    for m in (a, b):
        m.compile(optimizers.SGD(0.1), "mse")
        m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- one set of values (weight homes)
def test_the_base_model_sees_what_the_outer_model_learned_and_back():
    """A nested model's layers hold one set of values (hpcnn.layers.weight_home): after the outer
    model trains, the base model's own get_weights, predict and save show the trained values, and
    a base layer's set_weights is seen by the outer model."""
    base = make_base()
    outer = make_outer(base)
    outer.compile(optimizer=optimizers.SGD(0.1), loss="mse")
    x, y = data()
    before = base.get_weights()
    outer.fit(x, y, batch_size=8, epochs=2, verbose=0)
    trained = outer.get_weights()
    assert not np.allclose(before[0], trained[0])
    for a, b in zip(base.get_weights(), trained[:len(before)]):
        np.testing.assert_array_equal(a, b)
    flat = make_base(name="flat")
    flat.set_weights(trained[:len(before)])
    np.testing.assert_allclose(base.predict(x, verbose=0), flat.predict(x, verbose=0), rtol=1e-6, atol=1e-6)
    kernel = base.get_layer("c1").get_weights()
    base.get_layer("c1").set_weights([np.zeros_like(kernel[0]), kernel[1]])
    np.testing.assert_array_equal(outer.get_weights()[0], 0.0)


def test_a_model_with_several_outputs_is_callable_on_data():
    base = make_base()
    x, _ = data(4)
    extractor = keras.Model(base.inputs, [base.get_layer("c1").output, base.get_layer("gap").output])
    maps = extractor(x)
    expected = extractor.predict(x, verbose=0)
    assert isinstance(maps, list) and len(maps) == 2
    for got, want in zip(maps, expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(NotImplementedError, match="2 outputs"):
        extractor(x, training=True)
