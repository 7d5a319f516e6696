"""The preprocessing layers: ``Rescaling``, ``Normalization`` and the augmentation layers
``RandomFlip``, ``RandomTranslation``, ``RandomRotation``, ``RandomZoom``, ``RandomCrop``."""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .. import validation
from .arguments import (channels_last_only, core_seed, factor_range, layer_seed, rescaling_values, rotation_factor,
                        zoom_factor)
from .layer import Input, Layer


class Rescaling(Layer):
    """``Rescaling(scale, offset=0.0)``: y = x * scale + offset; each a number or one per channel
    (e.g. ``Rescaling(1 / 255)`` as a model's first layer)."""

    name_prefix = "rescaling"
    config_keys = ("scale", "offset")

    def __init__(self, scale: Any, offset: Any = 0.0, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.scale = rescaling_values(scale, "scale")
        self.offset = rescaling_values(offset, "offset")
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class Normalization(Layer):
    """``Normalization(axis=-1, mean=None, variance=None, invert=False)`` as Keras: y = (x - mean) /
    max(sqrt(variance), 1e-7) per channel (the last axis). With ``mean`` and ``variance`` given
    (a number or one per channel) the layer has no weights; otherwise its weights are Keras' three
    non-trainable ``mean``, ``variance`` and ``count``, set by ``adapt(data)`` or from a file (the
    ImageNet EfficientNet's). ``invert=True`` and axes other than the last are refused."""

    name_prefix = "normalization"
    config_keys = ("axis", "invert", "mean", "variance")

    def __init__(self, axis: Any = -1, mean: Any = None, variance: Any = None, invert: bool = False,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        axes = (axis,) if validation.is_integer(axis) else tuple(axis) if isinstance(axis, (list, tuple)) else None
        if axes is None or len(axes) != 1 or not validation.is_integer(axes[0]) or int(axes[0]) == 0:
            raise ValueError(f"Normalization: axis={axis!r} is not supported: hpcnn normalizes over the channels, "
                             "the last axis (axis=-1)")
        self.axis = (int(axes[0]),)
        if validation.boolean(invert, "invert", "Normalization"):
            raise ValueError("Normalization: invert=True is not supported (hpcnn normalizes: invert=False)")
        self.invert = False
        if (mean is None) != (variance is None):
            raise ValueError("When setting values directly, both `mean` and `variance` must be set. Received: "
                             f"mean={mean} and variance={variance}")
        self.mean = self.variance = None
        if mean is not None:
            m, v = np.asarray(mean, np.float64), np.asarray(variance, np.float64)
            if m.shape != v.shape or m.ndim > 1:
                raise ValueError("Normalization: `mean` and `variance` must be numbers or one value per channel, "
                                 f"of one shape; received shapes {m.shape} and {v.shape}")
            if not (np.isfinite(m).all() and np.isfinite(v).all() and (v >= 0).all()):
                raise ValueError("Normalization: `mean` must be finite and `variance` finite and >= 0")
            self.mean, self.variance = m.tolist(), v.tolist()
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def core_config(self) -> Dict[str, Any]:
        cfg: Dict[str, Any] = {"class_name": "Normalization", "invert": False}
        if self.mean is not None:
            cfg["mean"] = np.atleast_1d(self.mean).tolist()
            cfg["variance"] = np.atleast_1d(self.variance).tolist()
        return cfg

    def adapt(self, data: Any, batch_size: Optional[int] = None, steps: Optional[int] = None) -> None:
        """Sets the weights ``mean`` and ``variance`` to the per-channel mean and (population)
        variance of ``data``: an array (n, ..., c), or an iterable of such batches (or of (x, y)
        batches), at most ``steps`` of them. Summed in float64, batch by batch (Chan's update), so a
        dataset larger than memory works. Builds the layer if it is not built yet."""
        if self.mean is not None:
            raise ValueError("Normalization: adapt() needs a layer without `mean` and `variance` given")
        batches: Iterable[Any]
        if isinstance(data, np.ndarray) or hasattr(data, "__array__") and not hasattr(data, "__iter__"):
            arr = np.asarray(data)
            step = int(batch_size) if batch_size else max(1, (1 << 22) // max(1, arr[:1].size))
            batches = (arr[i:i + step] for i in range(0, len(arr), step))
        elif hasattr(data, "__iter__"):
            batches = data
        else:
            raise TypeError(f"Normalization.adapt: unsupported data type {type(data).__name__}: pass a NumPy array "
                            "or an iterable of batches")
        count, mean, m2, shape = 0, None, None, None
        for k, batch in enumerate(batches):
            if steps is not None and k >= steps:
                break
            if isinstance(batch, (tuple, list)):
                batch = batch[0]  # (x, y) batches: the features
            b = np.asarray(batch, np.float64)
            if b.ndim < 2:
                raise ValueError(f"Normalization.adapt: batches must be (batch, ..., channels), got shape {b.shape}")
            if shape is None:
                shape = b.shape[1:]
            elif b.shape[1:] != shape:
                raise ValueError(f"Normalization.adapt: batches of different shapes {shape} and {b.shape[1:]}")
            flat = b.reshape(-1, b.shape[-1])
            n = flat.shape[0]
            if n == 0:
                continue
            bm = flat.mean(axis=0)
            bm2 = ((flat - bm) ** 2).sum(axis=0)
            if mean is None:
                count, mean, m2 = n, bm, bm2
            else:
                delta = bm - mean
                total = count + n
                mean = mean + delta * (n / total)
                m2 = m2 + bm2 + delta ** 2 * (count * n / total)
                count = total
        if mean is None or shape is None:
            raise ValueError("adapt() received no data (an empty array or iterable)")
        if not self.built:
            self(Input(shape=shape))  # builds the layer's weights, as Keras' adapt builds it
        weights: List[np.ndarray] = self.get_weights()
        if weights[0].shape != mean.shape:
            raise ValueError(f"Normalization.adapt: the layer was built for {weights[0].shape[0]} channels, the "
                             f"data has {mean.shape[0]}")
        self.set_weights([mean.astype(np.float32), (m2 / count).astype(np.float32), weights[2]])


class _Augmentation(Layer):
    """Base of the augmentation layers: active in ``fit`` only (``evaluate``/``predict``: the
    identity; RandomCrop: the centre), no weights, a ``seed`` (Keras'). See RandomFlip for where
    they run and how they draw."""

    seed: Optional[int] = None
    #: An augmentation layer: called on data without ``training`` it augments, as in Keras 3 (whose
    #: augmentation layers default to training=True), models/model_call.py.
    augments = True

    def core_config(self) -> Dict[str, Any]:
        args = {k: v for k, v in self.arguments().items() if k != "seed"}
        return {"class_name": type(self).__name__, **args, **core_seed(self.seed)}

    @staticmethod
    def _fill(cls: str, fill_mode: Any, interpolation: Any, fill_value: Any) -> Tuple[str, str, float]:
        """Keras' fill_mode, interpolation and fill_value of the geometric layers, checked."""
        if not isinstance(fill_mode, str) or fill_mode not in _FILL_MODES:
            raise ValueError(f"{cls}: Unknown `fill_mode` {fill_mode!r}. Expected one of {_FILL_MODES}.")
        if not isinstance(interpolation, str) or interpolation not in _INTERPOLATIONS:
            raise ValueError(f"{cls}: Unknown `interpolation` {interpolation!r}. Expected one of {_INTERPOLATIONS}.")
        return fill_mode, interpolation, validation.number(fill_value, "fill_value", cls)


_FILL_MODES = ("reflect", "wrap", "constant", "nearest")
_INTERPOLATIONS = ("nearest", "bilinear")


def _as_given(factor: Any) -> Any:
    """A factor as given (a number or a pair, in config order), as plain floats: configs are JSON."""
    return [float(v) for v in factor] if isinstance(factor, (tuple, list)) else float(factor)


class RandomFlip(_Augmentation):
    """``RandomFlip(mode="horizontal_and_vertical")``: in training, each image is flipped with
    probability 1/2 (Keras 3: "horizontal_and_vertical" flips the chosen images along both axes).

    The augmentation layers (RandomFlip, RandomTranslation, RandomRotation, RandomZoom, RandomCrop)
    change the images during ``fit`` only; ``evaluate`` and ``predict`` see them unchanged (RandomCrop: its centre). At the
    start of a model (a ZeroPadding2D right before a RandomCrop included) they run in the native
    batch pipeline, not as model ops: on the CPU while the batch's rows are gathered and decoded,
    on a GPU on the device after the upload. Placed after other layers without weights (such as
    Rescaling) they run as ops of the step; after a layer with weights they are an error. The
    draws are per image, keyed by the model's seed, the training step and the image's row in the
    global batch (not by threads, devices or replicas): the same seed gives the same images on any
    thread count, on the CPU and the GPU, and in a resumed or data-parallel run. A layer given
    ``seed=N`` (Keras') draws from its own seed instead (with the step and the row): the same images
    whatever the model's seed or the layer's place in the model; two layers with the same seed draw
    alike, as in Keras.
    """

    name_prefix = "random_flip"
    config_keys = ("mode", "seed")
    _MODES = ("horizontal", "vertical", "horizontal_and_vertical")

    def __init__(self, mode: str = "horizontal_and_vertical", seed: Optional[int] = None,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.seed = layer_seed(seed, "RandomFlip")
        if not isinstance(mode, str) or mode not in self._MODES:
            raise ValueError(f"RandomFlip layer {name or 'random_flip'} received an unknown mode argument {mode!r}: "
                             f"use one of {', '.join(repr(m) for m in self._MODES)}")
        self.mode = mode
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class RandomTranslation(_Augmentation):
    """``RandomTranslation(height_factor, width_factor, fill_mode="reflect", interpolation="bilinear",
    fill_value=0.0)``, Keras 3's: in training each image is shifted by a fraction of its height and
    of its width, each drawn uniformly from the factor's range (a number f: [-f, f]; a pair: its
    range; all in [-1, 1]); positive moves the image down / right. Pixels from outside the image
    are filled by ``fill_mode``: 'constant' (``fill_value``), 'reflect' (d c b a | a b c d | d c b
    a), 'wrap' (a b c d | a b c d) or 'nearest' (a a a a | a b c d | d d d d); ``interpolation``
    'bilinear' (fractional shifts blend neighbours) or 'nearest' (whole pixels). See RandomFlip
    for when and where augmentation runs."""

    name_prefix = "random_translation"
    config_keys = ("height_factor", "width_factor", "fill_mode", "interpolation", "seed", "fill_value")

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="RandomTranslation", height_lo=self.height_lower, height_hi=self.height_upper,
                    width_lo=self.width_lower, width_hi=self.width_upper, fill_mode=self.fill_mode,
                    fill_value=self.fill_value, interpolation=self.interpolation, **core_seed(self.seed))

    def __init__(self, height_factor: Any, width_factor: Any, fill_mode: str = "reflect",
                 interpolation: str = "bilinear", seed: Optional[int] = None, fill_value: float = 0.0,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.seed = layer_seed(seed, "RandomTranslation")
        self.height_lower, self.height_upper = factor_range(height_factor, "height_factor", "RandomTranslation")
        self.width_lower, self.width_upper = factor_range(width_factor, "width_factor", "RandomTranslation")
        self.fill_mode, self.interpolation, self.fill_value = self._fill("RandomTranslation", fill_mode, interpolation,
                                                                         fill_value)
        self.height_factor = _as_given(height_factor)
        self.width_factor = _as_given(width_factor)
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class RandomRotation(_Augmentation):
    """``RandomRotation(factor, fill_mode="reflect", interpolation="bilinear", seed=None,
    fill_value=0.0)``, Keras 3's: in training each image is turned about its centre by an angle
    drawn uniformly from the factor's range, in fractions of a full turn (a number f: [-f, f] of
    360 degrees; a pair: its range); positive turns counter-clockwise. Pixels from outside the
    image are filled by ``fill_mode`` ('reflect', 'wrap', 'constant' with ``fill_value``,
    'nearest'); ``interpolation`` 'bilinear' or 'nearest'. Keras' config shows the factor as the
    range (lower, upper). See RandomFlip for when and where augmentation runs."""

    name_prefix = "random_rotation"
    config_keys = ("factor", "fill_mode", "fill_value", "interpolation", "seed")

    def __init__(self, factor: Any, fill_mode: str = "reflect", interpolation: str = "bilinear",
                 seed: Optional[int] = None, fill_value: float = 0.0, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.seed = layer_seed(seed, "RandomRotation")
        self.factor = rotation_factor(factor)
        self.fill_mode, self.interpolation, self.fill_value = self._fill("RandomRotation", fill_mode, interpolation,
                                                                         fill_value)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="RandomRotation", factor_lo=self.factor[0], factor_hi=self.factor[1],
                    fill_mode=self.fill_mode, fill_value=self.fill_value, interpolation=self.interpolation,
                    **core_seed(self.seed))


class RandomZoom(_Augmentation):
    """``RandomZoom(height_factor, width_factor=None, fill_mode="reflect", interpolation="bilinear",
    seed=None, fill_value=0.0)``, Keras 3's: in training each image is scaled about its centre by
    1 + a factor drawn per axis from its range (a number f: [-f, f]; a pair: its range; factors in
    (-1, 1]). A positive factor zooms out (the image shrinks and ``fill_mode`` fills the border:
    'reflect', 'wrap', 'constant' with ``fill_value``, 'nearest'), a negative one zooms in;
    ``width_factor=None`` zooms the width as the height (the aspect ratio kept). ``interpolation``
    'bilinear' or 'nearest'. See RandomFlip for when and where augmentation runs."""

    name_prefix = "random_zoom"
    config_keys = ("height_factor", "width_factor", "fill_mode", "interpolation", "seed", "fill_value")

    def __init__(self, height_factor: Any, width_factor: Any = None, fill_mode: str = "reflect",
                 interpolation: str = "bilinear", seed: Optional[int] = None, fill_value: float = 0.0,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.seed = layer_seed(seed, "RandomZoom")
        self.height_lower, self.height_upper = zoom_factor(height_factor, "height_factor")
        self.width_range = None if width_factor is None else zoom_factor(width_factor, "width_factor")
        self.fill_mode, self.interpolation, self.fill_value = self._fill("RandomZoom", fill_mode, interpolation,
                                                                         fill_value)
        self.height_factor = _as_given(height_factor)
        self.width_factor = None if width_factor is None else _as_given(width_factor)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def core_config(self) -> Dict[str, Any]:
        width = {} if self.width_range is None else dict(width_lo=self.width_range[0], width_hi=self.width_range[1])
        return dict(class_name="RandomZoom", height_lo=self.height_lower, height_hi=self.height_upper, **width,
                    fill_mode=self.fill_mode, fill_value=self.fill_value, interpolation=self.interpolation,
                    **core_seed(self.seed))


class RandomCrop(_Augmentation):
    """``RandomCrop(height, width)``: in training a (height, width) window at a random position of
    each image (drawn per image; Keras 3 draws one position per batch); in ``evaluate``/``predict``
    the centre window (Keras resizes there instead; hpcnn crops, so an input smaller than the crop
    is an error). The CIFAR recipe "pad by 4, crop 32 at random" is ``ZeroPadding2D(4)`` followed by
    ``RandomCrop(32, 32)`` at the model's start: the batch pipeline then crops from the padded
    image in one pass (the padding is never materialized), and inference sees the original image.
    See RandomFlip for when and where augmentation runs."""

    name_prefix = "random_crop"
    config_keys = ("height", "width", "seed")

    def __init__(self, height: int, width: int, seed: Optional[int] = None, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        self.seed = layer_seed(seed, "RandomCrop")
        self.height = validation.integer(height, "height", "RandomCrop")
        self.width = validation.integer(width, "width", "RandomCrop")
        super().__init__(name=name, input_shape=input_shape, **kwargs)
