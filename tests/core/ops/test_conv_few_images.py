"""Convolutions of fewer images than threads (batch 1) keep every thread busy, and each output
element is computed as it is in a larger batch.

The Winograd forward pass of a convolution with few tiles (fewer than 32 in all: a deep layer
at batch 1, where an 8x8 output is 4 tiles of F(4x4, 3x3)): the threads split the output
channels instead of the tiles, in slices of 16 (the last one takes what is left). Against the float64
reference, with and without the fused bias + ReLU and a residual, for channel counts that are and
are not multiples of 16, and bit for bit across thread counts (each element is the same chain of
operations whichever thread computes it) and against the same image in a larger batch (where the
tiles are split instead).

The direct kernel (few input channels: a first layer on RGB; 3x3 stride 2 to at most 32 filters:
a ResNet's downsampling), which splits a batch by images, splits an image's output rows over the
threads when there are fewer images than threads.

The im2col/sgemm path (1x1 projections, strided and large-kernel convolutions, and since the
Winograd size rule ResNet50's 256- and 512-channel 3x3 layers) splits an image's output pixels
over the threads when there are fewer images than threads: ResNet50 ran most of its batch-1 call
on one of two threads. Against the float64 reference with bias, ReLU and residual; OpenBLAS may
choose another kernel for a shorter GEMM, so the same image in a batch is compared to rounding,
not bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from tests.support import ops_reference as ref
from tests.support.ops_reference import close, randn
from hpcnn import _core

ops = _core.ops

FEW_TILE_CASES = [
    # n, h, w, c, f: 4-6 tiles in all, at least 32 output channels
    (1, 8, 8, 64, 128),   # the tutorial CNN's conv3 at batch 1
    (1, 8, 8, 16, 32),    # two slices of 16
    (1, 8, 8, 24, 40),    # the last slice takes 24 channels (a masked tail)
    (1, 5, 7, 17, 33),    # partial tiles, odd channel counts
    (1, 8, 12, 32, 64),   # 6 tiles
]


@pytest.mark.parametrize("n,h,w,c,f", FEW_TILE_CASES)
@pytest.mark.parametrize("relu", [False, True])
def test_few_tiles_split_over_channels_matches_reference(threads, n, h, w, c, f, relu):
    rng = np.random.default_rng(h * w + c + f + relu)
    x, wt, b = randn(rng, n, h, w, c), randn(rng, 3, 3, c, f), randn(rng, f)
    outs = []
    for nt in (1, 2, 3):
        _core.set_num_threads(nt)
        outs.append(ops.conv2d_forward(x, wt, b, padding="same", relu=relu))
        np.testing.assert_array_equal(outs[-1], outs[0])
    close(outs[0], ref.conv2d_forward(x, wt, b, (1, 1), "same", relu))
    # the same image among others: enough tiles to split the tiles over the threads instead
    _core.set_num_threads(2)
    batch = np.concatenate([x, randn(rng, 8, h, w, c)])  # 36 tiles or more: split by tiles
    np.testing.assert_array_equal(ops.conv2d_forward(batch, wt, b, padding="same", relu=relu)[:1], outs[0])


def test_few_tiles_with_residual(threads):
    rng = np.random.default_rng(3)
    x, wt, res = randn(rng, 1, 8, 8, 32), randn(rng, 3, 3, 32, 48), randn(rng, 1, 8, 8, 48)
    want = np.maximum(ref.conv2d_forward(x, wt, np.zeros(48, np.float32), (1, 1), "same", False) + res, 0)
    for nt in (1, 2):
        _core.set_num_threads(nt)
        close(ops.conv2d_forward(x, wt, None, padding="same", relu=True, residual=res), want)


DIRECT_CASES = [
    # n, h, w, c, f, stride, padding
    (1, 32, 32, 3, 32, 1, "same"),    # the tutorial CNN's conv1 at batch 1
    (1, 32, 32, 16, 32, 2, "same"),   # ResNet-20's first downsampling at batch 1
    (1, 17, 15, 3, 16, 1, "valid"),   # odd sizes
    (1, 3, 9, 1, 8, 1, "same"),       # fewer rows than threads x 2
]


@pytest.mark.parametrize("n,h,w,c,f,stride,pad", DIRECT_CASES)
def test_direct_conv_of_one_image_split_over_rows(threads, n, h, w, c, f, stride, pad):
    rng = np.random.default_rng(h + w + c + f + stride)
    x, wt, b = randn(rng, n, h, w, c), randn(rng, 3, 3, c, f), randn(rng, f)
    outs = []
    for nt in (1, 2, 3):
        _core.set_num_threads(nt)
        outs.append(ops.conv2d_forward(x, wt, b, strides=stride, padding=pad, relu=True))
        np.testing.assert_array_equal(outs[-1], outs[0])
    close(outs[0], ref.conv2d_forward(x, wt, b, (stride, stride), pad, True))
    _core.set_num_threads(2)
    batch = np.concatenate([x, randn(rng, 3, h, w, c)])  # split by images
    np.testing.assert_array_equal(ops.conv2d_forward(batch, wt, b, strides=stride, padding=pad, relu=True)[:1],
                                  outs[0])
    res = randn(rng, *outs[0].shape)
    want = np.maximum(ref.conv2d_forward(x, wt, b, (stride, stride), pad, False) + res, 0)
    close(ops.conv2d_forward(x, wt, b, strides=stride, padding=pad, relu=True, residual=res), want)


ROWS_SPLIT_CASES = [
    # n, h, w, c, f, kernel, stride, padding: at least 64 output pixels in all
    (1, 14, 14, 64, 96, 1, 1, "valid"),    # a pointwise projection (rows are pixels)
    (1, 12, 11, 24, 40, 1, 2, "valid"),    # a strided projection (ResNet's downsampling shortcut)
    (1, 9, 9, 40, 24, 5, 1, "same"),       # a 5x5 kernel through im2col
    (1, 10, 10, 256, 256, 3, 1, "same"),   # a 3x3 layer too large for Winograd (its U over 8 MB)
    (2, 9, 10, 32, 48, 3, 2, "same"),      # two images on three threads
]


@pytest.mark.parametrize("n,h,w,c,f,k,stride,pad", ROWS_SPLIT_CASES)
def test_gemm_conv_of_fewer_images_than_threads_split_over_pixels(threads, n, h, w, c, f, k, stride, pad):
    rng = np.random.default_rng(h * w + c + f + k)
    x, wt, b = randn(rng, n, h, w, c), randn(rng, k, k, c, f), randn(rng, f)
    want = ref.conv2d_forward(x, wt, b, (stride, stride), pad, True)
    for nt in (1, 2, 3):
        _core.set_num_threads(nt)
        close(ops.conv2d_forward(x, wt, b, strides=stride, padding=pad, relu=True), want)
    res = randn(rng, *want.shape)
    want_res = np.maximum(ref.conv2d_forward(x, wt, b, (stride, stride), pad, False) + res, 0)
    close(ops.conv2d_forward(x, wt, b, strides=stride, padding=pad, relu=True, residual=res), want_res)
    batch = np.concatenate([x, randn(rng, 3, h, w, c)])  # split by images
    close(ops.conv2d_forward(batch, wt, b, strides=stride, padding=pad, relu=True)[:n], want)
