"""BatchNormalization as a layer of a model, with Keras' semantics (issue 13):
- fit normalizes with the batch's statistics and then moves the moving statistics by Keras'
  formula (moving * momentum + batch * (1 - momentum), biased variance); evaluate/predict use the
  moving statistics; a frozen layer (trainable = False) runs in inference mode during fit too;
- gamma and beta are trained, moving_mean and moving_variance are non-trainable weights: in
  get_weights in Keras' order, saved and loaded, never stepped by any optimizer (even with a
  gradient planted at their place), counted as non-trainable by summary();
- a step whose loss is NaN changes nothing, the moving statistics included;
- the fused BatchNormalization+ReLU computes what the two layers compute;
- a small BN + GlobalAveragePooling CNN learns on the CPU.
Numbers are computed here with NumPy from Keras' formulas (no TensorFlow needed)."""

import numpy as np
import pytest

import hpcnn
from tests.support import ops_reference as ref
from hpcnn import _core, optimizers
from hpcnn.layers import (Activation, BatchNormalization, Conv2D, Dense, Flatten, GlobalAveragePooling2D, InputLayer,
                          Dropout, MaxPooling2D, ReLU)


def dense_bn_model(momentum=0.9, seed=1, **bn):
    return hpcnn.Sequential([InputLayer(input_shape=(5,)), BatchNormalization(momentum=momentum, **bn),
                             Dense(3, activation="softmax")], seed=seed)


def data(n=16, features=5, classes=3, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n, features)) * 2 + 1).astype(np.float32), r.integers(0, classes, n)


def softmax_xent(logits, y):
    p = ref.softmax(logits)
    return float(-np.log(p[np.arange(len(y)), y]).mean())


def test_weights_are_keras_four_in_keras_order_and_initial_values():
    m = dense_bn_model()
    assert m.weight_names() == ["batch_normalization/gamma", "batch_normalization/beta",
                                 "batch_normalization/moving_mean", "batch_normalization/moving_variance",
                                 "dense/kernel", "dense/bias"]
    g, b, mm, mv = m.get_weights()[:4]
    np.testing.assert_array_equal(g, np.ones(5))
    np.testing.assert_array_equal(b, np.zeros(5))
    np.testing.assert_array_equal(mm, np.zeros(5))
    np.testing.assert_array_equal(mv, np.ones(5))
    no_gamma = dense_bn_model(scale=False)
    assert [n.split("/")[1] for n in no_gamma.weight_names()[:3]] == ["beta", "moving_mean", "moving_variance"]
    neither = dense_bn_model(scale=False, center=False)
    assert [n.split("/")[1] for n in neither.weight_names()[:2]] == ["moving_mean", "moving_variance"]


def test_one_training_step_uses_batch_statistics_and_moves_the_moving_ones_by_keras_formula():
    x, y = data()
    m = dense_bn_model(momentum=0.9)
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    w0 = m.get_weights()
    loss = m.train_on_batch(x, y)
    # The loss of the step is computed with the batch's statistics (training mode).
    h, mean, var = ref.batchnorm_training(x, w0[0], w0[1], 1e-3)
    assert loss == pytest.approx(softmax_xent(h @ w0[4] + w0[5], y), rel=1e-5)
    g, b, mm, mv = m.get_weights()[:4]
    np.testing.assert_allclose(mm, 0.0 * 0.9 + mean * 0.1, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(mv, 1.0 * 0.9 + var * 0.1, rtol=1e-5)  # var: biased (1/n), as Keras
    assert not np.allclose(mv, 0.9 + x.astype(np.float64).var(0, ddof=1) * 0.1, rtol=1e-5)  # not the unbiased one
    assert (g != w0[0]).any() and (b != w0[1]).any()  # gamma and beta are trained


def test_evaluate_and_predict_use_the_moving_statistics():
    x, y = data()
    m = dense_bn_model(momentum=0.5)
    m.compile(optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x, y, batch_size=8, epochs=3, verbose=0)
    g, b, mm, mv, k, kb = m.get_weights()
    want = ref.softmax(ref.batchnorm_inference(x, g, b, mm, mv, 1e-3) @ k + kb)
    np.testing.assert_allclose(m.predict(x, batch_size=5), want, rtol=1e-5, atol=1e-6)
    loss, _ = m.evaluate(x, y, batch_size=7, verbose=0)
    assert loss == pytest.approx(softmax_xent(np.log(want), y), rel=1e-5)
    # predict on one sample gives the same row as in a batch: no batch statistics at inference
    np.testing.assert_allclose(m.predict(x[3:4]), want[3:4], rtol=1e-5, atol=1e-6)


def test_moving_statistics_over_several_steps_follow_the_recursion():
    x, y = data(n=24)
    m = dense_bn_model(momentum=0.8)
    m.compile(optimizers.SGD(0.05), "sparse_categorical_crossentropy")
    mm, mv = np.zeros(5), np.ones(5)
    for step in range(3):
        xb, yb = x[step * 8:(step + 1) * 8], y[step * 8:(step + 1) * 8]
        m.train_on_batch(xb, yb)
        _, mean, var = ref.batchnorm_training(xb, None, None)
        mm, mv = mm * 0.8 + mean * 0.2, mv * 0.8 + var * 0.2
    np.testing.assert_allclose(m.get_weights()[2], mm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.get_weights()[3], mv, rtol=1e-5)


@pytest.mark.parametrize("optimizer", [optimizers.Adam(0.1), optimizers.SGD(0.5, momentum=0.9, nesterov=True)],
                         ids=["adam", "sgd-nesterov"])
def test_no_optimizer_touches_the_moving_statistics_even_with_a_gradient_there(optimizer):
    """The moving statistics are outside the optimizer's ranges: a (nonsense) gradient planted in
    the gradient buffer at their place changes nothing, and the optimizer keeps no state there."""
    x, y = data()
    m = hpcnn.Sequential([InputLayer(input_shape=(5,)), BatchNormalization(momentum=0.9), Dense(4),
                          BatchNormalization(momentum=0.7), Dense(3, activation="softmax")], seed=2)
    m.compile(optimizer, "sparse_categorical_crossentropy")
    core = m.core
    nt = 2 * 5 + 2 * 4
    assert core.num_trainable_params == m.count_params() - nt
    # The non-trainable weights are packed last, in model order.
    w = m.get_weights()
    np.testing.assert_array_equal(core.parameter_buffer()[-nt:], np.concatenate([w[2], w[3], w[8], w[9]]))
    grads = core.gradient_buffer(padded=True)  # the buffer as held: a live view on the CPU
    for k in (2, 3, 8, 9):
        grads[core.param_offsets[k]:core.param_offsets[k] + w[k].size] = 1e3
    m.train_on_batch(x, y)
    assert (core.gradient_buffer()[-nt:] == 1e3).all()  # backward writes no gradient there
    _, mean1, var1 = ref.batchnorm_training(x, None, None)
    np.testing.assert_allclose(m.get_weights()[2], mean1 * 0.1, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(m.get_weights()[3], 0.9 + var1 * 0.1, rtol=1e-5)
    for s in core.optimizer_state().values():
        assert not s[-nt:].any()
        assert s[:-nt].any()


def test_frozen_batchnorm_runs_in_inference_mode_and_changes_nothing():
    """Keras: trainable = False on a BatchNormalization makes it use its moving statistics in fit,
    and neither gamma/beta nor the moving statistics change; the layers before it still train."""
    x = np.random.default_rng(3).standard_normal((16, 6, 6, 2)).astype(np.float32)
    y = np.arange(16) % 3
    m = hpcnn.Sequential([InputLayer(input_shape=(6, 6, 2)), Conv2D(4, 3, use_bias=False), BatchNormalization(),
                          ReLU(), Flatten(), Dense(3, activation="softmax")], seed=4)
    mm, mv = np.linspace(-0.2, 0.2, 4).astype(np.float32), np.linspace(0.5, 2.0, 4).astype(np.float32)
    w = m.get_weights()
    w[3], w[4] = mm, mv
    m.set_weights(w)
    m.layers[1].trainable = False
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    before = m.get_weights()
    loss = m.train_on_batch(x, y)
    # The loss of the step is the inference-mode loss with the weights before the step.
    k, g, b, mm0, mv0, dk, db = before
    h = np.maximum(ref.batchnorm_inference(ref.conv2d_forward(x, k, np.zeros(4)), g, b, mm0, mv0), 0)
    assert loss == pytest.approx(softmax_xent(h.reshape(16, -1) @ dk + db, y), rel=1e-5)
    after = m.get_weights()
    for i in (1, 2, 3, 4):
        np.testing.assert_array_equal(after[i], before[i])
    assert (after[0] != before[0]).any()  # the conv before the frozen BN trained (gradient through it)
    assert m.core.num_trainable_params == 2 * 2 * 2 * 0 + 3 * 3 * 2 * 4 + (4 * 4 * 4 * 3 + 3)


def test_a_nan_step_leaves_the_moving_statistics_as_they_were():
    x, y = data()
    m = dense_bn_model()
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    w = m.get_weights()
    w[4] = np.full_like(w[4], np.inf)  # logits inf -> NaN loss
    m.set_weights(w)
    with pytest.raises(ValueError, match="the loss is NaN"):
        m.train_on_batch(x, y)
    np.testing.assert_array_equal(m.get_weights()[2], np.zeros(5))
    np.testing.assert_array_equal(m.get_weights()[3], np.ones(5))


def test_save_and_load_keep_the_moving_statistics(tmp_path):
    x, y = data()
    m = dense_bn_model(momentum=0.5)
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x, y, batch_size=4, epochs=2, verbose=0)
    path = str(tmp_path / "bn.h5")
    m.save(path)
    loaded = hpcnn.models.load_model(path)
    for a, b in zip(m.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(loaded.get_weights()[2], np.zeros(5))  # trained statistics, not initial ones
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))
    assert loaded.get_config() == m.get_config()
    assert loaded.core.num_trainable_params == m.core.num_trainable_params


def test_set_weights_round_trip_and_clone():
    m = dense_bn_model()
    w = [np.random.default_rng(i).random(a.shape).astype(np.float32) + 0.1 for i, a in enumerate(m.get_weights())]
    m.set_weights(w)
    for a, b in zip(m.get_weights(), w):
        np.testing.assert_array_equal(a, b)
    clone = hpcnn.models.clone_model(m)
    assert [a.shape for a in clone.get_weights()] == [a.shape for a in w]


def summary_lines(m):
    out = []
    m.summary(print_fn=out.append)
    return "\n".join(out)


def test_summary_counts_moving_statistics_as_non_trainable():
    """Keras: BatchNormalization over C channels has 4*C parameters, 2*C of them non-trainable."""
    m = hpcnn.Sequential([InputLayer(input_shape=(8, 8, 3)), Conv2D(16, 3, use_bias=False), BatchNormalization(),
                          ReLU(), GlobalAveragePooling2D(), Dense(10, activation="softmax")])
    text = summary_lines(m)
    total = 3 * 3 * 3 * 16 + 4 * 16 + 16 * 10 + 10
    assert m.count_params() == total
    assert f"Total params: {total:,}" in text
    assert f"Trainable params: {total - 32:,}" in text
    assert "Non-trainable params: 32 " in text
    assert "batch_normalization (BatchNormalization)" in text and " 64" in text
    m.layers[1].trainable = False
    assert "Non-trainable params: 64 " in summary_lines(m)
    m.compile("adam", "categorical_crossentropy")
    assert m.core.num_trainable_params == total - 64


def test_center_and_scale_false_parameter_counts():
    m = hpcnn.Sequential([InputLayer(input_shape=(4, 4, 6)), BatchNormalization(center=False, scale=False),
                          Flatten(), Dense(2, activation="softmax")])
    assert m.count_params() == 12 + 96 * 2 + 2
    assert "Non-trainable params: 12 " in summary_lines(m)
    m.compile("adam", "sparse_categorical_crossentropy")
    x = np.random.default_rng(5).random((8, 4, 4, 6), dtype=np.float32)
    m.train_on_batch(x, np.arange(8) % 2)
    _, mean, var = ref.batchnorm_training(x, None, None)
    np.testing.assert_allclose(m.get_weights()[0], mean * 0.01, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(m.get_weights()[1], 0.99 + var * 0.01, rtol=1e-5)


def test_axis_may_be_given_as_the_last_axis_index():
    m = hpcnn.Sequential([InputLayer(input_shape=(4, 4, 3)), BatchNormalization(axis=3), Flatten(),
                          Dense(2, activation="softmax")])
    m.build()
    assert m.layers[0].get_config()["axis"] == 3


def test_a_batch_of_one_sample_normalizes_to_beta():
    """One row per channel (Dense features, batch 1): variance 0, y = beta, no NaN anywhere."""
    m = dense_bn_model()
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    x, y = data(n=1)
    assert np.isfinite(m.train_on_batch(x, y))
    assert np.isfinite(np.concatenate([w.ravel() for w in m.get_weights()])).all()
    np.testing.assert_allclose(m.get_weights()[3], 0.9, rtol=1e-6)  # var 0 moved in


def fused_and_plain(cfg_layers, seed=7):
    """Two core models of the same layers: with BatchNormalization+ReLU fused (what the core makes
    of them) and with every layer on its own (a Dropout(0), which passes every value unchanged,
    between the two keeps the ReLU from being the BatchNormalization's lone reader)."""
    bn = next(i for i, la in enumerate(cfg_layers) if isinstance(la, BatchNormalization))
    apart = cfg_layers[:bn + 1] + [Dropout(0.0)] + cfg_layers[bn + 1:]
    fused = _core.Model([6, 6, 3], [la.core_config() for la in cfg_layers], seed)
    plain = _core.Model([6, 6, 3], [la.core_config() for la in apart], seed)
    assert fused.core_layers[bn:bn + 2] == [["BatchNormalization+relu"], ["Identity"]]
    assert plain.core_layers[bn:bn + 3] == [["BatchNormalization"], ["Dropout"], ["Activation:relu"]]
    return fused, plain


@pytest.mark.parametrize("relu_layer", [ReLU, lambda: Activation("relu")])
def test_fused_batchnorm_relu_computes_what_the_two_layers_compute(relu_layer):
    layers = [Conv2D(8, 3, padding="same", use_bias=False), BatchNormalization(), relu_layer(), Flatten(),
              Dense(3), Activation("softmax")]
    fused, plain = fused_and_plain(layers)
    r = np.random.default_rng(6)
    x, y = r.standard_normal((10, 6, 6, 3)).astype(np.float32), (np.arange(10) % 3).astype(np.int32)
    for core in (fused, plain):
        core.compile(optimizers.SGD(0.1, momentum=0.9).core_config(), "sparse_categorical_crossentropy")
    for _ in range(3):
        lf, lp = fused.train_step((x, y))[0], plain.train_step((x, y))[0]
        assert lf == pytest.approx(lp, rel=1e-6)
    for a, b in zip(fused.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused.predict_step((x,)), plain.predict_step((x,)), rtol=1e-5, atol=1e-6)


def test_relu_variants_that_are_not_plain_are_not_fused():
    layers = [BatchNormalization(), ReLU(negative_slope=0.1), BatchNormalization(), ReLU(max_value=6)]
    core = _core.Model([6, 6, 3], [la.core_config() for la in layers], 0)
    assert core.core_layers == [["BatchNormalization"], ["Activation:leaky_relu"], ["BatchNormalization"],
                                ["Activation:relu6"]]


def test_a_small_bn_cnn_learns_on_the_cpu():
    """Bright-quadrant images: the class is which quadrant of a noisy 8x8 image is brightest."""
    r = np.random.default_rng(8)
    n = 512
    y = r.integers(0, 4, n)
    x = r.normal(0.0, 0.3, (n, 8, 8, 1)).astype(np.float32)
    for i, q in enumerate(y):
        x[i, (q // 2) * 4:(q // 2) * 4 + 4, (q % 2) * 4:(q % 2) * 4 + 4, 0] += 1.0
    # momentum 0.9: the moving statistics settle within the ~100 steps of this test (Keras' 0.99
    # would still weigh the initial 0 / 1 by 0.99**96 = 38 %, in Keras as here).
    m = hpcnn.Sequential([InputLayer(input_shape=(8, 8, 1)), Conv2D(8, 3, padding="same", use_bias=False),
                          BatchNormalization(momentum=0.9), ReLU(), MaxPooling2D(2),
                          Conv2D(16, 3, padding="same", use_bias=False), BatchNormalization(momentum=0.9), ReLU(),
                          GlobalAveragePooling2D(), Dense(4, activation="softmax")], seed=9)
    m.compile(optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    h = m.fit(x[:384], y[:384], batch_size=32, epochs=8, verbose=0)
    assert h.history["loss"][-1] < 0.5 * h.history["loss"][0]
    _, acc = m.evaluate(x[384:], y[384:], verbose=0)  # inference mode: the moving statistics
    assert acc > 0.9


# ---------------------------------------------------------------- one row per channel
ONE_ROW_SHAPES = [(1, 4), (1, 1, 1, 16), (1, 1, 1, 5)]


@pytest.mark.parametrize("shape", ONE_ROW_SHAPES)
@pytest.mark.parametrize("relu", [False, True])
def test_batch_norm_over_a_single_row_per_channel_is_keras(shape, relu):
    """N*H*W == 1 (batch 1 after global pooling): the batch's mean is the row, its variance 0 (as
    Keras/TensorFlow), y = beta; dbeta = dy, dgamma = 0 and dx = 0 (to float rounding of the
    terms that cancel). tests/gpu/test_gpu_layer_ops.py compares the GPU with this."""
    r = np.random.default_rng(shape[-1])
    c = shape[-1]
    x = (r.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    g, b = r.standard_normal(c).astype(np.float32), r.standard_normal(c).astype(np.float32)
    y, mean, var, invstd = _core.ops.batchnorm_forward_training(x, g, b, 1e-3, relu)
    want_y, want_mean, want_var = ref.batchnorm_training(x, g, b, 1e-3, relu)
    np.testing.assert_array_equal(mean, x.reshape(c))
    np.testing.assert_array_equal(var, np.zeros(c, np.float32))
    np.testing.assert_allclose(want_var, 0.0)
    np.testing.assert_allclose(invstd, 1 / np.sqrt(1e-3), rtol=1e-7)
    np.testing.assert_allclose(y, want_y, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(y.reshape(c), np.maximum(b, 0) if relu else b)
    dy = r.standard_normal(shape).astype(np.float32)
    dx, dgamma, dbeta = _core.ops.batchnorm_backward_training(x, y, dy, g, mean, invstd, 1e-3, relu)
    masked = np.where(y > 0, dy, 0).astype(np.float32) if relu else dy
    want_dx, want_dgamma, want_dbeta = ref.batchnorm_training_backward(x, g, masked, 1e-3)
    np.testing.assert_array_equal(dbeta, masked.reshape(c))
    np.testing.assert_array_equal(dgamma, np.zeros(c, np.float32))
    np.testing.assert_allclose(want_dx, 0.0)
    terms = np.abs(g * invstd * masked.reshape(c)).max()
    assert np.abs(dx).max() <= 1e-6 * terms, (dx, terms)
