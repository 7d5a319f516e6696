"""Every CPU operator, forward and backward, against the float64 NumPy references in ops_reference.py.

Shapes are drawn at random (seeded) and include batch 1, odd spatial sizes and channel counts that
are not multiples of 8. Tolerance: rtol 1e-4 with an atol scaled to the reference's magnitude
(float32 sums of a few hundred terms cannot do better than that relative to their largest term).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.support import op_cases, ops_reference as ref
from tests.support.ops_reference import close, randn
from hpcnn import _core

ops = _core.ops


# ------------------------------------------------------------------ conv2d
CONV_CASES = [
    # n, h, w, c, f, k, stride, padding
    (1, 5, 5, 1, 1, 1, 1, "valid"),
    (2, 7, 6, 3, 5, 3, 1, "same"),
    (3, 9, 8, 5, 7, 3, 2, "same"),  # odd total padding: extra row/column at the bottom/right
    (2, 8, 8, 4, 6, 3, 2, "same"),
    (1, 11, 9, 13, 3, 5, 1, "same"),
    (2, 11, 10, 6, 9, 5, 2, "same"),
    (2, 9, 7, 3, 4, 5, 1, "valid"),
    (3, 10, 9, 5, 11, 3, 2, "valid"),
    (2, 6, 5, 10, 3, 1, 2, "same"),
    (4, 6, 6, 9, 17, 1, 1, "same"),  # pointwise path (no im2col)
    (1, 4, 4, 3, 2, 5, 1, "same"),  # kernel larger than the image
    (5, 32, 32, 3, 8, 3, 1, "same"),  # the tutorial's first layer, small
    # few input channels, filters a multiple of 8: the direct (register-blocked) kernels
    (3, 28, 28, 1, 32, 5, 1, "same"),  # DeepMNIST's first layer
    (2, 13, 11, 3, 32, 3, 1, "same"),  # widths not a multiple of the pixel block
    (2, 9, 10, 3, 16, 3, 2, "valid"),
    (3, 7, 9, 2, 24, 3, 2, "same"),
    (1, 6, 5, 4, 8, 5, 1, "valid"),
    (2, 5, 7, 3, 8, 1, 1, "same"),
]


# ... and the tutorial CNN's convolutions that bench/bench_ops.py times (tests/support/op_cases.py).
@pytest.mark.parametrize("n,h,w,c,f,k,s,pad", CONV_CASES + [row.case() for row in op_cases.TUTORIAL_CNN_CONVS]
                         + [row.case() for row in op_cases.PHOTOS_CONVS])
@pytest.mark.parametrize("relu", [False, True])
def test_conv2d(n, h, w, c, f, k, s, pad, relu):
    rng = np.random.default_rng(hash((n, h, w, c, f, k, s, pad, relu)) & 0xFFFF)
    x, wt, b = randn(rng, n, h, w, c), randn(rng, k, k, c, f), randn(rng, f)
    y = ops.conv2d_forward(x, wt, b, strides=s, padding=pad, relu=relu)
    y_ref = ref.conv2d_forward(x, wt, b, (s, s), pad, relu)
    assert y.shape == y_ref.shape
    close(y, y_ref)

    dy = randn(rng, *y.shape)
    dy_copy = dy.copy()
    dx, dw, db = ops.conv2d_backward(x, wt, y, dy, strides=s, padding=pad, relu=relu)
    # the reference masks with the float64 output: use the op's own output so both masks agree
    dx_r, dw_r, db_r = ref.conv2d_backward(x, wt, y, dy, (s, s), pad, relu)
    close(dx, dx_r)
    close(dw, dw_r)
    close(db, db_r)
    np.testing.assert_array_equal(dy, dy_copy)  # the caller's dy is never written

    none, dw2, db2 = ops.conv2d_backward(x, wt, y, dy, strides=s, padding=pad, relu=relu, need_dx=False)
    assert none is None
    np.testing.assert_array_equal(dw2, dw)
    np.testing.assert_array_equal(db2, db)


def _random_conv_cases(count=16, seed=2024):
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        k = int(rng.choice([1, 3, 5]))
        s = int(rng.choice([1, 2]))
        pad = str(rng.choice(["same", "valid"]))
        h, w = int(rng.integers(1, 14)), int(rng.integers(1, 14))
        if pad == "valid" and (h < k or w < k):
            continue
        c = int(rng.choice([1, 2, 3, 5, 7, 9, 12, 17]))
        f = int(rng.choice([1, 3, 8, 10, 16, 24, 32, 33]))
        cases.append((int(rng.integers(1, 5)), h, w, c, f, k, s, pad))
    return cases


@pytest.mark.parametrize("n,h,w,c,f,k,s,pad", _random_conv_cases())
def test_conv2d_random_shapes(n, h, w, c, f, k, s, pad):
    test_conv2d(n, h, w, c, f, k, s, pad, relu=bool((h + w) % 2))


def test_conv2d_rectangular_strides():
    rng = np.random.default_rng(7)
    x, wt, b = randn(rng, 2, 9, 10, 3), randn(rng, 3, 3, 3, 4), randn(rng, 4)
    for pad in ("same", "valid"):
        y = ops.conv2d_forward(x, wt, b, strides=(2, 1), padding=pad)
        close(y, ref.conv2d_forward(x, wt, b, (2, 1), pad))
        dy = randn(rng, *y.shape)
        for got, want in zip(ops.conv2d_backward(x, wt, y, dy, strides=(2, 1), padding=pad),
                             ref.conv2d_backward(x, wt, y, dy, (2, 1), pad)):
            close(got, want)


def test_conv2d_same_padding_is_keras():
    # 4x4 input, 3x3 kernel, stride 2, 'same': out 2x2, total padding 1 -> 0 on top/left, 1 at the bottom/right.
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    w = np.zeros((3, 3, 1, 1), np.float32)
    w[0, 0, 0, 0] = 1.0  # picks the window's top-left input
    y = ops.conv2d_forward(x, w, np.zeros(1, np.float32), strides=2, padding="same")
    np.testing.assert_array_equal(y[0, :, :, 0], [[0, 2], [8, 10]])


@pytest.mark.parametrize("c,f", [(16, 24), (3, 32)])  # im2col+GEMM and the direct kernels
def test_conv2d_deterministic_dw(threads, c, f):
    rng = np.random.default_rng(3)
    x, wt = randn(rng, 37, 12, 12, c), randn(rng, 3, 3, c, f)
    y = ops.conv2d_forward(x, wt, np.zeros(f, np.float32), padding="same", relu=True)
    dy = randn(rng, *y.shape)
    for nt in (1, 2, 3):
        _core.set_num_threads(nt)
        a = ops.conv2d_backward(x, wt, y, dy, padding="same", relu=True)
        b = ops.conv2d_backward(x, wt, y, dy, padding="same", relu=True)
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)  # bitwise, for a given thread count
        close(a[1], ref.conv2d_backward(x, wt, y, dy, (1, 1), "same", True)[1])


def test_conv2d_thread_counts_agree(threads):
    rng = np.random.default_rng(4)
    x, wt, b = randn(rng, 5, 9, 9, 6), randn(rng, 3, 3, 6, 10), randn(rng, 10)
    outs = []
    for nt in (1, 2, 4):
        _core.set_num_threads(nt)
        outs.append(ops.conv2d_forward(x, wt, b, padding="same", relu=True))
    for o in outs[1:]:
        close(o, outs[0])


# ------------------------------------------------------------------ max-pool
POOL_CASES = [
    # n, h, w, c, pool, stride, padding
    (1, 4, 4, 1, 2, 2, "valid"),
    (2, 7, 5, 3, 2, 2, "same"),
    (2, 7, 5, 3, 2, 2, "valid"),
    (3, 9, 9, 13, 2, 2, "same"),
    (2, 8, 7, 5, 3, 2, "valid"),  # overlapping windows
    (2, 9, 8, 6, 3, 2, "same"),
    (1, 3, 3, 10, 3, 1, "same"),
    (2, 7, 8, 4, 3, 3, "same"),  # tiling windows with padding at the top/left too
    (2, 8, 7, 3, 3, 3, "valid"),  # tiling windows leaving rows and columns uncovered
    (4, 32, 32, 32, 2, 2, "same"),
]


@pytest.mark.parametrize("n,h,w,c,p,s,pad", POOL_CASES)
def test_maxpool2d(n, h, w, c, p, s, pad):
    rng = np.random.default_rng(hash((n, h, w, c, p, s, pad)) & 0xFFFF)
    x = randn(rng, n, h, w, c)
    y = ops.maxpool2d_forward(x, pool_size=p, strides=s, padding=pad)
    y_ref = ref.maxpool2d_forward(x, (p, p), (s, s), pad)
    assert y.shape == y_ref.shape
    np.testing.assert_array_equal(y, y_ref.astype(np.float32))
    dy = randn(rng, *y.shape)
    dx = ops.maxpool2d_backward(x, y, dy, pool_size=p, strides=s, padding=pad)
    close(dx, ref.maxpool2d_backward(x, dy, (p, p), (s, s), pad))


def test_maxpool2d_ties_go_to_first():
    # all-equal windows (ReLU zeros): the whole gradient goes to the first position of each window
    x = np.zeros((1, 4, 4, 10), np.float32)  # 8 vector lanes + a scalar tail
    y = ops.maxpool2d_forward(x, 2)
    dy = np.ones_like(y)
    dx = ops.maxpool2d_backward(x, y, dy, 2)
    close(dx, ref.maxpool2d_backward(x, dy, (2, 2)))
    assert dx.sum() == dy.sum()
    for c in (0, 9):
        assert dx[0, 0, 0, c] == 1 and dx[0, 0, 1, c] == 0 and dx[0, 1, 0, c] == 0 and dx[0, 1, 1, c] == 0


def test_maxpool2d_default_strides_are_pool_size():
    x = np.random.default_rng(0).standard_normal((1, 6, 6, 2)).astype(np.float32)
    np.testing.assert_array_equal(ops.maxpool2d_forward(x, 3), ref.maxpool2d_forward(x, (3, 3)).astype(np.float32))


# ------------------------------------------------------------------ dense
@pytest.mark.parametrize("nt", [1, 2, 3])
def test_dense_few_rows_split_by_columns(threads, nt):
    # Fewer than 16 rows: the threads split the columns (16 at a time) instead of the rows; every
    # element is still one chain over the inputs, so the bits do not depend on the thread count.
    rng = np.random.default_rng(77)
    x, w, b = randn(rng, 3, 300), randn(rng, 300, 70), randn(rng, 70)
    _core.set_num_threads(1)
    y1 = ops.dense_forward(x, w, b, relu=True)
    _core.set_num_threads(nt)
    np.testing.assert_array_equal(ops.dense_forward(x, w, b, relu=True), y1)
    close(y1, ref.dense_forward(x, w, b, True))


@pytest.mark.parametrize("nt", [1, 2, 3])
def test_dense_wide_kernel_split_by_columns(threads, nt):
    # 16-64 rows through a kernel of >= 2**20 elements: the forward pass and dW split the columns
    # (k in chunks, each element one chain in order) and dx the kernel's rows: the bits do not
    # depend on the thread count.
    rng = np.random.default_rng(78)
    x, w, b = randn(rng, 20, 4100), randn(rng, 4100, 260), randn(rng, 260)
    _core.set_num_threads(1)
    y1 = ops.dense_forward(x, w, b, relu=True)
    dy = randn(rng, 20, 260)
    g1 = ops.dense_backward(x, w, y1, dy, relu=True)
    _core.set_num_threads(nt)
    np.testing.assert_array_equal(ops.dense_forward(x, w, b, relu=True), y1)
    for got, want in zip(ops.dense_backward(x, w, y1, dy, relu=True), g1):
        np.testing.assert_array_equal(got, want)
    close(y1, ref.dense_forward(x, w, b, True))
    for got, want in zip(g1, ref.dense_backward(x, w, y1, dy, True)):
        close(got, want)


@pytest.mark.parametrize("n,i,o", [(1, 1, 1), (1, 7, 3), (5, 13, 9), (33, 100, 17), (250, 64, 10),
                                   (1, 1024, 256), (3, 50, 37), (15, 20, 40), (16, 20, 40)]
                         + [(op_cases.TEST_BATCH, i, o) for i, o, _ in op_cases.TUTORIAL_CNN_DENSE]  # bench_ops.py's
                         # the photos model's, at its batch (a wide kernel and 16-64 rows: split by columns)
                         + [(op_cases.PHOTOS_BATCH, i, o) for i, o, _ in op_cases.PHOTOS_DENSE] + [(64, 8192, 128)])
@pytest.mark.parametrize("relu", [False, True])
def test_dense(n, i, o, relu):
    rng = np.random.default_rng(n * 1000 + i * 10 + o)
    x, w, b = randn(rng, n, i), randn(rng, i, o), randn(rng, o)
    y = ops.dense_forward(x, w, b, relu=relu)
    close(y, ref.dense_forward(x, w, b, relu))
    dy = randn(rng, n, o)
    dy_copy = dy.copy()
    dx, dw, db = ops.dense_backward(x, w, y, dy, relu=relu)
    for got, want in zip((dx, dw, db), ref.dense_backward(x, w, y, dy, relu)):
        close(got, want)
    np.testing.assert_array_equal(dy, dy_copy)
    none, dw2, _ = ops.dense_backward(x, w, y, dy, relu=relu, need_dx=False)
    assert none is None
    np.testing.assert_array_equal(dw2, dw)


# ------------------------------------------------------------------ relu, softmax
def test_relu():
    rng = np.random.default_rng(1)
    x = randn(rng, 3, 5, 7, 11)
    x[0, 0, 0, :3] = 0.0
    y = ops.relu_forward(x)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    dy = randn(rng, *x.shape)
    np.testing.assert_array_equal(ops.relu_backward(y, dy), np.where(x > 0, dy, 0))  # 0 at the kink


@pytest.mark.parametrize("shape", [(1, 1), (4, 10), (3, 5, 7), (64, 1000)])
def test_softmax(shape):
    rng = np.random.default_rng(len(shape))
    x = randn(rng, *shape) * 5
    y = ops.softmax_forward(x)
    close(y, ref.softmax(x))
    dy = randn(rng, *shape)
    y64 = ref.softmax(x)
    dx_ref = y64 * (dy - (dy * y64).sum(axis=-1, keepdims=True))
    close(ops.softmax_backward(y, dy), dx_ref)


def test_softmax_large_logits_stable():
    x = np.array([[1e4, 0.0, -1e4], [3e4, 3e4, 3e4]], np.float32)
    y = ops.softmax_forward(x)
    assert np.all(np.isfinite(y))
    close(y, [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]])


# ------------------------------------------------------------------ dropout
def test_dropout_mask_and_scaling(threads):
    rate = 0.3
    x = np.ones((64, 1000), np.float32)
    y = ops.dropout_forward(x, rate, seed=42, stream=7)
    kept = y != 0
    np.testing.assert_allclose(y[kept], 1 / (1 - rate), rtol=1e-6)  # inverted scaling
    frac = kept.mean()
    assert abs(frac - (1 - rate)) < 0.01, frac  # 64000 draws: std 0.0018
    np.testing.assert_array_equal(ops.dropout_forward(x, rate, seed=42, stream=7), y)  # same seed+stream
    other = ops.dropout_forward(x, rate, seed=42, stream=8)
    assert (other != y).mean() > 0.2  # another step draws another mask
    assert (ops.dropout_forward(x, rate, seed=43, stream=7) != y).mean() > 0.2
    # backward applies the same mask and scale to the gradient
    dy = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    np.testing.assert_array_equal(ops.dropout_backward(dy, rate, seed=42, stream=7), dy * y)
    # the mask is a function of (seed, stream, index) only: thread counts agree bitwise
    _core.set_num_threads(1)
    y1 = ops.dropout_forward(x, rate, seed=42, stream=7)
    _core.set_num_threads(2)
    y2 = ops.dropout_forward(x, rate, seed=42, stream=7)
    np.testing.assert_array_equal(y1, y)
    np.testing.assert_array_equal(y2, y)


def test_dropout_rate_zero_is_identity():
    x = np.random.default_rng(0).standard_normal((3, 17)).astype(np.float32)
    np.testing.assert_array_equal(ops.dropout_forward(x, 0.0, seed=1), x)


# ------------------------------------------------------------------ softmax cross-entropy
@pytest.mark.parametrize("rows,cols", [(1, 2), (7, 10), (250, 10), (33, 100)])
def test_softmax_xent(rows, cols):
    rng = np.random.default_rng(rows * cols)
    logits = randn(rng, rows, cols) * 3
    labels = rng.integers(0, cols, rows).astype(np.int32)
    onehot = np.eye(cols, dtype=np.float32)[labels]
    loss_r, correct_r, grad_r = ref.softmax_xent(logits, onehot)
    scale = 1.0 / rows
    for target in (onehot, labels):
        loss, correct, grad = ops.softmax_cross_entropy(logits, target, grad_scale=scale)
        np.testing.assert_allclose(loss, loss_r, rtol=1e-5)
        assert correct == correct_r
        close(grad, grad_r * scale)


def test_softmax_xent_int64_labels_are_accepted():
    logits = np.array([[0.0, 2.0], [3.0, 1.0]], np.float32)
    loss, correct, _ = ops.softmax_cross_entropy(logits, np.array([1, 1], np.int64))
    assert correct == 1.0
    np.testing.assert_allclose(loss, ref.softmax_xent(logits, np.eye(2)[[1, 1]])[0], rtol=1e-6)


def test_softmax_xent_stable_for_large_logits():
    logits = np.array([[1e4, 0.0, -1e4], [0.0, 1e4, 1e4 - 5], [-1e4, -1e4, -1e4]], np.float32)
    labels = np.array([0, 2, 1], np.int32)
    loss, correct, grad = ops.softmax_cross_entropy(logits, labels)
    loss_r, correct_r, grad_r = ref.softmax_xent(logits, np.eye(3)[labels])
    assert np.isfinite(loss) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(loss, loss_r, rtol=1e-5)
    assert correct == correct_r == 1.0
    close(grad, grad_r)


def test_softmax_xent_soft_targets():
    rng = np.random.default_rng(5)
    logits = randn(rng, 6, 4)
    t = rng.random((6, 4)).astype(np.float32)
    t /= t.sum(axis=1, keepdims=True)
    loss, _, grad = ops.softmax_cross_entropy(logits, t)
    loss_r, _, grad_r = ref.softmax_xent(logits, t)
    np.testing.assert_allclose(loss, loss_r, rtol=1e-5)
    close(grad, grad_r)


# ------------------------------------------------------------------ optimizers
def test_adam_keras_formula():
    rng = np.random.default_rng(11)
    n = 10007
    p = rng.standard_normal(n).astype(np.float32)
    m = np.zeros(n, np.float32)
    v = np.zeros(n, np.float32)
    p64, m64, v64 = p.astype(np.float64), m.astype(np.float64), v.astype(np.float64)
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-7
    for t in range(1, 6):
        g = rng.standard_normal(n).astype(np.float32)
        p, m, v = ops.adam_step(p, g, m, v, lr=lr, beta_1=b1, beta_2=b2, epsilon=eps, t=t)
        p64, m64, v64 = ref.adam(p64, g.astype(np.float64), m64, v64, lr, b1, b2, eps, t)
    close(m, m64)
    close(v, v64)
    np.testing.assert_allclose(p, p64, rtol=1e-5, atol=1e-6)


def test_adam_does_not_write_callers_arrays():
    p = np.ones(5, np.float32)
    m = np.zeros(5, np.float32)
    v = np.zeros(5, np.float32)
    ops.adam_step(p, np.ones(5, np.float32), m, v)
    assert p.tolist() == [1] * 5 and m.tolist() == [0] * 5


@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True), (0.5, True)])
def test_sgd_keras_formula(momentum, nesterov):
    rng = np.random.default_rng(12)
    n = 4099
    p = rng.standard_normal(n).astype(np.float32)
    vel = np.zeros(n, np.float32)
    p64, v64 = p.astype(np.float64), vel.astype(np.float64)
    for _ in range(4):
        g = rng.standard_normal(n).astype(np.float32)
        p, vel = ops.sgd_step(p, g, vel, lr=0.05, momentum=momentum, nesterov=nesterov)
        p64, v64 = ref.sgd(p64, g.astype(np.float64), v64, 0.05, momentum, nesterov)
    np.testing.assert_allclose(p, p64, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vel, v64, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ decode
def test_decode_u8():
    rng = np.random.default_rng(13)
    x = rng.integers(0, 256, (3, 5, 7, 3), dtype=np.uint8)
    scale = [1 / 255, 2 / 255, 0.5]
    shift = [0.0, -1.0, 0.25]
    y = ops.decode_u8(x, scale, shift)
    assert y.dtype == np.float32 and y.shape == x.shape
    close(y, x * np.array(scale) + np.array(shift), rtol=1e-6)
    # one channel (MNIST-like)
    g = rng.integers(0, 256, (4, 28, 28, 1), dtype=np.uint8)
    close(ops.decode_u8(g, [1 / 255], [0.0]), g / 255.0, rtol=1e-6)


# ------------------------------------------------------------------ bad input: ValueError naming op and shapes
def _raises(fn, *words):
    with pytest.raises(ValueError) as e:
        fn()
    msg = str(e.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def test_bad_input_conv2d():
    x = np.zeros((2, 8, 8, 3), np.float32)
    w = np.zeros((3, 3, 3, 4), np.float32)
    b = np.zeros(4, np.float32)
    _raises(lambda: ops.conv2d_forward(x[0], w, b), "conv2d", "4-D", "(8, 8, 3)")
    _raises(lambda: ops.conv2d_forward(x, w[0], b), "conv2d", "kernel", "(3, 3, 4)")
    _raises(lambda: ops.conv2d_forward(x[:0], w, b), "conv2d", "batch size is 0", "(0, 8, 8, 3)")
    _raises(lambda: ops.conv2d_forward(np.zeros((2, 8, 8, 5), np.float32), w, b), "conv2d", "(3, 3, 3, 4)",
            "(2, 8, 8, 5)", "channels")
    _raises(lambda: ops.conv2d_forward(x, w, np.zeros(5, np.float32)), "conv2d", "bias", "(5,)", "(4,)")
    _raises(lambda: ops.conv2d_forward(x, w, b, padding="full"), "padding", "'full'")
    _raises(lambda: ops.conv2d_forward(x, np.zeros((9, 9, 3, 4), np.float32), b), "conv2d", "9x9", "8x8")
    _raises(lambda: ops.conv2d_forward(x, w, b, strides=0), "conv2d", "strides")
    y = np.zeros((2, 8, 8, 4), np.float32)
    _raises(lambda: ops.conv2d_backward(x, w, y, np.zeros((2, 7, 8, 4), np.float32), padding="same"),
            "conv2d backward", "(2, 7, 8, 4)", "(2, 8, 8, 4)")


def test_bad_input_maxpool2d():
    x = np.zeros((2, 8, 8, 3), np.float32)
    _raises(lambda: ops.maxpool2d_forward(x[0]), "max_pool2d", "4-D", "(8, 8, 3)")
    _raises(lambda: ops.maxpool2d_forward(x[:0]), "max_pool2d", "batch size is 0")
    _raises(lambda: ops.maxpool2d_forward(x, 2, padding="middle"), "padding", "'middle'")
    _raises(lambda: ops.maxpool2d_forward(x, 9), "max_pool2d", "9x9", "8x8")
    y = ops.maxpool2d_forward(x, 2)
    _raises(lambda: ops.maxpool2d_backward(x, y, np.zeros((2, 3, 4, 3), np.float32), 2), "max_pool2d backward",
            "(2, 3, 4, 3)", "(2, 4, 4, 3)")


def test_bad_input_dense():
    x = np.zeros((4, 10), np.float32)
    w = np.zeros((10, 3), np.float32)
    b = np.zeros(3, np.float32)
    _raises(lambda: ops.dense_forward(x, np.zeros((9, 3), np.float32), b), "dense", "(9, 3)", "(4, 10)")
    _raises(lambda: ops.dense_forward(x, w, np.zeros(4, np.float32)), "dense", "bias", "(4,)", "(3,)")
    _raises(lambda: ops.dense_forward(x[:0], w, b), "dense", "batch size is 0")
    _raises(lambda: ops.dense_forward(x.reshape(4, 10, 1), w, b), "dense", "2-D", "(4, 10, 1)")


def test_bad_input_loss_and_dropout():
    logits = np.zeros((3, 4), np.float32)
    _raises(lambda: ops.softmax_cross_entropy(logits, np.array([0, 4, 1], np.int32)), "softmax_cross_entropy",
            "label 4", "[0, 4)")
    _raises(lambda: ops.softmax_cross_entropy(logits, np.array([0, -1, 1], np.int32)), "label -1")
    _raises(lambda: ops.softmax_cross_entropy(logits, np.array([0, 1], np.int32)), "softmax_cross_entropy",
            "2 class indices for 3")
    _raises(lambda: ops.softmax_cross_entropy(logits, np.zeros((3, 5), np.float32)), "softmax_cross_entropy",
            "(3, 5)", "(3, 4)")
    x = np.zeros((3, 4), np.float32)
    for rate in (1.0, -0.1, 1.5):
        _raises(lambda: ops.dropout_forward(x, rate), "dropout", "rate", "[0, 1)")
    _raises(lambda: ops.dropout_backward(x, 1.0), "dropout", "rate")


def test_bad_input_optimizers_and_decode():
    p = np.zeros(5, np.float32)
    _raises(lambda: ops.adam_step(p, np.zeros(4, np.float32), p, p), "adam", "(4,)", "(5,)")
    _raises(lambda: ops.sgd_step(p, p, np.zeros(6, np.float32)), "sgd", "(6,)", "(5,)")
    _raises(lambda: ops.decode_u8(np.zeros((2, 3), np.uint8), [1.0], [0.0]), "decode_u8", "3")


def test_bad_input_thread_count():
    _raises(lambda: _core.set_num_threads(0), "set_num_threads", "0")


def test_unknown_device():
    x = np.zeros((1, 4, 4, 1), np.float32)
    with pytest.raises((ValueError, RuntimeError)):
        ops.relu_forward(x, device="tpu")


def philox_uniform(seed, stream, n):
    """rng::uniform for elements 0..n-1, written from the Philox4x32-10 definition (Salmon et al.)."""
    blocks = np.arange((n + 3) // 4, dtype=np.uint64)
    M = np.uint64(0xFFFFFFFF)
    c = [blocks & M, blocks >> np.uint64(32), np.full_like(blocks, stream & 0xFFFFFFFF),
         np.full_like(blocks, stream >> 32)]
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & M, (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & M]
        k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
        k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
    bits = np.stack(c, axis=1).reshape(-1)[:n]
    return (bits >> np.uint64(8)).astype(np.float64) / 16777216.0


@pytest.mark.parametrize("n,seed,stream", [(1, 0, 0), (7, 1, 2), (1001, 2**40 + 5, 2**33 + 9)])
def test_dropout_mask_is_philox(n, seed, stream):
    # The mask is a documented function of (seed, stream, index), the same on every backend.
    rate = 0.37
    y = ops.dropout_forward(np.ones(n, np.float32), rate, seed=seed, stream=stream)
    keep = philox_uniform(seed, stream, n) >= np.float32(rate)
    np.testing.assert_array_equal(y != 0, keep)


@pytest.mark.parametrize("shape,stride", [((1, 4, 4, 128, 40), 1), ((1, 3, 5, 16, 17), 1), ((2, 6, 6, 8, 33), 2)])
@pytest.mark.parametrize("nt", [1, 2, 3])
def test_conv2d_few_output_pixels_split_by_filters(threads, shape, stride, nt):
    # Fewer than 64 output pixels in the whole batch (a deep layer at batch 1): the im2col path splits
    # the filters over the threads, 16 at a time; the bits do not depend on the thread count.
    n, h, w, c, f = shape
    rng = np.random.default_rng(sum(shape) + stride)
    x, wt, b = randn(rng, n, h, w, c), randn(rng, 3, 3, c, f), randn(rng, f)
    _core.set_num_threads(1)
    y1 = ops.conv2d_forward(x, wt, b, strides=(stride, stride), padding="same", relu=True)
    _core.set_num_threads(nt)
    np.testing.assert_array_equal(ops.conv2d_forward(x, wt, b, strides=(stride, stride), padding="same", relu=True), y1)
    close(y1, ref.conv2d_forward(x, wt, b, (stride, stride), "same", True))


# shape (n, h, w, c, f), kernel, stride: each CPU path (Winograd F(4,3) and F(2,3), few output
# pixels, im2col, the direct kernel of few input channels) with a residual added before the ReLU
RESIDUAL_CASES = [((4, 12, 12, 16, 24), 3, 1), ((4, 6, 6, 16, 16), 3, 1), ((1, 4, 4, 32, 24), 3, 1),
                  ((3, 9, 7, 8, 12), 5, 1), ((2, 10, 10, 3, 16), 3, 1), ((2, 9, 9, 16, 32), 3, 2),
                  ((2, 7, 9, 17, 19), 3, 1)]


@pytest.mark.parametrize("shape,k,stride", RESIDUAL_CASES)
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_forward_with_residual(shape, k, stride, relu, bias):
    # y = act(conv(x) + b + residual): a residual block's Add and ReLU in the convolution's output stage.
    n, h, w, c, f = shape
    rng = np.random.default_rng(sum(shape) + k + stride)
    x, wt = randn(rng, n, h, w, c), randn(rng, k, k, c, f)
    b = randn(rng, f) if bias else None
    plain = ops.conv2d_forward(x, wt, b, strides=stride, padding="same")
    res = randn(rng, *plain.shape)
    y = ops.conv2d_forward(x, wt, b, strides=stride, padding="same", relu=relu, residual=res)
    conv = ref.conv2d_forward(x, wt, b if bias else np.zeros(f, np.float32), (stride, stride), "same")
    expected = conv + np.asarray(res, np.float64)
    close(y, np.maximum(expected, 0.0) if relu else expected)


# shape (n, h, w, c, f), kernel, stride, padding: each CPU backward-data path (Winograd F(4,3) and
# F(2,3), the pointwise GEMM, im2col + col2im for a 1x1 of stride 2, the direct kernel's shapes, 5x5)
ADD_TO_CASES = [((4, 12, 12, 16, 24), 3, 1, "same"), ((3, 6, 6, 16, 16), 3, 1, "same"),
                ((2, 7, 9, 17, 19), 3, 1, "same"), ((3, 6, 6, 9, 17), 1, 1, "same"), ((2, 9, 9, 16, 32), 1, 2, "same"),
                ((2, 9, 9, 16, 32), 3, 2, "same"), ((2, 10, 10, 3, 16), 3, 1, "same"),
                ((2, 16, 16, 32, 64), 3, 2, "same"), ((3, 9, 7, 8, 12), 5, 1, "valid")]


@pytest.mark.parametrize("shape,k,stride,pad", ADD_TO_CASES)
@pytest.mark.parametrize("relu", [False, True])
def test_conv2d_backward_adds_into_the_gradient_gathered_so_far(shape, k, stride, pad, relu):
    # A tensor read by several layers (a residual block's input) gathers its gradient in place: the
    # convolution adds its dx in the backward-data's output stage (add_to) instead of a temporary
    # added afterwards. dw and db are the same as without.
    n, h, w, c, f = shape
    rng = np.random.default_rng(sum(shape) + 7 * k + stride)
    x, wt, b = randn(rng, n, h, w, c), randn(rng, k, k, c, f), randn(rng, f)
    y = ops.conv2d_forward(x, wt, b, strides=stride, padding=pad, relu=relu)
    dy, gathered = randn(rng, *y.shape), randn(rng, *x.shape) * 3
    dx, dw, db = ops.conv2d_backward(x, wt, y, dy, strides=stride, padding=pad, relu=relu)
    dx_sum, dw2, db2 = ops.conv2d_backward(x, wt, y, dy, strides=stride, padding=pad, relu=relu, add_to=gathered)
    close(dx_sum, np.asarray(gathered, np.float64) + ref.conv2d_backward(x, wt, y, dy, (stride, stride), pad, relu)[0])
    np.testing.assert_allclose(dx_sum, gathered + dx, rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(dw2, dw)
    np.testing.assert_array_equal(db2, db)


def test_conv2d_backward_add_to_is_checked():
    rng = np.random.default_rng(4)
    x, wt = randn(rng, 2, 8, 8, 16), randn(rng, 3, 3, 16, 16)
    dy = randn(rng, 2, 8, 8, 16)
    _raises(lambda: ops.conv2d_backward(x, wt, None, dy, padding="same", add_to=randn(rng, 2, 8, 8, 15)),
            "conv2d_backward", "add_to", "(2, 8, 8, 15)")
    _raises(lambda: ops.conv2d_backward(x, wt, None, dy, padding="same", need_dx=False, add_to=x),
            "conv2d_backward", "add_to", "need_dx")


def test_conv2d_forward_residual_shape_is_checked():
    rng = np.random.default_rng(3)
    x, wt = randn(rng, 2, 8, 8, 16), randn(rng, 3, 3, 16, 16)
    _raises(lambda: ops.conv2d_forward(x, wt, None, padding="same", residual=randn(rng, 2, 8, 8, 15)),
            "conv2d", "residual", "(2, 8, 8, 15)")
