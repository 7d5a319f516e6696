"""A model on a GPU holds its conv kernels (and their gradients and Adam's moments) in cuDNN's OHWI
layout and converts only at its boundary (get_weights, set_weights, save, moves between devices):
checked on a GPU against the CPU. The conversions themselves are tested without a GPU in
test_param_layout.py. HPCNN_TEST_GPU=cpu runs this module with the CPU standing in for the GPU (a
check of the tests' own logic where no GPU is usable). TF32 is off.
"""
import numpy as np
import pytest

import hpcnn

from tests.support.gpu_target import GPU, MARKS
from tests.support.small_models import layout_model

pytestmark = MARKS


def data(n=48, seed=0):
    r = np.random.default_rng(seed)
    x = r.random((n, 7, 6, 3), dtype=np.float32)
    y = (x[:, :6, 0, 0].argmax(axis=1)).astype(np.int32)  # learnable: the brightest of six rows
    return x, y


def random_weights(model, seed=0):
    r = np.random.default_rng(seed)
    return [(r.standard_normal(w.shape) * 0.2).astype(np.float32) for w in model.get_weights()]


def keras_flat(weights):
    return np.concatenate([w.ravel() for w in weights])


def steps(model, x, y, batch=16):
    """One pass over (x, y) in order, one train_step call per batch: the losses."""
    core = model.core
    return [core.train_step((x[i:i + batch], y[i:i + batch])) for i in range(0, len(x), batch)]


def test_a_gpu_model_holds_kernels_in_the_gpu_layout(tmp_path):
    m = layout_model()
    m.compile("adam", "sparse_categorical_crossentropy", device="cpu")
    w = random_weights(m)
    m.set_weights(w)
    cpu_flat = m.core.parameter_buffer().copy()
    m.to(GPU)
    core = m.core
    held = core.parameter_buffer()
    assert np.array_equal(held, core.relayout_buffer(cpu_flat, "cpu", GPU))
    if GPU != "cpu":
        assert not np.array_equal(held, cpu_flat)  # kernels really are OHWI on the GPU
    assert np.array_equal(core.parameter_buffer(keras_layout=True), cpu_flat)
    for a, b in zip(m.get_weights(), w):  # get_weights on the GPU = Keras' layout, bit for bit
        assert a.shape == b.shape and np.array_equal(a, b)
    # set_weights on the GPU converts in; save writes Keras' layout
    w2 = random_weights(m, seed=1)
    m.set_weights(w2)
    assert np.array_equal(core.parameter_buffer(keras_layout=True), keras_flat(w2))
    path = tmp_path / "gpu.h5"
    m.save(path)
    loaded = hpcnn.models.load_model(path)
    for a, b in zip(loaded.get_weights(), w2):
        assert np.array_equal(a, b)


def test_get_weights_and_gradients_on_the_gpu_equal_the_cpus():
    x, y = data(16)
    cpu, gpu = layout_model(), layout_model()
    cpu.compile(hpcnn.optimizers.SGD(learning_rate=0.05), "sparse_categorical_crossentropy", device="cpu")
    gpu.compile(hpcnn.optimizers.SGD(learning_rate=0.05), "sparse_categorical_crossentropy", device=GPU)
    w = random_weights(cpu, seed=2)
    cpu.set_weights(w)
    gpu.set_weights(w)
    for a, b in zip(gpu.get_weights(), cpu.get_weights()):
        assert np.array_equal(a, b)
    l_c = cpu.core.train_step((x, y))
    l_g = gpu.core.train_step((x, y))
    assert l_g[0] == pytest.approx(l_c[0], rel=1e-4)
    # dW came out of cuDNN as OHWI and stayed so; in Keras' layout it is the CPU's gradient
    g_c = cpu.core.gradient_buffer(keras_layout=True)
    g_g = gpu.core.gradient_buffer(keras_layout=True)
    np.testing.assert_allclose(g_g, g_c, rtol=1e-3, atol=1e-4 * float(np.abs(g_c).max()))
    for i, (a, c, w0) in enumerate(zip(gpu.get_weights(), cpu.get_weights(), w)):
        d_gpu, d_cpu = a - w0, c - w0
        scale = max(float(np.abs(d_cpu).max()), 1e-8)
        np.testing.assert_allclose(d_gpu, d_cpu, rtol=2e-3, atol=2e-3 * scale, err_msg=f"update of weight {i}")


def test_a_round_trip_through_the_gpu_keeps_weights_and_adam_state():
    """cpu -> gpu -> cpu after some Adam steps: weights bit for bit, and the moments too (the next
    steps are bit for bit those of a model that stayed); then training on the GPU from the moved
    state follows the CPU's (moments moved into the GPU's layout, not scrambled)."""
    x, y = data(48, seed=3)
    stay, move = layout_model(), layout_model()
    for m in (stay, move):
        m.compile(hpcnn.optimizers.Adam(learning_rate=3e-3), "sparse_categorical_crossentropy", device="cpu")
    assert steps(stay, x, y) == steps(move, x, y)
    move.to(GPU)
    assert move.device == GPU
    for a, b in zip(move.get_weights(), stay.get_weights()):
        assert np.array_equal(a, b)
    move.to("cpu")
    assert np.array_equal(move.core.parameter_buffer(), stay.core.parameter_buffer())
    assert move.core.iterations == stay.core.iterations == 3
    assert steps(move, x, y) == steps(stay, x, y)
    assert np.array_equal(move.core.parameter_buffer(), stay.core.parameter_buffer())
    # on to the GPU with the moved moments: the updates follow the CPU's
    before = stay.get_weights()
    move.to(GPU)
    l_gpu = steps(move, x, y)
    l_cpu = steps(stay, x, y)
    np.testing.assert_allclose([s[0] for s in l_gpu], [s[0] for s in l_cpu], rtol=1e-3)
    for i, (a, c, w0) in enumerate(zip(move.get_weights(), stay.get_weights(), before)):
        d_gpu, d_cpu = a - w0, c - w0
        scale = max(float(np.abs(d_cpu).max()), 1e-8)
        np.testing.assert_allclose(d_gpu, d_cpu, rtol=1e-2, atol=1e-2 * scale, err_msg=f"update of weight {i}")
