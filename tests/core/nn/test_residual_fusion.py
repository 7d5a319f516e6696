"""A residual block's Add and ReLU computed in its last convolution's output stage for inference
(issue 27; nn/step_plan.h `residual`, ops::conv2d_forward with a residual): evaluate and predict run
Conv2D (+ the folded BatchNormalization) + Add + ReLU as one op where the Add of two inputs is read
only by a plain ReLU, the convolution's output only by the Add, and the shortcut exists before the
convolution runs. Training steps give the tail to the block's last BatchNormalization instead
(BatchNormLayer::forward_residual / backward_residual: ReLU(normalized + shortcut) in the
normalization's pass; its backward masks the gradient the shortcut shares in place). What is checked:
- the fused model predicts and evaluates what the same layers compute apart, to float32 rounding
  (an Activation('linear') between the Add and the ReLU, which passes every value unchanged, keeps
  the plan from fusing), at batch 12 and batch 1 (where the deepest block goes to the few-pixel
  im2col path), on the CPU and (the gpu kind) on a GPU;
- the cases that must not fuse give the same answers too: projection shortcuts (computed after
  the block's convolutions), an Add read by another layer besides its ReLU;
- training with its own fusion (the identity block and both projection blocks: BN + Add + ReLU)
  gives the same losses and weights as the layers apart, bit for bit (the same float operations in
  the same order), also model(x, training=True), a frozen normalization in the tail (inference
  mode inside a training step), and a shortcut read again after the normalization (which must
  not fuse: its other reader would add into the shared gradient before the mask);
- the plans fuse exactly the blocks that can (the memory report counts them), and never need more
  memory; the batch-norm ops with a residual on each device against NumPy."""
import numpy as np
import pytest

import hpcnn
from tests.support.gpu_target import GPU, KINDS
from hpcnn import _core, optimizers
from hpcnn.layers import (Activation, Add, BatchNormalization, Conv2D, Dense, GlobalAveragePooling2D, Input, ReLU)


def residual_net(apart: bool, seed: int = 4) -> hpcnn.Model:
    """Blocks that fuse (identity shortcut; a convolution with a bias and no normalization, as the
    Add's second input) and blocks that must not: projection shortcuts (the graph orders nodes by
    depth, as Keras does, so the projection, shallower than the block's two convolutions, is computed
    after them whichever was built first), an Add also read by the pooling."""
    def tail(s):  # the block's ReLU, kept apart by a linear Activation when `apart`
        return ReLU()(Activation("linear")(s) if apart else s)

    inp = Input((8, 8, 16))
    x = ReLU()(BatchNormalization()(Conv2D(16, 3, padding="same", use_bias=False)(inp)))
    # identity shortcut: fuses
    y = ReLU()(BatchNormalization()(Conv2D(16, 3, padding="same", use_bias=False)(x)))
    x = tail(Add()([BatchNormalization()(Conv2D(16, 3, padding="same", use_bias=False)(y)), x]))
    # projection shortcut: not ready when the block's last convolution runs, no fusion
    y = ReLU()(BatchNormalization()(Conv2D(24, 3, strides=2, padding="same", use_bias=False)(x)))
    y = BatchNormalization()(Conv2D(24, 3, padding="same", use_bias=False)(y))
    s = BatchNormalization()(Conv2D(24, 1, strides=2, use_bias=False)(x))
    x = tail(Add()([y, s]))
    # projection built first: still computed after the block's convolutions, no fusion
    s = BatchNormalization()(Conv2D(32, 1, use_bias=False)(x))
    y = ReLU()(BatchNormalization()(Conv2D(32, 3, padding="same", use_bias=False)(x)))
    x = tail(Add()([s, BatchNormalization()(Conv2D(32, 3, padding="same", use_bias=False)(y))]))
    # a convolution with its bias, no normalization, as the Add's second input: fuses
    x = tail(Add()([x, Conv2D(32, 3, padding="same")(x)]))
    # an Add read by the pooling too: no fusion
    a = Add()([x, Conv2D(32, 3, padding="same")(x)])
    pooled = Add()([GlobalAveragePooling2D()(tail(a)), GlobalAveragePooling2D()(a)])
    return hpcnn.Model(inp, Dense(3, activation="softmax")(pooled), seed=seed)


def data(n=12, seed=5):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n, 8, 8, 16)) * 1.5 + 0.3).astype(np.float32), (np.arange(n) % 3).astype(np.int32)


@pytest.mark.parametrize("kind", KINDS)
def test_fused_inference_matches_the_layers_apart_and_training_is_unchanged(kind):
    fused, apart = residual_net(False), residual_net(True)
    apart.set_weights(fused.get_weights())
    for m in (fused, apart):
        if kind != "cpu":
            m.to(GPU)
        m.compile(optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy")
    x, y = data()
    for _ in range(3):  # moving statistics and weights away from their initial values
        hf = fused.fit(x, y, batch_size=12, epochs=1, verbose=0).history["loss"][-1]
        ha = apart.fit(x, y, batch_size=12, epochs=1, verbose=0).history["loss"][-1]
        assert hf == ha  # the training fusion does the same float operations in the same order
    for a, b in zip(fused.get_weights(), apart.get_weights()):
        np.testing.assert_array_equal(a, b)
    want = apart.predict(x, verbose=0)
    np.testing.assert_allclose(fused.predict(x, verbose=0), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused.predict(x[5:6], verbose=0), want[5:6], rtol=1e-5, atol=1e-6)  # batch 1
    assert fused.evaluate(x, y, verbose=0) == pytest.approx(apart.evaluate(x, y, verbose=0), rel=1e-5)


def test_what_each_plan_fuses():
    fused, apart = residual_net(False), residual_net(True)
    report_f, report_a = fused.core.memory_report(64), apart.core.memory_report(64)
    assert report_f["predict_residual_blocks"] == 2  # the identity block, the convolution with a bias
    assert report_a["predict_residual_blocks"] == 0
    assert report_f["predict_folded"] == report_a["predict_folded"] == 9
    assert report_f["predict"] <= report_a["predict"]  # never more memory (here the peak is elsewhere)
    # training: the identity block and both projection blocks (their Add takes two normalizations),
    # not the convolution with a bias (no normalization to compute the tail)
    assert report_f["train_residual_blocks"] == 3
    assert report_a["train_residual_blocks"] == 0
    assert report_f["train"] <= report_a["train"]
    assert report_f["train_keep_all"] < report_a["train_keep_all"]  # no Add or ReLU buffers of their own


def tail_net(apart: bool, frozen: bool = False, late_reader: bool = False, seed: int = 6) -> hpcnn.Model:
    """One identity block; `frozen`: its last normalization not trainable (inference mode inside a
    training step); `late_reader`: the block's input also read by a layer placed after that
    normalization (a deeper branch that joins at the end), which must stop the training fusion."""
    inp = Input((6, 6, 8))
    x = ReLU()(BatchNormalization()(Conv2D(8, 3, padding="same", use_bias=False)(inp)))
    y = ReLU()(BatchNormalization()(Conv2D(8, 3, padding="same", use_bias=False)(x)))
    bn = BatchNormalization(trainable=not frozen)
    y = bn(Conv2D(8, 3, padding="same", use_bias=False)(y))
    # the linear Activation keeps the layers apart (before the Add), or is placed after the ReLU so
    # that both graphs have the same nodes at the same depths (the same order of weights)
    if apart:
        out = ReLU()(Add()([Activation("linear")(y), x]))
    else:
        out = Activation("linear")(ReLU()(Add()([y, x])))
    pooled = GlobalAveragePooling2D()(out)
    if late_reader:  # x read again by an Add deeper than the normalization (nodes go by depth)
        deep = x
        for _ in range(6):
            deep = Conv2D(8, 3, padding="same")(deep)
        pooled = Add()([pooled, GlobalAveragePooling2D()(Add()([deep, x]))])
    return hpcnn.Model(inp, Dense(3, activation="softmax")(pooled), seed=seed)


@pytest.mark.parametrize("case", ["trainable", "frozen", "late-reader"])
def test_training_fusion_is_the_layers_apart(case):
    frozen, late = case == "frozen", case == "late-reader"
    fused, apart = tail_net(False, frozen, late), tail_net(True, frozen, late)
    assert fused.core.memory_report(4)["train_residual_blocks"] == (0 if late else 1)
    apart.set_weights(fused.get_weights())
    r = np.random.default_rng(11)
    x = (r.standard_normal((10, 6, 6, 8)) + 0.3).astype(np.float32)
    y = (np.arange(10) % 3).astype(np.int32)
    for m in (fused, apart):
        m.compile(optimizers.SGD(0.1, momentum=0.9), "sparse_categorical_crossentropy")
    for step in range(4):
        assert fused.train_on_batch(x, y) == apart.train_on_batch(x, y), step
    for a, b in zip(fused.get_weights(), apart.get_weights()):
        np.testing.assert_array_equal(a, b)
    # model(x, training=True): the training forward, fused the same way
    np.testing.assert_array_equal(np.asarray(fused(x, training=True)), np.asarray(apart(x, training=True)))
    np.testing.assert_allclose(fused.predict(x, verbose=0), apart.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_residual_ops_on_each_device(kind, relu):
    """The ops the training fusion calls: y = act(normalized + residual), with the batch's
    statistics and with the moving ones."""
    r = np.random.default_rng(12)
    x = (r.standard_normal((4, 5, 5, 16)) * 2 + 1).astype(np.float32)
    res = r.standard_normal(x.shape).astype(np.float32)
    gamma = r.uniform(0.5, 1.5, 16).astype(np.float32)
    beta = r.standard_normal(16).astype(np.float32)
    device = "cpu" if kind == "cpu" else GPU
    got, mean, var, _ = _core.ops.batchnorm_forward_training(x, gamma, beta, epsilon=1e-3, relu=relu, residual=res,
                                                             device=device)
    xd = x.astype(np.float64)
    m, v = xd.mean(axis=(0, 1, 2)), xd.var(axis=(0, 1, 2))
    want = (xd - m) / np.sqrt(v + 1e-3) * gamma + beta + res
    np.testing.assert_allclose(got, np.maximum(want, 0) if relu else want, rtol=1e-4, atol=1e-4)
    mm, mv = r.standard_normal(16).astype(np.float32), r.uniform(0.5, 2, 16).astype(np.float32)
    got = _core.ops.batchnorm_forward_inference(x, gamma, beta, mm, mv, epsilon=1e-3, relu=relu, residual=res,
                                                device=device)
    want = (xd - mm) / np.sqrt(mv.astype(np.float64) + 1e-3) * gamma + beta + res
    np.testing.assert_allclose(got, np.maximum(want, 0) if relu else want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="residual"):
        _core.ops.batchnorm_forward_training(x, gamma, beta, residual=res[:2], device=device)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("relu", [False, True])
def test_conv2d_residual_op_on_each_device(kind, relu):
    """The op the fused step calls: on a GPU, cuDNN's convolution (bias fused at most) then the
    bias/residual/ReLU kernel; the same answers as the CPU's output stage."""
    r = np.random.default_rng(9)
    x = r.standard_normal((3, 9, 9, 16)).astype(np.float32)
    w = r.standard_normal((3, 3, 16, 24)).astype(np.float32) * 0.2
    b = r.standard_normal(24).astype(np.float32)
    res = r.standard_normal((3, 9, 9, 24)).astype(np.float32)
    device = "cpu" if kind == "cpu" else GPU
    got = _core.ops.conv2d_forward(x, w, b, padding="same", relu=relu, residual=res, device=device)
    plain = _core.ops.conv2d_forward(x, w, b, padding="same", device="cpu")
    want = plain + res
    np.testing.assert_allclose(got, np.maximum(want, 0) if relu else want, rtol=1e-4, atol=1e-4)
