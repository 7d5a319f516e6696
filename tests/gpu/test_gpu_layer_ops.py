"""Issue 13's operators and layers on the GPU against the CPU backend.

Tolerances (TF32 off, tests/conftest.py): cuDNN's batch norm against the CPU's: rtol 1e-4 of the
output's scale (other summation orders; its variance is converted from cuDNN's unbiased one, see
csrc/ops/batchnorm_cuda.cu); element-wise activations rtol 1e-5 (expf/erff/tanhf differ by a few
ulp between the host's libm and CUDA's); average/global pooling and zero padding bit for bit (the
same float operations in the same order, csrc/ops/*_body.h). Model tests train the same model on
both devices and compare every weight, the moving statistics included.

Without a usable GPU the module is skipped with the reason (`pytest -rs`); HPCNN_TEST_GPU=cpu runs
it with the CPU standing in (tests/support/gpu_target.py), to check the tests' own logic."""
import numpy as np
import pytest

import hpcnn
from tests.support.gpu_target import GPU, MARKS
from hpcnn import _core, optimizers
from hpcnn.layers import (BatchNormalization, Conv2D, Dense, GlobalAveragePooling2D, InputLayer, LeakyReLU,
                          ReLU)

ops = _core.ops
pytestmark = MARKS


def rng(seed=0):
    return np.random.default_rng(seed)


def close(gpu, cpu, rtol=1e-4, what=""):
    gpu, cpu = np.asarray(gpu, np.float64), np.asarray(cpu, np.float64)
    assert gpu.shape == cpu.shape, (what, gpu.shape, cpu.shape)
    scale = max(float(np.max(np.abs(cpu))) if cpu.size else 0.0, 1e-6)
    np.testing.assert_allclose(gpu, cpu, rtol=rtol, atol=rtol * scale, err_msg=what)


BN_SHAPES = [(8, 16, 16, 16), (5, 7, 3, 6), (32, 10), (1, 1, 1, 4), (3, 4, 4, 64)]


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_training_forward_and_backward(shape, affine, relu):
    r = rng(shape[-1])
    x = (r.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    c = shape[-1]
    g = r.standard_normal(c).astype(np.float32) if affine else None
    b = r.standard_normal(c).astype(np.float32) if affine else None
    out_c = ops.batchnorm_forward_training(x, g, b, 1e-3, relu, device="cpu")
    out_g = ops.batchnorm_forward_training(x, g, b, 1e-3, relu, device=GPU)
    for name, a, bb in zip(("y", "mean", "var (biased)", "invstd"), out_g, out_c):
        close(a, bb, what=f"batch_norm {name}")
    y, mean, _, invstd = out_c
    dy = r.standard_normal(shape).astype(np.float32)
    grads_c = ops.batchnorm_backward_training(x, y, dy, g, mean, invstd, 1e-3, relu, device="cpu")
    grads_g = ops.batchnorm_backward_training(x, y, dy, g, mean, invstd, 1e-3, relu, device=GPU)
    for name, a, bb in zip(("dx", "dgamma", "dbeta"), grads_g, grads_c):
        close(a, bb, what=f"batch_norm backward {name}")
    _, dg, db = ops.batchnorm_backward_training(x, y, dy, g, mean, invstd, 1e-3, relu, need_dx=False, device=GPU)
    close(dg, grads_c[1], what="dgamma without dx")
    close(db, grads_c[2], what="dbeta without dx")


@pytest.mark.parametrize("c", [3, 12, 70])
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_inference_param_gradients_as_the_cpu_and_deterministic(relu, c):
    """A trainable layer in inference mode: our column sums on the GPU (not cuDNN's backward with the
    moving statistics as "saved" ones) against the CPU; the same bits on a second run."""
    r = rng(7)
    x = r.standard_normal((5, 6, 7, c)).astype(np.float32)
    y = r.standard_normal(x.shape).astype(np.float32)
    dy = r.standard_normal(x.shape).astype(np.float32)
    mm, mv = r.standard_normal(c).astype(np.float32), (r.random(c) + 0.2).astype(np.float32)
    dg, db, g = ops.batchnorm_inference_param_gradients(x, y, dy, mm, mv, 1e-3, relu, device=GPU)
    dg_c, db_c, g_c = ops.batchnorm_inference_param_gradients(x, y, dy, mm, mv, 1e-3, relu, device="cpu")
    np.testing.assert_array_equal(g, g_c)  # the ReLU's mask, element for element
    close(dg, dg_c, 1e-5, "dgamma")
    close(db, db_c, 1e-5, "dbeta")
    dg2, db2, _ = ops.batchnorm_inference_param_gradients(x, y, dy, mm, mv, 1e-3, relu, device=GPU)
    assert np.array_equal(dg, dg2) and np.array_equal(db, db2)
    # the frozen backward of a layer without gamma (scale=False)
    dx = ops.batchnorm_backward_inference(y, dy, None, mv, 1e-3, relu, device=GPU)
    close(dx, ops.batchnorm_backward_inference(y, dy, None, mv, 1e-3, relu, device="cpu"), 1e-5, "frozen dx")


@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_inference_and_frozen_backward_and_moving_update(relu):
    r = rng(1)
    x = r.standard_normal((6, 5, 5, 12)).astype(np.float32)
    g, b = r.standard_normal(12).astype(np.float32), r.standard_normal(12).astype(np.float32)
    mm, mv = r.standard_normal(12).astype(np.float32), (r.random(12) + 0.2).astype(np.float32)
    y_c = ops.batchnorm_forward_inference(x, g, b, mm, mv, 1e-3, relu, device="cpu")
    close(ops.batchnorm_forward_inference(x, g, b, mm, mv, 1e-3, relu, device=GPU), y_c, what="inference")
    close(ops.batchnorm_forward_inference(x, None, None, mm, mv, 1e-3, relu, device=GPU),
          ops.batchnorm_forward_inference(x, None, None, mm, mv, 1e-3, relu, device="cpu"), what="inference, no affine")
    dy = r.standard_normal(x.shape).astype(np.float32)
    close(ops.batchnorm_backward_inference(y_c, dy, g, mv, 1e-3, relu, device=GPU),
          ops.batchnorm_backward_inference(y_c, dy, g, mv, 1e-3, relu, device="cpu"), 1e-5, "frozen backward")
    bm, bv = r.standard_normal(12).astype(np.float32), r.random(12).astype(np.float32)
    for a, bb in zip(ops.batchnorm_update_moving(mm, mv, bm, bv, 0.9, device=GPU),
                     ops.batchnorm_update_moving(mm, mv, bm, bv, 0.9, device="cpu")):
        close(a, bb, 1e-6, "moving update")


POOLS = [((4, 8, 8, 16), 2, 2, "valid"), ((2, 7, 9, 3), 2, 2, "same"), ((1, 9, 9, 5), 3, 2, "same"),
         ((2, 6, 5, 2), 3, 1, "same")]


@pytest.mark.parametrize("shape,p,s,pad", POOLS)
def test_avgpool2d_bit_for_bit(shape, p, s, pad):
    r = rng(2)
    x = r.standard_normal(shape).astype(np.float32)
    y = ops.avgpool2d_forward(x, p, s, pad, device="cpu")
    np.testing.assert_array_equal(ops.avgpool2d_forward(x, p, s, pad, device=GPU), y)
    dy = r.standard_normal(y.shape).astype(np.float32)
    np.testing.assert_array_equal(ops.avgpool2d_backward(list(shape), dy, p, s, pad, device=GPU),
                                  ops.avgpool2d_backward(list(shape), dy, p, s, pad, device="cpu"))


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_global_pooling_bit_for_bit(mode):
    r = rng(3)
    x = r.standard_normal((8, 8, 8, 64)).astype(np.float32)
    x[:, :, :, :8] = 0.0  # tied channels: the first position takes the gradient on both devices
    y = ops.global_pool2d_forward(x, mode, device="cpu")
    np.testing.assert_array_equal(ops.global_pool2d_forward(x, mode, device=GPU), y)
    dy = r.standard_normal(y.shape).astype(np.float32)
    np.testing.assert_array_equal(ops.global_pool2d_backward(x, y, dy, mode, device=GPU),
                                  ops.global_pool2d_backward(x, y, dy, mode, device="cpu"))


def test_zero_pad_and_scale_shift():
    r = rng(4)
    x = r.standard_normal((3, 5, 4, 6)).astype(np.float32)
    pad = [1, 0, 2, 3]
    y = ops.zero_pad2d_forward(x, pad, device="cpu")
    np.testing.assert_array_equal(ops.zero_pad2d_forward(x, pad, device=GPU), y)
    dy = r.standard_normal(y.shape).astype(np.float32)
    np.testing.assert_array_equal(ops.zero_pad2d_backward(list(x.shape), dy, pad, device=GPU),
                                  ops.zero_pad2d_backward(list(x.shape), dy, pad, device="cpu"))
    s, o = r.standard_normal(6).astype(np.float32), r.standard_normal(6).astype(np.float32)
    close(ops.scale_shift_forward(x, s, o, device=GPU), ops.scale_shift_forward(x, s, o, device="cpu"), 1e-6)
    close(ops.scale_shift_backward(x, s, device=GPU), ops.scale_shift_backward(x, s, device="cpu"), 1e-6)


ACTS = ["relu6", "leaky_relu", "elu", "selu", "gelu", "gelu_approximate", "tanh", "sigmoid", "hard_sigmoid", "swish",
        "softplus", "softsign", "mish"]


@pytest.mark.parametrize("name", ACTS)
def test_activations(name):
    r = rng(5)
    x = (r.standard_normal((64, 33)) * 4).astype(np.float32)
    alpha = {"leaky_relu": 0.3, "elu": 1.0}.get(name, 0.0)
    y = ops.activation_forward(x, name, alpha, device="cpu")
    close(ops.activation_forward(x, name, alpha, device=GPU), y, 1e-5, name)
    dy = r.standard_normal(x.shape).astype(np.float32)
    close(ops.activation_backward(x, y, dy, name, alpha, device=GPU),
          ops.activation_backward(x, y, dy, name, alpha, device="cpu"), 1e-5, name + " backward")


@pytest.mark.parametrize("k,s", [(3, 2), (1, 2), (3, 1)])
def test_conv2d_without_bias(k, s):
    r = rng(6)
    x = r.standard_normal((4, 16, 16, 16)).astype(np.float32)
    w = (r.standard_normal((k, k, 16, 32)) * 0.2).astype(np.float32)
    y = ops.conv2d_forward(x, w, None, s, "same", device="cpu")
    close(ops.conv2d_forward(x, w, None, s, "same", device=GPU), y, what="conv forward")
    close(ops.conv2d_forward(x, w, None, s, "same", True, device=GPU),
          ops.conv2d_forward(x, w, None, s, "same", True, device="cpu"), what="conv forward relu")
    dy = r.standard_normal(y.shape).astype(np.float32)
    g = ops.conv2d_backward(x, w, y, dy, s, "same", False, True, device=GPU, bias=False)
    c = ops.conv2d_backward(x, w, y, dy, s, "same", False, True, device="cpu", bias=False)
    assert g[2] is None and c[2] is None
    close(g[0], c[0], what="dx")
    close(g[1], c[1], what="dw")


def bn_model(seed=3):
    return hpcnn.Sequential([
        InputLayer(input_shape=(8, 8, 3)), Conv2D(8, 3, padding="same", use_bias=False),
        BatchNormalization(momentum=0.8), ReLU(), Conv2D(16, 3, strides=2, padding="same", use_bias=False),
        BatchNormalization(momentum=0.8), LeakyReLU(), GlobalAveragePooling2D(), Dense(12),
        BatchNormalization(momentum=0.8), Dense(4, activation="softmax")], seed=seed)


def test_a_bn_model_trains_the_same_on_the_gpu():
    r = rng(7)
    x, y = r.standard_normal((32, 8, 8, 3)).astype(np.float32), np.arange(32) % 4
    models = {}
    for dev in ("cpu", GPU):
        m = bn_model()
        m.compile(optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy", ["accuracy"], device=dev)
        m.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
        models[dev] = m
    names = models["cpu"].weight_names()
    for name, a, b in zip(names, models[GPU].get_weights(), models["cpu"].get_weights()):
        close(a, b, 2e-4, name)  # the moving statistics included
    close(models[GPU].predict(x), models["cpu"].predict(x), 2e-4, "predict (moving statistics)")


def test_moving_statistics_move_between_devices():
    r = rng(8)
    x, y = r.standard_normal((16, 8, 8, 3)).astype(np.float32), np.arange(16) % 4
    m = bn_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    w, p = m.get_weights(), m.predict(x)
    m.to(GPU)
    for a, b in zip(m.get_weights(), w):
        np.testing.assert_array_equal(a, b)
    close(m.predict(x), p, 1e-4, "predict after the move")
    m.layers[1].trainable = False  # frozen: inference mode, its statistics untouched by training on the GPU
    m.compile("adam", "sparse_categorical_crossentropy", device=GPU)
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    m.to("cpu")
    after = m.get_weights()
    for i in (1, 2, 3, 4):  # gamma, beta, moving_mean, moving_variance of the frozen layer
        np.testing.assert_array_equal(after[i], w[i])
    assert not np.array_equal(after[8], w[8])  # the second BatchNormalization's moving mean moved


ONE_ROW_SHAPES = [(1, 4), (1, 1, 1, 16), (1, 1, 1, 5), (1, 1, 1, 300)]


@pytest.mark.parametrize("shape", ONE_ROW_SHAPES)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_over_a_single_row_per_channel_matches_the_cpu(shape, affine, relu):
    """N*H*W == 1: the GPU runs the CPU's arithmetic without cuDNN (csrc/ops/batchnorm_body.h):
    statistics, y, dgamma and dbeta bit for bit; dx (about 0) to the rounding of its terms. The
    CPU's answer itself is checked against NumPy in test_batchnorm.py."""
    r = rng(shape[-1])
    c = shape[-1]
    x = (r.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    g = r.standard_normal(c).astype(np.float32) if affine else None
    b = r.standard_normal(c).astype(np.float32) if affine else None
    out_c = ops.batchnorm_forward_training(x, g, b, 1e-3, relu, device="cpu")
    out_g = ops.batchnorm_forward_training(x, g, b, 1e-3, relu, device=GPU)
    for name, a, bb in zip(("y", "mean", "var (biased)", "invstd"), out_g, out_c):
        np.testing.assert_array_equal(a, bb, err_msg=f"one-row batch_norm {name}")
    y, mean, _, invstd = out_c
    dy = r.standard_normal(shape).astype(np.float32)
    dx_c, dg_c, db_c = ops.batchnorm_backward_training(x, y, dy, g, mean, invstd, 1e-3, relu, device="cpu")
    dx_g, dg_g, db_g = ops.batchnorm_backward_training(x, y, dy, g, mean, invstd, 1e-3, relu, device=GPU)
    np.testing.assert_array_equal(dg_g, dg_c)
    np.testing.assert_array_equal(db_g, db_c)
    terms = np.abs((g if affine else 1.0) * invstd * dy.reshape(c)).max()
    assert np.abs(dx_g - dx_c).max() <= 1e-6 * terms
    _, dg, db = ops.batchnorm_backward_training(x, y, dy, g, mean, invstd, 1e-3, relu, need_dx=False, device=GPU)
    np.testing.assert_array_equal(dg, dg_c)
    np.testing.assert_array_equal(db, db_c)


def test_a_batch_of_one_after_global_pooling_trains_as_on_the_cpu():
    """BatchNormalization after GlobalAveragePooling2D with batch 1: one row per channel."""
    r = rng(7)
    x = r.random((3, 6, 6, 2), dtype=np.float32)
    y = np.array([0, 1, 2], np.int32)
    weights = {}
    for device in ("cpu", GPU):
        m = hpcnn.Sequential([InputLayer(input_shape=[6, 6, 2]), Conv2D(4, 3, padding="same"),
                              GlobalAveragePooling2D(), BatchNormalization(), Dense(3, activation="softmax")], seed=2)
        m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy", device=device)
        m.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0)
        weights[device] = m.get_weights()
    for k, (a, bb) in enumerate(zip(weights[GPU], weights["cpu"])):
        close(a, bb, what=f"weight {k}")
