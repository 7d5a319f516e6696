"""The most hpcnn's HDF5 tree reader accepts from a model or weights file (legacy Keras ``.h5``
models and weights, Keras 3 ``.weights.h5``, the weights inside a ``.keras`` archive, hpcnn's own
files and backups): a contract, documented in docs/reliability.md ("Limits of model and weights
files"). Past any of them the file is refused with a ValueError that names the file, the object,
and the limit by the name it has here; nothing is allocated for it first. The values live in the
reader (csrc/data/h5_tree.h, ``H5TreeLimits``), which checks them; this module names them for Python.

Each admits real models with a wide margin: the largest attribute Keras writes is a model's JSON
config (~100 KB for ResNet-50, whose ``layer_names`` holds 177 names), and a 100M-parameter Dense
kernel is 4e8 bytes, a twentieth of ``MAX_WEIGHT_BYTES``.
"""
from __future__ import annotations

from .. import _core

_LIMITS = _core.data.H5_TREE_LIMITS

#: One attribute's value as read: 8 bytes per number, each text's bytes (fixed-length strings:
#: their declared size, checked before reading; variable-length ones: checked as read).
MAX_ATTRIBUTE_BYTES: int = _LIMITS["MAX_ATTRIBUTE_BYTES"]
#: Elements (numbers or texts) of one attribute, checked before reading.
MAX_ATTRIBUTE_ELEMENTS: int = _LIMITS["MAX_ATTRIBUTE_ELEMENTS"]
#: Attributes of one group or dataset.
MAX_ATTRIBUTES_PER_OBJECT: int = _LIMITS["MAX_ATTRIBUTES_PER_OBJECT"]
#: Values of one dataset read as an array (a weight tensor), checked before anything is allocated.
MAX_WEIGHT_ELEMENTS: int = _LIMITS["MAX_WEIGHT_ELEMENTS"]
#: Bytes of one dataset as read (float32 for floats, int64 for integers), checked before anything
#: is allocated.
MAX_WEIGHT_BYTES: int = _LIMITS["MAX_WEIGHT_BYTES"]
#: Levels of groups below the root (Keras 3's layout nests two per nested model).
MAX_DEPTH: int = _LIMITS["MAX_DEPTH"]
#: Bytes of a link's or attribute's name.
MAX_NAME_BYTES: int = _LIMITS["MAX_NAME_BYTES"]
#: Groups, datasets and links listed in one file.
MAX_OBJECTS = 1_000_000

__all__ = ["MAX_ATTRIBUTE_BYTES", "MAX_ATTRIBUTE_ELEMENTS", "MAX_ATTRIBUTES_PER_OBJECT", "MAX_WEIGHT_ELEMENTS",
           "MAX_WEIGHT_BYTES", "MAX_DEPTH", "MAX_NAME_BYTES", "MAX_OBJECTS"]
