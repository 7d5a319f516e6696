"""The preprocessing layers: ``Rescaling`` and the augmentation layers ``RandomFlip``,
``RandomTranslation``, ``RandomCrop``."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from .. import validation
from .arguments import channels_last_only, factor_range, no_layer_seed, rescaling_values
from .layer import Layer


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


class _Augmentation(Layer):
    """Base of the augmentation layers: active in ``fit`` only (``evaluate``/``predict``: the
    identity; RandomCrop: the centre), no weights. See RandomFlip for where they run and how they
    draw."""


class RandomFlip(_Augmentation):
    """``RandomFlip(mode="horizontal_and_vertical")``: in training, each image is flipped with
    probability 1/2 (Keras 3: "horizontal_and_vertical" flips the chosen images along both axes).

    The augmentation layers (RandomFlip, RandomTranslation, RandomCrop) change the images during
    ``fit`` only; ``evaluate`` and ``predict`` see them unchanged (RandomCrop: its centre). At the
    start of a model (a ZeroPadding2D right before a RandomCrop included) they run in the native
    batch pipeline, not as model ops: on the CPU while the batch's rows are gathered and decoded,
    on a GPU on the device after the upload. Placed after other layers without weights (such as
    Rescaling) they run as ops of the step; after a layer with weights they are an error. The
    draws are per image, keyed by the model's seed, the training step and the image's row in the
    global batch (not by threads, devices or replicas): the same seed gives the same images on any
    thread count, on the CPU and the GPU, and in a resumed or data-parallel run. There is no
    per-layer ``seed``.
    """

    name_prefix = "random_flip"
    config_keys = ("mode",)
    _MODES = ("horizontal", "vertical", "horizontal_and_vertical")

    def __init__(self, mode: str = "horizontal_and_vertical", seed: Optional[int] = None,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        no_layer_seed(seed, "RandomFlip")
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
    config_keys = ("height_factor", "width_factor", "fill_mode", "interpolation", "fill_value")

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="RandomTranslation", height_lo=self.height_lower, height_hi=self.height_upper,
                    width_lo=self.width_lower, width_hi=self.width_upper, fill_mode=self.fill_mode,
                    fill_value=self.fill_value, interpolation=self.interpolation)
    _FILL_MODES = ("reflect", "wrap", "constant", "nearest")
    _INTERPOLATIONS = ("nearest", "bilinear")

    def __init__(self, height_factor: Any, width_factor: Any, fill_mode: str = "reflect",
                 interpolation: str = "bilinear", seed: Optional[int] = None, fill_value: float = 0.0,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        no_layer_seed(seed, "RandomTranslation")
        self.height_lower, self.height_upper = factor_range(height_factor, "height_factor", "RandomTranslation")
        self.width_lower, self.width_upper = factor_range(width_factor, "width_factor", "RandomTranslation")
        if not isinstance(fill_mode, str) or fill_mode not in self._FILL_MODES:
            raise ValueError(f"RandomTranslation: Unknown `fill_mode` {fill_mode!r}. Expected one of "
                             f"{self._FILL_MODES}.")
        if not isinstance(interpolation, str) or interpolation not in self._INTERPOLATIONS:
            raise ValueError(f"RandomTranslation: Unknown `interpolation` {interpolation!r}. Expected one of "
                             f"{self._INTERPOLATIONS}.")
        # As given (a number or a pair, in config order), as plain floats: configs are JSON.
        self.height_factor = ([float(v) for v in height_factor] if isinstance(height_factor, (tuple, list))
                              else float(height_factor))
        self.width_factor = ([float(v) for v in width_factor] if isinstance(width_factor, (tuple, list))
                             else float(width_factor))
        self.fill_mode = fill_mode
        self.interpolation = interpolation
        self.fill_value = validation.number(fill_value, "fill_value", "RandomTranslation")
        super().__init__(name=name, input_shape=input_shape, **kwargs)


class RandomCrop(_Augmentation):
    """``RandomCrop(height, width)``: in training a (height, width) window at a random position of
    each image (drawn per image; Keras 3 draws one position per batch); in ``evaluate``/``predict``
    the centre window (Keras resizes there instead; hpcnn crops, so an input smaller than the crop
    is an error). The CIFAR recipe "pad by 4, crop 32 at random" is ``ZeroPadding2D(4)`` followed by
    ``RandomCrop(32, 32)`` at the model's start: the batch pipeline then crops from the padded
    image in one pass (the padding is never materialized), and inference sees the original image.
    See RandomFlip for when and where augmentation runs."""

    name_prefix = "random_crop"
    config_keys = ("height", "width")

    def __init__(self, height: int, width: int, seed: Optional[int] = None, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        channels_last_only(kwargs)
        no_layer_seed(seed, "RandomCrop")
        self.height = validation.integer(height, "height", "RandomCrop")
        self.width = validation.integer(width, "width", "RandomCrop")
        super().__init__(name=name, input_shape=input_shape, **kwargs)
