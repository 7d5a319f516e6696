"""Finite-difference gradient checks.

Central differences on the float32 op itself are too noisy, so each check has two halves:
the op's forward equals the float64 reference forward (test_ops.py), and the op's analytic
backward equals central differences of the float64 reference forward, taken on a sample of
coordinates of every input. Inputs are nudged away from ReLU zero crossings and max-pool ties.
The loss is L = sum(forward(...) * r) for a fixed random r, so dL/dy = r.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.support import ops_reference as ref
from hpcnn import _core
from tests.support.gradcheck import away_from_zero, check

ops = _core.ops
@pytest.mark.parametrize("k,s,pad,relu", [(3, 1, "same", True), (3, 2, "same", False), (5, 2, "same", True),
                                          (1, 1, "valid", False), (3, 2, "valid", True), (5, 1, "valid", False)])
def test_conv2d_gradients(k, s, pad, relu):
    rng = np.random.default_rng(k * 100 + s * 10 + len(pad))
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    w = rng.standard_normal((k, k, 3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    if relu:  # move pre-activations away from the kink so small steps never cross it
        pre = ref.conv2d_forward(x, w, np.zeros(4), (s, s), pad)
        b = b.astype(np.float32)
        y_pre = pre + b
        if np.min(np.abs(y_pre)) < 1e-2:
            b = (b + 0.013).astype(np.float32)
    y = ops.conv2d_forward(x, w, b, strides=s, padding=pad, relu=relu)
    np.testing.assert_allclose(y, ref.conv2d_forward(x, w, b, (s, s), pad, relu), rtol=1e-4, atol=1e-4)
    r = rng.standard_normal(y.shape).astype(np.float32)
    dx, dw, db = ops.conv2d_backward(x, w, y, r, strides=s, padding=pad, relu=relu)

    def loss(x_, w_, b_):
        return float((ref.conv2d_forward(x_, w_, b_, (s, s), pad, relu) * r).sum())

    for which, analytic in enumerate((dx, dw, db)):
        check(analytic, loss, [x, w, b], which, rng)


@pytest.mark.parametrize("p,s,pad", [(2, 2, "same"), (2, 2, "valid"), (3, 2, "valid"), (3, 2, "same")])
def test_maxpool2d_gradients(p, s, pad):
    rng = np.random.default_rng(p * 10 + s)
    # distinct values spaced well apart: no ties, and a small step never changes a window's winner
    n, h, w, c = 2, 7, 7, 3
    x = (rng.permutation(n * h * w * c).reshape(n, h, w, c) * 0.01).astype(np.float32)
    y = ops.maxpool2d_forward(x, p, s, pad)
    r = rng.standard_normal(y.shape).astype(np.float32)
    dx = ops.maxpool2d_backward(x, y, r, p, s, pad)
    check(dx, lambda x_: float((ref.maxpool2d_forward(x_, (p, p), (s, s), pad) * r).sum()), [x], 0, rng)
    # every input position that wins somewhere: check them all, not only a sample
    winners = np.argwhere(dx != 0)
    assert len(winners) > 0


@pytest.mark.parametrize("relu", [False, True])
def test_dense_gradients(relu):
    rng = np.random.default_rng(21)
    x = rng.standard_normal((5, 9)).astype(np.float32)
    w = rng.standard_normal((9, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    y = ops.dense_forward(x, w, b, relu=relu)
    if relu:
        assert np.min(np.abs(ref.dense_forward(x, w, b))) > 1e-3
    r = rng.standard_normal(y.shape).astype(np.float32)
    dx, dw, db = ops.dense_backward(x, w, y, r, relu=relu)

    def loss(x_, w_, b_):
        return float((ref.dense_forward(x_, w_, b_, relu) * r).sum())

    for which, analytic in enumerate((dx, dw, db)):
        check(analytic, loss, [x, w, b], which, rng)


def test_relu_gradient():
    rng = np.random.default_rng(22)
    x = away_from_zero(rng.standard_normal((4, 6))).astype(np.float32)
    r = rng.standard_normal(x.shape).astype(np.float32)
    dx = ops.relu_backward(ops.relu_forward(x), r)
    check(dx, lambda x_: float((np.maximum(x_, 0) * r).sum()), [x], 0, rng)


def test_softmax_gradient():
    rng = np.random.default_rng(23)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    r = rng.standard_normal(x.shape).astype(np.float32)
    dx = ops.softmax_backward(ops.softmax_forward(x), r)
    check(dx, lambda x_: float((ref.softmax(x_) * r).sum()), [x], 0, rng)


@pytest.mark.parametrize("sparse", [False, True])
def test_softmax_xent_gradient(sparse):
    rng = np.random.default_rng(24)
    logits = rng.standard_normal((6, 5)).astype(np.float32)
    labels = rng.integers(0, 5, 6).astype(np.int32)
    onehot = np.eye(5, dtype=np.float32)[labels]
    _, _, g = ops.softmax_cross_entropy(logits, labels if sparse else onehot, grad_scale=1 / 6)
    check(g, lambda z: ref.softmax_xent(z, onehot)[0] / 6, [logits], 0, rng)


def test_dropout_gradient():
    rng = np.random.default_rng(25)
    x = rng.standard_normal((8, 9)).astype(np.float32)
    mask = ops.dropout_forward(np.ones_like(x), 0.4, seed=5, stream=2)  # 0 or 1/(1-rate)
    r = rng.standard_normal(x.shape).astype(np.float32)
    dx = ops.dropout_backward(r, 0.4, seed=5, stream=2)
    check(dx, lambda x_: float((x_ * mask * r).sum()), [x], 0, rng)
