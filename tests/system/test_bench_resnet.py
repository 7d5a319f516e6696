"""The ResNet-20 benchmarks' machinery (bench/bench_resnet.py, bench_layer_ops.py --step,
fashion_mnist_accuracy.py): they run (smoke runs with tiny sizes; no timings are asserted), the
frameworks' models are checked to be the same size, and the FLOP count matches the model."""
import io
import subprocess
import sys
from pathlib import Path

import pytest

from hpcnn import bench
from hpcnn import bench_workers as bw
from hpcnn.applications import resnet20_cifar
from hpcnn.layers import Conv2D
from tests.support import paths

BENCH = paths.ROOT / "bench"


def test_resnet20_flop_count_matches_the_model():
    """bench's FLOP count (a peer worker cannot import hpcnn to count) against the model's layers."""
    m = resnet20_cifar(shortcut="B")
    macs = [layer.output.shape[1] * layer.output.shape[2] * layer.filters * layer.kernel_size[0] ** 2
            * layer.inbound_tensors[0].shape[-1] for layer in m.layers if isinstance(layer, Conv2D)]
    fwd = 2 * (sum(macs) + 64 * 10) / 1e6
    train = fwd + 2 * (sum(macs[1:]) + sum(macs) + 2 * 64 * 10) / 1e6
    assert bench.RESNET20_FWD_MFLOP == pytest.approx(fwd) and bench.RESNET20_TRAIN_MFLOP == pytest.approx(train)
    assert 81 < bench.RESNET20_FWD_MFLOP < 83  # 40.8 M multiply-adds, the figure usually quoted


def test_hpcnn_worker_times_resnet20_and_counts_its_parameters():
    res = bench.run_worker(sys.executable, "hpcnn", 4, 2, 1, 1, "resnet20")
    assert len(res["train"]) == 2 and len(res["infer"]) == 2 and min(res["train"]) > 0
    assert res["params"] == 272_474  # shortcut B, as the peers build it


def test_different_models_are_refused():
    same = {("hpcnn", "train"): {"params": 10}, ("torch", "train"): {"params": 10},
            ("hpcnn", "infer"): {"params": 10}, ("baseline", "train"): {"params": None}}
    assert bench.check_same_params(same) == {"hpcnn": 10, "torch": 10}
    with pytest.raises(ValueError, match="the frameworks' models differ"):
        bench.check_same_params({("hpcnn", "train"): {"params": 10}, ("tensorflow", "train"): {"params": 11}})
    with pytest.raises(ValueError, match="unknown model"):
        bench.compare(["hpcnn"], 4, 1, 1, 1, 1, model="resnet21")


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_peer_resnet20_has_the_same_parameters(framework):
    """Where the peer is installed, its ResNet-20 is hpcnn's (272,474 trainable parameters)."""
    if not bench.importable(sys.executable, framework):
        pytest.skip(f"{framework} is not installed for this Python (bench/bench_resnet.py --python names an interpreter that has it)")
    res = bench.run_worker(sys.executable, framework, 4, 1, 1, 1, "resnet20")
    assert res["params"] == 272_474


def test_bench_resnet_script_smoke(tmp_path):
    r = subprocess.run([sys.executable, str(BENCH / "bench_resnet.py"), "--frameworks", "hpcnn", "--rounds", "1",
                        "--steps", "1", "--warmup", "1", "--batch", "4", "--csv", str(tmp_path / "r.csv")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "# model: resnet20" in r.stdout and "trainable parameters: hpcnn 272,474" in r.stdout
    assert "hpcnn      train" in r.stdout and "244.0 MFLOP per training image" in r.stdout
    assert "resnet20" in (tmp_path / "r.csv").read_text()


def test_step_breakdown_smoke():
    r = subprocess.run([sys.executable, "-m", "bench.bench_layer_ops", "--step", "--batch", "2", "--trials", "1",
                        "--min-time", "0.0001", "--steps", "1"], capture_output=True, text=True, timeout=300,
                       cwd=paths.ROOT)
    assert r.returncode == 0, r.stderr
    for op in ("conv2d 3x3 stride 1", "conv2d 3x3 stride 2", "conv2d 1x1 stride 2", "batch_norm + relu (fused)",
               "batch_norm ", "relu ", "add* ", "global average pool*", "dense", "SGD update*",
               "batch_norm + add + relu (block tail, fused)", "add + relu (in the tail's batch norm: no op)",
               "sum of the ops",
               "measured training step"):
        assert op in r.stdout, (op, r.stdout)


@pytest.mark.parametrize("recipe", [[], ["--translation", "0.1", "--schedule", "constant"]],
                         ids=["flip-cosine", "flip-translation-constant"])
def test_fashion_mnist_accuracy_smoke(recipe):
    if not Path("/usr/share/datasets/fashion-mnist").is_dir():
        pytest.skip("Debian's dataset-fashion-mnist is not installed (README's apt-get line installs it)")
    r = subprocess.run([sys.executable, str(BENCH / "fashion_mnist_accuracy.py"), "--frameworks", "hpcnn",
                        "--epochs", "1", "--rows", "600", *recipe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "hpcnn  seed 0:" in r.stdout and "mean final test accuracy" in r.stdout
    assert ("translation 0.1" in r.stdout) == bool(recipe) and ("(cosine)" in r.stdout) != bool(recipe)


def test_fit_overlap_augment_smoke(tmp_path):
    """bench_fit_overlap.py --augment (issue 13's 'augmentation costs nothing' figure) runs: every
    mode trains, the op timings and both cost ratios are printed."""
    pytest.importorskip("h5py", reason="the benchmark writes the tutorial's file with h5py")
    # --op-reps 2: the op-alone timings run and print as in a real run, 2 calls each instead of 100.
    r = subprocess.run([sys.executable, str(BENCH / "bench_fit_overlap.py"), "--rows", "500", "--rounds", "1",
                        "--augment", "--op-reps", "2", "--dir", str(tmp_path)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    for line in ("memory arrays, augmented", "tutorial file, streamed, augmented",
                 "the augmentation op alone", "padded crop (pad 4)",
                 "augmentation's cost, memory arrays: step time x",
                 "augmentation's cost, tutorial file, streamed: step time x"):
        assert line in r.stdout, (line, r.stdout)
    assert not list(tmp_path.iterdir())  # its HDF5 files removed


def test_fit_speed_against_a_baseline_smoke():
    """bench_fit_speed.py (issue 23's 'training speed unchanged' figure) runs this build against a
    baseline interpreter (here the same one) and prints both and the ratio."""
    r = subprocess.run([sys.executable, str(BENCH / "bench_fit_speed.py"), "--rows", "500", "--epochs", "1",
                        "--rounds", "1", "--baseline-python", f"same={sys.executable}"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "this build" in r.stdout and "\nsame " in r.stdout and "x, " in r.stdout


def test_latency_stats_median_and_p90():
    s = bench.latency_stats([0.001 * i for i in range(1, 11)])  # 1..10 ms
    assert s["calls"] == 10 and s["median_ms"] == pytest.approx(5.5) and s["p90_ms"] == pytest.approx(9.0)
    with pytest.raises(ValueError, match="no calls"):
        bench.latency_stats([])


def test_hpcnn_worker_reports_versions_and_single_image_latency():
    res = bench.run_worker(sys.executable, "hpcnn", 2, 1, 1, 1, "resnet20", latency_calls=3)
    import hpcnn
    assert res["versions"]["hpcnn"] == hpcnn.__version__ and res["versions"]["blas"]
    assert set(res["latency"]) == {"call", "predict"} and all(len(v) == 3 and min(v) > 0
                                                              for v in res["latency"].values())


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_peer_worker_reports_its_versions_and_latency(framework):
    """Where the peer is installed: the versions it ran (torch's oneDNN, Keras) and its latency."""
    if not bench.importable(sys.executable, framework):
        pytest.skip(f"{framework} is not installed for this Python (bench/bench_resnet.py --python names an interpreter that has it)")
    res = bench.run_worker(sys.executable, framework, 2, 1, 1, 1, "tutorial", latency_calls=2)
    assert res["versions"][framework] and "onednn" in res["versions"]
    assert "call" in res["latency"] and len(res["latency"]["call"]) == 2


def test_bench_script_prints_versions_and_latency(tmp_path):
    csv_path = tmp_path / "r.csv"
    r = subprocess.run([sys.executable, str(BENCH / "bench_train.py"), "--frameworks", "hpcnn", "--rounds", "1",
                        "--steps", "1", "--warmup", "1", "--batch", "4", "--latency", "3", "--csv", str(csv_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    import hpcnn
    assert f"# versions: hpcnn: hpcnn {hpcnn.__version__}" in r.stdout
    assert "# single-image latency, 3 calls per round" in r.stdout
    assert "model.predict(x)" in r.stdout and "median ms" in r.stdout
    import csv
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    assert rows and all(row["versions"].startswith("hpcnn ") and float(row["latency_predict_median_ms"]) > 0
                        for row in rows)


def test_frameworks_taking_turns_step_by_step():
    """interleave='steps': one served worker per framework for the whole run (here hpcnn and the
    same hpcnn as a baseline), every step and single-image call counted, and the paired ratio (the
    median over the turns of the step time over hpcnn's in the same turn) beside the means."""
    res = bench.compare(["hpcnn"], 4, 3, 1, 1, 2, baselines={"again": sys.executable}, model="resnet20",
                        latency_calls=2, interleave="steps")
    for label in ("hpcnn", "again"):
        for mode in ("train", "infer"):
            row = res[(label, mode)]
            assert row["steps"] == 6 and row["params"] == 272_474  # 2 rounds x 3 steps
            assert row["paired_hpcnn_speedup"] > 0
        assert res[(label, "latency")]["call"]["calls"] == 4 and res[(label, "latency")]["predict"]["calls"] == 4
    assert res[("hpcnn", "train")]["paired_hpcnn_speedup"] == 1.0
    rows = bench.comparison_rows(res, None, "resnet20")
    table = bench.format_comparison(rows)
    assert "paired" in table.splitlines()[0] and len(table.splitlines()) == 5
    with pytest.raises(ValueError, match="interleave must be"):
        bench.compare(["hpcnn"], 4, 1, 1, 1, 1, interleave="rounds")


def test_a_served_worker_that_fails_names_its_error():
    """A worker that dies (here: at its arguments, an unknown model) is a RuntimeError with its
    stderr, not a hang."""
    with pytest.raises(RuntimeError, match="(?s)the hpcnn benchmark worker failed.*invalid choice: 'resnet21'"):
        bench.ServedWorker(sys.executable, "hpcnn", 4, 1, "resnet21")


def test_the_served_protocol():
    """bench_workers.serve on a fake session: the greeting, one answer per command, a bad command
    refused by name."""
    session = bw.Session({"train": lambda count, warmup: [0.5] * count}, 7, {"x": "1"})
    out = io.StringIO()
    assert bw.serve(session, io.StringIO("run train 2 0\nquit\nrun train 9 9\n"), out) == 0
    lines = out.getvalue().splitlines()
    assert [line.startswith(bw.ANSWER) for line in lines] == [True, True]
    assert lines[1] == bw.ANSWER + "[0.5, 0.5]" and '"params": 7' in lines[0]
    with pytest.raises(ValueError, match="unknown command 'run fly 1 0'"):
        bw.serve(session, io.StringIO("run fly 1 0\n"), io.StringIO())


def test_bench_fold_smoke():
    """bench_fold.py (issue 27's A/B of the BN fold in one process) runs and checks the two models agree."""
    r = subprocess.run([sys.executable, str(BENCH / "bench_fold.py"), "--pairs", "1", "--batch", "2", "1"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "batch    2 apart / folded: median of the paired ratios" in r.stdout and "batch    1 folded" in r.stdout


@pytest.mark.parametrize("script", ["bench_resnet", "bench_photos"])
def test_scripts_that_import_bench_train_run_as_modules_too(script):
    # `python -m bench.bench_resnet` (from the checkout) as well as `python bench/bench_resnet.py`:
    # the sibling bench_train is found either way.
    r = subprocess.run([sys.executable, "-m", f"bench.{script}", "--help"], capture_output=True, text=True,
                       cwd=str(paths.ROOT), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage" in r.stdout
