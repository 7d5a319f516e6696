"""``keras.preprocessing.image``: ImageDataGenerator and the image helpers are not in hpcnn (the
augmentation layers are: RandomFlip, RandomTranslation, RandomCrop)."""
from __future__ import annotations

from .._compat import install

install(__name__, "preprocessing.image",
        default_advice="no image loading: read images with Pillow/NumPy and train from arrays or an HDF5 file "
                       "(hpcnn.data.HDF5Dataset); augment inside the model with RandomFlip, RandomTranslation "
                       "and RandomCrop")
