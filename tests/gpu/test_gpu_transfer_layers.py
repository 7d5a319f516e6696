"""Issue 38's layers on the GPU against the CPU backend: the depthwise convolution (cuDNN's grouped
convolution, group count = the input channels) forward, input and kernel gradients on the
MobileNetV2 rows of op_cases and on small cases of every argument (odd 'same' totals: the explicit
padding path; depth multipliers; dilation), the hard_silu activation, and a model with
DepthwiseConv2D and SeparableConv2D trained on both devices (same losses, same weight updates).

Tolerances (TF32 off, tests/conftest.py): the convolution sums in another order than the CPU: rtol
1e-4 of the output's scale; training as tests/support/gpu_target.py allows. Without a usable GPU the
module is skipped with the reason (`pytest -rs`); HPCNN_TEST_GPU=cpu runs it with the CPU standing in."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core
from hpcnn.layers import (Conv2D, DepthwiseConv2D, Dense, GlobalAveragePooling2D, InputLayer, SeparableConv2D)
from tests.support.gpu_target import GPU, LOSS_TOL, MARKS, UPDATE_TOL, assert_updates_close
from tests.support.op_cases import MOBILENETV2_DEPTHWISE, TEST_BATCH

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
CASES += [(TEST_BATCH, r.h, r.h, r.c, r.m, r.k, r.s, "same", 1, False) for r in MOBILENETV2_DEPTHWISE]


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
