"""CIFAR-10: 50,000 + 10,000 32x32 RGB images in 10 classes (Keras layout: x uint8 (N,32,32,3),
y uint8 (N,1))."""
from __future__ import annotations

import os
from typing import Optional

from . import converters
from ._download import DatasetUnavailable, data_dir, download, source_url

class_names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
num_classes = 10

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"   # or $HPCNN_CIFAR10_URL (a mirror)
MD5 = "c58f30108f718f92721af3b95e74349a"
BINARY_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
BINARY_MD5 = "c32a1d4ab5d03f1284b67883e8d87530"
ARCHIVE = "cifar-10-python.tar.gz"
HDF5_NAME = "dataset_cifar10.hdf5"   # the tutorial's file, as `hpcnn convert cifar10 --download` writes it


def hdf5_path(directory: Optional[str] = None) -> str:
    """Where the tutorial's HDF5 file of CIFAR-10 lives: <data dir>/dataset_cifar10.hdf5."""
    return os.path.join(directory or data_dir(), HDF5_NAME)


def fetch(directory: Optional[str] = None) -> str:
    """The official python tarball in `directory` (default: the data dir), downloaded from URL
    ($HPCNN_CIFAR10_URL overrides it) when missing; MD5-verified either way. Returns its path.
    DatasetUnavailable when it is missing and cannot be downloaded (no internet)."""
    directory = directory or data_dir()
    try:
        return download(source_url("CIFAR10", URL), os.path.join(directory, ARCHIVE), md5=MD5)
    except ValueError:
        raise  # a checksum mismatch: the file is wrong, not missing
    except OSError as e:
        raise DatasetUnavailable("CIFAR-10", directory, str(e), "cifar10") from None


def load_data(path: Optional[str] = None, download_if_missing: bool = True):
    """(x_train, y_train), (x_valid, y_valid) as Keras returns them.

    Parameters
    ----------
    path : str or None
        The python or binary tarball, an extracted folder, or an HDF5 file in the tutorial
        layout. None: from the data dir ($HPCNN_DATA_DIR, default ~/.hpcnn/datasets): the tarball,
        else the tutorial HDF5 file there, else the tarball downloaded there (MD5-checked).
    download_if_missing : bool
        False: a FileNotFoundError instead of a download when nothing is found.
    """
    if path is None:
        archive = os.path.join(data_dir(), ARCHIVE)
        if os.path.exists(archive):
            path = archive
        elif os.path.exists(hdf5_path()):
            path = hdf5_path()
        elif not download_if_missing:
            raise FileNotFoundError(f"CIFAR-10 not found in '{data_dir()}' (and download_if_missing=False)")
        else:
            path = fetch()
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
