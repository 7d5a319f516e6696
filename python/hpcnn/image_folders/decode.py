"""One image file to the (height, width, channels) uint8 array ``image_dataset_from_directory``
stores: decoded with Pillow, converted as TensorFlow's ``decode_image`` converts it, resized as
``tf.image.resize`` (resize.py), rounded to the nearest integer.

What each kind of file gives (docs/reliability.md has the table, tests/hostile the cases):

- EXIF orientation is not applied: TensorFlow's decoders (so Keras) ignore it, and a model must see
  what it was trained on. A phone photo stored sideways is used sideways by both.
- Grayscale, palette, CMYK, RGBA, 16-bit and animated (first frame, as ``expand_animations=False``)
  files are converted to the asked color mode: "rgb" drops alpha without compositing, 16-bit
  samples keep their high byte (TensorFlow's uint8 decode), "grayscale" is libjpeg's own Y plane for
  a JPEG (as TensorFlow's), Pillow's BT.601 luma otherwise (TensorFlow's PNG decoder converts color
  to gray through libpng's gamma-aware rgb_to_gray: a few levels apart, docs/data.md).
- A file that is not an image, a 0-byte, truncated or corrupt file, or one that declares more
  than MAX_PIXELS pixels (a decompression bomb: refused from its header, nothing decoded) raises
  ``ImageProblem`` naming the file and what is wrong with it.
"""
from __future__ import annotations

import os
import warnings
from typing import List, Optional, Sequence, Tuple

import numpy as np

try:
    from PIL import Image
except ImportError:  # Pillow is a dependency; a broken install is reported when an image is read
    Image = None

from .resize import resize, resize_with_pad, smart_resize

#: The most pixels a file may declare (Pillow's own decompression-bomb limit, 2 x 89,478,485):
#: a 50,000 x 50,000 header is refused before anything is decoded.
MAX_PIXELS = 178_956_970

__all__ = ["MAX_PIXELS", "ImageProblem", "Recipe", "decode_file", "decode_many", "require_pillow"]


class ImageProblem(ValueError):
    """A file that cannot be used as an image: ``path`` and ``reason``."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


class Recipe:
    """How files become rows: image_size (h, w), channels (1, 3, 4), interpolation, and
    'crop' / 'pad' / None for the aspect ratio."""
    __slots__ = ("size", "channels", "interpolation", "aspect")

    def __init__(self, size: Tuple[int, int], channels: int, interpolation: str, aspect: Optional[str]) -> None:
        self.size, self.channels, self.interpolation, self.aspect = (int(size[0]), int(size[1])), int(channels), \
            interpolation, aspect

    def row_shape(self) -> Tuple[int, int, int]:
        return self.size + (self.channels,)

    def __getstate__(self):
        return (self.size, self.channels, self.interpolation, self.aspect)

    def __setstate__(self, state) -> None:
        self.size, self.channels, self.interpolation, self.aspect = state


def require_pillow(caller: str) -> None:
    if Image is None:
        raise ImportError(f"{caller} reads images with Pillow, which is not installed: pip install pillow")


def _pixels(img, channels: int) -> np.ndarray:
    """The decoded image as uint8 (H, W, channels), converted as TensorFlow's decode_image."""
    mode = img.mode
    if mode in ("I;16", "I;16B", "I;16L", "I"):  # 16-bit (or 32-bit) gray: the high byte of 16 bits
        a = np.asarray(img, dtype=np.uint32 if mode == "I" else None)
        gray = (np.clip(a, 0, 65535).astype(np.uint32) >> 8).astype(np.uint8)
        img = Image.fromarray(gray, "L")
    elif mode == "F":
        raise ValueError("floating-point pixels (mode F) are not an 8-bit image")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Palette images with Transparency ... should be converted to RGBA"
        if channels == 1:
            out = img if img.mode == "L" else img.convert("L")
        elif channels == 3:
            out = img if img.mode == "RGB" else img.convert("RGB")
        else:
            out = img if img.mode == "RGBA" else img.convert("RGBA")
    a = np.asarray(out, dtype=np.uint8)
    return a[:, :, None] if a.ndim == 2 else a


def decode_file(path: str, recipe: Recipe) -> np.ndarray:
    """`path` as a uint8 (h, w, channels) row of `recipe`; ImageProblem when it cannot be one."""
    require_pillow("image_dataset_from_directory")
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise ImageProblem(path, f"cannot be read ({e.strerror or e})") from None
    if size == 0:
        raise ImageProblem(path, "empty file (0 bytes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ImageProblem(path, f"refused as a decompression bomb ({e})") from None
    except Image.UnidentifiedImageError:
        raise ImageProblem(path, "not an image Pillow can read (not a BMP, GIF, JPEG or PNG file?)") from None
    except OSError as e:
        if e.errno is not None:  # the file system refused it
            raise ImageProblem(path, f"cannot be read ({e.strerror or e})") from None
        raise ImageProblem(path, f"damaged or truncated ({e})") from None
    with img:
        w, h = img.size
        if w * h > MAX_PIXELS:
            raise ImageProblem(path, f"declares {w} x {h} pixels, more than {MAX_PIXELS:,}: refused as a "
                                     "decompression bomb (nothing decoded)")
        try:
            if recipe.channels == 1 and img.format == "JPEG" and img.mode in ("RGB", "YCbCr"):
                img.draft("L", img.size)  # libjpeg's own gray (the Y plane), as TensorFlow decodes it
            img.load()  # the first frame of an animation
            pixels = _pixels(img, recipe.channels)
        except Exception as e:  # Pillow raises OSError, SyntaxError, ValueError, struct.error on damage
            raise ImageProblem(path, f"damaged or truncated ({type(e).__name__}: {e})") from None
    if recipe.aspect == "crop":
        return smart_resize(pixels, recipe.size, recipe.interpolation, to_uint8=True)
    if recipe.aspect == "pad":
        return resize_with_pad(pixels, recipe.size, recipe.interpolation, to_uint8=True)
    return resize(pixels, recipe.size, recipe.interpolation, to_uint8=True)


def decode_many(paths: Sequence[str], recipe: Recipe) -> Tuple[np.ndarray, List[Tuple[int, str]]]:
    """The rows of `paths` (uint8 (n, h, w, c); a refused file's row is zeros) and the refused ones
    as (position, reason). What a worker process runs on one block of files."""
    rows = np.zeros((len(paths),) + recipe.row_shape(), dtype=np.uint8)
    problems = []
    for i, p in enumerate(paths):
        try:
            rows[i] = decode_file(p, recipe)
        except ImageProblem as e:
            problems.append((i, e.reason))
    return rows, problems
