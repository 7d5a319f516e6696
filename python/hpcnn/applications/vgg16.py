"""VGG16 (Simonyan and Zisserman, ICLR 2015) as Keras builds it (``keras.applications.vgg16``):
the same layer names and weights, so Keras' ImageNet files load and hpcnn's saves load in Keras.
Inputs: ``preprocess_input`` ('caffe': BGR, ImageNet's mean pixel subtracted)."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..layers import Conv2D, Dense, Flatten, MaxPooling2D
from ..models import Model
from . import imagenet_utils

WEIGHTS_PATH = ("https://storage.googleapis.com/tensorflow/keras-applications/vgg16/"
                "vgg16_weights_tf_dim_ordering_tf_kernels.h5")
WEIGHTS_PATH_NO_TOP = ("https://storage.googleapis.com/tensorflow/keras-applications/vgg16/"
                       "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5")
WEIGHTS_HASH = "64373286793e3c8b2b4e3219cbf3544b"
WEIGHTS_HASH_NO_TOP = "6d6bbae143d832006294945121d1f1fc"

# (block, convolutions, filters)
_BLOCKS = ((1, 2, 64), (2, 2, 128), (3, 3, 256), (4, 3, 512), (5, 3, 512))


def VGG16(include_top: bool = True, weights: Optional[str] = "imagenet", input_tensor: Any = None,
          input_shape: Optional[Sequence[int]] = None, pooling: Optional[str] = None, classes: int = 1000,
          classifier_activation: Optional[str] = "softmax", name: str = "vgg16") -> Model:
    """The VGG16 model (Keras' ``keras.applications.VGG16``).

    Parameters
    ----------
    include_top : bool
        Whether to include the three fully-connected layers at the top (then the input is 224x224x3
        with ImageNet weights).
    weights : str or None
        None (random initialization), 'imagenet' (Keras' ImageNet file, from Keras' cache folder
        ``~/.keras/models`` or ``$KERAS_HOME/models``, downloaded there when missing), or the path
        of a weights file.
    input_tensor : KerasTensor, optional
        A tensor (an ``Input``, or a layer's output on one) to build the model on.
    input_shape : tuple of int, optional
        (height, width, channels), at least 32x32; default 224x224x3.
    pooling : {None, 'avg', 'max'}
        With ``include_top=False``: the last convolution block's 4D output, or its global average or max.
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
    imagenet_utils.check_weights(weights, include_top, classes, "VGG16")
    imagenet_utils.check_pooling(pooling, "VGG16")
    shape = imagenet_utils.obtain_input_shape(input_shape, 224, 32, include_top, weights, "VGG16")
    inputs, x = imagenet_utils.model_input(input_tensor, shape, "VGG16")
    for block, convs, filters in _BLOCKS:
        for i in range(1, convs + 1):
            x = Conv2D(filters, (3, 3), activation="relu", padding="same", name=f"block{block}_conv{i}")(x)
        x = MaxPooling2D((2, 2), strides=(2, 2), name=f"block{block}_pool")(x)
    if include_top:
        x = Flatten(name="flatten")(x)
        x = Dense(4096, activation="relu", name="fc1")(x)
        x = Dense(4096, activation="relu", name="fc2")(x)
        imagenet_utils.validate_activation(classifier_activation, weights, "VGG16")
        x = Dense(classes, activation=classifier_activation, name="predictions")(x)
    else:
        x = imagenet_utils.pooling_head(x, pooling)
    model = Model(inputs, x, name=name)
    if include_top:
        fname, origin, file_hash = "vgg16_weights_tf_dim_ordering_tf_kernels.h5", WEIGHTS_PATH, WEIGHTS_HASH
    else:
        fname, origin, file_hash = ("vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5", WEIGHTS_PATH_NO_TOP,
                                    WEIGHTS_HASH_NO_TOP)
    imagenet_utils.load_weights(model, weights, fname, origin, file_hash, "VGG16")
    return model


def preprocess_input(x: Any, data_format: Optional[str] = None) -> np.ndarray:
    """VGG16's input: RGB to BGR, then ImageNet's mean pixel subtracted, no scaling ('caffe' mode of
    ``imagenet_utils.preprocess_input``, whose parameters these are)."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")


def decode_predictions(preds: Any, top: int = 5) -> List[List[Tuple[str, str, float]]]:
    """The `top` ImageNet classes per row of predictions (``imagenet_utils.decode_predictions``)."""
    return imagenet_utils.decode_predictions(preds, top=top)


__all__ = ["VGG16", "preprocess_input", "decode_predictions"]
