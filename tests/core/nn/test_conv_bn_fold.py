"""BatchNormalization folded into the convolution before it for inference (issue 27): evaluate and
predict run Conv2D + BatchNormalization (+ ReLU) as one convolution whose kernel and bias carry the
normalization with the moving statistics (ops::conv_bn_fold, nn/step_plan.h). What is checked:
- the folded model predicts and evaluates what the same layers compute apart, to float32
  rounding (a Dropout(0), which passes every value unchanged, between the convolution and the
  normalization keeps the plan from folding), on the CPU and (the gpu kind) on a GPU;
- training is untouched: the same weights, bit for bit, after the same steps;
- the plan folds only a convolution that the normalization alone reads and that has no ReLU of
  its own (a convolution also read elsewhere keeps its own output: checked against NumPy);
- the op itself against NumPy, in both kernel layouts' devices."""
import numpy as np
import pytest

import hpcnn
from tests.support.gpu_target import GPU, KINDS
from hpcnn import _core, optimizers
from hpcnn.layers import (Activation, Add, BatchNormalization, Conv2D, Dense, Dropout, GlobalAveragePooling2D, Input,
                          ReLU)


def device_of(kind):
    return "cpu" if kind == "cpu" else GPU


def bn_cnn_layers(relu_conv=False):
    """Every fold case: bias and no bias, stride 2, a 1x1 convolution, scale/center False, ReLU after."""
    return [Conv2D(8, 3, padding="same", use_bias=False), BatchNormalization(), ReLU(),
            Conv2D(6, 3, strides=2, padding="same"), BatchNormalization(center=False),
            Conv2D(5, 1, activation="relu" if relu_conv else None), BatchNormalization(scale=False, epsilon=0.01),
            ReLU(), GlobalAveragePooling2D(), Dense(3), Activation("softmax")]


def folded_and_apart(seed=3, shape=(9, 9, 3), **kw):
    layers = bn_cnn_layers(**kw)
    apart = []
    for la in layers:
        apart.append(la)
        if isinstance(la, Conv2D):
            apart.append(Dropout(0.0))
    folded = _core.Model(list(shape), [la.core_config() for la in layers], seed)
    plain = _core.Model(list(shape), [la.core_config() for la in apart], seed)
    return folded, plain


def data(n=12, seed=5, shape=(9, 9, 3)):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n,) + shape) * 1.5 + 0.5).astype(np.float32), (np.arange(n) % 3).astype(np.int32)


@pytest.mark.parametrize("shape", [(9, 9, 3), (4, 4, 32)], ids=["folded", "deep-small"])
@pytest.mark.parametrize("relu_conv", [False, True], ids=["conv-bn", "conv-relu-bn"])
@pytest.mark.parametrize("kind", KINDS)
def test_folded_inference_matches_the_layers_apart_and_training_is_unchanged(kind, relu_conv, shape):
    """conv-relu-bn: a convolution with its own ReLU before a normalization is not folded (the
    fold would drop that ReLU): the same answers there too. deep-small: outputs smaller than the
    kernels (4x4 from 32 channels, n * oh * ow < kh * kw * c at batch 1 and 12), where the CPU runs
    the two apart instead of folding (Conv2DLayer::forward_folded)."""
    folded, plain = folded_and_apart(relu_conv=relu_conv, shape=shape)
    x, y = data(shape=shape)
    for core in (folded, plain):
        core.to(device_of(kind))
        core.compile(optimizers.SGD(0.05, momentum=0.9).core_config(), "sparse_categorical_crossentropy")
    for _ in range(4):  # moving statistics and gamma/beta away from their initial 0/1
        lf, lp = folded.train_step((x, y))[0], plain.train_step((x, y))[0]
        assert lf == lp  # training never folds: the same computation
    for a, b in zip(folded.get_weights(), plain.get_weights()):
        np.testing.assert_array_equal(a, b)
    want = plain.predict_step((x,))
    np.testing.assert_allclose(folded.predict_step((x,)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(folded.predict_step((x[3:4],)), want[3:4], rtol=1e-5, atol=1e-6)  # batch 1
    assert folded.test_step((x, y))[0] == pytest.approx(plain.test_step((x, y))[0], rel=1e-5)
    # and training goes on as before after the inference steps
    assert folded.train_step((x, y))[0] == plain.train_step((x, y))[0]


def test_the_plan_folds_conv_bn_pairs_for_inference_only():
    """Folded, the predict step needs no buffer of its own for a normalization: its arena is
    smaller than the same layers' kept apart; the training step's is the same."""
    folded, plain = folded_and_apart()
    assert folded.memory_report(64)["predict"] < plain.memory_report(64)["predict"]
    assert folded.memory_report(64)["train"] == plain.memory_report(64)["train"]


def test_a_convolution_read_twice_keeps_its_own_output():
    """c = Conv2D(x); out = BN(c) + c: the convolution's output is read by the addition too, so
    the normalization is not folded into it; checked against NumPy in float64."""
    inp = Input((4, 4, 3))
    c = Conv2D(5, 1)(inp)
    s = Add()([BatchNormalization()(c), c])
    m = hpcnn.Model(inp, Dense(2)(GlobalAveragePooling2D()(s)), seed=2)
    m.compile(optimizers.SGD(0.1), "mse")
    r = np.random.default_rng(1)
    x = r.standard_normal((6, 4, 4, 3)).astype(np.float32)
    m.fit(x, r.standard_normal((6, 2)).astype(np.float32), batch_size=6, epochs=3, verbose=0)
    k, b, gamma, beta, mean, var, dk, db = [w.astype(np.float64) for w in m.get_weights()]
    conv = x.astype(np.float64) @ k[0, 0] + b
    s = (conv - mean) / np.sqrt(var + 1e-3) * gamma + beta + conv
    want = s.mean(axis=(1, 2)) @ dk + db
    np.testing.assert_allclose(m.predict(x, verbose=0), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_bn_fold_op_against_numpy(kind, bias):
    r = np.random.default_rng(4)
    f = 7
    w = r.standard_normal((3, 3, 4, f)).astype(np.float32)
    b = r.standard_normal(f).astype(np.float32) if bias else None
    gamma, beta, mean = (r.standard_normal(f).astype(np.float32) for _ in range(3))
    var = r.random(f).astype(np.float32) + 0.1
    wf, bf = _core.ops.conv_bn_fold(w, b, gamma, beta, mean, var, 1e-3, device=device_of(kind))
    a = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-3)
    np.testing.assert_allclose(wf, w * a, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(bf, ((b if bias else 0) - mean) * a + beta, rtol=1e-6, atol=1e-6)
