"""Finite-difference gradient checks of issue 13's operators, in the manner of test_gradcheck.py:
each op's analytic backward (float32, hpcnn) against central differences of the float64
reference forward (ops_reference.py) at a sample of coordinates of every input, with the loss
L = sum(forward(...) * r) for a fixed random r. Batch normalization is checked in training mode
(the batch statistics depend on every input: the full Jacobian, not a per-element scale) and in
inference mode."""
import numpy as np
import pytest

from tests.support import ops_reference as ref
from hpcnn import _core
from tests.support.gradcheck import away_from_zero, check

ops = _core.ops


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("shape", [(4, 3, 3, 5), (6, 4)])
def test_batchnorm_training_gradients(shape, relu):
    r = np.random.default_rng(31 + len(shape))
    c = shape[-1]
    x = (r.standard_normal(shape) * 1.5 + 0.5).astype(np.float32)
    gamma = (r.standard_normal(c) + 1.0).astype(np.float32)
    beta = r.standard_normal(c).astype(np.float32)
    if relu:  # keep outputs away from the kink: a small step must not flip a ReLU
        y_pre, _, _ = ref.batchnorm_training(x, gamma, beta)
        beta = (beta + np.where(np.abs(y_pre).min(axis=tuple(range(len(shape) - 1))) < 0.02, 0.05, 0.0)).astype(
            np.float32)
        y_pre, _, _ = ref.batchnorm_training(x, gamma, beta)
        assert np.abs(y_pre).min() > 1e-3
    y, mean, _, invstd = ops.batchnorm_forward_training(x, gamma, beta, 1e-3, relu)
    rr = r.standard_normal(y.shape).astype(np.float32)
    dx, dgamma, dbeta = ops.batchnorm_backward_training(x, y, rr, gamma, mean, invstd, 1e-3, relu)

    def loss(x_, g_, b_):
        return float((ref.batchnorm_training(x_, g_, b_, 1e-3, relu)[0] * rr).sum())

    for which, analytic in enumerate((dx, dgamma, dbeta)):
        check(analytic, loss, [x, gamma, beta], which, r)


def test_batchnorm_training_gradient_without_gamma_beta():
    r = np.random.default_rng(33)
    x = r.standard_normal((5, 2, 2, 3)).astype(np.float32)
    y, mean, _, invstd = ops.batchnorm_forward_training(x, None, None)
    rr = r.standard_normal(y.shape).astype(np.float32)
    dx, _, _ = ops.batchnorm_backward_training(x, y, rr, None, mean, invstd)
    check(dx, lambda x_: float((ref.batchnorm_training(x_, None, None)[0] * rr).sum()), [x], 0, r)


@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_inference_gradient(relu):
    """A frozen layer: the moving statistics are constants, dx = g * gamma / sqrt(var + eps)."""
    r = np.random.default_rng(34)
    x = r.standard_normal((3, 4, 4, 6)).astype(np.float32)
    g, b = r.standard_normal(6).astype(np.float32), r.standard_normal(6).astype(np.float32)
    mm, mv = r.standard_normal(6).astype(np.float32), (r.random(6) + 0.5).astype(np.float32)
    if relu:
        pre = ref.batchnorm_inference(x, g, b, mm, mv)
        x = np.where(np.abs(pre) < 0.02, x + 0.1, x).astype(np.float32)
    y = ops.batchnorm_forward_inference(x, g, b, mm, mv, 1e-3, relu)
    rr = r.standard_normal(y.shape).astype(np.float32)
    dx = ops.batchnorm_backward_inference(y, rr, g, mv, 1e-3, relu)
    check(dx, lambda x_: float((ref.batchnorm_inference(x_, g, b, mm, mv, 1e-3, relu) * rr).sum()), [x], 0, r)


@pytest.mark.parametrize("p,s,pad", [(2, 2, "same"), (2, 2, "valid"), (3, 2, "same"), (3, 1, "same")])
def test_avgpool2d_gradient(p, s, pad):
    r = np.random.default_rng(35 + p + s)
    x = r.standard_normal((2, 7, 6, 3)).astype(np.float32)
    y = ops.avgpool2d_forward(x, p, s, pad)
    rr = r.standard_normal(y.shape).astype(np.float32)
    dx = ops.avgpool2d_backward(list(x.shape), rr, p, s, pad)
    check(dx, lambda x_: float((ref.avgpool2d_forward(x_, (p, p), (s, s), pad) * rr).sum()), [x], 0, r)


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_global_pool_gradient(mode):
    r = np.random.default_rng(36)
    n, h, w, c = 2, 4, 3, 5
    x = (r.permutation(n * h * w * c).reshape(n, h, w, c) * 0.01).astype(np.float32)  # no ties
    y = ops.global_pool2d_forward(x, mode)
    rr = r.standard_normal(y.shape).astype(np.float32)
    dx = ops.global_pool2d_backward(x, y, rr, mode)
    check(dx, lambda x_: float((ref.global_pool2d(x_, mode) * rr).sum()), [x], 0, r)


def test_zero_pad2d_gradient():
    r = np.random.default_rng(37)
    x = r.standard_normal((2, 3, 4, 2)).astype(np.float32)
    pad = [1, 2, 0, 3]
    y = ops.zero_pad2d_forward(x, pad)
    rr = r.standard_normal(y.shape).astype(np.float32)
    dx = ops.zero_pad2d_backward(list(x.shape), rr, pad)
    check(dx, lambda x_: float((ref.zero_pad2d(x_, *pad) * rr).sum()), [x], 0, r)


def test_scale_shift_gradient():
    r = np.random.default_rng(38)
    x = r.standard_normal((4, 5)).astype(np.float32)
    s, o = r.standard_normal(5).astype(np.float32), r.standard_normal(5).astype(np.float32)
    rr = r.standard_normal(x.shape).astype(np.float32)
    dx = ops.scale_shift_backward(rr, s)
    check(dx, lambda x_: float(((x_ * s + o) * rr).sum()), [x], 0, r)


KINKED = {"relu6": (0.0, 6.0), "leaky_relu": (0.0,), "elu": (0.0,), "selu": (0.0,), "hard_sigmoid": (-3.0, 3.0)}


@pytest.mark.parametrize("name,alpha", [(n, {"leaky_relu": 0.3, "elu": 0.7}.get(n, 0.0))
                                        for n in ref.ACTIVATIONS if n not in ("relu", "linear")])
def test_activation_gradients(name, alpha):
    r = np.random.default_rng(39)
    x = (r.standard_normal((4, 9)) * 3).astype(np.float32)
    for k in KINKED.get(name, ()):
        x = np.where(np.abs(x - k) < 0.05, k + 0.1, x).astype(np.float32)
    x = away_from_zero(x).astype(np.float32)
    y = ops.activation_forward(x, name, alpha)
    rr = r.standard_normal(x.shape).astype(np.float32)
    dx = ops.activation_backward(x, y, rr, name, alpha)
    check(dx, lambda x_: float((ref.activation(name, x_, alpha) * rr).sum()), [x], 0, r)
