"""Images one at a time, with Keras' names, arguments and results: ``load_img``, ``img_to_array``,
``array_to_img``, ``save_img`` (``keras.utils`` and ``keras.preprocessing.image``).

Pillow decodes and resizes, as in Keras, so an image loaded here is the very array Keras loads:
the same colour conversions, the same resampling filters (``"nearest"`` by default) and the same
centre crop for ``keep_aspect_ratio``. Like Keras, ``load_img`` does not apply a JPEG's EXIF
orientation (a photo a phone stored sideways loads sideways). Pillow is an optional dependency
(``pip install pillow``, or the ``images`` extra); without it these functions raise ImportError
saying so when called, and the rest of hpcnn works.

Where hpcnn says more than Keras: a file that is missing, damaged or not an image is named in the
error; ``save_img`` writes a file atomically (a temporary file renamed into place, never a half
written image) and takes the format from extensions Pillow knows (``.tif``, ``.jpg``); an array
with NaN or infinity is refused instead of becoming an arbitrary image.
"""
from __future__ import annotations

import io
import os
import pathlib
import warnings
from typing import Any, Optional, Tuple, Union

import numpy as np

from . import validation

INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "hamming", "box", "lanczos")
COLOR_MODES = ("grayscale", "rgb", "rgba")
DATA_FORMATS = ("channels_last", "channels_first")
_INSTALL = "pip install pillow (or, in the hpcnn clone, pip install --no-build-isolation \".[images]\")"


def _pil() -> Any:
    """PIL.Image, imported when first needed: Pillow is optional (the `images` extra)."""
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(f"reading and writing images needs Pillow: {_INSTALL}") from e
    return Image


def _data_format(value: Optional[str], caller: str) -> str:
    # hpcnn is channels_last throughout (keras.backend.image_data_format()), so None means that;
    # "channels_first" is still accepted here: it is only a transpose of one image.
    return "channels_last" if value is None else validation.choice(value, "data_format", DATA_FORMATS, caller)


def _dtype(value: Any) -> np.dtype:
    return np.dtype("float32" if value is None else value)


def load_img(path: Union[str, bytes, os.PathLike, io.BytesIO], color_mode: str = "rgb",
             target_size: Optional[Tuple[int, int]] = None, interpolation: str = "nearest",
             keep_aspect_ratio: bool = False) -> Any:
    """Loads an image file into a PIL image, as ``keras.utils.load_img``.

    Parameters
    ----------
    path : str, bytes, path-like or io.BytesIO
        The image file (any format Pillow reads: JPEG, PNG, BMP, GIF, TIFF, ...), or its bytes in
        a BytesIO.
    color_mode : {"rgb", "grayscale", "rgba"}
        The image's colours after loading. "grayscale" keeps an 8-, 16- or 32-bit grayscale image
        as it is and converts anything else to 8-bit ("L"); "rgb" and "rgba" convert when needed.
    target_size : tuple of two ints, optional
        (height, width) to resize to; None keeps the file's size.
    interpolation : {"nearest", "bilinear", "bicubic", "hamming", "box", "lanczos"}
        Pillow's resampling filter for the resize ("nearest", as in Keras, by default).
    keep_aspect_ratio : bool
        With `target_size`: crop the largest centred region of the target's aspect ratio first,
        then resize it (no distortion), as Keras does.

    Returns
    -------
    PIL.Image.Image
        The decoded image (fully read: the file is closed).

    Raises
    ------
    FileNotFoundError
        No file at `path`.
    PIL.UnidentifiedImageError
        The file is not an image Pillow can read (the message names the file).
    OSError
        The file is damaged or truncated (the message names the file).
    ValueError
        A bad argument (the message names it).
    """
    color_mode = validation.choice(color_mode, "color_mode", COLOR_MODES, "load_img")
    interpolation = validation.choice(interpolation, "interpolation", INTERPOLATIONS, "load_img")
    size = None if target_size is None else validation.int_tuple(target_size, 2, "target_size", "load_img")
    keep_aspect_ratio = validation.boolean(keep_aspect_ratio, "keep_aspect_ratio", "load_img")
    image_module = _pil()
    if isinstance(path, io.BytesIO):
        name, data = "the BytesIO given", path
    elif isinstance(path, (str, bytes, os.PathLike)):
        name = os.fsdecode(path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"load_img: no file '{name}'")
        if os.path.isdir(path):
            raise IsADirectoryError(f"load_img: '{name}' is a folder, not an image file")
        with open(path, "rb") as f:  # read whole, so the file is closed when this returns
            data = io.BytesIO(f.read())
        name = f"'{name}'"
    else:
        raise TypeError(f"load_img: path should be a path (str, bytes, os.PathLike) or io.BytesIO, "
                        f"not {type(path).__name__}")
    try:
        img = image_module.open(data)
        img.load()  # decode now: a truncated file fails here, named, not later in img_to_array
    except image_module.UnidentifiedImageError:
        raise image_module.UnidentifiedImageError(
            f"load_img: {name} is not an image Pillow can read (JPEG, PNG, BMP, GIF, TIFF, ...)") from None
    except image_module.DecompressionBombError as e:
        raise image_module.DecompressionBombError(f"load_img: {name} is refused: {e}") from None
    except (OSError, SyntaxError, ValueError) as e:  # Pillow's plugins raise these for damaged data
        raise OSError(f"load_img: {name} is damaged or truncated: {e}") from None
    img = _with_colors(img, color_mode)
    if size is not None:
        img = _resized(img, size, interpolation, keep_aspect_ratio, image_module)
    return img


def _with_colors(img: Any, color_mode: str) -> Any:
    if color_mode == "grayscale":
        return img if img.mode in ("L", "I;16", "I") else img.convert("L")
    wanted = "RGBA" if color_mode == "rgba" else "RGB"
    return img if img.mode == wanted else img.convert(wanted)


def _resized(img: Any, size: Tuple[int, ...], interpolation: str, keep_aspect_ratio: bool, image_module: Any) -> Any:
    target_height, target_width = size
    if img.size == (target_width, target_height):
        return img
    resample = getattr(image_module.Resampling, interpolation.upper())
    if not keep_aspect_ratio:
        return img.resize((target_width, target_height), resample)
    width, height = img.size
    # The largest centred box of the target's aspect ratio, in Keras' integer arithmetic (floor
    # division, then the odd pixel on the right/bottom), so both crop exactly the same pixels.
    crop_height = min(height, (width * target_height) // target_width)
    crop_width = min(width, (height * target_width) // target_height)
    top = (height - crop_height) // 2
    left = (width - crop_width) // 2
    return img.resize((target_width, target_height), resample, box=(left, top, left + crop_width, top + crop_height))


def img_to_array(img: Any, data_format: Optional[str] = None, dtype: Any = None) -> np.ndarray:
    """A PIL image (or anything NumPy reads as one) as a 3-D array, as ``keras.utils.img_to_array``.

    Parameters
    ----------
    img : PIL.Image.Image or array-like
        The image.
    data_format : {"channels_last", "channels_first"}, optional
        (height, width, channels) (the default, hpcnn's layout) or (channels, height, width).
    dtype : str or numpy dtype, optional
        The array's type ("float32" by default). Values are kept as stored (0-255 for 8-bit
        images): no scaling.

    Returns
    -------
    numpy.ndarray
        A rank-3 array; a grayscale image gets a channel axis of 1.
    """
    data_format = _data_format(data_format, "img_to_array")
    x = np.asarray(img, dtype=_dtype(dtype))
    if x.ndim == 2:
        return x.reshape((1,) + x.shape if data_format == "channels_first" else x.shape + (1,))
    if x.ndim != 3:
        raise ValueError(f"img_to_array: unsupported image shape {x.shape}: expected (height, width) or "
                         "(height, width, channels)")
    return x.transpose(2, 0, 1) if data_format == "channels_first" else x


def array_to_img(x: Any, data_format: Optional[str] = None, scale: bool = True, dtype: Any = None) -> Any:
    """A 3-D array as a PIL image, as ``keras.utils.array_to_img``.

    Parameters
    ----------
    x : array-like
        One image, (height, width, channels) or, with data_format="channels_first", (channels,
        height, width); 1 (grayscale), 3 (RGB) or 4 (RGBA) channels.
    data_format : {"channels_last", "channels_first"}, optional
        The layout of `x` (channels_last by default).
    scale : bool
        Stretch the values so their minimum is 0 and maximum 255 (as Keras). With False, values
        are cast to 8 bits as they are (a grayscale image above 255 becomes a 32-bit "I" image).
    dtype : str or numpy dtype, optional
        The type `x` is converted to before scaling ("float32" by default).

    Returns
    -------
    PIL.Image.Image
        Mode "L", "RGB" or "RGBA" (or "I", see `scale`).
    """
    data_format = _data_format(data_format, "array_to_img")
    scale = validation.boolean(scale, "scale", "array_to_img")
    image_module = _pil()
    x = np.asarray(x, dtype=_dtype(dtype))
    if x.ndim != 3:
        raise ValueError(f"array_to_img: expected one image of rank 3, got an array of shape {x.shape}")
    if x.dtype.kind == "f" and not np.all(np.isfinite(x)):
        raise ValueError("array_to_img: the array holds NaN or infinite values (no image to draw from them)")
    if data_format == "channels_first":
        x = x.transpose(1, 2, 0)
    if x.shape[2] not in (1, 3, 4):
        raise ValueError(f"array_to_img: {x.shape[2]} channels; expected 1 (grayscale), 3 (RGB) or 4 (RGBA)")
    if scale:
        x = x - np.min(x)  # a new array: the caller's is never changed
        top = np.max(x)
        if top != 0:
            x = x / top
        x = x * 255
    if x.shape[2] == 1:
        plane = x[:, :, 0]
        if np.max(plane) > 255:
            return image_module.fromarray(plane.astype("int32"), "I")
        return image_module.fromarray(plane.astype("uint8"), "L")
    return image_module.fromarray(x.astype("uint8"), "RGBA" if x.shape[2] == 4 else "RGB")


def _format_for(path: Any, file_format: Optional[str], image_module: Any) -> str:
    if file_format is not None:
        fmt = str(file_format).lower()
        return "jpeg" if fmt == "jpg" else fmt
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise ValueError("save_img: give file_format (e.g. 'png') when saving to a file object")
    suffix = pathlib.Path(os.fsdecode(path)).suffix.lower()
    known = image_module.registered_extensions()  # ".jpg" -> "JPEG", ".tif" -> "TIFF", ...
    if suffix not in known:
        raise ValueError(f"save_img: cannot tell the image format from '{os.fsdecode(path)}' "
                         f"(extension '{suffix}'): give file_format, e.g. 'png' or 'jpeg'")
    return known[suffix].lower()


def save_img(path: Union[str, bytes, os.PathLike, Any], x: Any, data_format: Optional[str] = None,
             file_format: Optional[str] = None, scale: bool = True, **kwargs: Any) -> None:
    """Saves a 3-D array as an image file, as ``keras.utils.save_img``.

    Parameters
    ----------
    path : str, bytes, path-like or file object
        Where to write. A path is written atomically (a temporary file beside it, renamed into
        place), so a failed save leaves no half-written image.
    x : array-like
        The image, as for `array_to_img`.
    data_format : {"channels_last", "channels_first"}, optional
        The layout of `x`.
    file_format : str, optional
        "png", "jpeg" ("jpg"), "bmp", ...; by default taken from the path's extension (required
        for a file object).
    scale : bool
        Stretch the values to 0-255 first (as `array_to_img`).
    **kwargs
        Passed to ``PIL.Image.Image.save`` (e.g. ``quality=95`` for JPEG).

    Notes
    -----
    An RGBA image saved as JPEG is converted to RGB with a warning, as Keras does.
    """
    image_module = _pil()
    fmt = _format_for(path, file_format, image_module)
    img = array_to_img(x, data_format=data_format, scale=scale)
    if img.mode == "RGBA" and fmt == "jpeg":
        warnings.warn("save_img: the JPEG format does not support RGBA images, converting to RGB.", stacklevel=2)
        img = img.convert("RGB")
    if not isinstance(path, (str, bytes, os.PathLike)):
        img.save(path, format=fmt, **kwargs)
        return
    target = os.fsdecode(path)
    validation.output_directory(target, "save_img")
    tmp = f"{target}.tmp{os.getpid()}"
    try:
        img.save(tmp, format=fmt, **kwargs)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


__all__ = ["load_img", "img_to_array", "array_to_img", "save_img"]
