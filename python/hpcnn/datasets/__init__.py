"""Datasets in the Keras layout, their converters to the tutorial's HDF5 layout, and downloads.

    (x_train, y_train), (x_valid, y_valid) = hpcnn.datasets.cifar10.load_data()
    hpcnn.datasets.converters.to_hdf5('dataset_cifar10.hdf5', (x_train, y_train), (x_valid, y_valid))

load_data(path=None) reads a local copy (official archive, extracted folder, IDX files, a
Keras .npz, or an HDF5 file in the tutorial layout); without a path it looks in the data
directory ($HPCNN_DATA_DIR, else ~/.hpcnn/datasets) and downloads there, checksum-verified,
when nothing is found (login nodes have internet; compute nodes usually do not): a dataset that
is neither there nor downloadable raises DatasetUnavailable (a FileNotFoundError) saying what to do.
From the shell: `hpcnn convert cifar10 --download` (also mnist, fashion_mnist).
"""
from . import cifar10, converters, fashion_mnist, mnist
from ._download import DatasetUnavailable, data_dir, download

__all__ = ["cifar10", "mnist", "fashion_mnist", "converters", "download", "data_dir", "DatasetUnavailable"]
