"""MNIST: 60,000 + 10,000 28x28 grey digits (Keras layout: x uint8 (N,28,28), y uint8 (N,))."""
from __future__ import annotations

import os
from typing import Optional

from . import converters
from ._download import data_dir, download

class_names = [str(i) for i in range(10)]
num_classes = 10

BASE_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
SUBDIR = "mnist"
LOCAL_DIRS: list = []


def _load(path, name, subdir, base_url, md5, local_dirs, download_if_missing):
    if path is None:
        for d in list(local_dirs) + [os.path.join(data_dir(), subdir)]:
            try:
                converters.find_idx_files(d)
                path = d
                break
            except (ValueError, OSError):
                continue
        if path is None:
            if not download_if_missing:
                raise FileNotFoundError(f"{name} not found in {local_dirs + [os.path.join(data_dir(), subdir)]} "
                                        "(and download_if_missing=False)")
            path = os.path.join(data_dir(), subdir)
            for fname, digest in md5.items():
                download(base_url + fname, os.path.join(path, fname), md5=digest)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{name} not found: '{path}'")
    if os.path.isfile(path) and path.endswith((".h5", ".hdf5")):
        return converters.load_hdf5(path)
    if os.path.isfile(path) and path.endswith(".npz"):
        return converters.load_npz(path)
    return converters.load_idx_folder(path)


def load_data(path: Optional[str] = None, download_if_missing: bool = True):
    """(x_train, y_train), (x_valid, y_valid) as Keras returns them.

    path: a folder with the four IDX files (.gz or not), Keras' mnist.npz, or an HDF5 file in the
    tutorial layout. None: <data_dir>/mnist, downloaded (MD5-checked) if missing.
    """
    return _load(path, "MNIST", SUBDIR, BASE_URL, MD5, LOCAL_DIRS, download_if_missing)


def save_hdf5(out: str, path: Optional[str] = None, **kw) -> str:
    """load_data(path), written to `out` in the tutorial's HDF5 layout (x_train, y_train, x_valid,
    y_valid; see hpcnn.datasets.converters.to_hdf5 for the keyword arguments)."""
    train, valid = load_data(path)
    return converters.to_hdf5(out, train, valid, **kw)
