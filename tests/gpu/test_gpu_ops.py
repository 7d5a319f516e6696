"""Every operator on the GPU against the CPU backend, through hpcnn._core.ops.

Tolerances (TF32 off, so the GPU does IEEE float32 FMA math like the CPU, only in another order):
  - convolution / dense (cuDNN, cuBLAS vs OpenBLAS): rtol 1e-4, atol 1e-4 x the output's scale;
  - element-wise ops, softmax, loss, optimizers: rtol 1e-5..1e-6 (expf/logf differ by <= 2 ulp);
  - max-pool forward/backward and dropout masks: bit for bit (same comparisons, same additions).
A TF32 case (compute capability >= 8.0 only; the one test the TF32 rule of tests/conftest.py leaves
TF32 on for) checks that TF32 is on by default and the tensor-core path at rtol/atol 1e-2.

Without a usable GPU the whole module is skipped with the reason (`pytest -rs` shows it).
"""
import numpy as np
import pytest

from hpcnn import _core

ops = _core.ops
_REASON = _core.cuda_unavailable_reason()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(bool(_REASON), reason=f"no usable GPU: {_REASON}"),
]  # TF32 off: the TF32 rule of tests/conftest.py (the gpu mark), but for the `tf32`-marked test

GPU = "gpu:0"




def rng(seed=0):
    return np.random.default_rng(seed)


def close(gpu, cpu, rtol=1e-4, atol_scale=1e-4, what=""):
    gpu, cpu = np.asarray(gpu), np.asarray(cpu)
    assert gpu.shape == cpu.shape, (what, gpu.shape, cpu.shape)
    scale = max(float(np.max(np.abs(cpu))), 1e-6)
    np.testing.assert_allclose(gpu, cpu, rtol=rtol, atol=atol_scale * scale, err_msg=what)


# ------------------------------------------------------------------ conv2d
CONV_CASES = [
    # (x shape, kernel shape, stride, padding)
    ((4, 32, 32, 3), (3, 3, 3, 32), 1, "same"),    # the tutorial CNN's first layer
    ((4, 30, 30, 32), (3, 3, 32, 32), 1, "valid"),
    ((3, 16, 16, 8), (3, 3, 8, 16), 2, "same"),    # odd total padding: more at the bottom/right
    ((2, 15, 17, 5), (2, 2, 5, 7), 1, "same"),     # even kernel: asymmetric padding
    ((2, 9, 9, 6), (5, 5, 6, 4), 2, "valid"),
    ((5, 8, 8, 16), (1, 1, 16, 8), 1, "valid"),    # point-wise
    ((2, 28, 28, 1), (5, 5, 1, 32), 1, "same"),    # DeepMNIST's first layer
]


@pytest.mark.parametrize("xs,ks,stride,padding", CONV_CASES)
@pytest.mark.parametrize("relu", [False, True])
def test_conv2d_forward_backward(xs, ks, stride, padding, relu):
    r = rng(1)
    x = r.standard_normal(xs).astype(np.float32)
    w = (r.standard_normal(ks) * 0.2).astype(np.float32)
    b = r.standard_normal(ks[-1]).astype(np.float32)
    y_cpu = ops.conv2d_forward(x, w, b, stride, padding, relu, device="cpu")
    y_gpu = ops.conv2d_forward(x, w, b, stride, padding, relu, device=GPU)
    close(y_gpu, y_cpu, what="conv2d forward")

    dy = r.standard_normal(y_cpu.shape).astype(np.float32)
    # Both backward passes get the CPU's forward output, so the ReLU masks are the same.
    g_cpu = ops.conv2d_backward(x, w, y_cpu, dy, stride, padding, relu, True, device="cpu")
    g_gpu = ops.conv2d_backward(x, w, y_cpu, dy, stride, padding, relu, True, device=GPU)
    for name, a, c in zip(("dx", "dw", "db"), g_gpu, g_cpu):
        close(a, c, what=f"conv2d backward {name}")
    # dx added into the gradient gathered so far (a tensor read by several layers): scratch + add kernel
    gathered = r.standard_normal(xs).astype(np.float32)
    dx_sum = ops.conv2d_backward(x, w, y_cpu, dy, stride, padding, relu, True, device=GPU, add_to=gathered)[0]
    close(dx_sum, gathered + g_cpu[0], what="conv2d backward dx added into add_to")


def test_conv2d_backward_without_dx_and_repeatable():
    r = rng(2)
    x = r.standard_normal((4, 12, 12, 8)).astype(np.float32)
    w = (r.standard_normal((3, 3, 8, 16)) * 0.2).astype(np.float32)
    dy = r.standard_normal((4, 12, 12, 16)).astype(np.float32)
    dx, dw, db = ops.conv2d_backward(x, w, None, dy, 1, "same", False, False, device=GPU)
    assert dx is None
    _, dw_c, db_c = ops.conv2d_backward(x, w, None, dy, 1, "same", False, False, device="cpu")
    close(dw, dw_c, what="dw")
    close(db, db_c, what="db")
    # the bias gradient is our deterministic column sum: identical on a second run
    _, dw2, db2 = ops.conv2d_backward(x, w, None, dy, 1, "same", False, False, device=GPU)
    assert np.array_equal(db, db2)


@pytest.mark.tf32  # the TF32 rule (tests/conftest.py) leaves the switch as the process has it
def test_tf32_on_by_default_and_within_its_own_tolerance():
    assert _core.cuda_get_tf32() is True, "TF32 is on by default (as in TensorFlow)"
    if not _core.cuda_tf32_supported(0):
        pytest.skip("GPU 0 has no TF32 tensor cores (compute capability < 8.0)")
    r = rng(3)
    x = r.standard_normal((8, 32, 32, 32)).astype(np.float32)
    w = (r.standard_normal((3, 3, 32, 64)) * 0.1).astype(np.float32)
    b = np.zeros(64, np.float32)
    y_cpu = ops.conv2d_forward(x, w, b, 1, "same", True, device="cpu")
    y_gpu = ops.conv2d_forward(x, w, b, 1, "same", True, device=GPU)
    close(y_gpu, y_cpu, rtol=1e-2, atol_scale=1e-2, what="conv2d TF32")
    xd = r.standard_normal((64, 256)).astype(np.float32)
    wd = (r.standard_normal((256, 128)) * 0.1).astype(np.float32)
    bd = np.zeros(128, np.float32)
    close(ops.dense_forward(xd, wd, bd, False, device=GPU), ops.dense_forward(xd, wd, bd, False, device="cpu"),
          rtol=1e-2, atol_scale=1e-2, what="dense TF32")


# ------------------------------------------------------------------ max-pool
POOL_CASES = [
    ((4, 32, 32, 32), 2, None, "valid"),
    ((3, 15, 15, 8), 2, None, "valid"),   # odd size: last row/column dropped
    ((3, 15, 15, 8), 3, 2, "same"),       # overlapping windows, padding at the bottom/right
    ((2, 9, 10, 4), 3, 1, "same"),
]


@pytest.mark.parametrize("xs,pool,strides,padding", POOL_CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_maxpool_bitwise(xs, pool, strides, padding, ties):
    r = rng(4)
    x = r.standard_normal(xs).astype(np.float32)
    if ties:  # as after a ReLU: many windows of equal zeros, the first one must win
        x = np.maximum(x, 0).astype(np.float32)
        x[:, ::2] = 0
    y_cpu = ops.maxpool2d_forward(x, pool, strides, padding, device="cpu")
    y_gpu = ops.maxpool2d_forward(x, pool, strides, padding, device=GPU)
    assert np.array_equal(y_gpu, y_cpu)
    dy = r.standard_normal(y_cpu.shape).astype(np.float32)
    dx_cpu = ops.maxpool2d_backward(x, y_cpu, dy, pool, strides, padding, device="cpu")
    dx_gpu = ops.maxpool2d_backward(x, y_cpu, dy, pool, strides, padding, device=GPU)
    assert np.array_equal(dx_gpu, dx_cpu)


# ------------------------------------------------------------------ dense
@pytest.mark.parametrize("n,i,o", [(250, 2304, 512), (7, 33, 10), (1, 5, 3), (50, 3136, 1024)])
@pytest.mark.parametrize("relu", [False, True])
def test_dense_forward_backward(n, i, o, relu):
    r = rng(5)
    x = r.standard_normal((n, i)).astype(np.float32)
    w = (r.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32)
    b = r.standard_normal(o).astype(np.float32)
    y_cpu = ops.dense_forward(x, w, b, relu, device="cpu")
    y_gpu = ops.dense_forward(x, w, b, relu, device=GPU)
    close(y_gpu, y_cpu, what="dense forward")
    dy = r.standard_normal((n, o)).astype(np.float32)
    g_cpu = ops.dense_backward(x, w, y_cpu, dy, relu, True, device="cpu")
    g_gpu = ops.dense_backward(x, w, y_cpu, dy, relu, True, device=GPU)  # same mask on both
    for name, a, c in zip(("dx", "dw", "db"), g_gpu, g_cpu):
        close(a, c, what=f"dense backward {name}")


# ------------------------------------------------------------------ activations
def test_relu_and_softmax():
    r = rng(6)
    x = r.standard_normal((64, 10)).astype(np.float32) * 5
    x[0, :3] = 0.0
    dy = r.standard_normal(x.shape).astype(np.float32)
    assert np.array_equal(ops.relu_forward(x, device=GPU), ops.relu_forward(x, device="cpu"))
    y = ops.relu_forward(x, device="cpu")
    assert np.array_equal(ops.relu_backward(y, dy, device=GPU), ops.relu_backward(y, dy, device="cpu"))
    s_cpu = ops.softmax_forward(x, device="cpu")
    s_gpu = ops.softmax_forward(x, device=GPU)
    close(s_gpu, s_cpu, rtol=1e-5, atol_scale=1e-6, what="softmax")
    close(ops.softmax_backward(s_cpu, dy, device=GPU), ops.softmax_backward(s_cpu, dy, device="cpu"),
          rtol=1e-5, atol_scale=1e-6, what="softmax backward")


@pytest.mark.parametrize("shape", [(250, 512), (3, 7, 11), (1,)])
@pytest.mark.parametrize("rate", [0.0, 0.25, 0.5])
def test_dropout_masks_bitwise(shape, rate):
    x = rng(7).standard_normal(shape).astype(np.float32)
    for seed, stream in [(0, 0), (1234, 7), (2**40 + 3, 2**33)]:
        y_cpu = ops.dropout_forward(x, rate, seed, stream, device="cpu")
        y_gpu = ops.dropout_forward(x, rate, seed, stream, device=GPU)
        assert np.array_equal(y_gpu, y_cpu)
        assert np.array_equal(ops.dropout_backward(x, rate, seed, stream, device=GPU),
                              ops.dropout_backward(x, rate, seed, stream, device="cpu"))


# ------------------------------------------------------------------ loss
@pytest.mark.parametrize("sparse", [False, True])
def test_softmax_cross_entropy(sparse):
    r = rng(8)
    logits = (r.standard_normal((250, 10)) * 3).astype(np.float32)
    labels = r.integers(0, 10, 250).astype(np.int32)
    target = labels if sparse else np.eye(10, dtype=np.float32)[labels]
    l_cpu, c_cpu, g_cpu = ops.softmax_cross_entropy(logits, target, 1 / 250, device="cpu")
    l_gpu, c_gpu, g_gpu = ops.softmax_cross_entropy(logits, target, 1 / 250, device=GPU)
    assert l_gpu == pytest.approx(l_cpu, rel=1e-5)
    assert c_gpu == c_cpu
    close(g_gpu, g_cpu, rtol=1e-5, atol_scale=1e-5, what="dlogits")


# ------------------------------------------------------------------ optimizers
def test_adam_step():
    r = rng(9)
    n = 100_003
    p, g = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    m, v = (r.standard_normal(n) * 0.1).astype(np.float32), (r.random(n) * 0.1).astype(np.float32)
    for t in (1, 2, 1000):
        out_c = ops.adam_step(p, g, m, v, 1e-3, 0.9, 0.999, 1e-7, t, device="cpu")
        out_g = ops.adam_step(p, g, m, v, 1e-3, 0.9, 0.999, 1e-7, t, device=GPU)
        for a, c in zip(out_g, out_c):
            np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True)])
def test_sgd_step(momentum, nesterov):
    r = rng(10)
    p, g, vel = (r.standard_normal(4097).astype(np.float32) for _ in range(3))
    out_c = ops.sgd_step(p, g, vel, 0.01, momentum, nesterov, device="cpu")
    out_g = ops.sgd_step(p, g, vel, 0.01, momentum, nesterov, device=GPU)
    for a, c in zip(out_g, out_c):
        np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ decode
def test_decode_u8():
    x = rng(11).integers(0, 256, (16, 32, 32, 3)).astype(np.uint8)
    scale, shift = [1 / 255 / 0.25, 1 / 255 / 0.5, 1 / 255], [-0.5, 0.0, 0.1]
    y_c = ops.decode_u8(x, scale, shift, device="cpu")
    y_g = ops.decode_u8(x, scale, shift, device=GPU)
    np.testing.assert_array_equal(y_g, y_c)  # one fused multiply-add on both: the same bits


# ------------------------------------------------------------------ devices
@pytest.mark.multi_gpu
def test_second_device_if_present():
    n = len(_core.cuda_devices())
    if n < 2:
        pytest.skip(f"only {n} GPU visible: the device-index test needs 2")
    r = rng(12)
    x = r.standard_normal((2, 16, 16, 4)).astype(np.float32)
    w = r.standard_normal((3, 3, 4, 8)).astype(np.float32)
    b = np.zeros(8, np.float32)
    y0 = ops.conv2d_forward(x, w, b, 1, "same", True, device="gpu:0")
    y1 = ops.conv2d_forward(x, w, b, 1, "same", True, device=f"gpu:{n - 1}")
    close(y1, y0, what="gpu:N vs gpu:0")


def test_missing_device_index_is_a_clear_error():
    n = len(_core.cuda_devices())
    with pytest.raises(RuntimeError, match="does not exist"):
        ops.relu_forward(np.ones(4, np.float32), device=f"gpu:{n + 3}")


def test_prefetch_path_orders_copy_before_compute():
    """Pinned buffer -> copy stream -> event -> compute stream: the op must see the uploaded data."""
    x = rng(13).standard_normal((250, 32, 32, 3)).astype(np.float32)
    before = _core.transfer_stats()["h2d_count"]
    for _ in range(3):
        assert np.array_equal(_core.cuda_prefetch_check(x, 0), np.maximum(x, 0))
    assert _core.transfer_stats()["h2d_count"] >= before + 3


# ---------------------------------------------------------------- issue 14: the other losses, weights, metrics
@pytest.mark.parametrize("kind,from_logits,smoothing", [("mean_squared_error", False, 0.0),
                                                        ("mean_absolute_error", False, 0.0),
                                                        ("binary_crossentropy", False, 0.1),
                                                        ("binary_crossentropy", True, 0.0)])
def test_row_loss(kind, from_logits, smoothing):
    r = rng(21)
    p = (r.standard_normal((300, 5)) if kind != "binary_crossentropy" or from_logits
         else r.uniform(0.01, 0.99, (300, 5))).astype(np.float32)
    t = (r.integers(0, 2, (300, 5)) if kind == "binary_crossentropy" else r.standard_normal((300, 5))).astype(np.float32)
    w = r.uniform(0, 2, 300).astype(np.float32)
    l_cpu, g_cpu = ops.row_loss(p, t, kind, from_logits, smoothing, w, 1 / 300, device="cpu")
    l_gpu, g_gpu = ops.row_loss(p, t, kind, from_logits, smoothing, w, 1 / 300, device=GPU)
    assert l_gpu == pytest.approx(l_cpu, rel=1e-6)
    np.testing.assert_allclose(g_gpu, g_cpu, rtol=1e-5, atol=1e-9)


def test_softmax_cross_entropy_weighted_and_smoothed():
    r = rng(22)
    logits = r.standard_normal((250, 10)).astype(np.float32)
    onehot = np.eye(10, dtype=np.float32)[r.integers(0, 10, 250)]
    w = r.uniform(0, 2, 250).astype(np.float32)
    l_cpu, c_cpu, g_cpu = ops.softmax_cross_entropy(logits, onehot, 1 / 250, "cpu", 1, w, 0.1)
    l_gpu, c_gpu, g_gpu = ops.softmax_cross_entropy(logits, onehot, 1 / 250, GPU, 1, w, 0.1)
    assert l_gpu == pytest.approx(l_cpu, rel=1e-6) and c_gpu == c_cpu
    np.testing.assert_allclose(g_gpu, g_cpu, rtol=1e-5, atol=1e-9)


def test_row_weights_and_metrics():
    r = rng(23)
    p = r.random((200, 6)).astype(np.float32)
    labels = r.integers(0, 6, 200)
    onehot = np.eye(6, dtype=np.float32)[labels]
    sw, cw = r.uniform(0, 2, 200).astype(np.float32), r.uniform(0, 2, 6).astype(np.float32)
    np.testing.assert_array_equal(ops.row_weights(labels, sw, cw, device=GPU), ops.row_weights(labels, sw, cw))
    np.testing.assert_array_equal(ops.row_weights(onehot, sw, cw, device=GPU), ops.row_weights(onehot, sw, cw))
    for name, target in [("categorical_accuracy", labels), ("top_k_categorical_accuracy", onehot),
                         ("binary_accuracy", onehot), ("mean_squared_error", onehot), ("mean_absolute_error", onehot)]:
        assert ops.metric_rows(p, target, name, 3, device=GPU) == pytest.approx(
            ops.metric_rows(p, target, name, 3), rel=1e-12), name
