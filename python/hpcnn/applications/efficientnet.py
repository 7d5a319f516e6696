"""EfficientNet B0-B7 (Tan and Le, ICML 2019) as Keras builds them (``keras.applications.efficientnet``):
the same layer names and weights, so Keras' ImageNet files load and hpcnn's saves load in Keras.
The preprocessing is inside the model, as in Keras (Rescaling 1/255, then Normalization; with
ImageNet weights also the per-channel Rescaling of Keras' files): inputs are pixels in [0, 255] and
``preprocess_input`` passes them through."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..layers import (Activation, Add, BatchNormalization, Conv2D, Dense, DepthwiseConv2D, Dropout,
                      GlobalAveragePooling2D, KerasTensor, Multiply, Normalization, Rescaling,
                      Reshape, ZeroPadding2D)
from ..models import Model
from . import imagenet_utils

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/keras-applications/"
#: Keras' checksums of its files: (with the top, without).
WEIGHTS_HASHES = {
    "b0": ("902e53a9f72be733fc0bcb005b3ebbac", "50bc09e76180e00e4465e1a485ddc09d"),
    "b1": ("1d254153d4ab51201f1646940f018540", "74c4e6b3e1f6a1eea24c589628592432"),
    "b2": ("b15cce36ff4dcbd00b6dd88e7857a6ad", "111f8e2ac8aa800a7a99e3239f7bfb39"),
    "b3": ("ffd1fdc53d0ce67064dc6a9c7960ede0", "af6d107764bb5b1abb91932881670226"),
    "b4": ("18c95ad55216b8f92d7e70b3a046e2fc", "ebc24e6d6c33eaebbd558eafbeedf1ba"),
    "b5": ("ace28f2a6363774853a83a0b21b9421a", "38879255a25d3c92d5e44e04ae6cec6f"),
    "b6": ("165f6e37dce68623721b423839de8be5", "9ecce42647a20130c1f39a5d4cb75743"),
    "b7": ("8c03f828fec3ef71311cd463b6759d99", "cbcfe4450ddf6f3ad90b1b398090fe4a"),
}
# (kernel size, repeats, filters in, filters out, expand ratio, strides): the seven stages of B0;
# every block has an identity skip where the shape stays and squeeze-and-excitation of ratio 0.25.
_STAGES = ((3, 1, 32, 16, 1, 1), (3, 2, 16, 24, 6, 2), (5, 2, 24, 40, 6, 2), (3, 3, 40, 80, 6, 2),
           (5, 3, 80, 112, 6, 1), (5, 4, 112, 192, 6, 2), (3, 1, 192, 320, 6, 1))
_SE_RATIO = 0.25
IMAGENET_STDDEV_RGB = (0.229, 0.224, 0.225)
# width, depth, default size, dropout before the classifier
_VARIANTS = {"b0": (1.0, 1.0, 224, 0.2), "b1": (1.0, 1.1, 240, 0.2), "b2": (1.1, 1.2, 260, 0.3),
             "b3": (1.2, 1.4, 300, 0.3), "b4": (1.4, 1.8, 380, 0.4), "b5": (1.6, 2.2, 456, 0.4),
             "b6": (1.8, 2.6, 528, 0.5), "b7": (2.0, 3.1, 600, 0.5)}


def _block(inputs: KerasTensor, activation: str, drop_rate: float, name: str, filters_in: int, filters_out: int,
           kernel_size: int, strides: int, expand_ratio: int) -> KerasTensor:
    """The MBConv block: 1x1 expansion, depthwise convolution, squeeze-and-excitation, 1x1
    projection, and (where the shape stays) the input added, the residual dropped per sample
    (Dropout with noise_shape (None, 1, 1, 1): stochastic depth)."""
    filters = filters_in * expand_ratio
    x = inputs
    if expand_ratio != 1:
        x = Conv2D(filters, 1, padding="same", use_bias=False, name=f"{name}expand_conv")(x)
        x = BatchNormalization(axis=3, name=f"{name}expand_bn")(x)
        x = Activation(activation, name=f"{name}expand_activation")(x)
    if strides == 2:
        x = ZeroPadding2D(padding=imagenet_utils.correct_pad(x.shape[1:], kernel_size), name=f"{name}dwconv_pad")(x)
    x = DepthwiseConv2D(kernel_size, strides=strides, padding="valid" if strides == 2 else "same", use_bias=False,
                        name=f"{name}dwconv")(x)
    x = BatchNormalization(axis=3, name=f"{name}bn")(x)
    x = Activation(activation, name=f"{name}activation")(x)
    filters_se = max(1, int(filters_in * _SE_RATIO))
    se = GlobalAveragePooling2D(name=f"{name}se_squeeze")(x)
    se = Reshape((1, 1, filters), name=f"{name}se_reshape")(se)
    se = Conv2D(filters_se, 1, padding="same", activation=activation, name=f"{name}se_reduce")(se)
    se = Conv2D(filters, 1, padding="same", activation="sigmoid", name=f"{name}se_expand")(se)
    x = Multiply(name=f"{name}se_excite")([x, se])
    x = Conv2D(filters_out, 1, padding="same", use_bias=False, name=f"{name}project_conv")(x)
    x = BatchNormalization(axis=3, name=f"{name}project_bn")(x)
    if strides == 1 and filters_in == filters_out:
        if drop_rate > 0:
            x = Dropout(drop_rate, noise_shape=(None, 1, 1, 1), name=f"{name}drop")(x)
        x = Add(name=f"{name}add")([x, inputs])
    return x


def _efficientnet(variant: str, builder: str, include_top: bool, weights: Any, input_tensor: Any, input_shape: Any,
                  pooling: Any, classes: int, classifier_activation: Any, name: str) -> Model:
    width, depth, default_size, dropout_rate = _VARIANTS[variant]
    drop_connect_rate, divisor, activation = 0.2, 8, "swish"
    imagenet_utils.check_weights(weights, include_top, classes, builder)
    imagenet_utils.check_pooling(pooling, builder)
    shape = imagenet_utils.obtain_input_shape(input_shape, default_size, 32, include_top, weights, builder)

    def round_filters(filters: float) -> int:
        filters *= width
        new = max(divisor, int(filters + divisor / 2) // divisor * divisor)
        return int(new + divisor if new < 0.9 * filters else new)

    def round_repeats(repeats: int) -> int:
        return int(math.ceil(depth * repeats))

    inputs, x = imagenet_utils.model_input(input_tensor, shape, builder)
    x = Rescaling(1.0 / 255.0)(x)
    x = Normalization(axis=3)(x)
    if weights == "imagenet":
        x = Rescaling([1.0 / math.sqrt(s) for s in IMAGENET_STDDEV_RGB])(x)
    x = ZeroPadding2D(padding=imagenet_utils.correct_pad(x.shape[1:], 3), name="stem_conv_pad")(x)
    x = Conv2D(round_filters(32), 3, strides=2, padding="valid", use_bias=False, name="stem_conv")(x)
    x = BatchNormalization(axis=3, name="stem_bn")(x)
    x = Activation(activation, name="stem_activation")(x)
    b, blocks = 0, float(sum(round_repeats(stage[1]) for stage in _STAGES))
    for i, (kernel, repeats, f_in, f_out, expand, strides) in enumerate(_STAGES):
        f_in, f_out = round_filters(f_in), round_filters(f_out)
        for j in range(round_repeats(repeats)):
            x = _block(x, activation, drop_connect_rate * b / blocks, f"block{i + 1}{chr(j + 97)}_",
                       f_in if j == 0 else f_out, f_out, kernel, strides if j == 0 else 1, expand)
            b += 1
    x = Conv2D(round_filters(1280), 1, padding="same", use_bias=False, name="top_conv")(x)
    x = BatchNormalization(axis=3, name="top_bn")(x)
    x = Activation(activation, name="top_activation")(x)
    if include_top:
        x = GlobalAveragePooling2D(name="avg_pool")(x)
        if dropout_rate > 0:
            x = Dropout(dropout_rate, name="top_dropout")(x)
        imagenet_utils.validate_activation(classifier_activation, weights, builder)
        x = Dense(classes, activation=classifier_activation, name="predictions")(x)
    else:
        x = imagenet_utils.pooling_head(x, pooling, "avg_pool", "max_pool")
    model = Model(inputs, x, name=name)
    fname = name + (".h5" if include_top else "_notop.h5")
    imagenet_utils.load_weights(model, weights, fname, BASE_WEIGHTS_PATH + fname,
                                WEIGHTS_HASHES[variant][0 if include_top else 1], builder)
    return model


_DOC = """The {builder} model (Keras' ``keras.applications.{builder}``): inputs are pixels in [0, 255]
    (the preprocessing is inside the model), {size}x{size}x3 by default.

    Parameters
    ----------
    include_top : bool
        Whether to include the classifier (global average pooling, dropout and a Dense layer) at the top.
    weights : str or None
        None (random initialization), 'imagenet' (Keras' ImageNet file, from Keras' cache folder
        ``~/.keras/models`` or ``$KERAS_HOME/models``, downloaded there when missing), or the path
        of a weights file.
    input_tensor : KerasTensor, optional
        A tensor (an ``Input``, or a layer's output on one) to build the model on.
    input_shape : tuple of int, optional
        (height, width, channels), at least 32x32; default {size}x{size}x3.
    pooling : {{None, 'avg', 'max'}}
        With ``include_top=False``: the last block's 4D output, or its global average or max.
    classes : int
        Number of classes (with ``include_top=True`` and no pretrained weights).
    classifier_activation : str or None
        The top layer's activation ('softmax', or None for logits, with pretrained weights).
    name : str
        The model's name (Keras names the ImageNet file after it).

    Returns
    -------
    Model
        An uncompiled functional model.
    """


def _builder(variant: str) -> Any:
    builder = f"EfficientNet{variant.upper()}"

    def build(include_top: bool = True, weights: Optional[str] = "imagenet", input_tensor: Any = None,
              input_shape: Optional[Sequence[int]] = None, pooling: Optional[str] = None, classes: int = 1000,
              classifier_activation: Optional[str] = "softmax", name: str = f"efficientnet{variant}") -> Model:
        return _efficientnet(variant, builder, include_top, weights, input_tensor, input_shape, pooling, classes,
                             classifier_activation, name)

    build.__name__ = build.__qualname__ = builder
    build.__doc__ = _DOC.format(builder=builder, size=_VARIANTS[variant][2])
    return build


EfficientNetB0 = _builder("b0")
EfficientNetB1 = _builder("b1")
EfficientNetB2 = _builder("b2")
EfficientNetB3 = _builder("b3")
EfficientNetB4 = _builder("b4")
EfficientNetB5 = _builder("b5")
EfficientNetB6 = _builder("b6")
EfficientNetB7 = _builder("b7")


def preprocess_input(x: Any, data_format: Optional[str] = None) -> Any:
    """EfficientNet's preprocessing is inside the model (Rescaling and Normalization layers): this
    returns `x` unchanged, as Keras' does (kept so that scripts calling it run)."""
    return x


def decode_predictions(preds: Any, top: int = 5) -> List[List[Tuple[str, str, float]]]:
    """The `top` ImageNet classes per row of predictions (``imagenet_utils.decode_predictions``)."""
    return imagenet_utils.decode_predictions(preds, top=top)


__all__ = ["EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4", "EfficientNetB5",
           "EfficientNetB6", "EfficientNetB7", "preprocess_input", "decode_predictions"]
