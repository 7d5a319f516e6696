"""bench/bench_backbones.py's machinery: its FLOP count against the figure usually quoted, and a
smoke run of hpcnn's worker through the sessions file (tiny batch; no timings asserted)."""
import subprocess
import sys

import pytest

from hpcnn.keras import applications
from tests.support import paths

from bench import bench_backbones


def test_resnet50_flop_count():
    net = applications.ResNet50(weights=None, input_shape=(224, 224, 3))
    fwd = bench_backbones.forward_gflop(net)
    assert 7.6 < fwd < 7.8  # 3.86 G multiply-adds: the figure quoted for ResNet50 at 224x224
    first = 2 * 112 * 112 * 7 * 7 * 3 * 64 / 1e9  # conv1's backward-data: not needed
    assert bench_backbones.train_gflop(net, fwd) == pytest.approx(3 * fwd - first)


def test_bench_backbones_smoke():
    r = subprocess.run([sys.executable, "-m", "bench.bench_backbones", "--models", "resnet50", "--frameworks", "hpcnn",
                        "--rounds", "1", "--steps", "1", "--warmup", "0", "--batch", "1", "--threads", "2"],
                       capture_output=True, text=True, timeout=300, cwd=paths.ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    for way in ("train", "infer", "frozen"):
        assert any(line.startswith("resnet50") and f" {way} " in line for line in lines), r.stdout
    assert any("GiB" in line and "25,583,592" in line for line in lines), r.stdout
