"""MNIST: 60,000 + 10,000 28x28 grey digits (Keras layout: x uint8 (N,28,28), y uint8 (N,))."""
from __future__ import annotations

import os
from typing import Optional

from . import converters
from ._download import DatasetUnavailable, data_dir, download, source_url

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


def _find_local(subdir, local_dirs, directory=None) -> Optional[str]:
    """The first of `local_dirs` and <directory or data dir>/<subdir> holding the four IDX files."""
    for d in list(local_dirs) + [os.path.join(directory or data_dir(), subdir)]:
        try:
            converters.find_idx_files(d)
            return d
        except (ValueError, OSError):
            continue
    return None


def fetch_idx(name, subdir, url_var, base_url, md5, local_dirs, kind, directory=None) -> str:
    """A folder with the four IDX files: a local one (see _find_local), else <directory or data
    dir>/<subdir>, whose missing files are downloaded from base_url ($HPCNN_<url_var>_URL
    overrides it) and MD5-verified. DatasetUnavailable when they cannot be downloaded."""
    found = _find_local(subdir, local_dirs, directory)
    if found:
        return found
    folder = os.path.join(directory or data_dir(), subdir)
    base = source_url(url_var, base_url)
    try:
        for fname, digest in md5.items():
            download(base.rstrip("/") + "/" + fname, os.path.join(folder, fname), md5=digest)
    except ValueError:
        raise  # a checksum mismatch: the file is wrong, not missing
    except OSError as e:
        raise DatasetUnavailable(name, folder, str(e), kind) from None
    return folder


def load_idx(path, name, subdir, url_var, base_url, md5, local_dirs, kind, download_if_missing):
    if path is None:
        path = _find_local(subdir, local_dirs)
        if path is None and not download_if_missing:
            raise FileNotFoundError(f"{name} not found in {local_dirs + [os.path.join(data_dir(), subdir)]} "
                                    "(and download_if_missing=False)")
        if path is None:
            path = fetch_idx(name, subdir, url_var, base_url, md5, local_dirs, kind)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{name} not found: '{path}'")
    if os.path.isfile(path) and path.endswith((".h5", ".hdf5")):
        return converters.load_hdf5(path)
    if os.path.isfile(path) and path.endswith(".npz"):
        return converters.load_npz(path)
    return converters.load_idx_folder(path)


def fetch(directory: Optional[str] = None) -> str:
    """The folder with MNIST's four IDX files, downloaded into <directory or data dir>/mnist
    (MD5-verified) when missing; $HPCNN_MNIST_URL overrides the base URL."""
    return fetch_idx("MNIST", SUBDIR, "MNIST", BASE_URL, MD5, LOCAL_DIRS, "mnist", directory)


def load_data(path: Optional[str] = None, download_if_missing: bool = True):
    """(x_train, y_train), (x_valid, y_valid) as Keras returns them.

    Parameters
    ----------
    path : str or None
        A folder with the four IDX files (.gz or not), Keras' mnist.npz, or an HDF5 file in the
        tutorial layout. None: <data_dir>/mnist, downloaded (MD5-checked) if missing.
    download_if_missing : bool
        False: a FileNotFoundError instead of a download when nothing is found.
    """
    return load_idx(path, "MNIST", SUBDIR, "MNIST", BASE_URL, MD5, LOCAL_DIRS, "mnist", download_if_missing)


def save_hdf5(out: str, path: Optional[str] = None, **kw) -> str:
    """load_data(path), written to `out` in the tutorial's HDF5 layout (x_train, y_train, x_valid,
    y_valid; see hpcnn.datasets.converters.to_hdf5 for the keyword arguments)."""
    train, valid = load_data(path)
    return converters.to_hdf5(out, train, valid, **kw)
