"""CIFAR-10: 50,000 + 10,000 32x32 RGB images in 10 classes (Keras layout: x uint8 (N,32,32,3),
y uint8 (N,1))."""
from __future__ import annotations

import os
from typing import Optional

from . import converters
from ._download import data_dir, download

class_names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
num_classes = 10

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
MD5 = "c58f30108f718f92721af3b95e74349a"
BINARY_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
BINARY_MD5 = "c32a1d4ab5d03f1284b67883e8d87530"
ARCHIVE = "cifar-10-python.tar.gz"


def load_data(path: Optional[str] = None, download_if_missing: bool = True):
    """(x_train, y_train), (x_valid, y_valid) as Keras returns them.

    path: the python or binary tarball, an extracted folder, or an HDF5 file in the tutorial
    layout. None: <data_dir>/cifar-10-python.tar.gz, downloaded (MD5-checked) if missing.
    """
    if path is None:
        path = os.path.join(data_dir(), ARCHIVE)
        if not os.path.exists(path):
            if not download_if_missing:
                raise FileNotFoundError(f"CIFAR-10 not found at '{path}' (and download_if_missing=False)")
            download(URL, path, md5=MD5)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"CIFAR-10 not found: '{path}'")
    if os.path.isfile(path) and path.endswith((".h5", ".hdf5")):
        return converters.load_hdf5(path)
    return converters.load_cifar10(path)


def save_hdf5(out: str, path: Optional[str] = None, **kw) -> str:
    """load_data(path), written to `out` in the tutorial's HDF5 layout (x_train, y_train, x_valid,
    y_valid; see hpcnn.datasets.converters.to_hdf5 for the keyword arguments)."""
    train, valid = load_data(path)
    return converters.to_hdf5(out, train, valid, **kw)
