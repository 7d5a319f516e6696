"""bench/bench_ops.py --depthwise runs (a smoke run at batch 1, no timings asserted): every
MobileNetV2 and EfficientNetB0 row of op_cases is timed and the streaming reference printed; --peer with a Python that
cannot import torch reports the failure per row instead of stopping."""
import subprocess
import sys

from tests.support import op_cases, paths


def test_bench_ops_depthwise_smoke():
    r = subprocess.run([sys.executable, "-m", "bench.bench_ops", "--depthwise", "--batch", "1", "--trials", "1",
                        "--min-time", "0.0001", "--peak-seconds", "0.05", "--peer", sys.executable],
                       capture_output=True, text=True, timeout=300, cwd=paths.ROOT)
    assert r.returncode == 0, r.stderr
    assert "streaming reference" in r.stdout and "sum of the rows" in r.stdout
    for row in op_cases.MOBILENETV2_DEPTHWISE + op_cases.EFFICIENTNETB0_DEPTHWISE:
        assert row.label() in r.stdout, (row.label(), r.stdout)
