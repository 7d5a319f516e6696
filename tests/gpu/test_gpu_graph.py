"""The functional API on the GPU against the CPU backend.

  - the merging ops and gradient accumulation (add, accumulate, concatenate, split, copy): bit
    for bit (the same additions in the same order, and plain copies);
  - graphs with Add, Concatenate and a tensor read by several layers: one SGD step's weight
    updates within rtol 2e-3 / atol 2e-3 x the largest update (TF32 off), as tests/gpu/test_gpu_model.py
    does for the Sequential models, and predictions and a short Adam run that agree;
  - a graph moved between the devices keeps its weights, and its step memory is planned there too;
  - a graph's training step copies its batch up and its loss statistics back, nothing else (the
    gradient routes of Add and of shared tensors run on the device);
  - a ResNet basic block with BatchNormalization (cuDNN's batch norm; the identity and a 1x1
    stride-2 projection shortcut): a step's updates, the moving statistics and the inference-mode
    predictions agree with the CPU's, and a model saved on the GPU loads and predicts on the CPU.
Without a usable GPU the module is skipped with the reason (`pytest -rs` shows it);
HPCNN_TEST_GPU=cpu runs it with the CPU standing in for the GPU (tests/support/gpu_target.py).
"""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core

from tests.support.gpu_target import GPU, MARKS
from tests.support.small_models import GRAPHS, resnet_block_model

pytestmark = MARKS
ops = _core.ops


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_merging_ops_are_bit_for_bit_the_cpus():
    rng = np.random.default_rng(0)
    xs = [randn(rng, 3, 9, 7, 5) for _ in range(3)]
    np.testing.assert_array_equal(ops.add(xs, device=GPU), ops.add(xs))
    np.testing.assert_array_equal(ops.accumulate(xs[0], xs[1], device=GPU), ops.accumulate(xs[0], xs[1]))
    np.testing.assert_array_equal(ops.copy(xs[2], device=GPU), xs[2])
    for axis, shapes in ((-1, [(2, 5, 5, 3), (2, 5, 5, 1), (2, 5, 5, 4)]), (1, [(2, 1, 3, 2), (2, 4, 3, 2)]),
                         (1, [(4, 6), (4, 3)])):
        parts = [randn(rng, *s) for s in shapes]
        y = ops.concatenate(parts, axis, device=GPU)
        np.testing.assert_array_equal(y, np.concatenate(parts, axis=axis))
        sizes = [s[axis] for s in shapes]
        for got, want in zip(ops.split(y, sizes, axis, device=GPU), parts):
            np.testing.assert_array_equal(got, want)


def _pair(name, optimizer):
    build, in_shape, _ = GRAPHS[name]
    cpu, gpu = build(seed=3), build(seed=3)
    cpu.compile(optimizer(), "categorical_crossentropy", ["accuracy"], device="cpu")
    gpu.compile(optimizer(), "categorical_crossentropy", ["accuracy"], device=GPU)
    return cpu, gpu, in_shape


def _data(in_shape, n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n,) + in_shape, dtype=np.float32)
    return x, np.eye(3, dtype=np.float32)[rng.integers(0, 3, n)]


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_one_sgd_step_of_a_graph_matches_cpu(name):
    cpu, gpu, in_shape = _pair(name, lambda: hpcnn.optimizers.SGD(learning_rate=0.05))
    assert gpu.device == GPU
    x, y = _data(in_shape)
    w0 = cpu.get_weights()
    for a, b in zip(gpu.get_weights(), w0):
        np.testing.assert_array_equal(a, b)  # the same seed; kernels converted to OHWI and back
    np.testing.assert_allclose(gpu.predict(x), cpu.predict(x), rtol=1e-4, atol=1e-5)
    cpu.train_on_batch(x, y)
    gpu.train_on_batch(x, y)
    for i, (a, c, w) in enumerate(zip(gpu.get_weights(), cpu.get_weights(), w0)):
        d_gpu, d_cpu = a - w, c - w
        scale = max(float(np.max(np.abs(d_cpu))), 1e-8)
        np.testing.assert_allclose(d_gpu, d_cpu, rtol=2e-3, atol=2e-3 * scale, err_msg=f"{name}: weight {i}")


@pytest.mark.parametrize("name", ["residual", "concat"])
def test_a_short_adam_run_and_a_device_round_trip(name):
    cpu, gpu, in_shape = _pair(name, lambda: hpcnn.optimizers.Adam(learning_rate=1e-3))
    x, y = _data(in_shape, n=96, seed=1)
    h_cpu = cpu.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    h_gpu = gpu.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h_gpu["loss"], h_cpu["loss"], rtol=5e-2)
    report = gpu.core.memory_report(16)
    assert report["allocated"] == max(report["train"], report["test"], report["predict"])
    weights = gpu.get_weights()
    gpu.to("cpu")
    for a, b in zip(gpu.get_weights(), weights):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(gpu.predict(x[:8]), cpu.predict(x[:8]), atol=0.05)


def test_a_graph_step_copies_its_batch_up_and_its_statistics_back_and_nothing_else():
    if GPU == "cpu":
        pytest.skip("about host-device copies: needs a real GPU (HPCNN_TEST_GPU=cpu)")
    _, gpu, in_shape = _pair("residual", lambda: hpcnn.optimizers.SGD(learning_rate=0.05))  # Add: alias and copy
    x, y = _data(in_shape)
    core = gpu.core
    core.train_step((x, y))  # the step's buffers are made: what follows is one step's copies
    _core.reset_transfer_stats()
    core.train_step((x, y))
    s = _core.transfer_stats()
    stats = core.memory_report(len(x))["statistics"]  # the step's statistics: the one copy back
    assert (s["h2d_count"], s["h2d_bytes"], s["d2h_count"], s["d2h_bytes"]) == (2, x.nbytes + y.nbytes, 1, stats)


def test_a_resnet_block_with_batchnorm_matches_cpu(tmp_path):
    cpu, gpu = resnet_block_model(seed=3), resnet_block_model(seed=3)
    cpu.compile(hpcnn.optimizers.SGD(learning_rate=0.05), "categorical_crossentropy", device="cpu")
    gpu.compile(hpcnn.optimizers.SGD(learning_rate=0.05), "categorical_crossentropy", device=GPU)
    x, y = _data((8, 8, 3))
    w0 = cpu.get_weights()
    for a, b in zip(gpu.get_weights(), w0):
        np.testing.assert_array_equal(a, b)
    cpu.train_on_batch(x, y)
    gpu.train_on_batch(x, y)
    for name, a, c, w in zip(cpu.weight_names(), gpu.get_weights(), cpu.get_weights(), w0):
        d_gpu, d_cpu = a - w, c - w  # SGD's update, or the moving statistics' step
        scale = max(float(np.max(np.abs(d_cpu))), 1e-8)
        np.testing.assert_allclose(d_gpu, d_cpu, rtol=2e-3, atol=2e-3 * scale, err_msg=name)
    np.testing.assert_allclose(gpu.predict(x), cpu.predict(x), rtol=1e-3, atol=1e-5)
    path = str(tmp_path / "block.h5")
    gpu.save(path)
    back = hpcnn.load_model(path)
    assert back.device == "cpu"
    np.testing.assert_allclose(back.predict(x), cpu.predict(x), rtol=1e-3, atol=1e-5)
