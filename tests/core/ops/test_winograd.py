"""The Winograd F(2x2,3x3) / F(4x4,3x3) path of the CPU conv2d (3x3, stride 1, >= 16 input and output channels)
against the float64 references in ops_reference.py: forward (fused bias + ReLU) and backward
(dx by Winograd, dW/db by im2col+GEMM). Shapes cover both paddings, odd sizes (partial output
tiles, the asymmetric 'same' padding does not arise for stride 1 but 'valid' shrinks the output),
batch 1, images smaller than one tile, and channel counts that are not multiples of 8 (a forward
pass of fewer than 4 tiles in all goes to im2col instead: the cases that test tiny images have
batches of 4 or more). The tile
size follows the output size (F(2,3) for outputs of 1-2 rows/columns and 6x6, else F(4,3)), so both
variants run here: e.g. 3x3 'valid' has a 1x1 output (F(2,3)) and a 3x3 input gradient (F(4,3)).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.support import ops_reference as ref
from tests.support.ops_reference import close, randn
import hpcnn
from hpcnn import _core
from hpcnn import layers as L

ops = _core.ops


WINO_CASES = [
    # n, h, w, c, f, padding
    (1, 16, 16, 32, 64, "same"),   # the tutorial's conv2, batch 1
    (3, 8, 8, 64, 128, "same"),    # conv3
    (4, 4, 4, 128, 256, "same"),   # conv4: one image = one 4x4 tile (a batch of fewer than 4 tiles: im2col)
    (2, 7, 9, 17, 19, "same"),     # odd sizes: partial tiles; C, F not multiples of 8
    (1, 5, 6, 16, 16, "valid"),    # smallest channel counts that select Winograd
    (3, 9, 7, 21, 33, "valid"),    # odd output 7x5
    (4, 3, 3, 24, 20, "valid"),    # output 1x1 (one partial tile per image)
    (5, 1, 1, 16, 24, "same"),     # 1x1 image: everything but the centre tap is padding
    (1, 2, 5, 40, 17, "same"),
    (5, 11, 13, 18, 27, "same"),   # several groups per thread
    (2, 6, 6, 16, 32, "same"),     # 6x6: F(2,3) everywhere
    (2, 8, 4, 16, 24, "valid"),    # 6x2 output: F(2,3) forward and dW, F(4,3) input gradient (8x4)
]


@pytest.mark.parametrize("n,h,w,c,f,pad", WINO_CASES)
@pytest.mark.parametrize("relu", [False, True])
def test_winograd_conv2d(n, h, w, c, f, pad, relu):
    rng = np.random.default_rng(hash((n, h, w, c, f, pad, relu)) & 0xFFFF)
    x, wt, b = randn(rng, n, h, w, c), randn(rng, 3, 3, c, f), randn(rng, f)
    y = ops.conv2d_forward(x, wt, b, padding=pad, relu=relu)
    y_ref = ref.conv2d_forward(x, wt, b, (1, 1), pad, relu)
    assert y.shape == y_ref.shape
    close(y, y_ref)

    dy = randn(rng, *y.shape)
    dy_copy = dy.copy()
    dx, dw, db = ops.conv2d_backward(x, wt, y, dy, padding=pad, relu=relu)
    dx_r, dw_r, db_r = ref.conv2d_backward(x, wt, y, dy, (1, 1), pad, relu)
    assert dx.shape == x.shape
    close(dx, dx_r)
    close(dw, dw_r)
    close(db, db_r)
    np.testing.assert_array_equal(dy, dy_copy)

    none, dw2, db2 = ops.conv2d_backward(x, wt, y, dy, padding=pad, relu=relu, need_dx=False)
    assert none is None
    np.testing.assert_array_equal(dw2, dw)
    np.testing.assert_array_equal(db2, db)


def test_winograd_large_values():
    # The transforms add and subtract up to 16 inputs: relative accuracy must not depend on scale.
    rng = np.random.default_rng(11)
    x, wt, b = randn(rng, 2, 10, 10, 32) * 1e3, randn(rng, 3, 3, 32, 48) * 1e-2, randn(rng, 48)
    close(ops.conv2d_forward(x, wt, b, padding="same"), ref.conv2d_forward(x, wt, b, (1, 1), "same"))


@pytest.mark.parametrize("nt", [1, 2, 3])
def test_winograd_bitwise_reproducible(threads, nt):
    rng = np.random.default_rng(5)
    x, wt, b = randn(rng, 13, 12, 10, 24), randn(rng, 3, 3, 24, 40), randn(rng, 40)
    _core.set_num_threads(nt)
    y1 = ops.conv2d_forward(x, wt, b, padding="same", relu=True)
    y2 = ops.conv2d_forward(x, wt, b, padding="same", relu=True)
    np.testing.assert_array_equal(y1, y2)
    dy = randn(rng, *y1.shape)
    a = ops.conv2d_backward(x, wt, y1, dy, padding="same", relu=True)
    c = ops.conv2d_backward(x, wt, y1, dy, padding="same", relu=True)
    for u, v in zip(a, c):
        np.testing.assert_array_equal(u, v)
    close(a[0], ref.conv2d_backward(x, wt, y1, dy, (1, 1), "same", True)[0])


def test_winograd_per_image_independent_of_batch():
    # An image's output does not depend on which other images share its batch or group.
    rng = np.random.default_rng(6)
    x, wt, b = randn(rng, 9, 8, 8, 16), randn(rng, 3, 3, 16, 16), randn(rng, 16)
    full = ops.conv2d_forward(x, wt, b, padding="same")
    for i in (0, 4, 8):
        close(ops.conv2d_forward(x[i:i + 1], wt, b, padding="same")[0], full[i], rtol=1e-6)


@pytest.mark.parametrize("shape", [(5, 12, 10, 24, 40), (3, 9, 11, 16, 16), (2, 8, 8, 64, 64), (1, 32, 32, 16, 19)])
def test_winograd_forward_independent_of_threads_and_batch(threads, shape):
    # The forward pass splits a batch's tiles (not its images) over the threads, in blocks whose
    # boundaries move with the thread count and the batch size; every output element is still one
    # fixed chain of operations on its tile, so the bits do not move: across 1, 2 and 3 threads,
    # and between an image alone and the same image in a batch.
    n, h, w, c, f = shape
    rng = np.random.default_rng(sum(shape))
    x, wt, b = randn(rng, n, h, w, c), randn(rng, 3, 3, c, f), randn(rng, f)
    outs = []
    for nt in (1, 2, 3):
        _core.set_num_threads(nt)
        outs.append(ops.conv2d_forward(x, wt, b, padding="same", relu=True))
        np.testing.assert_array_equal(outs[-1], outs[0])
    for i in range(n):
        np.testing.assert_array_equal(ops.conv2d_forward(x[i:i + 1], wt, b, padding="same", relu=True)[0], outs[0][i])
    close(outs[0], ref.conv2d_forward(x, wt, b, (1, 1), "same", True))


def test_winograd_kernel_transform_kept_and_checked_by_value():
    # U = G g G^T is kept between forward calls and remade when the kernel's values change: a
    # kernel at the same address with other values (the allocator reuses the freed buffer of the
    # previous call's kernel) must never meet the old U.
    rng = np.random.default_rng(21)
    x, b = randn(rng, 4, 8, 8, 16), randn(rng, 24)
    kernels = [randn(rng, 3, 3, 16, 24) for _ in range(3)]
    ops.winograd_kernel_cache(clear=True)
    for _ in range(3):
        for wt in kernels:
            close(ops.conv2d_forward(x, wt, b, padding="same"), ref.conv2d_forward(x, wt, b, (1, 1), "same"))
    wt = kernels[0].copy()
    for k in range(4):
        wt[1, 1, k, k] += 1.0  # one value changed in place between calls
        close(ops.conv2d_forward(x, wt, b, padding="same"), ref.conv2d_forward(x, wt, b, (1, 1), "same"))
    stats = ops.winograd_kernel_cache()
    assert stats["made"] >= 1 and stats["bytes"] <= stats["max_bytes"]


def test_winograd_kernel_transform_reused_by_predict_and_remade_after_set_weights():
    rng = np.random.default_rng(22)
    model = hpcnn.models.Sequential([L.Input((8, 8, 16)), L.Conv2D(32, 3, padding="same", activation="relu"),
                                     L.Conv2D(16, 3, padding="same")])
    x = randn(rng, 4, 8, 8, 16)
    first = model.predict(x, verbose=0)
    ops.winograd_kernel_cache(clear=True)
    np.testing.assert_array_equal(model.predict(x, verbose=0), first)
    np.testing.assert_array_equal(model.predict(x, verbose=0), first)
    stats = ops.winograd_kernel_cache()
    assert stats["reused"] >= 2, stats  # the second call (at least) served both convolutions from entries
    weights = model.get_weights()
    weights[2] = weights[2] * 0.5  # the second convolution's kernel, changed through set_weights
    model.set_weights(weights)
    w1, b1, w2, b2 = (np.asarray(a, np.float64) for a in weights)
    expected = ref.conv2d_forward(ref.conv2d_forward(x, w1, b1, (1, 1), "same", True), w2, b2, (1, 1), "same")
    close(model.predict(x, verbose=0), expected)


def test_winograd_only_where_its_transformed_kernel_is_kept():
    # A 3x3 kernel whose transform U (and its source) would not fit the kernel cache's entry limit
    # (8 MB: 256x256 channels and up, ResNet50's last two stages) goes through im2col instead: U
    # remade on every call and streamed from memory per block of tiles lost to the sgemm at every
    # batch size measured (bench/RESULTS.md). 128x256 (5.9 MB) keeps Winograd.
    rng = np.random.default_rng(23)
    for c, f, winograd in ((128, 256, True), (256, 256, False)):
        x, wt, b = randn(rng, 2, 8, 8, c), randn(rng, 3, 3, c, f) * 0.05, randn(rng, f)
        ops.winograd_kernel_cache(clear=True)
        close(ops.conv2d_forward(x, wt, b, padding="same"), ref.conv2d_forward(x, wt, b, (1, 1), "same"))
        assert (ops.winograd_kernel_cache()["made"] > 0) == winograd, (c, f)
