"""The tutorial's data, shared by the verbs that train on it (``hpcnn tutorial``, ``hpcnn
dist-train``) and by notebooks 01 and 03: the HDF5 file in the data directory (named by what it
holds, made once and reused), CIFAR-10 loaded or downloaded into it, or generated CIFAR-shaped
images with a learnable class signal (``--synthetic``) where CIFAR-10 is not available."""
from __future__ import annotations

import os
from typing import Optional, Tuple

import numpy as np

from . import data, datasets, suggestions
from .datasets import converters

CLASS_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def synthetic_cifar10(n_train: int = 50000, n_valid: int = 10000, seed: int = 0):
    """CIFAR-10-shaped uint8 data whose class shows as a faint coloured square near a
    class-specific place (jittered position and colour) over noise: learnable over a few epochs,
    so curves and accuracies mean something, but no substitute for CIFAR-10."""
    rng = np.random.default_rng(seed)

    def make(n):
        y = rng.integers(0, 10, (n, 1)).astype(np.uint8)
        x = rng.integers(0, 200, (n, 32, 32, 3)).astype(np.int16)
        base = np.array([[(40 * k) % 256, (90 + 50 * k) % 256, (200 - 20 * k) % 256] for k in range(10)], np.int16)
        for i in range(n):
            k = int(y[i, 0])
            r = 4 + 6 * (k // 4) + int(rng.integers(-3, 4))
            c = 4 + 7 * (k % 4) + int(rng.integers(-3, 4))
            colour = base[k] + rng.integers(-50, 51, 3)
            patch = x[i, max(r, 0):r + 5, max(c, 0):c + 5, :]
            patch[...] = (patch + colour) // 2  # half-transparent: the square blends into the noise
        return np.clip(x, 0, 255).astype(np.uint8), y

    return make(n_train), make(n_valid)


def write_tutorial_hdf5(path: str, x, y, xv, yv) -> None:
    """The tutorial's file: x_train, y_train, x_valid, y_valid, gzip; hpcnn's default chunks
    (whole images) rather than h5py's automatic ones."""
    data.write_hdf5(path, {"x_train": x, "y_train": y, "x_valid": xv, "y_valid": yv}, compression="gzip")


def cifar10_unavailable(e) -> SystemExit:
    """The message for a command-line user when CIFAR-10 is neither here nor downloadable."""
    return SystemExit(
        f"hpcnn tutorial: CIFAR-10 is not in '{e.where}' and cannot be downloaded here ({e.reason}).\n"
        f"  on a login node with internet:    {suggestions.convert_download('cifar10')}   (then run this again)\n"
        f"  with a copy of cifar-10-python.tar.gz or the tutorial's HDF5 file:    {suggestions.tutorial_data()}\n"
        f"  without CIFAR-10 (generated CIFAR-shaped data):    {suggestions.tutorial_synthetic()}")


def hdf5_path(synthetic: bool = False, train_rows: Optional[int] = None, seed: int = 0,
              directory: Optional[str] = None) -> str:
    """The tutorial's HDF5 file in the data dir ($HPCNN_DATA_DIR, else ~/.hpcnn/datasets), named
    by what it holds, so `hpcnn tutorial` and notebook 01 make it once and share it:
    dataset_cifar10.hdf5, synthetic_cifar10_seed0.hdf5, ..._train5000.hdf5 for a subset."""
    name = f"synthetic_cifar10_seed{seed}" if synthetic else "dataset_cifar10"
    if train_rows:
        name += f"_train{train_rows}"
    return os.path.join(directory or datasets.data_dir(), name + ".hdf5")


def synthetic_split_sizes(train_rows: Optional[int]) -> Tuple[int, int]:
    """(train, valid) rows of the synthetic set: 50,000 + 10,000, or a subset and a fifth of it."""
    if not train_rows:
        return 50000, 10000
    return train_rows, min(10000, max(500, train_rows // 5))


def prepare_data(a) -> Tuple[str, np.ndarray, np.ndarray, str]:
    """(HDF5 file to train from, x_valid, y_valid, source). --data FILE.hdf5 is used as it is; an
    archive given with --data is converted into --out; otherwise (CIFAR-10 from the data dir, or
    the synthetic set) the file is kept in the data dir and reused by later runs."""
    source = "synthetic (generated)" if a.synthetic else (a.data or "CIFAR-10")
    if a.data and a.data.endswith((".h5", ".hdf5")) and os.path.isfile(a.data) and not a.train_rows:
        h5, keep = a.data, True
    elif a.data:
        h5, keep = os.path.join(a.out, "dataset_cifar10.hdf5"), False
    else:
        h5, keep = hdf5_path(a.synthetic, a.train_rows, a.seed, a.data_dir), True
    if keep and os.path.exists(h5):
        print(f"Data: {source}, reusing {h5}" + ("" if h5 == a.data else " (delete it to rebuild)"))
        (x, y), (xv, yv) = converters.load_hdf5(h5)
    else:
        if a.synthetic:
            (x, y), (xv, yv) = synthetic_cifar10(*synthetic_split_sizes(a.train_rows), seed=a.seed)
        else:
            try:
                full = hdf5_path(directory=a.data_dir)   # made by an earlier run or `hpcnn convert --download`
                src = a.data or (full if os.path.exists(full) else datasets.cifar10.fetch(a.data_dir))
                (x, y), (xv, yv) = datasets.cifar10.load_data(src)
            except datasets.DatasetUnavailable as e:
                raise cifar10_unavailable(e) from None
            if a.train_rows:
                x, y = x[:a.train_rows], y[:a.train_rows]
        os.makedirs(os.path.dirname(os.path.abspath(h5)), exist_ok=True)
        write_tutorial_hdf5(h5, x, y, xv, yv)
        print(f"Data: {source}, written to {h5} ({os.path.getsize(h5) / 1e6:.0f} MB)")
    print(f"Train: X={x.shape}, y={y.shape}; Test: X={xv.shape}, y={yv.shape}; "
          f"number of classes= {len(set(np.asarray(y).flatten()))}")
    return h5, xv, yv, source
