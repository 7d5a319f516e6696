"""The optimizers, clipping, weight decay, schedules and weight regularizers on a GPU against the
CPU: the update ops and the fixed-order sums through hpcnn._core.ops (the sums: the same bits on
both backends), and whole training steps of a model whose conv kernels are in a different layout
on the GPU (OHWI) than on the CPU (HWIO). HPCNN_TEST_GPU=cpu runs this module with the CPU
standing in for the GPU (a check of the tests' own logic where no GPU is usable). TF32 is off.
"""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core, optimizers, regularizers
from hpcnn.layers import Conv2D, Dense, Flatten, InputLayer, MaxPooling2D
from hpcnn.optimizers import schedules

from tests.support.gpu_target import GPU, MARKS
from tests.support.optimizer_reference import state_buffers

pytestmark = MARKS
ops = _core.ops

SIZES = [54, 3, 5000, 1, 4096, 4097, 7]


def rng(seed=0):
    return np.random.default_rng(seed)


# ------------------------------------------------------------------ the ops
def test_variable_sums_are_the_same_bits_on_both_backends():
    x = rng(1).standard_normal(sum(SIZES)).astype(np.float32) * 100
    cpu = ops.variable_sums(x, SIZES, device="cpu")
    gpu = ops.variable_sums(x, SIZES, device=GPU)
    assert gpu.tobytes() == cpu.tobytes()


@pytest.mark.parametrize("global_norm", [False, True])
def test_clip_scales_are_the_same_bits_on_both_backends(global_norm):
    g = rng(2).standard_normal(sum(SIZES)).astype(np.float32)
    cpu = ops.clip_scales(g, SIZES, clipnorm=3.0, global_norm=global_norm, device="cpu")
    gpu = ops.clip_scales(g, SIZES, clipnorm=3.0, global_norm=global_norm, device=GPU)
    assert gpu.tobytes() == cpu.tobytes()


def test_weight_penalty_on_both_backends():
    r = rng(3)
    w, g = (r.standard_normal(sum(SIZES)).astype(np.float32) for _ in range(2))
    l1 = [0.1, 0.0, 0.01, 0.5, 0.0, 0.2, 0.0]
    l2 = [0.0, 0.3, 0.02, 0.5, 0.1, 0.0, 0.0]
    p_cpu, g_cpu = ops.weight_penalty(w, g, SIZES, l1, l2, device="cpu")
    p_gpu, g_gpu = ops.weight_penalty(w, g, SIZES, l1, l2, device=GPU)
    assert p_gpu == p_cpu  # fixed-order sums, an explicit fma: the same bits
    np.testing.assert_allclose(g_gpu, g_cpu, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("centered,momentum", [(False, 0.0), (True, 0.0), (False, 0.5), (True, 0.5)])
def test_rmsprop_op(centered, momentum):
    r = rng(4)
    n = sum(SIZES)
    p, g = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    vel = np.abs(r.standard_normal(n)).astype(np.float32)
    mom, avg = (r.standard_normal(n).astype(np.float32) * 0.1 for _ in range(2))
    kw = dict(lr=0.01, rho=0.9, momentum=momentum, centered=centered, sizes=SIZES, weight_decay=0.1, clipvalue=1.0,
              decay=[k % 2 == 0 for k in range(len(SIZES))])
    out_c = ops.rmsprop_step(p, g, vel, mom, avg, device="cpu", **kw)
    out_g = ops.rmsprop_step(p, g, vel, mom, avg, device=GPU, **kw)
    for a, c in zip(out_g, out_c):
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-7)


def test_adam_and_sgd_ops_with_decay_and_clipping():
    r = rng(5)
    n = sum(SIZES)
    p, g, m = (r.standard_normal(n).astype(np.float32) for _ in range(3))
    v = np.abs(r.standard_normal(n)).astype(np.float32)
    kw = dict(sizes=SIZES, weight_decay=0.2, clipvalue=0.5, decay=[k % 3 != 0 for k in range(len(SIZES))])
    for a, c in zip(ops.adam_step(p, g, m, v, t=3, device=GPU, **kw), ops.adam_step(p, g, m, v, t=3, device="cpu", **kw)):
        np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-7)
    for a, c in zip(ops.sgd_step(p, g, m, lr=0.1, momentum=0.9, nesterov=True, device=GPU, **kw),
                    ops.sgd_step(p, g, m, lr=0.1, momentum=0.9, nesterov=True, device="cpu", **kw)):
        np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ whole steps
def layout_model(seed=11):
    """Conv kernels of unequal dimensions (a wrong layout cannot pass for the right one), weight
    regularizers on both kinds of layer."""
    return hpcnn.Sequential([
        InputLayer(input_shape=[7, 6, 3]),
        Conv2D(5, (3, 2), padding="same", activation="relu", kernel_regularizer=regularizers.l2(0.01),
               bias_regularizer=regularizers.l1(0.01)),
        MaxPooling2D(2),
        Conv2D(4, (2, 3), padding="valid", activation="relu"),
        Flatten(),
        Dense(6, activation="softmax", kernel_regularizer=regularizers.L1L2(l1=0.001, l2=0.01)),
    ], seed=seed)


def data(n=32, seed=0):
    r = rng(seed)
    x = r.random((n, 7, 6, 3), dtype=np.float32)
    return x, (x[:, :6, 0, 0].argmax(axis=1)).astype(np.int32)


def adamw_excluding_biases():
    opt = optimizers.AdamW(0.01, weight_decay=0.1, clipnorm=0.5)
    opt.exclude_from_weight_decay(var_names=["bias"])
    return opt


OPTIMIZERS = {
    "sgd-nesterov-decay": lambda: optimizers.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=0.05),
    "adam-global-clipnorm": lambda: optimizers.Adam(3e-3, global_clipnorm=0.2),
    "adamw-excluding-biases": adamw_excluding_biases,
    "rmsprop-centered-momentum-clipvalue": lambda: optimizers.RMSprop(3e-3, momentum=0.5, centered=True, clipvalue=0.05),
    "sgd-cosine-warmup": lambda: optimizers.SGD(schedules.CosineDecay(0.0, 6, warmup_target=0.1, warmup_steps=2)),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_training_steps_match_the_cpu(name):
    x, y = data()
    models = {}
    for device in ("cpu", GPU):
        m = layout_model()
        m.compile(OPTIMIZERS[name](), "sparse_categorical_crossentropy", device=device)
        losses = [m.train_on_batch(x[i:i + 8], y[i:i + 8]) for i in range(0, len(x), 8)]
        models[device] = (m, losses)
    (cpu, l_cpu), (gpu, l_gpu) = models["cpu"], models[GPU]
    np.testing.assert_allclose(l_gpu, l_cpu, rtol=1e-3)  # the losses include the penalty
    for i, (a, c) in enumerate(zip(gpu.get_weights(), cpu.get_weights())):
        np.testing.assert_allclose(a, c, rtol=2e-3, atol=2e-4, err_msg=f"weight {i}")
    assert gpu.optimizer.learning_rate == pytest.approx(cpu.optimizer.learning_rate)
    # the state, brought into the CPU's layout, follows the CPU's
    core = gpu.core
    for s_gpu, s_cpu in zip(state_buffers(core), state_buffers(cpu.core)):
        s = core.relayout_buffer(s_gpu, GPU, "cpu")
        np.testing.assert_allclose(s, s_cpu, rtol=5e-3, atol=5e-3 * max(float(np.abs(s_cpu).max()), 1e-8))


def test_rmsprop_state_round_trips_through_the_gpu():
    """cpu -> gpu -> cpu: all three RMSprop buffers come back bit for bit (moved in the parameters'
    layout), so the next CPU steps are those of a model that stayed."""
    x, y = data()
    stay, move = layout_model(), layout_model()
    for m in (stay, move):
        m.compile(optimizers.RMSprop(3e-3, momentum=0.5, centered=True), "sparse_categorical_crossentropy",
                  device="cpu")
        m.train_on_batch(x, y)
    move.to(GPU)
    move.to("cpu")
    for a, b in zip(state_buffers(move.core), state_buffers(stay.core)):
        assert np.array_equal(a, b)
    assert move.train_on_batch(x, y) == stay.train_on_batch(x, y)
    assert np.array_equal(move.core.parameter_buffer(), stay.core.parameter_buffer())
