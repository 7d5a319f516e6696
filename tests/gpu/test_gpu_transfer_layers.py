"""Issue 38's layers on the GPU against the CPU backend: the depthwise convolution (cuDNN's grouped
convolution, group count = the input channels) forward, input and kernel gradients on the
MobileNetV2 and EfficientNetB0 rows of op_cases and on small cases of every argument (odd 'same' totals: the explicit
padding path; depth multipliers; dilation), the hard_silu activation, the broadcast product and
Normalization's constants, and models trained on both devices (same losses, same weight updates):
DepthwiseConv2D with SeparableConv2D, and a squeeze-and-excitation block with Normalization,
Reshape, Multiply and Dropout(noise_shape=(None, 1, 1, 1)).

Tolerances (TF32 off, tests/conftest.py): the convolution sums in another order than the CPU: rtol
1e-4 of the output's scale; training as tests/support/gpu_target.py allows. Without a usable GPU the
module is skipped with the reason (`pytest -rs`); HPCNN_TEST_GPU=cpu runs it with the CPU standing in."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core
from hpcnn.layers import (Conv2D, DepthwiseConv2D, Dense, GlobalAveragePooling2D, InputLayer, SeparableConv2D)
from tests.support.gpu_target import GPU, LOSS_TOL, MARKS, UPDATE_TOL, assert_updates_close
from tests.support.op_cases import EFFICIENTNETB0_DEPTHWISE, MOBILENETV2_DEPTHWISE, TEST_BATCH

ops = _core.ops
pytestmark = MARKS


def close(gpu, cpu, rtol=1e-4, what=""):
    gpu, cpu = np.asarray(gpu, np.float64), np.asarray(cpu, np.float64)
    assert gpu.shape == cpu.shape, (what, gpu.shape, cpu.shape)
    scale = max(float(np.max(np.abs(cpu))) if cpu.size else 0.0, 1e-6)
    np.testing.assert_allclose(gpu, cpu, rtol=rtol, atol=rtol * scale, err_msg=what)


# (n, h, w, c, m, k, strides, padding, dilation, bias)
CASES = [(2, 8, 9, 3, 2, 3, 2, "same", 1, True), (1, 9, 7, 4, 3, 2, 1, "valid", 1, False),
         (2, 10, 10, 6, 1, 3, 1, "same", 2, True), (3, 5, 5, 40, 1, 5, 2, "same", 1, True)]
CASES += [(TEST_BATCH, r.h, r.h, r.c, r.m, r.k, r.s, "same", 1, False)
          for r in MOBILENETV2_DEPTHWISE + EFFICIENTNETB0_DEPTHWISE]


@pytest.mark.parametrize("case", CASES)
def test_depthwise_conv2d_gpu_matches_cpu(case):
    n, h, w, c, m, k, s, padding, d, bias = case
    r = np.random.default_rng(c)
    x = r.standard_normal((n, h, w, c)).astype(np.float32)
    kern = r.standard_normal((k, k, c, m)).astype(np.float32)
    b = r.standard_normal(c * m).astype(np.float32) if bias else None
    y_c = ops.depthwise_conv2d_forward(x, kern, b, s, padding, d, device="cpu")
    close(ops.depthwise_conv2d_forward(x, kern, b, s, padding, d, device=GPU), y_c, what="forward")
    dy = r.standard_normal(y_c.shape).astype(np.float32)
    grads_c = ops.depthwise_conv2d_backward(x, kern, dy, s, padding, d, bias=bias, device="cpu")
    grads_g = ops.depthwise_conv2d_backward(x, kern, dy, s, padding, d, bias=bias, device=GPU)
    for name, g, cc in zip(("dx", "dkernel", "dbias"), grads_g, grads_c):
        if cc is None:
            assert g is None
        else:
            close(g, cc, what=name)


def test_hard_silu_gpu_matches_cpu():
    x = np.linspace(-5, 5, 1001, dtype=np.float32).reshape(7, 143)
    y = ops.activation_forward(x, "hard_silu", 0.0, device="cpu")
    close(ops.activation_forward(x, "hard_silu", 0.0, device=GPU), y, 1e-6, "forward")
    dy = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    close(ops.activation_backward(x, y, dy, "hard_silu", 0.0, device=GPU),
          ops.activation_backward(x, y, dy, "hard_silu", 0.0, device="cpu"), 1e-6, "backward")


def test_a_depthwise_model_trains_as_on_the_cpu():
    r = np.random.default_rng(2)
    x = r.standard_normal((24, 10, 10, 3)).astype(np.float32)
    y = (np.arange(24) % 3).astype(np.int32)

    def model():
        return hpcnn.Sequential([InputLayer(input_shape=[10, 10, 3]), Conv2D(8, 1),
                                 DepthwiseConv2D(3, strides=2, padding="same", activation="relu6"),
                                 SeparableConv2D(6, 3, padding="same", activation="hard_silu"),
                                 GlobalAveragePooling2D(), Dense(3, activation="softmax")], seed=4)

    cpu, gpu = model(), model()
    for m, dev in ((cpu, "cpu"), (gpu, GPU)):
        m.compile(hpcnn.optimizers.SGD(learning_rate=0.05), "sparse_categorical_crossentropy", device=dev)
    gpu.set_weights(cpu.get_weights())
    w0 = cpu.get_weights()
    h_c = cpu.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    h_g = gpu.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h_g["loss"], h_c["loss"], rtol=LOSS_TOL["gpu"])
    assert_updates_close(gpu.get_weights(), cpu.get_weights(), w0, UPDATE_TOL["gpu"], "depthwise model")


@pytest.mark.parametrize("sa,sb", [((2, 5, 4, 6), (2, 1, 1, 6)), ((3, 1, 1, 6), (3, 4, 5, 6)), ((2, 3, 4, 5), (2, 3, 4, 1)),
                                   ((4, 7, 7, 96), (4, 7, 7, 96))])
def test_multiply_gpu_matches_cpu(sa, sb):
    r = np.random.default_rng(len(sa))
    a, b = r.standard_normal(sa).astype(np.float32), r.standard_normal(sb).astype(np.float32)
    y = ops.multiply_forward(a, b, device="cpu")
    np.testing.assert_array_equal(ops.multiply_forward(a, b, device=GPU), y)  # one product per element
    dy = r.standard_normal(y.shape).astype(np.float32)
    for name, g, c in zip(("da", "db"), ops.multiply_backward(a, b, dy, device=GPU),
                          ops.multiply_backward(a, b, dy, device="cpu")):
        close(g, c, 1e-5, name)


def test_normalization_constants_gpu_match_cpu():
    mean = np.array([0.5, -2.0, 0.0], np.float32)
    var = np.array([4.0, 0.25, 0.0], np.float32)
    for g, c in zip(ops.normalization_constants(mean, var, 1e-7, device=GPU),
                    ops.normalization_constants(mean, var, 1e-7, device="cpu")):
        close(g, c, 1e-6)


def test_an_se_model_with_sample_dropout_trains_as_on_the_cpu():
    """Normalization, Reshape, Multiply and Dropout(noise_shape=(None, 1, 1, 1)) in training on both
    devices: the same masks (counter-based draws), losses and weight updates."""
    from hpcnn.layers import Dropout, Multiply, Normalization, Reshape
    r = np.random.default_rng(5)
    x = r.standard_normal((24, 6, 6, 3)).astype(np.float32)
    y = (np.arange(24) % 3).astype(np.int32)

    def model():
        inp = hpcnn.Input(shape=(6, 6, 3))
        t = Normalization(mean=[0.1, 0.2, 0.3], variance=[1.0, 2.0, 3.0])(inp)
        t = Conv2D(8, 3, padding="same", activation="swish")(t)
        se = GlobalAveragePooling2D()(t)
        se = Reshape((1, 1, 8))(se)
        se = Conv2D(8, 1, activation="sigmoid")(se)
        t = Multiply()([t, se])
        t = Dropout(0.4, noise_shape=(None, 1, 1, 1))(t)
        out = Dense(3, activation="softmax")(GlobalAveragePooling2D()(t))
        return hpcnn.Model(inp, out, seed=6)

    cpu, gpu = model(), model()
    for m, dev in ((cpu, "cpu"), (gpu, GPU)):
        m.compile(hpcnn.optimizers.SGD(learning_rate=0.05), "sparse_categorical_crossentropy", device=dev)
    gpu.set_weights(cpu.get_weights())
    w0 = cpu.get_weights()
    h_c = cpu.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    h_g = gpu.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h_g["loss"], h_c["loss"], rtol=LOSS_TOL["gpu"])
    assert_updates_close(gpu.get_weights(), cpu.get_weights(), w0, UPDATE_TOL["gpu"], "SE model")


@pytest.mark.parametrize("form", [dict(max_value=4.5), dict(threshold=0.5, negative_slope=0.1, max_value=2.0)])
def test_relu_clip_gpu_matches_cpu(form):
    x = np.linspace(-5, 5, 1001, dtype=np.float32).reshape(7, 143)
    dy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    for g, c in zip(ops.relu_clip(x, dy, device=GPU, **form), ops.relu_clip(x, dy, device="cpu", **form)):
        np.testing.assert_array_equal(g, c)  # the same float operations per element
