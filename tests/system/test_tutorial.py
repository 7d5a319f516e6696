"""The main job, small: `hpcnn tutorial --synthetic` end to end (HDF5 file, CPU training from it,
evaluation, predictions, timings CSV, summary, saved model that loads back)."""
import csv
import importlib.util
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import hpcnn


def env_with_data_dir(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("HPCNN_DATA", "HPCNN_DATA_DIR")}
    env.update(HPCNN_DATA_DIR=str(tmp_path / "data"), MPLBACKEND="Agg", **extra)
    return env


def test_tutorial_end_to_end(tmp_path):
    out = tmp_path / "tut"
    r = subprocess.run([sys.executable, "-m", "hpcnn", "tutorial", "--synthetic", "--epochs", "2",
                        "--train-rows", "3000", "--device", "cpu", "--out", str(out), "--verbose", "2"],
                       capture_output=True, text=True, timeout=600, env=env_with_data_dir(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Total params: 787,530" in r.stdout and "Test accuracy:" in r.stdout
    rows = list(csv.DictReader(io.StringIO((out / "timings.csv").read_text())))
    assert [row["epoch"] for row in rows] == ["1", "2"] and float(rows[0]["images_per_second"]) > 0
    summary = json.loads((out / "summary.json").read_text())
    hist = summary["runs"]["cpu"]["history"]
    # 2 x 12 steps on the (deliberately hard) synthetic data: learning has only started, but the
    # loss goes down and everything is finite (learning itself is tested on Fashion-MNIST).
    assert all(np.isfinite(hist[k]).all() for k in ("loss", "val_loss", "accuracy", "val_accuracy"))
    assert hist["loss"][1] < hist["loss"][0]
    # The timings are the History's own lists, beside Keras' keys (the CSV rows and speed-up read them).
    assert sorted(hist) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert [float(row["seconds"]) for row in rows] == pytest.approx(summary["runs"]["cpu"]["epoch_seconds"])
    assert len(summary["runs"]["cpu"]["images_per_second"]) == 2
    # The dataset is kept in the data dir (not in --out), and the output says where it went.
    h5 = tmp_path / "data" / "synthetic_cifar10_seed0_train3000.hdf5"
    assert os.path.getsize(h5) > 0 and summary["hdf5"] == str(h5)
    assert f"written to {h5}" in r.stdout
    assert not [p for p in os.listdir(out) if p.endswith(".hdf5")]
    # Labelled device lines, not bare lists.
    assert "\nCPUs: [PhysicalDevice(" in "\n" + r.stdout and "\nGPUs: [" in r.stdout
    model = hpcnn.models.load_model(str(out / "model_cpu.h5"))
    assert model.count_params() == 787_530
    assert model.predict(np.zeros((2, 32, 32, 3), np.float32)).shape == (2, 10)


def test_tutorial_gpu_only_without_gpu_says_why(tmp_path):
    if hpcnn.list_physical_devices("GPU"):
        return
    r = subprocess.run([sys.executable, "-m", "hpcnn", "tutorial", "--synthetic", "--epochs", "1", "--train-rows",
                        "300", "--device", "gpu", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=300, env=env_with_data_dir(tmp_path))
    assert r.returncode != 0
    assert "no GPU is usable" in r.stderr + r.stdout
    # Failed before the expensive work: no dataset generated or written.
    assert "Data:" not in r.stdout and not (tmp_path / "data").exists()
    assert not list((tmp_path / "out").glob("*.hdf5")) if (tmp_path / "out").exists() else True


def test_tutorial_reuses_cifar10_from_the_data_dir(tmp_path):
    """CIFAR-10's tutorial file in the data dir (as `hpcnn convert cifar10 --download` leaves it):
    the tutorial trains from it without converting or downloading anything, and says so."""
    from tests.support.cifar_files import cifar_python_tar, fake_cifar
    archive = cifar_python_tar(tmp_path / "cifar-10-python.tar.gz", fake_cifar(n_per_batch=20))
    h5 = tmp_path / "data" / "dataset_cifar10.hdf5"
    (tmp_path / "data").mkdir()
    env = env_with_data_dir(tmp_path, HPCNN_CIFAR10_URL=(tmp_path / "no-download").as_uri())
    r = subprocess.run([sys.executable, "-m", "hpcnn", "convert", "cifar10", archive, str(h5)], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    before = h5.stat().st_mtime_ns
    r = subprocess.run([sys.executable, "-m", "hpcnn", "tutorial", "--epochs", "1", "--batch-size", "25", "--device",
                        "cpu", "--out", str(tmp_path / "out"), "--verbose", "0"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"Data: CIFAR-10, reusing {h5}" in r.stdout and h5.stat().st_mtime_ns == before
    assert "Train: X=(100, 32, 32, 3)" in r.stdout and "Test accuracy:" in r.stdout
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["hdf5"] == str(h5)


def test_tutorial_without_gpu_gives_the_reason_once(tmp_path):
    """`hpcnn tutorial --synthetic --epochs 1` (CPU, then GPU where usable) on a node without a GPU:
    the reason is printed once, on the line that says the GPU run is skipped, and the CPU run goes on."""
    if hpcnn.list_physical_devices("GPU"):
        return
    reason = hpcnn.gpu_unavailable_reason()
    r = subprocess.run([sys.executable, "-m", "hpcnn", "tutorial", "--synthetic", "--epochs", "1", "--train-rows",
                        "300", "--out", str(tmp_path / "out"), "--verbose", "0"], capture_output=True, text=True,
                       timeout=300, env=env_with_data_dir(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    output = r.stdout + r.stderr
    assert reason and output.count(reason) == 1, output
    assert f"No GPU run: {reason}" in r.stdout and "\nGPUs: []\n" in r.stdout
    if importlib.util.find_spec("matplotlib") is None:
        # The run goes on without the plots and says why; the plot files are not checked here.
        assert "(no plots: plots need matplotlib" in r.stdout, r.stdout[-2000:]
        assert not (tmp_path / "out" / "curves.png").exists()
        pytest.skip("the tutorial's plots (curves.png, predictions.png) need matplotlib "
                    "(`pip install --no-build-isolation '.[plot]'`)")
    assert (tmp_path / "out" / "curves.png").exists() and (tmp_path / "out" / "predictions.png").exists()
