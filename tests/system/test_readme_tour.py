"""README's "A short tour" runs as written (issue 43, item 2), in a fresh folder, on a node with
internet (the data directory holds `dataset_cifar10.hdf5`, as `hpcnn convert cifar10 --download`
leaves it) and without (it holds `synthetic_cifar10_seed0.hdf5`, as README's command (1) leaves it,
and the tour's one data line names it, as README's comment on that line says). The block is read
from README.md and run unchanged but for that name; the files are small (600 images), so ten
epochs take seconds."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hpcnn
from tests.support.cifar_files import cifar_python_tar, fake_cifar
from hpcnn import tutorial
from hpcnn.data import dataset_info
from tests.support import paths

ROOT = paths.ROOT
README = (ROOT / "README.md").read_text(encoding="utf-8")


def tour_block() -> str:
    section = README.split("## A short tour", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def offline_name() -> str:
    """The file README's tour names for a node without internet (its comment on the data line)."""
    line = next(line for line in tour_block().splitlines() if line.startswith("data = "))
    return re.search(r"without internet: '([^']+)'", line).group(1)


def converted_cifar(tmp_path, out, per_batch=100):
    """What `hpcnn convert cifar10` writes from the official archive, from a small archive in the
    official format (5 x per_batch training images, per_batch test images)."""
    tar = cifar_python_tar(tmp_path / "cifar-10-python.tar.gz", fake_cifar(per_batch))
    r = subprocess.run([sys.executable, "-m", "hpcnn", "convert", "cifar10", tar, str(out)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def run_tour(tmp_path, data_dir, block):
    work = tmp_path / "fresh"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("HPCNN_DATA", "HPCNN_DATA_DIR")}
    env.update(HPCNN_DATA_DIR=str(data_dir), MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, "-c", block], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert r.stdout.count("Epoch ") == 10, r.stdout[-2000:]
    model = hpcnn.load_model(work / "cnn.keras")
    assert model.predict(np.zeros((1, 32, 32, 3), np.float32)).shape == (1, 10)
    return r


def test_the_tour_runs_as_written_with_cifar10_in_the_data_directory(tmp_path):
    data = tmp_path / "datasets"
    data.mkdir()
    converted_cifar(tmp_path, data / "dataset_cifar10.hdf5")
    run_tour(tmp_path, data, tour_block())


def test_the_tour_runs_without_internet_on_the_synthetic_file_of_command_1(tmp_path):
    data = tmp_path / "datasets"
    data.mkdir()
    name = offline_name()
    assert name == Path(tutorial.hdf5_path(synthetic=True)).name   # what command (1) writes
    # What `hpcnn tutorial --synthetic` writes (its generator and writer), small.
    (x, y), (xv, yv) = tutorial.synthetic_cifar10(500, 100)
    tutorial.write_tutorial_hdf5(str(data / name), x, y, xv, yv)
    block = tour_block().replace("data = 'dataset_cifar10.hdf5'", f"data = {name!r}", 1)
    assert block != tour_block()
    run_tour(tmp_path, data, block)


def test_the_synthetic_file_has_the_same_layout(tmp_path):
    """README says so: the same datasets, dtypes and row shapes as the converted CIFAR-10."""
    converted_cifar(tmp_path, tmp_path / "c.hdf5", per_batch=10)
    (x, y), (xv, yv) = tutorial.synthetic_cifar10(50, 10)
    tutorial.write_tutorial_hdf5(str(tmp_path / "s.hdf5"), x, y, xv, yv)
    for name in ("x_train", "y_train", "x_valid", "y_valid"):
        c, s = dataset_info(tmp_path / "c.hdf5", name), dataset_info(tmp_path / "s.hdf5", name)
        assert (c["dtype"], tuple(c["shape"][1:])) == (s["dtype"], tuple(s["shape"][1:])), name
    tour = " ".join(README.split("## A short tour", 1)[1].split("\n## ", 1)[0].split())
    assert "same layout" in tour and offline_name() in tour


def test_without_either_file_the_error_says_what_to_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HPCNN_DATA", "HPCNN_DATA_DIR")}
    env.update(HPCNN_DATA_DIR=str(tmp_path / "empty"))
    r = subprocess.run([sys.executable, "-c", tour_block()], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0
    assert ("FileNotFoundError" in r.stderr or "MissingFile" in r.stderr) and "hpcnn convert cifar10 --download" in r.stderr, r.stderr[-2000:]
    assert "synthetic_cifar10_seed0.hdf5" in r.stderr, r.stderr[-2000:]
