"""The operators behind issue 13's layers against float64 NumPy references (tests/support/ops_reference.py):
batch normalization (training, inference, backward, the moving update), average pooling with
Keras' padding count, global pooling, zero padding, per-channel scale and shift, the element-wise
activations, and Conv2D / Dense without a bias. Also their bad-input errors (ValueError naming the
op and the shapes). Gradients: test_layer_gradcheck.py; GPU vs CPU: test_gpu_layer_ops.py."""
import numpy as np
import pytest

from tests.support import op_cases, ops_reference as ref
from hpcnn import _core

ops = _core.ops


def rng(seed=0):
    return np.random.default_rng(seed)


# ------------------------------------------------------------------ batch normalization
# Channel counts 8/16/32/64 take the CPU's vectorized row kernels, the others its generic loops.
# And ResNet-20's stages, which bench/bench_layer_ops.py times (tests/support/op_cases.py).
@pytest.mark.parametrize("shape", [(4, 5, 6, 8), (3, 7, 7, 3), (16, 10), (1, 1, 1, 4), (2, 3, 4, 5, 6), (5, 3, 3, 16),
                                   (3, 5, 32), (2, 3, 3, 64), (7, 1, 1, 16)]
                         + [(op_cases.TEST_BATCH, h, h, c) for h, c in op_cases.RESNET20_BATCHNORM])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_training_forward(shape, affine, relu):
    r = rng(len(shape) + shape[-1])
    x = (r.standard_normal(shape) * 3 + 2).astype(np.float32)
    c = shape[-1]
    gamma = r.standard_normal(c).astype(np.float32) if affine else None
    beta = r.standard_normal(c).astype(np.float32) if affine else None
    y, mean, var, invstd = ops.batchnorm_forward_training(x, gamma, beta, 1e-3, relu)
    y_ref, mean_ref, var_ref = ref.batchnorm_training(x, gamma, beta, 1e-3, relu)
    ref.close(y, y_ref, 1e-5)
    ref.close(mean, mean_ref, 1e-5)
    ref.close(var, var_ref, 1e-5)  # the BIASED variance (Keras' ops.moments), not n/(n-1) of it
    ref.close(invstd, 1 / np.sqrt(var_ref + 1e-3), 1e-5)


def test_batchnorm_variance_survives_a_large_mean():
    """A channel at 1e4 +- 1: a one-pass sum of squares in float would lose the variance entirely."""
    r = rng(1)
    x = (1e4 + r.standard_normal((64, 8, 8, 4))).astype(np.float32)
    _, mean, var, _ = ops.batchnorm_forward_training(x, None, None)
    _, mean_ref, var_ref = ref.batchnorm_training(x, None, None)
    ref.close(mean, mean_ref, 1e-6)
    np.testing.assert_allclose(var, var_ref, rtol=1e-3)


def test_batchnorm_is_deterministic_and_thread_count_independent_in_value(threads):
    r = rng(2)
    x = r.standard_normal((32, 16, 16, 16)).astype(np.float32)
    a = ops.batchnorm_forward_training(x, None, None)
    b = ops.batchnorm_forward_training(x, None, None)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    _core.set_num_threads(1)
    c = ops.batchnorm_forward_training(x, None, None)
    for u, v in zip(a, c):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_inference_forward(relu):
    r = rng(3)
    x = r.standard_normal((5, 4, 4, 6)).astype(np.float32)
    g, b = r.standard_normal(6).astype(np.float32), r.standard_normal(6).astype(np.float32)
    mm, mv = r.standard_normal(6).astype(np.float32), r.random(6).astype(np.float32) + 0.1
    y = ops.batchnorm_forward_inference(x, g, b, mm, mv, 1e-3, relu)
    ref.close(y, ref.batchnorm_inference(x, g, b, mm, mv, 1e-3, relu), 1e-5)
    y0 = ops.batchnorm_forward_inference(x, None, None, mm, mv, 0.01)
    ref.close(y0, ref.batchnorm_inference(x, None, None, mm, mv, 0.01), 1e-5)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("c", [7, 16, 32])
def test_batchnorm_backward_matches_the_closed_form(relu, c):
    """dbeta = sum g, dgamma = sum g*xhat, dx = gamma*invstd*(g - mean(g) - xhat*mean(g*xhat))."""
    r = rng(4)
    x = (r.standard_normal((6, 5, 5, c)) * 2 - 1).astype(np.float32)
    g = r.standard_normal(c).astype(np.float32)
    b = r.standard_normal(c).astype(np.float32)
    y, mean, var, invstd = ops.batchnorm_forward_training(x, g, b, 1e-3, relu)
    dy = r.standard_normal(x.shape).astype(np.float32)
    dy_before = dy.copy()
    dx, dg, db = ops.batchnorm_backward_training(x, y, dy, g, mean, invstd, 1e-3, relu)
    np.testing.assert_array_equal(dy, dy_before)  # the binding never hands the caller's array to the op
    xd = x.astype(np.float64).reshape(-1, c)
    _, m, v = ref.batchnorm_training(x, g, b)
    gd = dy.astype(np.float64).reshape(-1, c) * ((y.reshape(-1, c) > 0) if relu else 1)
    xhat = (xd - m) / np.sqrt(v + 1e-3)
    n = xd.shape[0]
    ref.close(db, gd.sum(0), 1e-5)
    ref.close(dg, (gd * xhat).sum(0), 1e-4)
    dx_ref = g / np.sqrt(v + 1e-3) * (gd - gd.sum(0) / n - xhat * (gd * xhat).sum(0) / n)
    ref.close(dx.reshape(-1, c), dx_ref, 1e-4)
    none_dx, dg2, db2 = ops.batchnorm_backward_training(x, y, dy, g, mean, invstd, 1e-3, relu, need_dx=False)
    assert none_dx is None
    np.testing.assert_array_equal(dg2, dg)
    np.testing.assert_array_equal(db2, db)


def test_batchnorm_inference_backward_and_moving_update():
    r = rng(5)
    y = r.standard_normal((3, 4, 4, 5)).astype(np.float32)
    dy = r.standard_normal(y.shape).astype(np.float32)
    g, mv = r.standard_normal(5).astype(np.float32), r.random(5).astype(np.float32)
    dx = ops.batchnorm_backward_inference(y, dy, g, mv, 1e-3, False)
    ref.close(dx, dy * g / np.sqrt(mv.astype(np.float64) + 1e-3), 1e-5)
    dx_relu = ops.batchnorm_backward_inference(y, dy, g, mv, 1e-3, True)
    ref.close(dx_relu, (y > 0) * dy * g / np.sqrt(mv.astype(np.float64) + 1e-3), 1e-5)
    mm0, mv0, bm, bv = (r.standard_normal(5).astype(np.float32) for _ in range(4))
    mm1, mv1 = ops.batchnorm_update_moving(mm0, mv0, bm, bv, 0.9)
    ref.close(mm1, mm0 * 0.9 + bm * 0.1, 1e-6)
    ref.close(mv1, mv0 * 0.9 + bv * 0.1, 1e-6)


@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_inference_param_gradients_against_numpy(relu):
    """A trainable layer in inference mode: dbeta = sum g, dgamma = sum g * (x - moving_mean) /
    sqrt(moving_var + eps), g = dy masked by y > 0 with relu (returned as the op leaves it in dy)."""
    r = rng(6)
    x = r.standard_normal((3, 4, 4, 5)).astype(np.float32)
    y = r.standard_normal(x.shape).astype(np.float32)
    dy = r.standard_normal(x.shape).astype(np.float32)
    mm, mv = r.standard_normal(5).astype(np.float32), (r.random(5) + 0.1).astype(np.float32)
    dg, db, g = ops.batchnorm_inference_param_gradients(x, y, dy, mm, mv, 1e-3, relu)
    g_ref = (y > 0) * dy if relu else dy
    np.testing.assert_array_equal(g, g_ref.astype(np.float32))
    xhat = (x.astype(np.float64) - mm) / np.sqrt(mv.astype(np.float64) + 1e-3)
    ref.close(db, g_ref.reshape(-1, 5).sum(0), 1e-5)
    ref.close(dg, (g_ref * xhat).reshape(-1, 5).sum(0), 1e-5)


@pytest.mark.parametrize("call,match", [
    (lambda: ops.batchnorm_forward_training(np.ones((4,), np.float32), None, None), r"batch_norm: input must have a "
     r"batch and a channel axis|needs a batch and a channel axis"),
    (lambda: ops.batchnorm_forward_training(np.ones((4, 3), np.float32), np.ones(2, np.float32), None),
     r"batch_norm: gamma has shape \(2,\), expected \(3,\)"),
    (lambda: ops.batchnorm_forward_training(np.ones((4, 3), np.float32), None, None, 0.0),
     r"batch_norm: epsilon must be positive"),
    (lambda: ops.batchnorm_forward_inference(np.ones((4, 3), np.float32), None, None, np.zeros(3, np.float32),
                                             np.ones(4, np.float32)),
     r"batch_norm \(inference\): moving variance has shape \(4,\), expected \(3,\)"),
    (lambda: ops.batchnorm_inference_param_gradients(np.ones((4, 3), np.float32), None, np.ones((4, 3), np.float32),
                                                     np.zeros(2, np.float32), np.ones(3, np.float32)),
     r"batch_norm parameter gradients \(inference\): moving mean has shape \(2,\), expected \(3,\)"),
    (lambda: ops.batchnorm_inference_param_gradients(np.ones((4, 3), np.float32), np.ones((4, 2), np.float32),
                                                     np.ones((4, 3), np.float32), np.zeros(3, np.float32),
                                                     np.ones(3, np.float32), relu=True),
     r"batch_norm parameter gradients \(inference\): output has shape \(4, 2\), expected \(4, 3\)"),
    (lambda: ops.batchnorm_update_moving(np.zeros(3, np.float32), np.zeros(3, np.float32), np.zeros(3, np.float32),
                                         np.zeros(3, np.float32), 1.5), r"momentum must be in \[0, 1\]"),
])
def test_batchnorm_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ------------------------------------------------------------------ pooling and padding
POOL_CASES = [((2, 8, 8, 3), 2, 2, "valid"), ((2, 7, 9, 3), 2, 2, "same"), ((1, 9, 9, 5), 3, 2, "same"),
              ((2, 6, 5, 2), 3, 1, "same"), ((1, 11, 7, 2), 3, 2, "valid"), ((1, 1, 1, 4), 2, 2, "same"),
              ((3, 5, 5, 16), (2, 3), (1, 2), "same")]


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize("shape,pool,stride,pad", POOL_CASES)
def test_avgpool2d_forward_counts_only_in_bounds_positions(shape, pool, stride, pad):
    x = rng(6).standard_normal(shape).astype(np.float32)
    y = ops.avgpool2d_forward(x, pool, stride, pad)
    ref.close(y, ref.avgpool2d_forward(x, pair(pool), pair(stride), pad), 1e-6)


def test_avgpool2d_same_padding_corner_is_the_keras_number():
    """Keras (TensorFlow's avg_pool): a 2x2 'same' window over the last row/column of a 3x3 image
    averages the positions inside the image only."""
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    y = ops.avgpool2d_forward(x, 2, 2, "same")[0, :, :, 0]
    np.testing.assert_array_equal(y, [[2.0, 3.5], [6.5, 8.0]])  # (0+1+3+4)/4, (2+5)/2, (6+7)/2, 8/1


@pytest.mark.parametrize("shape,pool,stride,pad", POOL_CASES)
def test_avgpool2d_backward_is_the_adjoint(shape, pool, stride, pad):
    """<avgpool(x), dy> = <x, avgpool_backward(dy)> for a linear op: checks every input position."""
    r = rng(7)
    x = r.standard_normal(shape).astype(np.float32)
    y = ops.avgpool2d_forward(x, pool, stride, pad)
    dy = r.standard_normal(y.shape).astype(np.float32)
    dx = ops.avgpool2d_backward(list(x.shape), dy, pool, stride, pad)
    lhs = float((ref.avgpool2d_forward(x, pair(pool), pair(stride), pad) * dy).sum())
    assert float((x.astype(np.float64) * dx).sum()) == pytest.approx(lhs, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("shape", [(3, 8, 8, 16), (2, 1, 1, 5), (4, 7, 5, 3)])
def test_global_pooling(mode, shape):
    r = rng(8)
    x = r.standard_normal(shape).astype(np.float32)
    y = ops.global_pool2d_forward(x, mode)
    ref.close(y, ref.global_pool2d(x, mode), 1e-6)
    dy = r.standard_normal(y.shape).astype(np.float32)
    dx = ops.global_pool2d_backward(x, y, dy, mode)
    if mode == "avg":
        ref.close(dx, np.broadcast_to(dy[:, None, None, :] / (shape[1] * shape[2]), shape), 1e-6)
    else:
        flat = x.reshape(shape[0], -1, shape[3])
        win = flat.argmax(axis=1)
        want = np.zeros_like(flat)
        for n in range(shape[0]):
            want[n, win[n], np.arange(shape[3])] = dy[n]
        np.testing.assert_array_equal(dx.reshape(flat.shape), want)


def test_global_max_pool_ties_go_to_the_first_position():
    x = np.zeros((1, 2, 2, 1), np.float32)  # all tied (after a ReLU, an all-zero channel)
    y = ops.global_pool2d_forward(x, "max")
    dx = ops.global_pool2d_backward(x, y, np.ones((1, 1), np.float32), "max")
    np.testing.assert_array_equal(dx.ravel(), [1, 0, 0, 0])


@pytest.mark.parametrize("pad", [(1, 1, 1, 1), (0, 2, 3, 0), (0, 0, 0, 0), (2, 1, 0, 1)])
def test_zero_pad2d(pad):
    r = rng(9)
    x = r.standard_normal((2, 5, 4, 3)).astype(np.float32)
    y = ops.zero_pad2d_forward(x, list(pad))
    np.testing.assert_array_equal(y, ref.zero_pad2d(x, *pad).astype(np.float32))
    dy = r.standard_normal(y.shape).astype(np.float32)
    dx = ops.zero_pad2d_backward(list(x.shape), dy, list(pad))
    t, b, l, rr = pad
    np.testing.assert_array_equal(dx, dy[:, t:t + 5, l:l + 4, :])


@pytest.mark.parametrize("call,match", [
    (lambda: ops.avgpool2d_forward(np.ones((1, 1, 3, 1), np.float32), 2, 2, "valid"),
     r"avg_pool2d: a 2x2 pool with 'valid' padding does not fit a 1x3 input"),
    (lambda: ops.avgpool2d_forward(np.ones((2, 3, 1), np.float32), 2), r"avg_pool2d: input must be 4-D"),
    (lambda: ops.avgpool2d_backward([1, 4, 4, 1], np.ones((1, 3, 3, 1), np.float32), 2),
     r"avg_pool2d backward: output gradient has shape \(1, 3, 3, 1\), expected \(1, 2, 2, 1\)"),
    (lambda: ops.global_pool2d_forward(np.ones((2, 3), np.float32)), r"global_pool2d: x must be 4-D"),
    (lambda: ops.global_pool2d_backward(np.ones((1, 2, 2, 3), np.float32), None, np.ones((1, 4), np.float32)),
     r"global_avg_pool2d backward: output gradient has shape \(1, 4\), expected \(1, 3\)"),
    (lambda: ops.zero_pad2d_forward(np.ones((1, 2, 2, 1), np.float32), [1, -1, 0, 0]),
     r"zero_pad2d: padding must be >= 0"),
    (lambda: ops.scale_shift_forward(np.ones((2, 3), np.float32), np.ones(2, np.float32), np.ones(3, np.float32)),
     r"scale_shift: scale has shape \(2,\), expected \(3,\)"),
])
def test_pool_pad_scale_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_scale_shift():
    r = rng(10)
    x = r.standard_normal((4, 3, 3, 5)).astype(np.float32)
    s, o = r.standard_normal(5).astype(np.float32), r.standard_normal(5).astype(np.float32)
    ref.close(ops.scale_shift_forward(x, s, o), x.astype(np.float64) * s + o, 1e-6)
    dy = r.standard_normal(x.shape).astype(np.float32)
    ref.close(ops.scale_shift_backward(dy, s), dy.astype(np.float64) * s, 1e-6)


# ------------------------------------------------------------------ activations
ACT_CASES = [(name, {"leaky_relu": 0.3, "elu": 1.5}.get(name, 0.0)) for name in ref.ACTIVATIONS if name != "relu"]


@pytest.mark.parametrize("name,alpha", ACT_CASES)
def test_activation_forward(name, alpha):
    x = np.concatenate([np.linspace(-8, 8, 162), [-30.0, 30.0, -3.0, 3.0, 6.0, 0.0]]).astype(np.float32)
    y = ops.activation_forward(x.reshape(3, -1), name, alpha)
    ref.close(y.ravel(), ref.activation(name, x, alpha), 2e-6)


def test_activation_keras_numbers():
    """A few values as Keras defines them (written out, independent of the reference above)."""
    x = np.array([-1.0, 0.0, 1.0], np.float32)
    np.testing.assert_allclose(ops.activation_forward(x, "gelu"), [-0.15865525, 0.0, 0.84134475], rtol=1e-6)
    np.testing.assert_allclose(ops.activation_forward(x, "gelu_approximate"), [-0.15880801, 0.0, 0.841192],
                               rtol=1e-5)
    np.testing.assert_allclose(ops.activation_forward(x, "swish"), [-0.26894142, 0.0, 0.7310586], rtol=1e-6)
    np.testing.assert_allclose(ops.activation_forward(x, "hard_sigmoid"), [1 / 3, 0.5, 2 / 3], rtol=1e-6)
    np.testing.assert_allclose(ops.activation_forward(x, "selu"), [-1.1113307, 0.0, 1.050701], rtol=1e-6)
    np.testing.assert_allclose(ops.activation_forward(x, "leaky_relu", 0.3), [-0.3, 0.0, 1.0], rtol=1e-6)


@pytest.mark.parametrize("name", [n for n in ref.ACTIVATIONS if n not in ("linear", "relu", "relu6")])
def test_activation_relative_accuracy(name):
    """Relative error against float64 over [-20, 20] and down to 1e-30 in magnitude, wherever the
    value is above 1e-30: a few ulp (the CPU and the GPU share these formulas). The GELUs take e^z of
    a computed z (-x^2/2, or 2u with u cubic in x), whose own rounding, |z| * 6e-8, is the float
    limit there: their bound grows with |z|."""
    x = np.concatenate([np.linspace(-20, 20, 40001), -np.logspace(-30, 1.3, 500),
                        np.logspace(-30, 1.3, 500)]).astype(np.float32)
    alpha = {"leaky_relu": 0.3, "elu": 1.0}.get(name, 0.0)
    got = ops.activation_forward(x, name, alpha).astype(np.float64)
    want = ref.activation(name, x, alpha)
    xd = x.astype(np.float64)
    z = {"gelu": xd * xd / 2, "gelu_approximate": np.abs(2 * np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3))}
    bound = 1e-6 + 2e-7 * z.get(name, np.zeros_like(xd))
    shown = np.abs(want) > 1e-30
    rel = np.abs(got - want)[shown] / np.abs(want[shown])
    worst = np.argmax(rel / bound[shown])
    assert (rel <= bound[shown]).all(), (name, float(x[shown][worst]), float(rel[worst]))


def test_activation_stays_finite_at_extremes():
    x = np.array([-1e4, -100.0, 100.0, 1e4], np.float32)
    for name, alpha in ACT_CASES:
        y = ops.activation_forward(x, name, alpha)
        dx = ops.activation_backward(x, y, np.ones_like(x), name, alpha)
        if name in ("linear",):
            continue
        assert np.isfinite(y).all() or name in ("elu", "selu"), (name, y)
        assert np.isfinite(dx).all(), (name, dx)


def test_activation_unknown_name():
    with pytest.raises(ValueError, match=r"unknown activation 'tanhh': use 'linear', 'relu'"):
        ops.activation_forward(np.ones(3, np.float32), "tanhh")


# ------------------------------------------------------------------ Conv2D / Dense without a bias
@pytest.mark.parametrize("k,s,pad", [(3, 1, "same"), (3, 2, "same"), (1, 2, "valid"), (3, 2, "valid"),
                                     (1, 1, "valid")])
@pytest.mark.parametrize("c", [3, 16])
def test_conv2d_without_bias(k, s, pad, c):
    r = rng(11)
    x = r.standard_normal((3, 9, 8, c)).astype(np.float32)
    w = (r.standard_normal((k, k, c, 16)) * 0.3).astype(np.float32)
    y = ops.conv2d_forward(x, w, None, s, pad)
    ref.close(y, ref.conv2d_forward(x, w, np.zeros(16), (s, s), pad), 1e-4)
    dy = r.standard_normal(y.shape).astype(np.float32)
    dx, dw, db = ops.conv2d_backward(x, w, y, dy, s, pad, bias=False)
    assert db is None
    dx_ref, dw_ref, _ = ref.conv2d_backward(x, w, y, dy, (s, s), pad)
    ref.close(dx, dx_ref, 1e-4)
    ref.close(dw, dw_ref, 1e-4)


@pytest.mark.parametrize("row", op_cases.RESNET20_DOWNSAMPLE_CONVS, ids=lambda row: row.label())
def test_conv2d_benchmark_rows_without_bias(row):
    """ResNet-20's downsampling convolutions as bench/bench_layer_ops.py times them, at a small batch."""
    n, h, w_, c, f, k, s, pad = row.case()
    r = rng(13)
    x = r.standard_normal((n, h, w_, c)).astype(np.float32)
    w = (r.standard_normal((k, k, c, f)) * 0.3).astype(np.float32)
    y = ops.conv2d_forward(x, w, None, s, pad)
    ref.close(y, ref.conv2d_forward(x, w, np.zeros(f), (s, s), pad), 1e-4)
    dy = r.standard_normal(y.shape).astype(np.float32)
    dx, dw, db = ops.conv2d_backward(x, w, y, dy, s, pad, bias=False)
    assert db is None
    dx_ref, dw_ref, _ = ref.conv2d_backward(x, w, y, dy, (s, s), pad)
    ref.close(dx, dx_ref, 1e-4)
    ref.close(dw, dw_ref, 1e-4)


@pytest.mark.parametrize("name", op_cases.ACTIVATIONS_TIMED)
def test_activation_benchmark_rows(name):
    """Each activation bench/bench_layer_ops.py times, with its alpha, at its shape and a small batch."""
    x = rng(14).standard_normal((op_cases.TEST_BATCH, 32, 32, 16)).astype(np.float32) * 3
    y = ops.activation_forward(x, name, op_cases.ACTIVATION_ALPHA)
    ref.close(y, ref.activation(name, x, op_cases.ACTIVATION_ALPHA), 2e-6)  # test_activation_forward's


def test_dense_without_bias():
    r = rng(12)
    x, w = r.standard_normal((5, 7)).astype(np.float32), r.standard_normal((7, 3)).astype(np.float32)
    for relu in (False, True):
        y = ops.dense_forward(x, w, None, relu)
        ref.close(y, ref.dense_forward(x, w, np.zeros(3), relu), 1e-5)
        dy = r.standard_normal(y.shape).astype(np.float32)
        dx, dw, db = ops.dense_backward(x, w, y, dy, relu, bias=False)
        assert db is None
        dx_ref, dw_ref, _ = ref.dense_backward(x, w, y, dy, relu)
        ref.close(dx, dx_ref, 1e-5)
        ref.close(dw, dw_ref, 1e-5)
