"""The main job, small: `hpcnn tutorial --synthetic` end to end (HDF5 file, CPU training from it,
evaluation, predictions, timings CSV, summary, saved model that loads back)."""
import csv
import io
import json
import os
import subprocess
import sys

import numpy as np

import hpcnn


def test_tutorial_end_to_end(tmp_path):
    out = tmp_path / "tut"
    r = subprocess.run([sys.executable, "-m", "hpcnn", "tutorial", "--synthetic", "--epochs", "2",
                        "--train-rows", "3000", "--device", "cpu", "--out", str(out), "--verbose", "2"],
                       capture_output=True, text=True, timeout=600)
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
    assert os.path.getsize(out / "dataset_cifar10.hdf5") > 0
    model = hpcnn.models.load_model(str(out / "model_cpu.h5"))
    assert model.count_params() == 787_530
    assert model.predict(np.zeros((2, 32, 32, 3), np.float32)).shape == (2, 10)


def test_tutorial_gpu_only_without_gpu_says_why(tmp_path):
    if hpcnn.list_physical_devices("GPU"):
        return
    r = subprocess.run([sys.executable, "-m", "hpcnn", "tutorial", "--synthetic", "--epochs", "1", "--train-rows",
                        "300", "--device", "gpu", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "no GPU is usable" in r.stderr + r.stdout
