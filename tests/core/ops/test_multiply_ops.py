"""The broadcast product (csrc/ops/multiply.h, the Multiply layer's), the general ReLU
(csrc/ops/relu_clip.h, Keras' ReLU(max_value, negative_slope, threshold)) and Keras' Normalization
constants (ops/scale_shift.h) against float64 NumPy: the forward on equal and broadcast shapes
(squeeze-and-excitation's (n, h, w, c) x (n, 1, 1, c), a broadcast last axis, both operands
broadcast), both gradients by finite differences, and the shapes refused with their message."""
import numpy as np
import pytest

from hpcnn import _core
from tests.support.gradcheck import check

ops = _core.ops

SHAPES = [((2, 5, 4, 6), (2, 5, 4, 6)), ((2, 5, 4, 6), (2, 1, 1, 6)), ((3, 1, 1, 6), (3, 4, 5, 6)),
          ((2, 3, 4, 5), (2, 3, 4, 1)), ((2, 1, 4, 5), (2, 3, 1, 5)), ((4, 7), (4, 1)), ((2, 3, 3, 40), (2, 1, 1, 40))]


@pytest.mark.parametrize("sa,sb", SHAPES)
def test_multiply_forward_and_gradients(sa, sb):
    r = np.random.default_rng(len(sa) + sa[-1])
    a = r.standard_normal(sa).astype(np.float32)
    b = r.standard_normal(sb).astype(np.float32)
    y = ops.multiply_forward(a, b)
    want = a.astype(np.float64) * b.astype(np.float64)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    rr = r.standard_normal(want.shape).astype(np.float32)
    da, db = ops.multiply_backward(a, b, rr)
    assert da.shape == sa and db.shape == sb

    def loss(a_, b_):
        return float((a_ * b_ * rr).sum())

    check(da, loss, [a, b], 0, r)
    check(db, loss, [a, b], 1, r)


def test_multiply_gradient_of_a_broadcast_operand_is_the_same_on_any_thread_count():
    r = np.random.default_rng(3)
    a, b = r.standard_normal((8, 9, 9, 32)).astype(np.float32), r.standard_normal((8, 1, 1, 32)).astype(np.float32)
    dy = r.standard_normal(a.shape).astype(np.float32)
    before = _core.get_num_threads()
    try:
        _core.set_num_threads(1)
        one = ops.multiply_backward(a, b, dy)
        _core.set_num_threads(2)
        two = ops.multiply_backward(a, b, dy)
    finally:
        _core.set_num_threads(before)
    for x, y in zip(one, two):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("sa,sb,message", [((2, 4, 4, 3), (2, 4, 4, 5), "incompatible shapes"),
                                           ((2, 4, 4, 3), (2, 4, 3), "different ranks"),
                                           ((2, 4, 3), (1, 4, 3), "batch axis is not broadcast")])
def test_multiply_refuses_shapes_that_do_not_fit(sa, sb, message):
    with pytest.raises(ValueError, match=message):
        ops.multiply_forward(np.zeros(sa, np.float32), np.zeros(sb, np.float32))


def test_normalization_constants_are_keras_definition():
    mean = np.array([0.5, -2.0, 0.0, 3.0], np.float32)
    var = np.array([4.0, 0.25, 0.0, 1e-20], np.float32)
    scale, offset = ops.normalization_constants(mean, var, 1e-7)
    want = 1.0 / np.maximum(np.sqrt(var.astype(np.float64)), 1e-7)
    np.testing.assert_allclose(scale, want, rtol=1e-6)
    np.testing.assert_allclose(offset, -mean * want, rtol=1e-6)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(ops.scale_shift_forward(x, scale, offset), (x - mean) / np.maximum(np.sqrt(var), 1e-7),
                               rtol=1e-5, atol=1e-5)


def keras_relu(x, max_value=None, negative_slope=0.0, threshold=0.0):
    """keras.activations.relu written out in float64 (ReLU.static_call's steps)."""
    x = np.asarray(x, np.float64)
    neg = np.maximum(threshold - x, 0.0) if negative_slope else 0.0
    a = x * (x > threshold) if threshold != 0 else np.maximum(x, 0.0)
    if max_value is not None:
        a = np.clip(a, 0.0, max_value)
    return a - negative_slope * neg


RELU_FORMS = [dict(max_value=4.5), dict(max_value=6.0, negative_slope=0.1), dict(threshold=0.5),
              dict(threshold=-1.0), dict(threshold=-1.0, max_value=2.0), dict(negative_slope=0.2, threshold=1.0),
              dict(max_value=0.0), dict(negative_slope=0.3, threshold=-0.5, max_value=3.0)]


@pytest.mark.parametrize("form", RELU_FORMS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_relu_clip_forward_and_gradient(form):
    r = np.random.default_rng(0)
    x = (r.standard_normal((6, 50)) * 4).astype(np.float32)
    kinks = [0.0, form.get("threshold", 0.0)] + ([form["max_value"]] if "max_value" in form else [])
    for k in kinks:  # a finite difference must not straddle a kink
        x = np.where(np.abs(x - k) < 0.05, k + 0.1, x).astype(np.float32)
    dy = r.standard_normal(x.shape).astype(np.float32)
    y, dx = ops.relu_clip(x, dy, **form)
    np.testing.assert_allclose(y, keras_relu(x, **form), rtol=1e-6, atol=1e-6)
    check(dx, lambda x_: float((keras_relu(x_, **form) * dy).sum()), [x], 0, r)


@pytest.mark.parametrize("form,message", [(dict(max_value=-1.0), "max_value"), (dict(negative_slope=-0.5), "slope"),
                                          (dict(threshold=float("nan")), "threshold")])
def test_relu_clip_refuses_bad_parameters(form, message):
    with pytest.raises(ValueError, match=message):
        ops.relu_clip(np.zeros(3, np.float32), None, **form)
