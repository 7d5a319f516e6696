"""Weight regularizers (hpcnn.regularizers on Conv2D / Dense): the reported loss is the data loss plus
the penalty, and the gradient gets the penalty's gradient before the optimizer step; against a
float64 NumPy step (tests/support/reference.py) plus Keras' penalty formulas. Frozen layers carry no
penalty (Keras counts trainable weights only); evaluation reports the penalty too (Keras' test
step computes the same loss)."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core, optimizers, regularizers
from hpcnn.layers import Conv2D, Dense, Flatten, InputLayer
from hpcnn.utils import to_categorical

from tests.support import optimizer_reference as oref
from tests.support import reference

SPEC = [("conv", 1, "same", True), ("flatten",), ("dense", True), ("dense", False), ("softmax",)]
FACTORS = [(0.0, 0.05), (0.02, 0.0), (0.01, 0.03), (0.0, 0.0), (0.0, 0.0), (0.0, 0.1)]  # per weight: (l1, l2)


def model(seed=6, frozen=()):
    m = hpcnn.Sequential([
        InputLayer(input_shape=[5, 5, 2]),
        Conv2D(3, 3, padding="same", activation="relu", kernel_regularizer=regularizers.l2(0.05),
               bias_regularizer=regularizers.L1(0.02)),
        Flatten(),
        Dense(4, activation="relu", kernel_regularizer=regularizers.l1_l2(l1=0.01, l2=0.03)),
        Dense(3, activation="softmax", bias_regularizer="l2"),  # Keras' string: L2(0.01) ...
    ], seed=seed)
    m.layers[3].bias_regularizer = regularizers.L2(0.1)  # ... changed before the model is built
    for i in frozen:
        m.layers[i].trainable = False
    return m


def data(n=10, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 5, 5, 2)).astype(np.float32)
    return x, rng.integers(0, 3, n)


def nonzero_biases(m, seed=2):
    """Biases start at zero: give them values so their penalties and gradients mean something."""
    rng = np.random.default_rng(seed)
    ws = m.get_weights()
    for k in (1, 3, 5):
        ws[k] = rng.standard_normal(ws[k].shape).astype(np.float32) * 0.3
    ws[1][0] = 0.0  # sign(0) = 0: an L1 penalty has no gradient there
    m.set_weights(ws)
    return ws


def test_loss_and_gradients_against_float64():
    x, y = data()
    m = model()
    m.compile(optimizers.SGD(1e-3), "sparse_categorical_crossentropy")
    ws = nonzero_biases(m)
    data_loss, grads = reference.train_step(SPEC, [w.astype(np.float64) for w in ws], x.astype(np.float64),
                                            to_categorical(y, 3).astype(np.float64), {})
    penalty = oref.penalty(ws, FACTORS)
    loss = m.train_on_batch(x, y)
    assert loss == pytest.approx(data_loss + penalty, rel=1e-5)
    got = oref.split(m.core.gradient_buffer(keras_layout=True), [w.shape for w in ws])
    for k, (g, w, (l1, l2)) in enumerate(zip(grads, ws, FACTORS)):
        want = g + oref.penalty_gradient(w, l1, l2)
        np.testing.assert_allclose(got[k], want, rtol=1e-4, atol=1e-6 * max(1.0, np.abs(want).max()),
                                   err_msg=f"weight {k}")
    assert got[1][0] == pytest.approx(grads[1][0], abs=1e-7)  # no L1 gradient at w = 0


def test_evaluate_and_fit_report_the_penalty():
    x, y = data()
    m = model()
    m.compile(optimizers.SGD(1e-3), "sparse_categorical_crossentropy", ["accuracy"])
    ws = nonzero_biases(m)
    data_loss, _ = reference.train_step(SPEC, [w.astype(np.float64) for w in ws], x.astype(np.float64),
                                        to_categorical(y, 3).astype(np.float64), {})
    penalty = oref.penalty(ws, FACTORS)
    loss, _ = m.evaluate(x, y, batch_size=4, verbose=0)
    assert loss == pytest.approx(data_loss + penalty, rel=1e-5)
    assert m.test_on_batch(x, y)[0] == pytest.approx(data_loss + penalty, rel=1e-5)
    h = m.fit(x, y, batch_size=10, epochs=1, shuffle=False, verbose=0)  # one batch, at the weights above
    assert h.history["loss"][0] == pytest.approx(data_loss + penalty, rel=1e-5)


def test_frozen_layers_carry_no_penalty():
    x, y = data()
    m = model(frozen=(0,))
    m.compile(optimizers.SGD(1e-3), "sparse_categorical_crossentropy")
    ws = nonzero_biases(m)
    data_loss, grads = reference.train_step(SPEC, [w.astype(np.float64) for w in ws], x.astype(np.float64),
                                            to_categorical(y, 3).astype(np.float64), {})
    trainable = [(0.0, 0.0), (0.0, 0.0)] + FACTORS[2:]
    assert m.train_on_batch(x, y) == pytest.approx(data_loss + oref.penalty(ws, trainable), rel=1e-5)
    after = m.get_weights()
    np.testing.assert_array_equal(after[0], ws[0])  # frozen: no step, not even the penalty's
    got = oref.split(m.core.gradient_buffer(keras_layout=True), [w.shape for w in ws])
    for k in (2, 3, 4, 5):
        l1, l2 = FACTORS[k]
        want = grads[k] + oref.penalty_gradient(ws[k], l1, l2)
        np.testing.assert_allclose(got[k], want, rtol=1e-4, atol=1e-6 * max(1.0, np.abs(want).max()))


def test_training_with_a_penalty_shrinks_the_weights():
    """Strong L2 on the first Dense kernel: after training its norm is well below the one trained
    without it (the penalty's gradient reaches the optimizer)."""
    x, y = data(40)
    norms = []
    for reg in (None, regularizers.L2(1.0)):
        m = hpcnn.Sequential([InputLayer(input_shape=[5, 5, 2]), Flatten(), Dense(8, kernel_regularizer=reg),
                              Dense(3, activation="softmax")], seed=3)
        m.compile(optimizers.Adam(0.01), "sparse_categorical_crossentropy")
        m.fit(x, y, batch_size=10, epochs=5, verbose=0)
        norms.append(float(np.linalg.norm(m.get_weights()[0])))
    assert norms[1] < 0.5 * norms[0]


def test_penalty_op_against_numpy():
    rng = np.random.default_rng(4)
    sizes = [30, 4096, 1, 5000]
    w = rng.standard_normal(sum(sizes)).astype(np.float32)
    w[5] = 0.0
    g = rng.standard_normal(w.size).astype(np.float32)
    l1, l2 = [0.1, 0.0, 0.5, 0.02], [0.0, 0.3, 0.5, 0.01]
    penalty, g2 = _core.ops.weight_penalty(w, g, sizes, l1, l2)
    parts = oref.split(w, [(n,) for n in sizes])
    assert penalty == pytest.approx(oref.penalty(parts, list(zip(l1, l2))), rel=1e-6)  # float32 factors, as Keras
    want = g.astype(np.float64) + np.concatenate([oref.penalty_gradient(p, a, b) for p, a, b in zip(parts, l1, l2)])
    np.testing.assert_allclose(g2, want, rtol=1e-6, atol=1e-7)
    assert g2[5] == g[5]  # sign(0) = 0


# ------------------------------------------------------------------ the objects, configs, save/load
def test_regularizer_objects():
    w = np.array([[1.0, -2.0], [0.5, 0.0]])
    assert regularizers.L1(0.1)(w) == pytest.approx(0.35)
    assert regularizers.L2(0.1)(w) == pytest.approx(0.525)
    assert regularizers.L1L2(l1=0.1, l2=0.1)(w) == pytest.approx(0.875)
    assert regularizers.get("l2").l2 == 0.01 and regularizers.get("l1").l1 == 0.01  # Keras' string defaults
    assert regularizers.get("l1_l2").get_config() == {"l1": 0.0, "l2": 0.0}  # Keras: L1L2()
    assert regularizers.l2 is regularizers.L2 and regularizers.l1_l2 is regularizers.L1L2
    assert regularizers.get(None) is None
    assert regularizers.L2(None).l2 == 0.01
    r = regularizers.L1L2(l1=0.5, l2=0.25)
    assert regularizers.deserialize(regularizers.serialize(r)) == r
    assert regularizers.get({"module": "keras.regularizers", "class_name": "L2", "config": {"l2": 0.2},
                             "registered_name": None}) == regularizers.L2(0.2)


def test_layer_and_model_configs_round_trip(tmp_path):
    m = model()
    cfg = m.get_config()
    conv = cfg["layers"][1]["config"]
    assert conv["kernel_regularizer"] == {"class_name": "L2", "config": {"l2": 0.05}}
    assert conv["bias_regularizer"] == {"class_name": "L1", "config": {"l1": 0.02}}
    assert "kernel_regularizer" not in cfg["layers"][4]["config"]  # only what is set
    again = hpcnn.Sequential.from_config(cfg)
    assert again.get_config() == cfg
    x, y = data()
    m.compile(optimizers.SGD(1e-3), "sparse_categorical_crossentropy")
    nonzero_biases(m)
    path = str(tmp_path / "reg.h5")
    m.save(path)
    loaded = hpcnn.models.load_model(path)
    assert loaded.get_config() == cfg
    assert loaded.evaluate(x, y, verbose=0) == pytest.approx(m.evaluate(x, y, verbose=0), rel=1e-6)


def test_core_layer_configs_name_regularizer_problems():
    with pytest.raises(ValueError, match=r"layer 0 \(Flatten\) has no parameter 'kernel' to regularize"):
        _core.Model([4, 4, 1], [dict(class_name="Flatten", kernel_l2=0.1), dict(class_name="Dense", units=2,
                                                                                  activation="linear")], 0)
    with pytest.raises(ValueError, match="factors must be >= 0 and finite"):
        _core.Model([4], [dict(class_name="Dense", units=2, activation="linear", bias_l1=-1.0)], 0)


def test_penalty_gradient_against_finite_differences():
    """The op's gradient against central differences of the float64 penalty (weights kept away
    from 0, where L1 has its kink)."""
    rng = np.random.default_rng(7)
    sizes = [12, 7, 20]
    l1, l2 = [0.3, 0.0, 0.05], [0.0, 0.7, 0.2]
    w = rng.standard_normal(sum(sizes))
    w = np.where(np.abs(w) < 0.05, 0.05, w).astype(np.float32)
    _, grad = _core.ops.weight_penalty(w, np.zeros_like(w), sizes, l1, l2)

    def penalty(v):
        return oref.penalty(oref.split(v, [(n,) for n in sizes]), list(zip(l1, l2)))

    eps = 1e-5
    w64 = w.astype(np.float64)
    for i in rng.choice(w.size, 15, replace=False):
        up, down = w64.copy(), w64.copy()
        up[i] += eps
        down[i] -= eps
        assert grad[i] == pytest.approx((penalty(up) - penalty(down)) / (2 * eps), rel=1e-4, abs=1e-6)
