"""The depthwise convolution (csrc/ops/depthwise_conv2d.h) against the float64 reference
(ops_reference.depthwise_conv2d_forward): forward on every MobileNetV2 and EfficientNetB0 row of
op_cases and on
small cases of every argument (strides, 'valid'/'same' with odd totals, depth multipliers,
dilation, no bias), and its three gradients by finite differences of the reference."""
import numpy as np
import pytest

from hpcnn import _core
from tests.support import ops_reference as ref
from tests.support.gradcheck import check
from tests.support.op_cases import EFFICIENTNETB0_DEPTHWISE, MOBILENETV2_DEPTHWISE

ops = _core.ops

# (n, h, w, c, m, kh, kw, strides, padding, dilation, bias)
SMALL = [
    (2, 7, 6, 5, 1, 3, 3, (1, 1), "same", (1, 1), True),
    (2, 8, 9, 3, 2, 3, 3, (2, 2), "same", (1, 1), True),      # odd 'same' totals: extra row at the bottom
    (1, 9, 7, 4, 3, 2, 3, (1, 2), "valid", (1, 1), False),
    (2, 10, 10, 6, 1, 3, 3, (1, 1), "same", (2, 2), True),    # dilation
    (1, 11, 9, 2, 2, 3, 2, (2, 1), "valid", (2, 3), True),    # dilation with strides (Keras on JAX allows it)
    (3, 5, 5, 40, 1, 5, 5, (2, 2), "same", (1, 1), True),     # a full 32-channel block and a tail
    (1, 4, 4, 33, 1, 1, 1, (1, 1), "valid", (1, 1), True),
]


def _arrays(case, seed):
    n, h, w, c, m, kh, kw, _, _, _, bias = case
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, h, w, c)).astype(np.float32)
    k = r.standard_normal((kh, kw, c, m)).astype(np.float32)
    b = r.standard_normal(c * m).astype(np.float32) if bias else None
    return r, x, k, b


@pytest.mark.parametrize("case", SMALL)
def test_depthwise_forward_matches_reference(case):
    _, x, k, b = _arrays(case, 3)
    strides, padding, dilation = case[7], case[8], case[9]
    got = ops.depthwise_conv2d_forward(x, k, b, strides, padding, dilation)
    want = ref.depthwise_conv2d_forward(x, k, b, strides, padding, dilation)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("row", MOBILENETV2_DEPTHWISE + EFFICIENTNETB0_DEPTHWISE, ids=lambda r: r.label())
def test_depthwise_backbone_rows(row):
    n, h, w, c, m, k, s, padding = row.case(1)
    r = np.random.default_rng(5)
    x = r.standard_normal((n, h, w, c)).astype(np.float32)
    kern = r.standard_normal((k, k, c, m)).astype(np.float32)
    b = r.standard_normal(c * m).astype(np.float32)
    got = ops.depthwise_conv2d_forward(x, kern, b, s, padding)
    np.testing.assert_allclose(got, ref.depthwise_conv2d_forward(x, kern, b, (s, s), padding), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", SMALL)
def test_depthwise_gradients(case):
    r, x, k, b = _arrays(case, 7)
    strides, padding, dilation = case[7], case[8], case[9]
    y = ops.depthwise_conv2d_forward(x, k, b, strides, padding, dilation)
    rr = r.standard_normal(y.shape).astype(np.float32)
    dx, dk, db = ops.depthwise_conv2d_backward(x, k, rr, strides, padding, dilation, bias=b is not None)

    def loss(x_, k_, b_=None):
        return float((ref.depthwise_conv2d_forward(x_, k_, b_, strides, padding, dilation) * rr).sum())

    arrays = [x, k] + ([b] if b is not None else [])
    for which, analytic in enumerate((dx, dk, db)[:len(arrays)]):
        check(analytic, loss, arrays, which, r)
    if b is None:
        assert db is None


def test_depthwise_backward_without_input_gradient():
    r, x, k, b = _arrays(SMALL[0], 9)
    dy = r.standard_normal(ops.depthwise_conv2d_forward(x, k, b, 1, "same").shape).astype(np.float32)
    dx, dk, db = ops.depthwise_conv2d_backward(x, k, dy, 1, "same", need_dx=False)
    assert dx is None
    _, dk_full, db_full = ops.depthwise_conv2d_backward(x, k, dy, 1, "same")
    np.testing.assert_array_equal(dk, dk_full)
    np.testing.assert_array_equal(db, db_full)


@pytest.mark.parametrize("kwargs,message", [
    (dict(kernel=np.zeros((3, 3, 4, 1), np.float32)), "is for 4 channels but the input"),
    (dict(strides=0), "strides must be positive"),
    (dict(dilation_rate=0), "dilation_rate must be positive"),
    (dict(kernel=np.zeros((3, 3, 5, 0), np.float32)), "depth_multiplier must be positive"),
    (dict(kernel=np.zeros((9, 9, 5, 1), np.float32), padding="valid"), "does not fit"),
    (dict(bias=np.zeros(4, np.float32)), "bias"),
])
def test_depthwise_refuses_bad_arguments(kwargs, message):
    args = dict(x=np.zeros((1, 6, 6, 5), np.float32), kernel=np.zeros((3, 3, 5, 1), np.float32), bias=None)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ops.depthwise_conv2d_forward(**args)
