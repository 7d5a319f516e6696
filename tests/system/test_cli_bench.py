"""The hpcnn command and the benchmark statistics."""
import csv
import io
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hpcnn
from hpcnn import bench, bench_workers
from tests.support import paths


def test_step_stats_formulas():
    times = [0.1, 0.1, 0.2, 0.1]
    s = bench.step_stats(times, 50)
    assert s["mean_time_per_step"] == pytest.approx(0.125)
    assert s["mean_speed"] == pytest.approx(400.0)            # batch / mean time
    speeds = [500, 500, 250, 500]
    mean = sum(speeds) / 4
    sd = math.sqrt(sum((v - mean) ** 2 for v in speeds) / 3)
    assert s["speed_uncertainty"] == pytest.approx(sd / 2)    # std / sqrt(steps)
    assert s["speed_jitter"] == pytest.approx(0.0)            # 1.4826 * MAD: 3 of 4 equal the median
    with pytest.raises(ValueError):
        bench.step_stats([], 10)


def test_csv_append_and_collect(tmp_path):
    a, b, out = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "all.csv"
    bench.append_csv(str(a), {"device": "cpu", "mean_speed": 10})
    bench.append_csv(str(a), {"device": "cpu", "mean_speed": 11})
    bench.append_csv(str(b), {"device": "gpu", "mean_speed": 99, "label": "h100"})
    assert bench.collect_csv([str(a), str(b)], str(out)) == 3
    rows = list(csv.DictReader(io.StringIO(Path(out).read_text())))
    assert [r["device"] for r in rows] == ["cpu", "cpu", "gpu"] and rows[2]["label"] == "h100"


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="POSIX file locks (Linux)")
def test_csv_append_waits_while_another_job_appends(tmp_path):
    """Sweep jobs ending together append to one results CSV: an append takes the file's lock first
    (here held by the test, as by another job's append), so the header is written once and rows are
    never interleaved."""
    import fcntl
    out = tmp_path / "dist.csv"
    code = "import sys; from hpcnn import bench; bench.append_csv(sys.argv[1], {'job': 2, 'speed': 5})"
    with open(out, "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        proc = subprocess.Popen([sys.executable, "-c", code, str(out)])
        try:
            time.sleep(3)  # hpcnn imported, the append waiting
            assert proc.poll() is None and out.stat().st_size == 0
            other.write("job,speed\n1,4\n")  # the other job's header and row
        finally:
            fcntl.flock(other, fcntl.LOCK_UN)
    assert proc.wait(timeout=120) == 0
    assert out.read_text() == "job,speed\n1,4\n2,5\n"  # no second header


def run(*args):
    return subprocess.run([sys.executable, "-m", "hpcnn", *args], capture_output=True, text=True, timeout=300)


def test_cli_info_and_devices():
    r = run("info")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["version"] and "gpu_unavailable_reason" in info
    r = run("devices")
    assert r.returncode == 0 and "/physical_device:CPU:0" in r.stdout


def test_cli_bench_writes_csv(tmp_path):
    out = tmp_path / "b.csv"
    r = run("bench", "--batch", "16", "--steps", "2", "--warmup", "1", "--csv", str(out), "--label", "test")
    assert r.returncode == 0, r.stderr
    assert "train:" in r.stdout and "img/s" in r.stdout
    rows = list(csv.DictReader(io.StringIO(Path(out).read_text())))
    assert {r["mode"] for r in rows} == {"train", "infer"} and rows[0]["label"] == "test"
    # The ratio to this machine's FP32 peak, measured in the run, and why it can pass 100 %.
    assert "# FP32 peak of " in r.stdout and "% of FP32 peak" in r.stdout
    assert "Winograd" in r.stdout and "100 %" in r.stdout
    assert float(rows[0]["peak_gflops"]) > 0 and float(rows[0]["percent_of_peak"]) > 0


def test_cli_bench_peers(tmp_path):
    """--peers: hpcnn, and PyTorch / TensorFlow when importable (else a line says it skipped
    them), in one table from the same run."""
    out = tmp_path / "p.csv"
    r = run("bench", "--peers", "--batch", "8", "--steps", "2", "--warmup", "1", "--rounds", "1", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    for label, module in (("PyTorch", "torch"), ("TensorFlow", "tensorflow")):
        present = bench.importable(sys.executable, module)
        assert (f"{label}: not importable" in r.stdout) != present
        assert (f"\n{label:<11}train" in r.stdout) == present
    assert "\nhpcnn      train" in r.stdout and "\nhpcnn      infer" in r.stdout and "Winograd" in r.stdout
    rows = list(csv.DictReader(io.StringIO(Path(out).read_text())))
    assert {(row["framework"], row["mode"]) for row in rows} >= {("hpcnn", "train"), ("hpcnn", "infer")}


def test_peer_workers_load_the_bench_module_without_hpcnn():
    """A PyTorch/TensorFlow worker process loads hpcnn/bench_workers.py as a plain file: no hpcnn
    package (whose extension would pin a shared OpenBLAS to one thread) in that process."""
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('b', sys.argv[1]); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "print(sorted(k for k in sys.modules if k.startswith('hpcnn')), sorted(m.WORKERS))")
    r = subprocess.run([sys.executable, "-c", code, bench_workers.__file__], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[] ['hpcnn', 'tensorflow', 'torch']"
    # The hpcnn worker itself, run the way the peers are run, returns its step times.
    res = bench.run_worker(sys.executable, "hpcnn", 4, 2, 1, 1)
    assert len(res["train"]) == 2 and len(res["infer"]) == 2 and min(res["train"]) > 0


def test_bench_train_script_shares_the_implementation(tmp_path):
    script = paths.ROOT / "bench" / "bench_train.py"
    r = subprocess.run([sys.executable, str(script), "--frameworks", "hpcnn", "--rounds", "1", "--steps", "1",
                        "--warmup", "1", "--batch", "8", "--csv", str(tmp_path / "t.csv")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "hpcnn      train" in r.stdout and "Winograd" in r.stdout
    assert len(list(csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text())))) == 2


def test_cli_bench_gpu_without_gpu_fails_clearly():
    import hpcnn
    if hpcnn.list_physical_devices("GPU"):
        pytest.skip("a GPU is present")
    r = run("bench", "--device", "gpu", "--steps", "1")
    assert r.returncode != 0
    assert "RuntimeError" in r.stderr and hpcnn.gpu_unavailable_reason()[:30] in r.stderr


def test_cli_bench_with_a_strategy_reports_its_replicas(tmp_path):
    # MirroredStrategy() on a machine without a GPU: one CPU replica; the row says how many.
    out = tmp_path / "b.csv"
    r = run("bench", "--strategy", "mirrored", "--batch", "8", "--steps", "1", "--warmup", "0", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    assert "MirroredStrategy(replicas=" in r.stdout and "global batch 8" in r.stdout
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert {row["mode"] for row in rows} == {"train", "infer"}
    assert int(rows[0]["replicas"]) == max(1, len(hpcnn.list_physical_devices("GPU")))


def test_bench_distribute_model_only():
    # The GPU / node model: bytes per step from the models' parameter counts.
    script = str(paths.BENCH / "bench_distribute.py")
    r = subprocess.run([sys.executable, script, "--model-only"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    cnn = hpcnn.applications.tutorial_cnn(seed=0).count_params() * 4 / 1e6
    assert f"tutorial_cnn    {round(cnn, 2)}" in r.stdout and "deep_mnist" in r.stdout
    assert "InfiniBand" in r.stdout and "NVLink" in r.stdout
