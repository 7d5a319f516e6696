"""``keras.preprocessing.image``: the image file helpers (load_img, img_to_array, array_to_img,
save_img, from hpcnn.image_files); ImageDataGenerator is not in hpcnn (the augmentation layers
are: RandomFlip, RandomTranslation, RandomCrop)."""
from __future__ import annotations

from .._compat import install

install(__name__, "preprocessing.image", sources=["hpcnn.image_files"],
        default_advice="no ImageDataGenerator: train from arrays or an HDF5 file (hpcnn.data.HDF5Dataset) and "
                       "augment inside the model with RandomFlip, RandomTranslation and RandomCrop")
