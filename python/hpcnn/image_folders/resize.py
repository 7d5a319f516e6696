"""Resizing as Keras' ``image_dataset_from_directory`` does it on TensorFlow: ``tf.image.resize`` with
half-pixel centers and no antialiasing (Pillow's resize antialiases when it shrinks, so it is not
used), Keras' ``smart_resize`` for ``crop_to_aspect_ratio`` and ``tf.image.resize_with_pad`` for
``pad_to_aspect_ratio``.

The arithmetic follows TensorFlow's CPU kernels in float32, in their order: for bilinear, a source
coordinate ``(x + 0.5) * (in / out) - 0.5``, its floor and ceiling clamped to the image, then
``top = tl + (tr - tl) * dx``, ``bottom = bl + (br - bl) * dx``, ``top + (bottom - top) * dy``; for
nearest, ``min(floor((x + 0.5) * (in / out)), in - 1)``. The work is a small C++ function
(csrc/data/image_resize.h): a 500x375 photo to 180x180 in a fraction of what Pillow takes to decode
it, where NumPy gathers took longer than the decoding (docs/data.md).
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from .. import _core

INTERPOLATIONS = ("bilinear", "nearest")

__all__ = ["INTERPOLATIONS", "resize", "smart_resize", "resize_with_pad"]


def resize(image: np.ndarray, size: Tuple[int, int], interpolation: str = "bilinear",
           to_uint8: bool = False) -> np.ndarray:
    """uint8 (H, W, C) image to float32 (size[0], size[1], C) as tf.image.resize, or to uint8
    rounded to the nearest integer (`to_uint8`). Runs in C++ (data/image_resize.h), without the GIL."""
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}")
    return _core.data.resize_image(image, int(size[0]), int(size[1]), interpolation, bool(to_uint8))


def smart_resize(image: np.ndarray, size: Tuple[int, int], interpolation: str = "bilinear",
                 to_uint8: bool = False) -> np.ndarray:
    """Keras' crop_to_aspect_ratio: the largest centred crop of the target's aspect ratio, resized
    (its sizes computed in float32, as in a tf.data pipeline)."""
    h, w = image.shape[:2]
    th, tw = int(size[0]), int(size[1])
    ch = max(min(h, int(np.float32(w * th) / np.float32(tw))), 1)
    cw = max(min(w, int(np.float32(h * tw) / np.float32(th))), 1)
    y0 = int(np.float32(h - ch) / np.float32(2))
    x0 = int(np.float32(w - cw) / np.float32(2))
    return resize(np.ascontiguousarray(image[y0:y0 + ch, x0:x0 + cw]), (th, tw), interpolation, to_uint8)


def resize_with_pad(image: np.ndarray, size: Tuple[int, int], interpolation: str = "bilinear",
                    to_uint8: bool = False) -> np.ndarray:
    """tf.image.resize_with_pad: resized to fit inside the target keeping the aspect ratio, then
    centred on zeros (Keras' pad_to_aspect_ratio)."""
    h, w = image.shape[:2]
    th, tw = int(size[0]), int(size[1])
    f = np.float32
    ratio = max(f(w) / f(tw), f(h) / f(th))
    rh, rw = f(h) / ratio, f(w) / f(ratio)
    new_h, new_w = max(int(np.floor(rh)), 1), max(int(np.floor(rw)), 1)
    top = max(0, int(np.floor((f(th) - rh) / f(2))))
    left = max(0, int(np.floor((f(tw) - rw) / f(2))))
    out = np.zeros((th, tw, image.shape[2]), dtype=np.uint8 if to_uint8 else np.float32)
    out[top:top + new_h, left:left + new_w] = resize(image, (new_h, new_w), interpolation, to_uint8)
    return out
