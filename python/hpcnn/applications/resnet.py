"""ResNet50, ResNet101 and ResNet152 (He et al., CVPR 2016; v1, the bottleneck blocks) as Keras
builds them (``keras.applications.resnet``, and ``resnet50`` for ResNet50): the same layer names
and weights, so Keras' ImageNet files load and hpcnn's saves load in Keras. Inputs:
``preprocess_input`` ('caffe': BGR, ImageNet's mean pixel subtracted)."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from ..layers import (Activation, Add, BatchNormalization, Conv2D, Dense, GlobalAveragePooling2D,
                      KerasTensor, MaxPooling2D, ZeroPadding2D)
from ..models import Model
from . import imagenet_utils

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/resnet/"
#: Keras' checksums of its files: (with the top, without).
WEIGHTS_HASHES = {
    "resnet50": ("2cb95161c43110f7111970584f804107", "4d473c1dd8becc155b73f8504c6f6626"),
    "resnet101": ("f1aeb4b969a6efcfb50fad2f0c20cfc5", "88cf7a10940856eca736dc7b7e228a21"),
    "resnet152": ("100835be76be38e30d865e96f2aaae62", "ee4c566cf9a93f14d82f913c2dc6dd0c"),
}
_EPSILON = 1.001e-5  # Keras' (the Caffe models' BatchNormalization)


def _block(x: KerasTensor, filters: int, stride: int = 1, conv_shortcut: bool = True, name: str = "") -> KerasTensor:
    """The bottleneck block: 1x1 (stride), 3x3, 1x1 (4 x filters), each with BatchNormalization,
    plus the shortcut (a 1x1 convolution where the shape changes), Add, ReLU."""
    if conv_shortcut:
        shortcut = Conv2D(4 * filters, 1, strides=stride, name=f"{name}_0_conv")(x)
        shortcut = BatchNormalization(axis=3, epsilon=_EPSILON, name=f"{name}_0_bn")(shortcut)
    else:
        shortcut = x
    x = Conv2D(filters, 1, strides=stride, name=f"{name}_1_conv")(x)
    x = BatchNormalization(axis=3, epsilon=_EPSILON, name=f"{name}_1_bn")(x)
    x = Activation("relu", name=f"{name}_1_relu")(x)
    x = Conv2D(filters, 3, padding="same", name=f"{name}_2_conv")(x)
    x = BatchNormalization(axis=3, epsilon=_EPSILON, name=f"{name}_2_bn")(x)
    x = Activation("relu", name=f"{name}_2_relu")(x)
    x = Conv2D(4 * filters, 1, name=f"{name}_3_conv")(x)
    x = BatchNormalization(axis=3, epsilon=_EPSILON, name=f"{name}_3_bn")(x)
    x = Add(name=f"{name}_add")([shortcut, x])
    return Activation("relu", name=f"{name}_out")(x)


def _stack(x: KerasTensor, filters: int, blocks: int, stride1: int = 2, name: str = "") -> KerasTensor:
    x = _block(x, filters, stride=stride1, name=f"{name}_block1")
    for i in range(2, blocks + 1):
        x = _block(x, filters, conv_shortcut=False, name=f"{name}_block{i}")
    return x


def _resnet(stack_fn: Callable[[KerasTensor], KerasTensor], weights_name: str, builder: str, include_top: bool,
            weights: Any, input_tensor: Any, input_shape: Any, pooling: Any, classes: int,
            classifier_activation: Any, name: str) -> Model:
    imagenet_utils.check_weights(weights, include_top, classes, builder)
    imagenet_utils.check_pooling(pooling, builder)
    shape = imagenet_utils.obtain_input_shape(input_shape, 224, 32, include_top, weights, builder)
    inputs, x = imagenet_utils.model_input(input_tensor, shape, builder)
    x = ZeroPadding2D(padding=((3, 3), (3, 3)), name="conv1_pad")(x)
    x = Conv2D(64, 7, strides=2, name="conv1_conv")(x)
    x = BatchNormalization(axis=3, epsilon=_EPSILON, name="conv1_bn")(x)
    x = Activation("relu", name="conv1_relu")(x)
    x = ZeroPadding2D(padding=((1, 1), (1, 1)), name="pool1_pad")(x)
    x = MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    x = stack_fn(x)
    if include_top:
        x = GlobalAveragePooling2D(name="avg_pool")(x)
        imagenet_utils.validate_activation(classifier_activation, weights, builder)
        x = Dense(classes, activation=classifier_activation, name="predictions")(x)
    else:
        x = imagenet_utils.pooling_head(x, pooling, "avg_pool", "max_pool")
    model = Model(inputs, x, name=name)
    top = "" if include_top else "_notop"
    fname = f"{weights_name}_weights_tf_dim_ordering_tf_kernels{top}.h5"
    imagenet_utils.load_weights(model, weights, fname, BASE_WEIGHTS_PATH + fname,
                                WEIGHTS_HASHES[weights_name][0 if include_top else 1], builder)
    return model


_DOC = """The {builder} model (Keras' ``keras.applications.{builder}``).

    Parameters
    ----------
    include_top : bool
        Whether to include the classifier (global average pooling and a Dense layer) at the top
        (then the input is 224x224x3 with ImageNet weights).
    weights : str or None
        None (random initialization), 'imagenet' (Keras' ImageNet file, from Keras' cache folder
        ``~/.keras/models`` or ``$KERAS_HOME/models``, downloaded there when missing), or the path
        of a weights file.
    input_tensor : KerasTensor, optional
        A tensor (an ``Input``, or a layer's output on one) to build the model on.
    input_shape : tuple of int, optional
        (height, width, channels), at least 32x32; default 224x224x3.
    pooling : {{None, 'avg', 'max'}}
        With ``include_top=False``: the last block's 4D output, or its global average or max.
    classes : int
        Number of classes (with ``include_top=True`` and no pretrained weights).
    classifier_activation : str or None
        The top layer's activation ('softmax', or None for logits, with pretrained weights).
    name : str
        The model's name.

    Returns
    -------
    Model
        An uncompiled functional model.
    """


def ResNet50(include_top: bool = True, weights: Optional[str] = "imagenet", input_tensor: Any = None,
             input_shape: Optional[Sequence[int]] = None, pooling: Optional[str] = None, classes: int = 1000,
             classifier_activation: Optional[str] = "softmax", name: str = "resnet50") -> Model:
    def stack_fn(x: KerasTensor) -> KerasTensor:
        x = _stack(x, 64, 3, stride1=1, name="conv2")
        x = _stack(x, 128, 4, name="conv3")
        x = _stack(x, 256, 6, name="conv4")
        return _stack(x, 512, 3, name="conv5")
    return _resnet(stack_fn, "resnet50", "ResNet50", include_top, weights, input_tensor, input_shape, pooling,
                   classes, classifier_activation, name)


def ResNet101(include_top: bool = True, weights: Optional[str] = "imagenet", input_tensor: Any = None,
              input_shape: Optional[Sequence[int]] = None, pooling: Optional[str] = None, classes: int = 1000,
              classifier_activation: Optional[str] = "softmax", name: str = "resnet101") -> Model:
    def stack_fn(x: KerasTensor) -> KerasTensor:
        x = _stack(x, 64, 3, stride1=1, name="conv2")
        x = _stack(x, 128, 4, name="conv3")
        x = _stack(x, 256, 23, name="conv4")
        return _stack(x, 512, 3, name="conv5")
    return _resnet(stack_fn, "resnet101", "ResNet101", include_top, weights, input_tensor, input_shape, pooling,
                   classes, classifier_activation, name)


def ResNet152(include_top: bool = True, weights: Optional[str] = "imagenet", input_tensor: Any = None,
              input_shape: Optional[Sequence[int]] = None, pooling: Optional[str] = None, classes: int = 1000,
              classifier_activation: Optional[str] = "softmax", name: str = "resnet152") -> Model:
    def stack_fn(x: KerasTensor) -> KerasTensor:
        x = _stack(x, 64, 3, stride1=1, name="conv2")
        x = _stack(x, 128, 8, name="conv3")
        x = _stack(x, 256, 36, name="conv4")
        return _stack(x, 512, 3, name="conv5")
    return _resnet(stack_fn, "resnet152", "ResNet152", include_top, weights, input_tensor, input_shape, pooling,
                   classes, classifier_activation, name)


ResNet50.__doc__ = _DOC.format(builder="ResNet50")
ResNet101.__doc__ = _DOC.format(builder="ResNet101")
ResNet152.__doc__ = _DOC.format(builder="ResNet152")


def preprocess_input(x: Any, data_format: Optional[str] = None) -> np.ndarray:
    """ResNet's input: RGB to BGR, then ImageNet's mean pixel subtracted, no scaling ('caffe' mode of
    ``imagenet_utils.preprocess_input``, whose parameters these are)."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")


def decode_predictions(preds: Any, top: int = 5) -> List[List[Tuple[str, str, float]]]:
    """The `top` ImageNet classes per row of predictions (``imagenet_utils.decode_predictions``)."""
    return imagenet_utils.decode_predictions(preds, top=top)


__all__ = ["ResNet50", "ResNet101", "ResNet152", "preprocess_input", "decode_predictions"]
