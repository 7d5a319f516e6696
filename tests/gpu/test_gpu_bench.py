"""The benchmark bindings and scripts on a GPU (issue 22): each gives sane numbers there (keys present,
times positive and finite, FLOP counts as the geometry says, no rate beyond what the GPU can do),
and without a usable GPU each GPU request fails with the reason (that part runs here).
  - hpcnn._core.bench_conv2d / bench_maxpool2d / bench_dense (csrc/diagnostics/op_timing.h);
  - hpcnn._core.cuda_sm_clock_khz and bench/bench_gpu.py's peaks, per-layer times and throughput;
  - hpcnn.bench.model_step_times (what `hpcnn bench` times), also under a one-device strategy,
    and `hpcnn bench --device ...`;
  - python -m bench.bench_layer_ops --device ... (the per-op table and the ResNet-20 step breakdown).
(cuda_prefetch_check against the CPU: tests/gpu/test_gpu_ops.py.)
Each test that can runs twice: on the CPU (here, on every machine: the test's own logic) and on
the GPU of tests/support/gpu_target.py (`gpu`, skipped with the reason where none is usable; HPCNN_TEST_GPU=cpu
runs it with the CPU standing in). TF32 is off, so the FP32 peak bounds the rates.
"""
import importlib.util
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hpcnn
from tests.support.gpu_target import GPU, MARKS
from hpcnn import _core, bench
from hpcnn.distribute import MirroredStrategy
from tests.support import paths

pytestmark = pytest.mark.usefixtures("tf32_off")  # tests/conftest.py; harmless for the CPU variants

ROOT = paths.ROOT
GPU_MARKS = [m for m in MARKS if m.name != "usefixtures"]  # pytest.param takes no usefixtures mark
KINDS = [pytest.param("cpu", id="cpu"), pytest.param("gpu", id="gpu", marks=GPU_MARKS)]
NO_GPU = "no usable GPU|built without the CUDA backend"
TIMING_KEYS = {"forward_ms", "backward_ms", "forward_flops"}


def device(kind):
    return "cpu" if kind == "cpu" else GPU


def bench_gpu():
    """bench/bench_gpu.py as a module (its functions, without running main)."""
    spec = importlib.util.spec_from_file_location("bench_gpu_script", ROOT / "bench" / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rate_bound(dev):
    """FLOP/s no timed op can reach on `dev`: 10x its FP32 peak (Winograd and FFT convolutions count
    the direct method's FLOPs, so they may pass the peak, but not tenfold). A timing that misses the
    work (an event recorded before the kernels ran) shows as a rate beyond it."""
    if dev == "cpu":
        return 10 * bench.peak_gflops(seconds=0.2) * 1e9
    assert _core.cuda_get_tf32() is False  # the tf32_off fixture: FP32 math only
    index = int(dev.split(":")[1]) if ":" in dev else 0
    info = next(d for d in _core.cuda_devices() if d.index == index)
    fp32, _, _ = bench_gpu().peaks(info)
    return 10 * fp32


def check_timing(t, flops, bound, what):
    assert set(t) == TIMING_KEYS, what
    for k in ("forward_ms", "backward_ms"):
        assert math.isfinite(t[k]) and t[k] > 0, f"{what}: {k} = {t[k]}"
    assert t["forward_flops"] == flops, what
    if flops:
        rate = flops / (t["forward_ms"] * 1e-3)
        assert rate < bound, f"{what}: {rate / 1e12:.1f} TFLOP/s in {t['forward_ms']} ms is beyond the device"


def run(args, timeout=300):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=dict(os.environ))


# ------------------------------------------------------------------ the op timings
@pytest.mark.parametrize("kind", KINDS)
def test_op_timings_are_positive_and_count_the_flops(kind):
    dev = device(kind)
    bound = rate_bound(dev)
    # 2.4 GFLOP: long enough on a GPU (tens of microseconds) for a timing that misses the work to show
    t = _core.bench_conv2d((64, 32, 32, 32), (3, 3, 32, 64), 1, "same", True, 2, dev)
    check_timing(t, 2.0 * 64 * 32 * 32 * 64 * 3 * 3 * 32, bound, f"conv2d same on {dev}")
    t = _core.bench_conv2d((8, 16, 16, 8), (3, 3, 8, 16), 2, "valid", False, 2, dev)  # 7x7 outputs
    check_timing(t, 2.0 * 8 * 7 * 7 * 16 * 3 * 3 * 8, bound, f"conv2d stride 2 valid on {dev}")
    t = _core.bench_maxpool2d((32, 16, 16, 32), 2, 2, dev)
    check_timing(t, 0.0, bound, f"maxpool2d on {dev}")
    t = _core.bench_dense((256, 1024), (1024, 256), True, 2, dev)
    check_timing(t, 2.0 * 256 * 1024 * 256, bound, f"dense on {dev}")
    with pytest.raises(ValueError, match="repeat must be positive"):
        _core.bench_dense((4, 4), (4, 4), True, 0, dev)


def test_without_a_usable_gpu_the_benchmarks_say_why():
    """What a GPU request gives where none is usable (this machine, CI): the reason, never a crash
    or a silent CPU run."""
    reason = _core.cuda_unavailable_reason()
    if not reason:
        pytest.skip("a GPU is usable here: this test covers machines without one")
    for call in (lambda: _core.bench_conv2d((2, 8, 8, 3), (3, 3, 3, 4), device="gpu:0"),
                 lambda: _core.bench_maxpool2d((2, 8, 8, 3), device="gpu"),
                 lambda: _core.bench_dense((2, 4), (4, 4), device="gpu:0"),
                 lambda: _core.cuda_prefetch_check([1.0, -1.0], 0),
                 lambda: bench.model_step_times("tutorial", "gpu", 4, 1, 0)):
        with pytest.raises(RuntimeError, match=NO_GPU) as e:
            call()
        assert reason in str(e.value)
    assert _core.cuda_sm_clock_khz(0) == 0  # "0 when unknown"
    r = run([str(ROOT / "bench" / "bench_gpu.py")])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"bench_gpu: no usable GPU, nothing to measure: {reason}"
    r = run(["-m", "bench.bench_layer_ops", "--device", "gpu:0", "--batch", "2", "--trials", "1"])
    assert r.returncode != 0 and "RuntimeError" in r.stderr and reason in r.stderr


# ------------------------------------------------------------------ bench/bench_gpu.py
@pytest.mark.gpu
@pytest.mark.skipif(bool(_core.cuda_unavailable_reason()) or GPU == "cpu",
                    reason=f"no usable GPU: {_core.cuda_unavailable_reason()}" if _core.cuda_unavailable_reason()
                    else "reads a real GPU's clock (HPCNN_TEST_GPU=cpu)")
def test_sm_clock_and_peaks_of_the_gpu():
    index = int(GPU.split(":")[1]) if ":" in GPU else 0
    info = next(d for d in _core.cuda_devices() if d.index == index)
    khz = _core.cuda_sm_clock_khz(index)
    assert 200e3 < khz < 5e6, f"SM clock {khz} kHz"
    fp32, tf32, clock_hz = bench_gpu().peaks(info)
    assert clock_hz == khz * 1e3
    cc = tuple(info.compute_capability)
    assert 1e12 < fp32 < 1e15, f"FP32 peak {fp32 / 1e12:.1f} TFLOP/s of {info.name} (cc {cc}, {info.multiprocessors} SMs)"
    assert (tf32 is not None) == (cc >= (8, 0)) == _core.cuda_tf32_supported(index)
    if cc == (9, 0):  # H100 / H200: 256 FP32 and 2048 TF32 FLOP per SM per clock
        assert fp32 == info.multiprocessors * clock_hz * 256 and tf32 == 8 * fp32


@pytest.mark.parametrize("kind", KINDS)
def test_bench_gpu_layer_times_and_throughput(kind):
    """bench_gpu.py's per-layer table and model throughput, on either device (its main runs both)."""
    dev = device(kind)
    bg = bench_gpu()
    rows = bg.layer_times(dev, 8, 2)
    assert len(rows) == 2 * len(bg.CONVS) + len(bg.DENSES)
    flops = [2.0 * 8 * h * w * f * 9 * c for (h, w, c), f in bg.CONVS]
    assert [r["forward_flops"] for name, r in rows if name.startswith("conv2d")] == flops
    bound = rate_bound(dev)
    for name, r in rows:
        check_timing(r, r["forward_flops"], bound, f"{name} on {dev}")
    train, infer = bg.model_throughput(dev, 32, 16)
    assert math.isfinite(train) and math.isfinite(infer) and train > 0 and infer > 0


# ------------------------------------------------------------------ hpcnn.bench, the CLI, bench_layer_ops.py
@pytest.mark.parametrize("kind", KINDS)
def test_model_step_times_on_the_device_and_on_a_one_device_strategy(kind):
    dev = device(kind)
    expected = hpcnn.applications.tutorial_cnn(seed=0).count_params()
    train, infer, params = bench.model_step_times("tutorial", dev, 8, 2, 1)
    assert params == expected
    train2, infer2 = bench.tutorial_cnn_step_times(dev, 8, 2, 1, strategy=MirroredStrategy([dev]))
    for times in (train, infer, train2, infer2):
        assert len(times) == 2 and all(math.isfinite(t) and t > 0 for t in times), times
    s = bench.step_stats(train, 8)
    assert s["mean_speed"] > 0 and math.isfinite(s["speed_uncertainty"])


@pytest.mark.parametrize("kind", KINDS)
def test_cli_bench_on_the_device(kind, tmp_path):
    dev = device(kind)
    out = tmp_path / "b.csv"
    r = run(["-m", "hpcnn", "bench", "--device", dev, "--batch", "8", "--steps", "2", "--warmup", "1", "--csv",
             str(out)])
    assert r.returncode == 0, r.stderr
    assert f"device {dev}" in r.stdout and "train:" in r.stdout and "infer:" in r.stdout
    rows = out.read_text().splitlines()
    assert len(rows) == 3 and all(f",{dev}," in row for row in rows[1:]), rows


@pytest.mark.parametrize("step", [False, True], ids=["ops", "resnet-step"])
@pytest.mark.parametrize("kind", KINDS)
def test_bench_layer_ops_on_the_device(kind, step):
    dev = device(kind)
    args = ["-m", "bench.bench_layer_ops", "--device", dev, "--batch", "4", "--trials", "1",
            "--min-time", "0.01"]
    r = run(args + (["--step", "--steps", "2"] if step else []))
    assert r.returncode == 0, r.stderr
    if step:
        assert f"batch 4, {dev}" in r.stdout and "measured training step" in r.stdout
    else:
        assert f"device {dev}" in r.stdout and "batch_norm" in r.stdout
    assert not re.search(r"\b(nan|inf)\b", r.stdout, re.IGNORECASE), r.stdout
