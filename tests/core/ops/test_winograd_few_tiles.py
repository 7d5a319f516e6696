"""The Winograd forward pass of a convolution with few tiles (fewer than 32 in all: a deep layer
at batch 1, where an 8x8 output is 4 tiles of F(4x4, 3x3)): the threads split the output
channels instead of the tiles, in slices of 16 (the last one takes what is left). Against the float64
reference, with and without the fused bias + ReLU and a residual, for channel counts that are and
are not multiples of 16, and bit for bit across thread counts (each element is the same chain of
operations whichever thread computes it) and against the same image in a larger batch (where the
tiles are split instead)."""
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
