"""Folders of image files (JPEG, PNG, BMP, GIF) as training data: Keras' listing and split, the images
decoded once (Pillow, TensorFlow's resize) into an HDF5 file that hpcnn's native loader reads, and
the dataset ``image_dataset_from_directory`` returns. docs/data.md, "A folder of images".

    listing.py   which files, their labels and subset (Keras' rules)
    resize.py    tf.image.resize (bilinear, nearest), smart_resize, resize_with_pad
    decode.py    one file to a row (Pillow), and what is refused
    cache.py     the decoded images' HDF5 file: workers, bounded memory, key, atomic write
    dataset.py   ImageDataset and the tf.data idioms
    folder.py    image_dataset_from_directory's work
    tf_data.py   tf.data.experimental's cardinality
"""
from __future__ import annotations

from .cache import read_meta, write_images
from .dataset import AUTOTUNE, ImageDataset, MappedDataset, UnbatchedDataset
from .decode import MAX_PIXELS, ImageProblem
from .folder import from_directory
from .listing import ALLOWLIST_FORMATS

__all__ = ["AUTOTUNE", "ALLOWLIST_FORMATS", "MAX_PIXELS", "ImageDataset", "ImageProblem", "MappedDataset",
           "UnbatchedDataset", "from_directory", "read_meta", "write_images"]
