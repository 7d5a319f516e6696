"""Fashion-MNIST: 60,000 + 10,000 28x28 grey clothing images (Keras layout: x uint8 (N,28,28),
y uint8 (N,)). Debian's dataset-fashion-mnist package is used when installed."""
from __future__ import annotations

from typing import Optional

from . import converters
from .mnist import fetch_idx, load_idx

class_names = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
num_classes = 10

BASE_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
MD5 = {
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}
SUBDIR = "fashion-mnist"
# Debian's dataset-fashion-mnist (recompressed .gz files: same arrays, different checksums).
LOCAL_DIRS = ["/usr/share/datasets/fashion-mnist"]


def load_data(path: Optional[str] = None, download_if_missing: bool = True):
    """(x_train, y_train), (x_valid, y_valid) as Keras returns them (see mnist.load_data)."""
    return load_idx(path, "Fashion-MNIST", SUBDIR, "FASHION_MNIST", BASE_URL, MD5, LOCAL_DIRS, "fashion_mnist",
                 download_if_missing)


def fetch(directory: Optional[str] = None) -> str:
    """The folder with Fashion-MNIST's four IDX files: Debian's package when installed, else
    <directory or data dir>/fashion-mnist, downloaded (MD5-verified) when missing;
    $HPCNN_FASHION_MNIST_URL overrides the base URL."""
    return fetch_idx("Fashion-MNIST", SUBDIR, "FASHION_MNIST", BASE_URL, MD5, LOCAL_DIRS, "fashion_mnist", directory)


def save_hdf5(out: str, path: Optional[str] = None, **kw) -> str:
    """load_data(path), written to `out` in the tutorial's HDF5 layout (x_train, y_train, x_valid,
    y_valid; see hpcnn.datasets.converters.to_hdf5 for the keyword arguments)."""
    train, valid = load_data(path)
    return converters.to_hdf5(out, train, valid, **kw)
