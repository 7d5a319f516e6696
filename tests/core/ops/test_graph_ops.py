"""The ops of the merging layers and of gradient accumulation (ops/add.h, ops/concat.h) on the
CPU: against float64 NumPy, concatenate's backward (split) against central differences of the
float64 forward, aliasing (an output that is an input), and bad inputs as ValueErrors naming the
op and the shapes. tests/gpu/test_gpu_graph.py runs the same ops on a GPU against these."""
import numpy as np
import pytest

from hpcnn import _core

from tests.support import ops_reference as ref

ops = _core.ops


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_add_sums_left_to_right(k):
    rng = np.random.default_rng(k)
    xs = [randn(rng, 3, 5, 4, 2) for _ in range(k)]
    want = xs[0].astype(np.float32)
    for x in xs[1:]:
        want = want + x  # float32, in the op's order: the result is bit for bit the same
    np.testing.assert_array_equal(ops.add(xs), want)
    ref.close(ops.add(xs), sum(x.astype(np.float64) for x in xs), rtol=1e-6)


def test_accumulate_and_copy():
    rng = np.random.default_rng(1)
    a, b = randn(rng, 4, 7), randn(rng, 4, 7)
    np.testing.assert_array_equal(ops.accumulate(a, b), a + b)
    np.testing.assert_array_equal(ops.accumulate(a, b.reshape(28)), a + b)  # same size, any shape
    np.testing.assert_array_equal(ops.copy(a), a)
    big = randn(rng, 3, 70_000)  # rows split over threads; one long row split in segments
    np.testing.assert_array_equal(ops.copy(big), big)
    np.testing.assert_array_equal(ops.copy(big.reshape(-1)), big.reshape(-1))


@pytest.mark.parametrize("shapes,axis", [
    ([(2, 3, 3, 4), (2, 3, 3, 1), (2, 3, 3, 3)], -1),  # channels of NHWC: a strided copy per input
    ([(2, 3, 3, 4), (2, 3, 3, 4)], 3),
    ([(2, 1, 4, 2), (2, 3, 4, 2)], 1),                  # height
    ([(2, 3, 2, 2), (2, 3, 5, 2)], -2),                 # width
    ([(3, 5), (3, 2), (3, 1)], 1),                      # flat features
])
def test_concatenate_and_split_match_numpy(shapes, axis):
    rng = np.random.default_rng(len(shapes))
    xs = [randn(rng, *s) for s in shapes]
    y = ops.concatenate(xs, axis)
    np.testing.assert_array_equal(y, np.concatenate(xs, axis=axis))
    dy = randn(rng, *y.shape)
    sizes = [s[axis] for s in shapes]
    parts = ops.split(dy, sizes, axis)
    for got, want in zip(parts, np.split(dy, np.cumsum(sizes)[:-1], axis=axis)):
        np.testing.assert_array_equal(got, want)
    skipped = ops.split(dy, sizes, axis, need=[False] + [True] * (len(sizes) - 1))
    assert skipped[0] is None
    np.testing.assert_array_equal(skipped[1], parts[1])


def test_split_is_the_gradient_of_concatenate():
    """L = sum(concatenate(xs) * r): dL/dx_i = split(r)_i, against central differences of the
    float64 forward on a sample of coordinates of every input."""
    rng = np.random.default_rng(7)
    xs = [randn(rng, 2, 3, 3, c) for c in (2, 3)]
    r = randn(rng, 2, 3, 3, 5)
    grads = ops.split(r, [2, 3], -1)
    eps = 1e-5
    for k, (x, g) in enumerate(zip(xs, grads)):
        for i in rng.choice(x.size, 8, replace=False):
            pos = np.unravel_index(i, x.shape)
            up = [v.astype(np.float64) for v in xs]
            down = [v.astype(np.float64) for v in xs]
            up[k][pos] += eps
            down[k][pos] -= eps
            num = ((np.concatenate(up, -1) * r).sum() - (np.concatenate(down, -1) * r).sum()) / (2 * eps)
            assert g[pos] == pytest.approx(num, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("call,pattern", [
    (lambda r: ops.add([r(2, 3)]), r"add: needs at least two inputs, got 1"),
    (lambda r: ops.add([r(2, 3), r(2, 4)]), r"add: input 1 has shape \(2, 4\), the output \(2, 3\)"),
    (lambda r: ops.accumulate(r(2, 3), r(2, 4)), r"accumulate: source \(2, 4\) and destination \(2, 3\) differ"),
    (lambda r: ops.concatenate([r(2, 3, 4), r(2, 2, 4)], -1), r"concatenate: part 1 has shape \(2, 2, 4\), which "
     r"does not fit \(2, 3, 8\) along axis 2"),
    (lambda r: ops.concatenate([r(2, 3), r(2, 3)], 0), r"concatenate: axis 0 is the batch axis"),
    (lambda r: ops.concatenate([r(2, 3), r(2, 3)], 2), r"concatenate: axis 2 is out of range for shape \(2, 3\)"),
    (lambda r: ops.split(r(2, 6), [2, 3], -1), r"split: the parts add up to 5 along axis 1, the whole has 6"),
    (lambda r: ops.split(r(2, 6), [2, 4], 0), r"split: axis 0 is the batch axis"),
])
def test_bad_inputs_name_the_op_and_the_shapes(call, pattern):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=pattern):
        call(lambda *s: randn(rng, *s))


def test_the_cuda_row_copy_body_runs_on_the_host():
    """The CUDA concatenate/split kernel's per-element body (ops/concat_body.h) against the CPU's
    row copies, in the host self-test (no GPU needed)."""
    checks = [(n, e, t) for n, e, t in _core.cuda_kernel_selftest() if "row copy body" in n]
    assert len(checks) == 2 and all(e <= t for _, e, t in checks), checks
