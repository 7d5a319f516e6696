"""bench/bench_engines.py (hpcnn against ONNX Runtime and OpenVINO on hpcnn's exported file) and
bench/engine_layers.py (the per-layer profile) run end to end with tiny sizes (no timing is
asserted), and the table's arithmetic: the ratio to the faster deployment engine, its paired form,
the percentiles, and a bad --batches refused with a message naming what is expected."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from bench import bench_engines as be


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_rows_give_the_ratio_to_the_faster_engine():
    engines = {"hpcnn": ("py", "hpcnn"), "ONNX Runtime": ("py", "onnxruntime"), "OpenVINO": ("py", "openvino"),
               "PyTorch eager": ("py", "torch")}
    res = {("tutorial", 1, "hpcnn", "call-1"): {"seconds": [2.0, 2.0, 4.0], "turns": [2.0, 4.0]},
           ("tutorial", 1, "ONNX Runtime", "run-1"): {"seconds": [3.0, 3.0, 3.0], "turns": [3.0, 3.0]},
           ("tutorial", 1, "OpenVINO", "run-1"): {"seconds": [1.0, 1.0, 9.0], "turns": [1.0, 9.0]},
           ("tutorial", 1, "PyTorch eager", "call-1"): {"seconds": [0.5], "turns": [0.5]}}
    rows = {r["engine"]: r for r in be.rows_of(res, engines)}
    hp = rows["hpcnn"]
    assert hp["fastest_engine"] == "OpenVINO"  # by its median (1.0), PyTorch is no deployment engine
    assert hp["vs_fastest"] == pytest.approx(0.5)  # OpenVINO's 1.0 / hpcnn's 2.0
    assert hp["vs_fastest_paired"] == pytest.approx(1.375)  # the median of 1/2 and 9/4
    assert hp["median_ms"] == pytest.approx(2000) and hp["img_s"] == pytest.approx(0.5)
    assert rows["ONNX Runtime"]["vs_fastest"] != rows["ONNX Runtime"]["vs_fastest"]  # only hpcnn's rows: NaN
    assert [r["engine"] for r in be.rows_of(res, engines)] == list(engines)  # in the engines' order
    assert "0.50x" in be.format_rows(list(rows.values()))


def test_percentile_and_ways():
    assert be.percentile([5, 1, 3, 2, 4], 0) == 1 and be.percentile([5, 1, 3, 2, 4], 100) == 5
    assert be.percentile(list(range(11)), 90) == 9
    assert be.ways_of("hpcnn", 1) == ["predict-1", "call-1"] and be.ways_of("hpcnn", 250) == ["predict-250"]
    assert be.ways_of("torch", 1) == ["call-1"] and be.ways_of("openvino", 128) == ["run-128"]


def test_bad_batches_are_refused():
    assert be.parse_batches(["resnet20=8,1"], ["tutorial", "resnet20"]) == {"tutorial": (250, 1), "resnet20": (8, 1)}
    assert be.parse_batches([], ["resnet50", "mobilenetv2"]) == {"resnet50": (32, 1), "mobilenetv2": (32, 1)}
    workers = be.engine_workers()
    assert workers.input_shape(None, "mobilenetv2") == (224, 224, 3)
    with pytest.raises(ValueError, match="expected MODEL=B"):
        be.parse_batches(["vgg=8"], ["tutorial"])
    with pytest.raises(ValueError, match="expected MODEL=B"):
        be.parse_batches(["tutorial"], ["tutorial"])


@pytest.mark.skipif(not (have("onnxruntime") and have("openvino") and have("onnx")),
                    reason="needs onnx, onnxruntime and openvino (hpcnn's export extra)")
def test_bench_engines_script_smoke(tmp_path):
    csv = tmp_path / "e.csv"
    r = subprocess.run([sys.executable, "-m", "bench.bench_engines", "--models", "tutorial", "--engines",
                        "hpcnn,onnxruntime,openvino", "--batches", "tutorial=4,1", "--rounds", "1", "--calls", "2",
                        "--large-calls", "1", "--csv", str(csv)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    for words in ("ONNX Runtime", "OpenVINO", "model(x)", "model.predict(x)", "intra_op 2", "PERFORMANCE_HINT LATENCY"):
        assert words in r.stdout
    lines = csv.read_text().splitlines()
    assert len(lines) == 1 + 3 + 4  # header; per batch hpcnn predict (+ model(x) at batch 1), ONNX Runtime, OpenVINO
    assert len(lines) - 1 == sum(1 for line in lines[1:] if ",tutorial," in line)


@pytest.mark.skipif(not (have("onnxruntime") and have("onnx")), reason="needs onnx and onnxruntime")
def test_engine_layers_script_smoke():
    r = subprocess.run([sys.executable, "-m", "bench.engine_layers", "--models", "tutorial", "--calls", "10",
                        "--trials", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "conv2d_3" in r.stdout and "FusedGemm" in r.stdout and "hpcnn model(x)" in r.stdout
    assert "conv kxk" in r.stdout and "depthwise" in r.stdout  # the per-kind columns
