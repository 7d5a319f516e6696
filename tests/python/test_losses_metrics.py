"""Issue 14: Keras' losses, metrics, sample/class weights and data sources in compile/fit/evaluate.

The ops (hpcnn._core.ops.row_loss, softmax_cross_entropy, row_weights, metric_rows) against float64
NumPy references written here (Keras' definitions and its "sum_over_batch_size" reduction), their
gradients against central differences of those references, then the model-level contract: names
in the History, 'accuracy' resolved per loss, weights computed in the step, generators and
PyDataset, verbose='auto', integer labels of every integer dtype.
"""
import re
import warnings

import numpy as np
import pytest

import hpcnn
from hpcnn import _core, losses, metrics, optimizers
from hpcnn.layers import Dense, Flatten, InputLayer

ops = _core.ops
EPS = 1e-7
# Keras clips probabilities to [eps, 1 - eps] in float32: 1 - 1e-7 is 1 - 2**-23 there.
CLIP_LO, CLIP_HI = float(np.float32(EPS)), float(np.float32(1) - np.float32(EPS))


# ---------------------------------------------------------------------- float64 references (Keras' definitions)
def ref_row_loss(kind, p, t, from_logits=False, smoothing=0.0):
    p, t = np.asarray(p, np.float64), np.asarray(t, np.float64)
    if kind == "mean_squared_error":
        return np.mean((p - t) ** 2, axis=-1)
    if kind == "mean_absolute_error":
        return np.mean(np.abs(p - t), axis=-1)
    t = t * (1 - smoothing) + 0.5 * smoothing
    if from_logits:
        s = 1 / (1 + np.exp(-p))
        return np.mean(-(t * np.log(s) + (1 - t) * np.log(1 - s)), axis=-1)
    q = np.clip(p, CLIP_LO, CLIP_HI)
    return np.mean(-(t * np.log(q) + (1 - t) * np.log(1 - q)), axis=-1)


def ref_softmax_xent(z, onehot, smoothing=0.0):
    z = np.asarray(z, np.float64)
    t = onehot * (1 - smoothing) + smoothing / onehot.shape[1]
    logp = z - z.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    return -(t * logp).sum(axis=1)


def fd_grad(f, a, h=1e-6):
    """Central differences of the scalar f at every element of a (float64)."""
    a = np.asarray(a, np.float64)
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[i] += h
        down[i] -= h
        g[i] = (f(up) - f(down)) / (2 * h)
    return g


ROW_CASES = [("mean_squared_error", False, 0.0), ("mean_absolute_error", False, 0.0),
             ("binary_crossentropy", False, 0.0), ("binary_crossentropy", True, 0.0),
             ("binary_crossentropy", True, 0.2), ("binary_crossentropy", False, 0.1)]


def row_inputs(kind, from_logits, seed=0, rows=7, cols=3):
    rng = np.random.default_rng(seed)
    if kind == "binary_crossentropy":
        t = rng.integers(0, 2, (rows, cols)).astype(np.float32)
        p = (rng.standard_normal((rows, cols)) * 2 if from_logits else rng.uniform(0.05, 0.95, (rows, cols)))
    else:
        t = rng.standard_normal((rows, cols)).astype(np.float32)
        p = rng.standard_normal((rows, cols))
        p = np.where(np.abs(p - t) < 0.05, p + 0.1, p)  # away from |.|'s kink
    return p.astype(np.float32), t


@pytest.mark.parametrize("kind,from_logits,smoothing", ROW_CASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_row_loss_matches_float64_reference(kind, from_logits, smoothing, weighted):
    p, t = row_inputs(kind, from_logits)
    w = np.linspace(0.0, 2.0, len(p)).astype(np.float32) if weighted else None
    loss_sum, grad = ops.row_loss(p, t, kind, from_logits=from_logits, label_smoothing=smoothing, row_weights=w,
                                  grad_scale=1 / len(p))
    per_row = ref_row_loss(kind, p, t, from_logits, smoothing)
    want = per_row * (w if weighted else 1)
    assert loss_sum == pytest.approx(want.sum(), rel=1e-6, abs=1e-7)
    # the gradient of Keras' reduction: sum(w * loss) / batch
    weights = np.asarray(w, np.float64) if weighted else 1.0

    def mean_loss(pp):
        return float(np.sum(ref_row_loss(kind, pp, t, from_logits, smoothing) * weights) / len(p))

    np.testing.assert_allclose(grad, fd_grad(mean_loss, p), rtol=1e-4, atol=1e-6)


def test_binary_crossentropy_clips_probabilities_as_keras():
    t = np.array([[1.0, 0.0, 1.0, 0.0]], np.float32)
    p = np.array([[0.0, 1.0, 1.0, 0.0]], np.float32)  # two certain mistakes, two certain hits
    loss_sum, grad = ops.row_loss(p, t, "binary_crossentropy")
    assert loss_sum == pytest.approx(ref_row_loss("binary_crossentropy", p, t).sum(), rel=1e-5)
    assert np.isfinite(loss_sum) and np.all(grad == 0)  # outside the clip the gradient is 0 (tf.clip_by_value)


def test_binary_crossentropy_from_logits_is_stable_for_large_logits():
    z = np.array([[80.0, -80.0]], np.float32)
    t = np.array([[0.0, 1.0]], np.float32)
    loss_sum, grad = ops.row_loss(z, t, "binary_crossentropy", from_logits=True)
    assert loss_sum == pytest.approx(80.0, rel=1e-6)  # mean of two 80s, not inf
    np.testing.assert_allclose(grad, [[0.5, -0.5]], rtol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 1.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_softmax_xent_label_smoothing_and_row_weights(smoothing, weighted):
    rng = np.random.default_rng(1)
    z = rng.standard_normal((6, 4)).astype(np.float32)
    onehot = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 6)]
    w = rng.uniform(0, 3, 6).astype(np.float32) if weighted else None
    loss_sum, correct, grad = ops.softmax_cross_entropy(z, onehot, 1 / 6, row_weights=w, label_smoothing=smoothing)
    weights = np.asarray(w, np.float64) if weighted else np.ones(6)
    assert loss_sum == pytest.approx((ref_softmax_xent(z, onehot, smoothing) * weights).sum(), rel=1e-6)
    assert correct == np.sum(np.argmax(z, 1) == np.argmax(onehot, 1))  # never weighted
    np.testing.assert_allclose(grad, fd_grad(lambda zz: float((ref_softmax_xent(zz, onehot, smoothing) * weights)
                                                              .sum() / 6), z), rtol=1e-4, atol=1e-6)
    if weighted:  # class indices take the same weights
        l2, _, g2 = ops.softmax_cross_entropy(z, np.argmax(onehot, 1), 1 / 6, row_weights=w)
        l1, _, g1 = ops.softmax_cross_entropy(z, onehot, 1 / 6, row_weights=w)
        assert l2 == pytest.approx(l1, rel=1e-6)
        np.testing.assert_allclose(g2, g1, rtol=1e-6, atol=1e-7)


def test_row_weights_from_sample_and_class_weights():
    cw = np.array([1.0, 3.0, 0.5], np.float32)
    labels = np.array([0, 1, 2, 1])
    np.testing.assert_allclose(ops.row_weights(labels, class_weight=cw), [1.0, 3.0, 0.5, 3.0])
    onehot = np.eye(3, dtype=np.float32)[labels]
    sw = np.array([2.0, 1.0, 0.0, 4.0], np.float32)
    np.testing.assert_allclose(ops.row_weights(onehot, sample_weight=sw, class_weight=cw), sw * cw[labels])
    binary = np.array([[1.0], [0.0], [1.0]], np.float32)  # one column: the class is round(t)
    np.testing.assert_allclose(ops.row_weights(binary, class_weight=np.array([0.25, 4.0], np.float32)),
                               [4.0, 0.25, 4.0])
    # a class beyond the table weighs 1
    np.testing.assert_allclose(ops.row_weights(np.array([5]), class_weight=cw), [1.0])


def ref_metric(name, p, t, k=5, threshold=0.5):
    p = np.asarray(p, np.float64)
    if name == "categorical_accuracy":
        c = np.argmax(t, 1) if t.ndim == 2 else t
        return np.sum(np.argmax(p, 1) == c)
    if name == "sparse_categorical_accuracy":
        return np.sum(np.argmax(p, 1) == t)
    if name == "top_k_categorical_accuracy":
        c = np.argmax(t, 1) if t.ndim == 2 else t
        at = p[np.arange(len(p)), c]
        return np.sum((p > at[:, None]).sum(1) < k)
    if name == "binary_accuracy":
        return np.sum(np.mean((p > threshold) == t, axis=1))
    if name == "mean_squared_error":
        return np.sum(np.mean((p - t) ** 2, axis=1))
    return np.sum(np.mean(np.abs(p - t), axis=1))


@pytest.mark.parametrize("name,kw", [("categorical_accuracy", {}), ("top_k_categorical_accuracy", {"k": 2}),
                                     ("top_k_categorical_accuracy", {"k": 1}), ("mean_squared_error", {}),
                                     ("mean_absolute_error", {})])
def test_metric_rows_match_reference(name, kw):
    rng = np.random.default_rng(4)
    p = rng.random((50, 5)).astype(np.float32)
    p[0, :] = 0.5  # ties: every class is "in the top k" (none strictly above)
    onehot = np.eye(5, dtype=np.float32)[rng.integers(0, 5, 50)]
    assert ops.metric_rows(p, onehot, name, **kw) == pytest.approx(ref_metric(name, p, onehot, **kw), rel=1e-6)
    if "accuracy" in name:  # class indices give the same
        labels = np.argmax(onehot, 1)
        assert ops.metric_rows(p, labels, name, **kw) == pytest.approx(ref_metric(name, p, labels, **kw))


@pytest.mark.parametrize("threshold", [0.5, 0.3])
def test_binary_accuracy_rows(threshold):
    rng = np.random.default_rng(5)
    p = rng.random((40, 3)).astype(np.float32)
    t = rng.integers(0, 2, (40, 3)).astype(np.float32)
    got = ops.metric_rows(p, t, "binary_accuracy", threshold=threshold)
    assert got == pytest.approx(ref_metric("binary_accuracy", p, t, threshold=threshold), rel=1e-6)


def test_op_bad_inputs_name_the_op():
    with pytest.raises(ValueError, match=r"loss: targets have shape \(3, 2\), predictions \(3, 4\)"):
        ops.row_loss(np.zeros((3, 4), np.float32), np.zeros((3, 2), np.float32), "mean_squared_error")
    with pytest.raises(ValueError, match=r"loss: row weights has shape"):
        ops.row_loss(np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32), "mean_squared_error",
                     row_weights=np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\]"):
        ops.softmax_cross_entropy(np.zeros((2, 3), np.float32), np.eye(3, dtype=np.float32)[:2], label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"metric: this metric needs float targets"):
        ops.metric_rows(np.zeros((2, 3), np.float32), np.array([0, 1]), "mean_absolute_error")
    with pytest.raises(ValueError, match=r"unknown metric 'auc'"):
        ops.metric_rows(np.zeros((2, 3), np.float32), np.array([0, 1]), "auc")


# ---------------------------------------------------------------------- the model: losses by name and object
def dense_model(units, activation, seed=7, inputs=5):
    return hpcnn.Sequential([InputLayer(input_shape=(inputs,)), Dense(units, activation=activation)], seed=seed)


def model_data(units, kind, n=24, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 5)).astype(np.float32)
    if kind == "binary":
        y = rng.integers(0, 2, (n, units)).astype(np.float32)
    elif kind == "sparse":
        y = rng.integers(0, units, n)
    elif kind == "onehot":
        y = np.eye(units, dtype=np.float32)[rng.integers(0, units, n)]
    else:
        y = rng.standard_normal((n, units)).astype(np.float32)
    return x, y


def keras_loss(loss_name, out, y, w=None, from_logits=False, smoothing=0.0):
    """Keras' sum_over_batch_size: sum(w * per-sample loss) / n."""
    if loss_name in ("mean_squared_error", "mean_absolute_error", "binary_crossentropy"):
        per = ref_row_loss(loss_name, out, y, from_logits, smoothing)
    elif loss_name == "categorical_crossentropy":
        z = out if from_logits else np.log(np.clip(out, 1e-30, None))
        per = ref_softmax_xent(z, y, smoothing)
    else:
        z = out if from_logits else np.log(np.clip(out, 1e-30, None))
        per = ref_softmax_xent(z, np.eye(out.shape[1])[y])
    w = np.ones(len(per)) if w is None else np.asarray(w, np.float64)
    return float(np.sum(per * w) / len(per))


LOSS_CASES = [
    ("mse", "linear", 3, "regression", {}), ("mae", "linear", 3, "regression", {}),
    (losses.MeanSquaredError(), "tanh", 2, "regression", {}), (losses.mean_absolute_error, "linear", 2, "regression", {}),
    ("binary_crossentropy", "sigmoid", 3, "binary", {}),
    (losses.BinaryCrossentropy(from_logits=True), "linear", 1, "binary", {"from_logits": True}),
    (losses.BinaryCrossentropy(label_smoothing=0.2), "sigmoid", 2, "binary", {"smoothing": 0.2}),
    ("categorical_crossentropy", "softmax", 4, "onehot", {}),
    (losses.CategoricalCrossentropy(label_smoothing=0.1), "softmax", 4, "onehot", {"smoothing": 0.1}),
    (losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.3), "linear", 3, "onehot",
     {"from_logits": True, "smoothing": 0.3}),
    (losses.SparseCategoricalCrossentropy(), "softmax", 4, "sparse", {}),
]


@pytest.mark.parametrize("loss,activation,units,kind,opts", LOSS_CASES,
                         ids=[f"{c[0] if isinstance(c[0], str) else type(c[0]).__name__}-{c[1]}" for c in LOSS_CASES])
def test_model_loss_matches_keras_reduction(loss, activation, units, kind, opts):
    m = dense_model(units, activation)
    m.compile("sgd", loss)
    x, y = model_data(units, kind)
    name = m.compile_settings["loss"]
    out = m.predict(x, verbose=0).astype(np.float64)
    w = np.random.default_rng(3).uniform(0, 2, len(x))
    assert m.evaluate(x, y, batch_size=len(x), verbose=0) == pytest.approx(keras_loss(name, out, y, **opts), rel=1e-5)
    got = m.evaluate(x, y, batch_size=len(x), sample_weight=w, verbose=0)
    assert got == pytest.approx(keras_loss(name, out, y, w, **opts), rel=1e-5)
    # batches of 5: the mean over all samples of the weighted losses, as Keras' epoch loss
    assert m.evaluate(x, y, batch_size=5, sample_weight=w, verbose=0) == pytest.approx(got, rel=1e-5)


@pytest.mark.parametrize("loss,activation,units,kind,opts", LOSS_CASES,
                         ids=[f"{c[0] if isinstance(c[0], str) else type(c[0]).__name__}-{c[1]}" for c in LOSS_CASES])
def test_one_sgd_step_follows_the_float64_gradient(loss, activation, units, kind, opts):
    """One SGD step (lr 1) moves Dense's weights by minus the finite-difference gradient of the
    float64 reference loss, with sample weights: the loss's gradient, weights included, is right
    through the whole step."""
    m = dense_model(units, activation, inputs=5)
    m.compile(optimizers.SGD(1.0), loss)
    x, y = model_data(units, kind, n=6)
    w = np.array([0.0, 1.0, 2.0, 0.5, 1.5, 1.0])
    k0, b0 = [a.astype(np.float64) for a in m.get_weights()]
    name = m.compile_settings["loss"]
    act = {"linear": lambda z: z, "tanh": np.tanh, "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
           "softmax": lambda z: np.exp(z - z.max(1, keepdims=True)) / np.exp(z - z.max(1, keepdims=True)).sum(1,
                                                                                                     keepdims=True)}
    f = act[activation]

    def loss_of(k, b):
        return keras_loss(name, f(x.astype(np.float64) @ k + b), y, w, **opts)

    gk = fd_grad(lambda k: loss_of(k, b0), k0)
    gb = fd_grad(lambda b: loss_of(k0, b), b0)
    m.train_on_batch(x, y, sample_weight=w)
    k1, b1 = m.get_weights()
    np.testing.assert_allclose(k0 - k1, gk, rtol=2e-3, atol=2e-5)
    np.testing.assert_allclose(b0 - b1, gb, rtol=2e-3, atol=2e-5)


def test_sigmoid_binary_crossentropy_is_fused_and_equals_the_logits_form():
    x, y = model_data(2, "binary", n=16)
    a = dense_model(2, "sigmoid", seed=5)
    b = dense_model(2, "linear", seed=5)
    a.compile(optimizers.SGD(0.5), "binary_crossentropy")
    b.compile(optimizers.SGD(0.5), losses.BinaryCrossentropy(from_logits=True))
    for _ in range(3):
        la, lb = a.train_on_batch(x, y), b.train_on_batch(x, y)
        assert la == pytest.approx(lb, rel=1e-6)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-6, atol=1e-7)


def test_loss_objects_compute_keras_values_in_numpy():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.99, (4, 3))
    t = rng.integers(0, 2, (4, 3)).astype(float)
    w = np.array([1.0, 0.0, 2.0, 1.0])
    assert losses.BinaryCrossentropy()(t, p, sample_weight=w) == pytest.approx(
        np.sum(ref_row_loss("binary_crossentropy", p, t) * w) / 4)
    assert losses.MeanSquaredError()(t, p) == pytest.approx(np.mean((p - t) ** 2))
    np.testing.assert_allclose(losses.mae(t, p), np.mean(np.abs(p - t), axis=-1))
    onehot = np.eye(3)[[0, 2, 1, 1]]
    probs = p / p.sum(1, keepdims=True)
    np.testing.assert_allclose(losses.categorical_crossentropy(onehot, probs, label_smoothing=0.1),
                               ref_softmax_xent(np.log(probs), onehot, 0.1), rtol=1e-6)
    np.testing.assert_allclose(losses.sparse_categorical_crossentropy([0, 2, 1, 1], probs),
                               ref_softmax_xent(np.log(probs), onehot), rtol=1e-6)


# ---------------------------------------------------------------------- metrics: names, resolution, values
def test_several_metrics_with_keras_names_in_history_and_evaluate():
    m = dense_model(4, "softmax")
    m.compile("adam", "sparse_categorical_crossentropy",
              ["accuracy", "sparse_top_k_categorical_accuracy", metrics.SparseTopKCategoricalAccuracy(k=2, name="top2")])
    x, y = model_data(4, "sparse", n=40)
    h = m.fit(x, y, batch_size=8, epochs=2, validation_data=(x[:16], y[:16]), verbose=0)
    for key in ("loss", "accuracy", "sparse_top_k_categorical_accuracy", "top2", "val_loss", "val_accuracy",
                "val_sparse_top_k_categorical_accuracy", "val_top2"):
        assert key in h.history and len(h.history[key]) == 2, key
    assert h.history["sparse_top_k_categorical_accuracy"] == [1.0, 1.0]  # k=5 > 4 classes
    res = m.evaluate(x, y, batch_size=7, return_dict=True, verbose=0)
    assert list(res) == ["loss", "accuracy", "sparse_top_k_categorical_accuracy", "top2"]
    p = m.predict(x, verbose=0)
    assert res["accuracy"] == pytest.approx(np.mean(np.argmax(p, 1) == y))
    assert res["top2"] == pytest.approx(ref_metric("top_k_categorical_accuracy", p, y, k=2) / len(y))
    assert m.evaluate(x, y, verbose=0) == pytest.approx(list(res.values()))


@pytest.mark.parametrize("loss,activation,units,kind,want", [
    ("binary_crossentropy", "sigmoid", 1, "binary", "binary_accuracy"),
    ("sparse_categorical_crossentropy", "softmax", 3, "sparse", "sparse_categorical_accuracy"),
    ("categorical_crossentropy", "softmax", 3, "onehot", "categorical_accuracy"),
    ("binary_crossentropy", "sigmoid", 3, "binary", "categorical_accuracy"),
])
def test_accuracy_resolves_as_keras_per_loss(loss, activation, units, kind, want):
    m = dense_model(units, activation)
    m.compile("sgd", loss, ["acc", "accuracy"])
    x, y = model_data(units, kind, n=30)
    res = m.evaluate(x, y, return_dict=True, verbose=0)
    assert list(res) == ["loss", "acc", "accuracy"]  # the names given
    p = m.predict(x, verbose=0)
    if want == "binary_accuracy":
        expected = np.mean((p > 0.5) == y)
    elif want == "sparse_categorical_accuracy":
        expected = np.mean(np.argmax(p, 1) == y)
    else:
        expected = np.mean(np.argmax(p, 1) == np.argmax(y, 1))
    assert res["accuracy"] == pytest.approx(expected) and res["acc"] == res["accuracy"]


def test_float_metrics_on_a_regression_model():
    m = dense_model(2, "linear")
    m.compile("adam", "mse", ["mae", metrics.MeanSquaredError(), metrics.mean_absolute_error])
    x, y = model_data(2, "regression", n=20)
    res = m.evaluate(x, y, batch_size=6, return_dict=True, verbose=0)
    assert list(res) == ["loss", "mae", "mean_squared_error", "mean_absolute_error"]
    p = m.predict(x, verbose=0).astype(np.float64)
    assert res["mae"] == pytest.approx(np.mean(np.abs(p - y)), rel=1e-5)
    assert res["mean_squared_error"] == pytest.approx(res["loss"], rel=1e-5)


def test_metrics_of_a_fused_softmax_see_probabilities():
    """mse as a metric of a softmax + cross-entropy model compares the probabilities (the fused
    softmax runs for it), not the logits."""
    m = dense_model(3, "softmax")
    m.compile("sgd", "categorical_crossentropy", ["mse", "categorical_accuracy"])
    x, y = model_data(3, "onehot", n=12)
    res = m.evaluate(x, y, return_dict=True, verbose=0)
    p = m.predict(x, verbose=0).astype(np.float64)
    assert res["mse"] == pytest.approx(np.mean((p - y) ** 2), rel=1e-5)


def test_metric_functions_are_numpy_references():
    p = np.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2]])
    np.testing.assert_array_equal(metrics.categorical_accuracy(np.eye(3)[[1, 2]], p), [1.0, 0.0])
    np.testing.assert_array_equal(metrics.sparse_categorical_accuracy([1, 2], p), [1.0, 0.0])
    np.testing.assert_array_equal(metrics.top_k_categorical_accuracy(np.eye(3)[[1, 2]], p, k=2), [1.0, 0.0])
    np.testing.assert_allclose(metrics.binary_accuracy([[1, 0, 0]], [[0.6, 0.4, 0.9]]), [2 / 3])


# ---------------------------------------------------------------------- sample_weight and class_weight in fit
def sgd_model(seed=9):
    m = dense_model(3, "softmax", seed=seed)
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy", ["accuracy"])
    return m


def test_zero_weighted_rows_train_as_if_absent():
    """sum_over_batch_size: rows with weight 0 and the others with weight 2 in a batch of 2k train
    exactly as the k weighted rows alone."""
    x, y = model_data(3, "sparse", n=8, seed=2)
    a, b = sgd_model(), sgd_model()
    keep = np.array([1, 0, 1, 1, 0, 0, 1, 0], bool)
    a.fit(x, y, sample_weight=keep * 2.0, batch_size=8, epochs=3, shuffle=False, verbose=0)
    b.fit(x[keep], y[keep], batch_size=4, epochs=3, shuffle=False, verbose=0)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-5, atol=1e-7)


def test_class_weight_equals_the_matching_sample_weight_and_skips_validation():
    x, y = model_data(3, "sparse", n=24, seed=3)
    cw = {0: 0.5, 1: 2.0, 2: 1.0}
    a, b = sgd_model(), sgd_model()
    ha = a.fit(x, y, class_weight=cw, batch_size=8, epochs=2, validation_data=(x, y), verbose=0)
    hb = b.fit(x, y, sample_weight=np.array([cw[int(c)] for c in y]), batch_size=8, epochs=2,
               validation_data=(x, y), verbose=0)
    assert ha.history["loss"] == pytest.approx(hb.history["loss"], rel=1e-6)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-6, atol=1e-7)
    # validation (and evaluate after fit) is unweighted by class_weight, as in Keras
    assert ha.history["val_loss"][-1] == pytest.approx(a.evaluate(x, y, verbose=0)[0], rel=1e-6)
    c = sgd_model()
    c.fit(x, y, class_weight={0: 1.0, 1: 1.0, 2: 1.0}, batch_size=8, epochs=2, verbose=0)
    d = sgd_model()
    d.fit(x, y, batch_size=8, epochs=2, verbose=0)
    for wc, wd in zip(c.get_weights(), d.get_weights()):
        np.testing.assert_array_equal(wc, wd)


def test_sample_weight_follows_the_shuffle_and_validation_split():
    x, y = model_data(3, "sparse", n=20, seed=4)
    w = np.random.default_rng(1).uniform(0, 2, 20)
    a, b = sgd_model(), sgd_model()
    ha = a.fit(x, y, sample_weight=w, validation_split=0.25, batch_size=5, epochs=2, verbose=0)
    # the split is the last quarter (before shuffling), its weights with it
    hb = b.fit(x[:15], y[:15], sample_weight=w[:15], validation_data=(x[15:], y[15:], w[15:]), batch_size=5,
               epochs=2, verbose=0)
    assert ha.history["loss"] == pytest.approx(hb.history["loss"], rel=1e-6)
    assert ha.history["val_loss"] == pytest.approx(hb.history["val_loss"], rel=1e-6)
    assert hb.history["val_loss"][-1] == pytest.approx(
        b.evaluate(x[15:], y[15:], sample_weight=w[15:], verbose=0)[0], rel=1e-6)


def test_binary_class_weight_uses_the_rounded_target():
    x, y = model_data(1, "binary", n=16, seed=5)
    a, b = dense_model(1, "sigmoid"), dense_model(1, "sigmoid")
    for m in (a, b):
        m.compile(optimizers.SGD(0.2), "binary_crossentropy", ["accuracy"])
    a.fit(x, y[:, 0], class_weight={0: 3.0, 1: 0.5}, batch_size=4, epochs=1, shuffle=False, verbose=0)
    b.fit(x, y, sample_weight=np.where(y[:, 0] > 0.5, 0.5, 3.0), batch_size=4, epochs=1, shuffle=False, verbose=0)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- generators and PyDataset
class Batches(hpcnn.utils.PyDataset):
    def __init__(self, x, y, size, w=None, **kw):
        super().__init__(**kw)
        self.x, self.y, self.w, self.size, self.ends = x, y, w, size, 0

    def __len__(self):
        return len(self.x) // self.size

    def __getitem__(self, i):
        s = slice(i * self.size, (i + 1) * self.size)
        return (self.x[s], self.y[s]) if self.w is None else (self.x[s], self.y[s], self.w[s])

    def on_epoch_end(self):
        self.ends += 1


def test_pydataset_trains_like_the_arrays_and_calls_on_epoch_end():
    x, y = model_data(3, "sparse", n=24, seed=6)
    w = np.random.default_rng(2).uniform(0, 2, 24)
    a, b = sgd_model(), sgd_model()
    ds = Batches(x, y, 6, w, workers=2)
    ha = a.fit(ds, epochs=2, shuffle=False, verbose=0)
    hb = b.fit(x, y, sample_weight=w, batch_size=6, epochs=2, shuffle=False, verbose=0)
    assert ds.ends == 2 and ds.num_batches == 4
    assert ha.history["loss"] == pytest.approx(hb.history["loss"], rel=1e-6)
    res = a.evaluate(Batches(x, y, 6, w), return_dict=True, verbose=0)
    assert res["loss"] == pytest.approx(a.evaluate(x, y, sample_weight=w, verbose=0)[0], rel=1e-6)
    np.testing.assert_allclose(a.predict(Batches(x, y, 6), verbose=0), a.predict(x, verbose=0), rtol=1e-6)


def test_generator_with_steps_per_epoch_continues_across_epochs():
    x, y = model_data(3, "sparse", n=30, seed=7)
    taken = []

    def gen():
        i = 0
        while True:
            s = slice((i % 6) * 5, (i % 6 + 1) * 5)
            taken.append(i)
            i += 1
            yield x[s], y[s]

    a, b = sgd_model(), sgd_model()
    ha = a.fit(gen(), steps_per_epoch=3, epochs=2, verbose=0,
               validation_data=((x[s:s + 5], y[s:s + 5]) for s in range(0, 30, 5)), validation_steps=2)
    hb = b.fit(x, y, batch_size=5, epochs=1, shuffle=False, verbose=0)  # the same 6 batches in order
    assert len(taken) == 6  # no batch taken ahead and thrown away
    np.testing.assert_allclose(a.get_weights()[0], b.get_weights()[0], rtol=1e-6, atol=1e-7)
    assert len(ha.history["val_loss"]) == 2 and len(hb.history["loss"]) == 1
    assert a.evaluate(gen(), steps=2, verbose=0)[0] == pytest.approx(
        a.evaluate(x[:10], y[:10], batch_size=5, verbose=0)[0], rel=1e-6)
    assert a.predict((x[s:s + 5] for s in range(0, 30, 5)), steps=6, verbose=0).shape == (30, 3)


def test_a_generator_that_runs_out_stops_training_with_keras_warning():
    x, y = model_data(3, "sparse", n=10, seed=8)
    m = sgd_model()
    with pytest.warns(UserWarning, match="Your input ran out of data; interrupting training"):
        h = m.fit(((x[s:s + 5], y[s:s + 5]) for s in (0, 5, 0)), steps_per_epoch=2, epochs=3, verbose=0)
    assert len(h.history["loss"]) == 2  # epoch 2 got one batch of two, then training stopped


# ---------------------------------------------------------------------- labels of any integer dtype
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_integer_labels_of_every_dtype(dtype):
    x, y = model_data(3, "sparse", n=12, seed=9)
    m = sgd_model()
    want = m.evaluate(x, y.astype(np.int32), verbose=0)
    assert m.evaluate(x, y.astype(dtype), verbose=0) == pytest.approx(want)
    assert m.train_on_batch(x, y.astype(dtype)) == pytest.approx(want)
    m.fit(Batches(x, y.astype(dtype), 4), epochs=1, verbose=0)


@pytest.mark.parametrize("dtype,bad", [(np.uint8, 200), (np.int8, -3), (np.uint64, 2**63 + 5), (np.int16, 3)])
def test_out_of_range_labels_are_named(dtype, bad):
    x, y = model_data(3, "sparse", n=6, seed=10)
    y = y.astype(dtype)
    y[4] = bad
    m = sgd_model()
    pattern = rf"label {bad} \(row 4\) is outside \[0, 3\) for a model with 3 outputs"
    for call in (lambda: m.fit(x, y, verbose=0), lambda: m.evaluate(x, y, verbose=0),
                 lambda: m.fit(Batches(x, y, 6), verbose=0)):
        with pytest.raises(ValueError, match=pattern) as info:
            call()
        assert "float32" not in str(info.value)


def test_integer_labels_with_categorical_crossentropy_point_to_to_categorical():
    """The message named float32 for uint8 labels (the dtype after a conversion, not the user's)."""
    x, y = model_data(3, "sparse", n=6)
    m = dense_model(3, "softmax")
    m.compile("sgd", "categorical_crossentropy")
    y8 = y.astype(np.uint8)
    for call in (lambda: m.fit(x, y8, verbose=0), lambda: m.train_on_batch(x, y8), lambda: m.test_on_batch(x, y8),
                 lambda: m.evaluate(x, y8, verbose=0), lambda: m.fit(Batches(x, y8, 3), verbose=0)):
        with pytest.raises(ValueError, match=r"one-hot targets of shape \(n, 3\).*to_categorical") as info:
            call()
        assert "float32" not in str(info.value)
    m.compile("sgd", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"evaluate: sparse_categorical_crossentropy needs class indices.*y \(uint8\) has shape \(6, 3\); these look one-hot") as info:
        m.evaluate(x, np.eye(3, dtype=np.uint8)[y], verbose=0)
    assert "int32" not in str(info.value)


# ---------------------------------------------------------------------- verbose, initial_epoch, files
def test_verbose_auto_is_one_and_the_last_bar_is_drawn_once(capsys):
    assert hpcnn.progress.resolve_verbose("auto") == 1
    x, y = model_data(3, "sparse", n=20)
    m = sgd_model()
    m.fit(x, y, batch_size=5, epochs=2, verbose="auto", validation_data=(x, y))
    out = capsys.readouterr().out
    finals = re.findall(r"4/4 ", out)
    assert len(finals) == 2, out  # one per epoch (a file gets the final line only; never twice)
    assert "val_accuracy" in out


def test_initial_epoch_numbers_the_epochs():
    x, y = model_data(3, "sparse", n=10)
    h = sgd_model().fit(x, y, epochs=4, initial_epoch=2, verbose=0)
    assert h.epoch == [2, 3] and len(h.history["loss"]) == 2


def train_save_and_reload(m, path):
    """`m` compiled with a label-smoothed loss object and metric objects, trained one epoch, saved
    to `path`; returns (m, the model load_model reads back, x, y)."""
    m.compile("adam", losses.CategoricalCrossentropy(label_smoothing=0.2),
              ["accuracy", metrics.TopKCategoricalAccuracy(k=2, name="top2"), "mse"])
    x, y = model_data(3, "onehot", n=12)
    m.fit(x, y, epochs=1, verbose=0)
    m.save(str(path))
    return m, hpcnn.models.load_model(str(path)), x, y


def test_compiled_losses_and_metrics_survive_save_and_load(tmp_path):
    m, back, x, y = train_save_and_reload(dense_model(3, "softmax"), tmp_path / "m.h5")
    assert back.compile_settings["label_smoothing"] == pytest.approx(0.2)
    assert back.evaluate(x, y, return_dict=True, verbose=0) == pytest.approx(
        m.evaluate(x, y, return_dict=True, verbose=0))


def test_names_are_importable_with_keras_spelling():
    for name in ("mse", "mae", "MSE", "MAE", "mean_squared_error", "binary_crossentropy", "categorical_crossentropy",
                 "sparse_categorical_crossentropy", "MeanSquaredError", "MeanAbsoluteError", "BinaryCrossentropy",
                 "CategoricalCrossentropy", "SparseCategoricalCrossentropy", "Loss", "get"):
        assert hasattr(losses, name), name
    for name in ("categorical_accuracy", "sparse_categorical_accuracy", "binary_accuracy",
                 "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy", "mse", "mae",
                 "CategoricalAccuracy", "SparseCategoricalAccuracy", "BinaryAccuracy", "TopKCategoricalAccuracy",
                 "SparseTopKCategoricalAccuracy", "MeanSquaredError", "MeanAbsoluteError", "Metric"):
        assert hasattr(metrics, name), name
    assert hasattr(hpcnn.utils, "PyDataset") and issubclass(hpcnn.utils.Sequence, hpcnn.utils.PyDataset)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert losses.get("mse").name == "mean_squared_error"


# ---------------------------------------------------------------------- functional (graph) models
def branchy_model(units=2, activation="sigmoid", seed=11):
    """A graph, not a chain: two Dense branches added, then the output layer (its activation the
    last node, fused with the loss where it can be)."""
    inp = hpcnn.Input(shape=(5,))
    a = Dense(4, activation="tanh")(inp)
    b = Dense(4)(inp)
    out = Dense(units, activation=activation)(hpcnn.layers.Add()([a, b]))
    return hpcnn.Model(inp, out, seed=seed)


def test_functional_model_binary_crossentropy_sample_weight_and_two_metrics():
    """The loss part of the step is the graph model's too: a functional model with a fused sigmoid +
    binary cross-entropy, sample weights and two metrics reports Keras' weighted loss and the
    metrics of its (sigmoid) outputs, in fit's history, evaluate and train_on_batch."""
    x, y = model_data(2, "binary", n=24, seed=4)
    w = np.random.default_rng(5).uniform(0, 2, len(x))
    m = branchy_model()
    m.compile(optimizers.SGD(0.1), "binary_crossentropy", ["binary_accuracy", metrics.MeanSquaredError(name="mse")])
    p = m.predict(x, verbose=0).astype(np.float64)
    assert np.all((p > 0) & (p < 1))
    res = m.evaluate(x, y, batch_size=7, sample_weight=w, return_dict=True, verbose=0)
    assert list(res) == ["loss", "binary_accuracy", "mse"]
    assert res["loss"] == pytest.approx(keras_loss("binary_crossentropy", p, y, w), rel=1e-5)
    # the metrics are unweighted means over the rows, of the sigmoid's outputs (not the logits)
    assert res["binary_accuracy"] == pytest.approx(ref_metric("binary_accuracy", p, y) / len(y), rel=1e-6)
    assert res["mse"] == pytest.approx(ref_metric("mean_squared_error", p, y) / len(y), rel=1e-5)
    h = m.fit(x, y, sample_weight=w, batch_size=8, epochs=2, validation_data=(x, y, w), verbose=0)
    for key in ("loss", "binary_accuracy", "mse", "val_loss", "val_binary_accuracy", "val_mse"):
        assert len(h.history[key]) == 2, key
    assert h.history["val_loss"][-1] == pytest.approx(m.evaluate(x, y, sample_weight=w, verbose=0)[0], rel=1e-6)
    out = m.train_on_batch(x, y, sample_weight=w, return_dict=True)
    assert list(out) == ["loss", "binary_accuracy", "mse"]


def test_functional_model_sample_and_class_weights_train_as_in_a_chain():
    """Zero-weighted rows train as if absent, and class_weight as the matching sample_weight, in a
    graph model (the weights enter the loss's gradient through the same row weights)."""
    x, y = model_data(3, "sparse", n=8, seed=2)

    def make():
        m = branchy_model(3, "softmax", seed=13)
        m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy", ["accuracy", "sparse_top_k_categorical_accuracy"])
        return m

    keep = np.array([1, 0, 1, 1, 0, 0, 1, 0], bool)
    a, b = make(), make()
    a.fit(x, y, sample_weight=keep * 2.0, batch_size=8, epochs=3, shuffle=False, verbose=0)
    b.fit(x[keep], y[keep], batch_size=4, epochs=3, shuffle=False, verbose=0)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-5, atol=1e-7)
    cw = {0: 0.5, 1: 2.0, 2: 1.0}
    c, d = make(), make()
    hc = c.fit(x, y, class_weight=cw, batch_size=4, epochs=2, verbose=0)
    hd = d.fit(x, y, sample_weight=np.array([cw[int(k)] for k in y]), batch_size=4, epochs=2, verbose=0)
    assert hc.history["loss"] == pytest.approx(hd.history["loss"], rel=1e-6)
    for wc, wd in zip(c.get_weights(), d.get_weights()):
        np.testing.assert_allclose(wc, wd, rtol=1e-6, atol=1e-7)


def test_functional_model_keeps_loss_smoothing_and_metrics_through_save_and_load(tmp_path):
    m, back, x, y = train_save_and_reload(branchy_model(3, "softmax"), tmp_path / "g.h5")
    assert type(back) is hpcnn.Model
    assert back.compile_settings["label_smoothing"] == pytest.approx(0.2)
    want = m.evaluate(x, y, return_dict=True, verbose=0)
    assert list(want) == ["loss", "accuracy", "top2", "mse"]
    assert back.evaluate(x, y, return_dict=True, verbose=0) == pytest.approx(want)


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_keras_files_keep_the_loss_arguments_and_metric_objects(tmp_path, suffix):
    """Keras' compile config in .keras / legacy .h5 files names the loss object with its
    from_logits / label_smoothing and the metric objects with their k / threshold, and load_model
    compiles them back (Keras' formats hold Sequential models in this version)."""
    m = dense_model(3, "linear")
    m.compile("adam", losses.BinaryCrossentropy(from_logits=True, label_smoothing=0.1),
              ["binary_accuracy", metrics.BinaryAccuracy(threshold=0.3, name="acc03"), "mae"])
    x, y = model_data(3, "binary", n=12)
    m.fit(x, y, epochs=1, verbose=0)
    path = str(tmp_path / f"g{suffix}")
    m.save(path)
    back = hpcnn.models.load_model(path)
    assert back.compile_settings["loss"] == "binary_crossentropy"
    assert back.compile_settings["from_logits"] and back.compile_settings["label_smoothing"] == pytest.approx(0.1)
    want = m.evaluate(x, y, return_dict=True, verbose=0)
    assert list(want) == ["loss", "binary_accuracy", "acc03", "mae"]
    assert back.evaluate(x, y, return_dict=True, verbose=0) == pytest.approx(want, rel=1e-6)
