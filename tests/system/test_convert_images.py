"""`hpcnn convert images DIR OUT.hdf5` end to end: Keras' files and subsets for the seed, the class
names in `hpcnn convert info`, damaged files listed, the arguments checked, an HDF5Dataset trains
from the result; and the decoding threads follow HPCNN_NUM_THREADS."""
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.support import image_folders as support

import hpcnn
from hpcnn.data import HDF5Dataset, image_dataset_from_directory, read_dataset
from hpcnn.image_folders import read_meta


def convert(*args, env=None):
    return subprocess.run([sys.executable, "-m", "hpcnn", "convert", *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=300)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = support.make_folder(tmp_path_factory.mktemp("conv") / "photos", {"owl": 9, "bee": 7})
    (root / "bee" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 broken")
    return root


def test_convert_images_matches_keras_subsets(folder, tmp_path):
    out = tmp_path / "photos.hdf5"
    r = convert("images", folder, out, "--size", 10, 12, "--validation-split", 0.25, "--seed", 3,
                env={"HPCNN_NUM_THREADS": "2"})
    assert r.returncode == 0, r.stderr
    assert "Decoding 17 images on 2 decoding thread(s)" in r.stdout and "17/17" in r.stdout
    assert "broken.jpg" in r.stderr and "refused" in r.stderr
    meta = read_meta(str(out))
    with pytest.warns(UserWarning, match="broken.jpg"):
        train, val = image_dataset_from_directory(str(folder), seed=3, validation_split=0.25, subset="both",
                                                  image_size=(10, 12), verbose=False, cache_dir=str(tmp_path))
    assert meta["class_names"] == ["bee", "owl"] == train.class_names
    assert meta["file_paths"]["train"] == train.file_paths and meta["file_paths"]["valid"] == val.file_paths
    x = read_dataset(str(out), "x_train")
    assert x.shape == (len(train.file_paths), 10, 12, 3) and x.dtype == np.uint8
    y = read_dataset(str(out), "y_train")
    assert y.tolist() == [["bee", "owl"].index(p.split(os.sep)[-2]) for p in train.file_paths]
    info = convert("info", out)
    assert info.returncode == 0 and "class_names (2): bee, owl" in info.stdout and "x_valid" in info.stdout
    ds = HDF5Dataset(str(out), x="x_train", y="y_train", batch_size=4, scale=1.0)
    m = hpcnn.Sequential([hpcnn.keras.layers.Input((10, 12, 3)), hpcnn.keras.layers.Rescaling(1 / 255),
                          hpcnn.keras.layers.Flatten(), hpcnn.keras.layers.Dense(2)])
    m.compile("adam", hpcnn.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(ds, epochs=1, verbose=0)


def test_convert_images_arguments(folder, tmp_path):
    r = convert("images", folder, tmp_path / "a.hdf5", "--validation-split", 0.2)
    assert r.returncode == 2 and "--validation-split needs --seed" in r.stderr
    r = convert("images", folder, tmp_path / "b.hdf5", "--interpolation", "lanczos3")
    assert r.returncode == 2 and "'bilinear', 'nearest'" in r.stderr
    r = convert("images", tmp_path / "nowhere", tmp_path / "c.hdf5")
    assert r.returncode == 2 and "is not a folder" in r.stderr
    assert not any(p.name.endswith(".hdf5") for p in tmp_path.iterdir())


def test_conversion_memory_is_bounded_by_the_blocks_not_the_folder(tmp_path):
    """600 files decoded to 200x200 RGB are 72 MB of rows; with blocks of 16 files and two threads
    (at most 4 blocks in flight, about 8 MB) the converting process grows by far less than that."""
    from tests.support import paths
    root = tmp_path / "many"
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(300):
            support.PIL.fromarray(np.full((6, 6, 3), i % 255, np.uint8)).save(root / c / f"{i}.png")
    r = subprocess.run([sys.executable, "-m", "tests.support.images_memory_child", str(root), str(tmp_path / "o.h5"),
                        "200"], capture_output=True, text=True, cwd=paths.ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    grown_mb = int(r.stdout.split()[-1]) / 1024
    assert grown_mb < 36, f"the conversion grew the process by {grown_mb:.0f} MB for 72 MB of rows"
    assert read_dataset(str(tmp_path / "o.h5"), "x_train").shape == (600, 200, 200, 3)
