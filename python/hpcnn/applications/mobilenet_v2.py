"""MobileNetV2 (Sandler et al., CVPR 2018) as Keras builds it (``keras.applications.mobilenet_v2``):
the same layer names and weights, for any width multiplier ``alpha``, so Keras' ImageNet files load
and hpcnn's saves load in Keras. Inputs: ``preprocess_input`` ('tf': scaled to [-1, 1])."""
from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .. import validation
from ..layers import Add, BatchNormalization, Conv2D, Dense, DepthwiseConv2D, KerasTensor, ReLU, ZeroPadding2D
from ..models import Model
from . import imagenet_utils

BASE_WEIGHT_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/"
#: The widths and input sizes Keras has ImageNet files for.
IMAGENET_ALPHAS = (0.35, 0.50, 0.75, 1.0, 1.3, 1.4)
IMAGENET_SIZES = (96, 128, 160, 192, 224)
# (filters, stride, expansion) of the 17 inverted residual blocks
_BLOCKS = ((16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (32, 1, 6), (64, 2, 6), (64, 1, 6),
           (64, 1, 6), (64, 1, 6), (96, 1, 6), (96, 1, 6), (96, 1, 6), (160, 2, 6), (160, 1, 6), (160, 1, 6),
           (320, 1, 6))


def _make_divisible(v: float, divisor: int = 8) -> int:
    """Keras' (and the paper's reference code's) channel rounding: to a multiple of `divisor`, never
    below 90 % of `v`."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _bn(name: str) -> BatchNormalization:
    return BatchNormalization(axis=-1, epsilon=1e-3, momentum=0.999, name=name)


def _inverted_res_block(inputs: KerasTensor, expansion: int, stride: int, alpha: float, filters: int,
                        block_id: int) -> KerasTensor:
    """1x1 expansion (not in block 0), 3x3 depthwise (stride), 1x1 projection, each with
    BatchNormalization (ReLU6 after the first two); the input added where the shape stays."""
    in_channels = inputs.shape[-1]
    pointwise_filters = _make_divisible(int(filters * alpha), 8)
    x = inputs
    prefix = f"block_{block_id}_"
    if block_id:
        x = Conv2D(expansion * in_channels, kernel_size=1, padding="same", use_bias=False, activation=None,
                   name=f"{prefix}expand")(x)
        x = _bn(f"{prefix}expand_BN")(x)
        x = ReLU(6.0, name=f"{prefix}expand_relu")(x)
    else:
        prefix = "expanded_conv_"
    if stride == 2:
        x = ZeroPadding2D(padding=imagenet_utils.correct_pad(x.shape[1:], 3), name=f"{prefix}pad")(x)
    x = DepthwiseConv2D(kernel_size=3, strides=stride, activation=None, use_bias=False,
                        padding="same" if stride == 1 else "valid", name=f"{prefix}depthwise")(x)
    x = _bn(f"{prefix}depthwise_BN")(x)
    x = ReLU(6.0, name=f"{prefix}depthwise_relu")(x)
    x = Conv2D(pointwise_filters, kernel_size=1, padding="same", use_bias=False, activation=None,
               name=f"{prefix}project")(x)
    x = _bn(f"{prefix}project_BN")(x)
    if in_channels == pointwise_filters and stride == 1:
        return Add(name=f"{prefix}add")([inputs, x])
    return x


def MobileNetV2(input_shape: Optional[Sequence[int]] = None, alpha: float = 1.0, include_top: bool = True,
                weights: Optional[str] = "imagenet", input_tensor: Any = None, pooling: Optional[str] = None,
                classes: int = 1000, classifier_activation: Optional[str] = "softmax",
                name: Optional[str] = None) -> Model:
    """The MobileNetV2 model (Keras' ``keras.applications.MobileNetV2``).

    Parameters
    ----------
    input_shape : tuple of int, optional
        (height, width, channels), at least 32x32; default 224x224x3 (or the input tensor's size
        when it is one of 96, 128, 160, 192, 224). ImageNet files exist for square inputs of those sizes.
    alpha : float
        The width multiplier: below 1 fewer filters in every layer, above 1 more; ImageNet files
        exist for 0.35, 0.5, 0.75, 1.0, 1.3 and 1.4.
    include_top : bool
        Whether to include the classifier (global average pooling and a Dense layer) at the top.
    weights : str or None
        None (random initialization), 'imagenet' (Keras' ImageNet file, from Keras' cache folder
        ``~/.keras/models`` or ``$KERAS_HOME/models``, downloaded there when missing), or the path
        of a weights file.
    input_tensor : KerasTensor, optional
        A tensor (an ``Input``, or a layer's output on one) to build the model on.
    pooling : {None, 'avg', 'max'}
        With ``include_top=False``: the last block's 4D output, or its global average or max.
    classes : int
        Number of classes (with ``include_top=True`` and no pretrained weights).
    classifier_activation : str or None
        The top layer's activation ('softmax', or None for logits, with pretrained weights).
    name : str, optional
        The model's name; default ``mobilenetv2_<alpha>_<rows>`` as in Keras.

    Returns
    -------
    Model
        An uncompiled functional model.
    """
    builder = "MobileNetV2"
    imagenet_utils.check_weights(weights, include_top, classes, builder)
    imagenet_utils.check_pooling(pooling, builder)
    alpha = validation.number(alpha, "alpha", builder, low=0.0, low_open=True)
    if input_shape is None and input_tensor is not None and isinstance(input_tensor, KerasTensor):
        input_shape = tuple(input_tensor.shape[1:])
    rows = input_shape[0] if input_shape is not None and len(input_shape) == 3 else None
    square = input_shape is not None and len(input_shape) == 3 and input_shape[0] == input_shape[1]
    default_size = rows if square and rows in IMAGENET_SIZES else 224
    shape = imagenet_utils.obtain_input_shape(input_shape, default_size, 32, include_top, weights, builder)
    rows = shape[0]
    if weights == "imagenet":
        if alpha not in IMAGENET_ALPHAS:
            raise ValueError(f"{builder}: with weights='imagenet', alpha must be one of 0.35, 0.50, 0.75, 1.0, 1.3 "
                             f"or 1.4, got alpha={alpha}")
        if shape[0] != shape[1] or shape[0] not in IMAGENET_SIZES:
            rows = 224
            warnings.warn(f"{builder}: input_shape {shape} is non-square or not one of 96, 128, 160, 192, 224: the "
                          "weights for 224x224 are loaded", UserWarning, stacklevel=2)
    inputs, x = imagenet_utils.model_input(input_tensor, shape, builder)
    x = Conv2D(_make_divisible(32 * alpha, 8), kernel_size=3, strides=(2, 2), padding="same", use_bias=False,
               name="Conv1")(x)
    x = _bn("bn_Conv1")(x)
    x = ReLU(6.0, name="Conv1_relu")(x)
    for block_id, (filters, stride, expansion) in enumerate(_BLOCKS):
        x = _inverted_res_block(x, filters=filters, alpha=alpha, stride=stride, expansion=expansion,
                                block_id=block_id)
    last = _make_divisible(1280 * alpha, 8) if alpha > 1.0 else 1280
    x = Conv2D(last, kernel_size=1, use_bias=False, name="Conv_1")(x)
    x = _bn("Conv_1_bn")(x)
    x = ReLU(6.0, name="out_relu")(x)
    if include_top:
        x = imagenet_utils.pooling_head(x, "avg")
        imagenet_utils.validate_activation(classifier_activation, weights, builder)
        x = Dense(classes, activation=classifier_activation, name="predictions")(x)
    else:
        x = imagenet_utils.pooling_head(x, pooling)
    model = Model(inputs, x, name=name if name is not None else f"mobilenetv2_{alpha:0.2f}_{rows}")
    top = "" if include_top else "_no_top"
    fname = f"mobilenet_v2_weights_tf_dim_ordering_tf_kernels_{float(alpha)}_{rows}{top}.h5"
    # Keras gives no checksum for these files: the loader's count and shape checks stand in for it.
    imagenet_utils.load_weights(model, weights, fname, BASE_WEIGHT_PATH + fname, None, builder)
    return model


def preprocess_input(x: Any, data_format: Optional[str] = None) -> np.ndarray:
    """MobileNetV2's input: scaled from [0, 255] to [-1, 1] ('tf' mode of
    ``imagenet_utils.preprocess_input``, whose parameters these are)."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")


def decode_predictions(preds: Any, top: int = 5) -> List[List[Tuple[str, str, float]]]:
    """The `top` ImageNet classes per row of predictions (``imagenet_utils.decode_predictions``)."""
    return imagenet_utils.decode_predictions(preds, top=top)


__all__ = ["MobileNetV2", "preprocess_input", "decode_predictions"]
