"""``keras.preprocessing``: image_dataset_from_directory (Keras' alias of the keras.utils one); the
rest is not in hpcnn (prepare arrays with NumPy, or an HDF5 file for hpcnn.data.HDF5Dataset)."""
from __future__ import annotations

from .._compat import install
from . import image
from ...data import image_dataset_from_directory

install(__name__, "preprocessing", default_advice="prepare arrays with NumPy, or write them to HDF5 "
                                                  "(hpcnn.data.write_hdf5) and train from hpcnn.data.HDF5Dataset")

__all__ = ["image", "image_dataset_from_directory"]
