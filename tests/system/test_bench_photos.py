"""The 180x180 image model's benchmarks (bench/bench_photos.py, bench_ops.py --model photos; issue
37's speed item): they run (smoke runs with tiny sizes; no timings are asserted), every framework
builds TensorFlow's Image classification model with the same parameters (through the sessions
file bench/photos_sessions.py, as bench_photos.py times them), and the FLOP count matches the
model."""
import subprocess
import sys

import pytest

from hpcnn import bench, bench_workers
from hpcnn.layers import Conv2D, Dense
from tests.support import paths

from bench import photos_sessions

PARAMS = 3_989_285  # TF's tutorial prints 3,989,285 for its first model (5 classes)
SESSIONS = str(paths.ROOT / "bench" / "photos_sessions.py")  # what bench_photos.py passes


def test_photos_flop_count_matches_the_model():
    m, _, _ = photos_sessions.build_hpcnn("photos")
    macs = []
    for layer in m.layers:
        if isinstance(layer, Conv2D):
            h, w, f = layer.output.shape[1:]
            macs.append(h * w * f * layer.kernel_size[0] * layer.kernel_size[1] * layer.inbound_tensors[0].shape[-1])
        elif isinstance(layer, Dense):
            macs.append(layer.inbound_tensors[0].shape[-1] * layer.units)
    row = photos_sessions.MODELS["photos"]
    assert row[0] == pytest.approx(2 * (2 * sum(macs) + sum(macs[1:])) / 1e6)
    assert row[1] == pytest.approx(2 * sum(macs) / 1e6)
    assert row[2] == (180, 180, 3) and row[4] == 5


@pytest.mark.parametrize("text", ["SESSIONS = {}\n", "MODELS = {'m': (1.0, 1.0, (2, 2, 1), 'm', 2)}\n"])
def test_a_sessions_file_without_models_or_ways_to_time_them_is_refused(tmp_path, text):
    path = tmp_path / "s.py"
    path.write_text(text)
    with pytest.raises(ValueError, match="s.py' must define MODELS and SESSIONS or BUILDERS"):
        bench_workers.add_sessions(str(path))
    assert "m" not in bench_workers.MODELS


@pytest.mark.parametrize("model", ["photos", "photos_aug"])
def test_hpcnn_worker_times_the_photos_models(model):
    res = bench.run_worker(sys.executable, "hpcnn", 2, 1, 1, 1, model, sessions=SESSIONS)
    assert len(res["train"]) == 1 and len(res["infer"]) == 1 and min(res["train"]) > 0
    assert res["params"] == PARAMS


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_peer_photos_models_have_the_same_parameters(framework):
    if not bench.importable(sys.executable, framework):
        pytest.skip(f"{framework} is not installed for this Python (bench/bench_photos.py --python names an "
                    "interpreter that has it)")
    for model in ("photos", "photos_aug"):
        assert bench.run_worker(sys.executable, framework, 2, 1, 1, 1, model, sessions=SESSIONS)["params"] == PARAMS


def test_bench_photos_script_smoke(tmp_path):
    r = subprocess.run([sys.executable, str(paths.ROOT / "bench" / "bench_photos.py"), "--frameworks", "hpcnn",
                        "--rounds", "1", "--steps", "1", "--warmup", "1", "--batch", "2", "--latency", "0",
                        "--csv", str(tmp_path / "p.csv")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "# model: photos" in r.stdout and f"trainable parameters: hpcnn {PARAMS:,}" in r.stdout
    assert "hpcnn      train" in r.stdout and "527.7 MFLOP per training image" in r.stdout
    assert "photos" in (tmp_path / "p.csv").read_text()


def test_bench_ops_photos_smoke():
    r = subprocess.run([sys.executable, "-m", "bench.bench_ops", "--model", "photos", "--batch", "2", "--trials", "1",
                        "--min-time", "0.0001", "--peak-seconds", "0.05", "--clock", "cpu"], capture_output=True,
                       text=True, timeout=300, cwd=paths.ROOT)
    assert r.returncode == 0, r.stderr
    assert "batch 2, cpu clock" in r.stdout
    for row in ("conv1 3->16 @180x180", "pool1 2x2 @180x180x16", "conv3 32->64 @45x45", "dense1 30976->128",
                "dense2 128->5", "softmax-xent (5)", f"adam ({PARAMS:,} params)", "training step estimate"):
        assert row in r.stdout, (row, r.stdout)


def test_tensorflow_layer_profile_smoke():
    """TensorFlow's side of the per-layer profile, where TensorFlow is installed for this Python."""
    if not bench.importable(sys.executable, "tensorflow"):
        pytest.skip("tensorflow is not installed for this Python (run bench/photos_layers_tf.py with an "
                    "interpreter that has it)")
    r = subprocess.run([sys.executable, str(paths.ROOT / "bench" / "photos_layers_tf.py"), "--batch", "2",
                        "--steps", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for row in ("conv1 3->16 @180x180", "pool3 2x2 @45x45x64", "dense1 30976->128"):
        assert row in r.stdout, (row, r.stdout)
