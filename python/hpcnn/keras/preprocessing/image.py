"""``keras.preprocessing.image``: ImageDataGenerator and the image helpers are not in hpcnn."""
from __future__ import annotations

from .._compat import install

install(__name__, "preprocessing.image",
        default_advice="no image loading or augmentation: read images with Pillow/NumPy, augment the arrays, and "
                       "train from arrays or an HDF5 file (hpcnn.data.HDF5Dataset)")
