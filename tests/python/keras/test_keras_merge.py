"""Keras' lower-case merge functions: ``layers.add`` and ``layers.concatenate`` build the same
functional model as the classes and predict as Keras' (live, with the `keras` extra); the merge
functions and classes hpcnn lacks import and refuse when used, naming a recipe that works, and
those recipes (Average, Subtract from Add and Rescaling) compute what Keras' layers do."""

import numpy as np
import pytest

import hpcnn
from hpcnn import keras as hk
from tests.support.live_keras import REASON, import_keras

keras = import_keras()
needs_keras = pytest.mark.skipif(keras is None, reason=REASON)
X = np.random.default_rng(5).random((6, 8, 8, 3), dtype=np.float32)


def block(ns, with_functions):
    """A two-branch block: Conv2D branches merged by add, then concatenated with the input."""
    L = ns.layers
    inputs = ns.Input((8, 8, 3))
    a = L.Conv2D(3, 3, padding="same", name="a")(inputs)
    b = L.Conv2D(3, 1, name="b")(inputs)
    if with_functions:
        s = L.add([a, b], name="sum")
        c = L.concatenate([s, inputs], axis=-1, name="cat")
    else:
        s = L.Add(name="sum")([a, b])
        c = L.Concatenate(axis=-1, name="cat")([s, inputs])
    out = L.Dense(4, activation="softmax", name="out")(L.Flatten()(c))
    return ns.Model(inputs, out)


def test_functions_build_the_classes_model():
    f = block(hk, True)
    c = block(hk, False)
    assert [type(layer).__name__ for layer in f.layers] == [type(layer).__name__ for layer in c.layers]
    assert f.get_layer("sum").__class__ is hpcnn.layers.Add and f.get_layer("cat").axis == -1
    c.set_weights(f.get_weights())
    np.testing.assert_array_equal(f.predict(X, verbose=0), c.predict(X, verbose=0))
    assert hk.layers.add is hpcnn.layers.add and hk.layers.merge.concatenate is hpcnn.layers.concatenate


def test_functions_take_keras_arguments():
    a, b = hk.Input((4, 4, 2)), hk.Input((4, 4, 2))
    with pytest.raises(ValueError, match="axis"):
        hk.layers.concatenate([a, b], axis=0)
    t = hk.layers.concatenate([a, b], axis=1)
    assert tuple(t.shape) == (None, 8, 4, 2)


@needs_keras
def test_functions_predict_as_keras():
    theirs = block(keras, True)
    ours = block(hk, True)
    ours.set_weights(theirs.get_weights())
    np.testing.assert_allclose(ours.predict(X, verbose=0), theirs.predict(X, verbose=0), atol=1e-5)


@pytest.mark.parametrize("name", ["average", "maximum", "minimum", "subtract", "dot",
                                  "Average", "Maximum", "Minimum", "Subtract", "Dot"])
def test_missing_merges_import_and_refuse_with_a_recipe(name):
    for module in (hk.layers, hk.layers.merge):
        thing = getattr(module, name)  # `from keras.layers import maximum` works
        with pytest.raises(NotImplementedError, match=rf"keras\.layers(\.merge)?\.{name} is not available in hpcnn: "
                                                      r".*(Add|add|Concatenate|concatenate)"):
            thing([hk.Input((2, 2, 1)), hk.Input((2, 2, 1))])


def test_the_average_and_subtract_recipes_compute_keras_results():
    L = hk.layers
    rng = np.random.default_rng(0)
    xs = rng.random((4, 2, 2, 3), dtype=np.float32)
    for recipe, want in (("average", lambda p, q: (p + q) / 2), ("subtract", lambda p, q: p - q)):
        x = hk.Input((2, 2, 3))
        p = L.Conv2D(3, 1, name="p")(x)
        q = L.Conv2D(3, 1, name="q")(x)
        out = L.Rescaling(1 / 2)(L.add([p, q])) if recipe == "average" else L.add([p, L.Rescaling(-1.0)(q)])
        model = hk.Model(x, out)
        w = [rng.standard_normal(v.shape).astype(np.float32) for v in model.get_weights()]
        model.set_weights(w)
        order = [layer.name for layer in model.layers if layer.name in ("p", "q")]  # get_weights' order
        values = {name: xs @ w[2 * i][0, 0] + w[2 * i + 1] for i, name in enumerate(order)}
        np.testing.assert_allclose(model.predict(xs, verbose=0), want(values["p"], values["q"]), rtol=1e-5,
                                   atol=1e-6, err_msg=recipe)
