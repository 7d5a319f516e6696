"""Keras-named layers. Each is a configuration; the C++ core does the work.

Input is NHWC (batch, height, width, channels), as in Keras. ``Conv2D`` kernels are
(kh, kw, in, out) and ``Dense`` kernels (in, out), so ``get_weights``/``set_weights`` move
weights to and from Keras unchanged; ``Flatten`` flattens in (H, W, C) order as Keras does.
``BatchNormalization``'s weights are Keras' four, in Keras' order: gamma, beta, moving_mean,
moving_variance (the last two non-trainable).

Activations (``activation=`` of Conv2D and Dense, ``Activation(...)``) by Keras' names: 'relu',
'relu6', 'leaky_relu' (slope 0.2, as keras.activations.leaky_relu), 'elu', 'selu', 'gelu' (Keras'
default exact erf form), 'gelu_approximate' (the tanh form, Keras' ``gelu(x, approximate=True)``),
'tanh', 'sigmoid', 'hard_sigmoid' (Keras 3's relu6(x + 3) / 6), 'swish' / 'silu', 'softplus',
'softsign', 'mish', 'hard_silu' / 'hard_swish' (x * hard_sigmoid(x)), 'softmax' (over the last axis,
on any layer) and 'linear' / None. The core
fuses ReLU into Conv2D and Dense; any other activation runs as its own step after them.

Layers go into a ``Sequential`` model, or are called on symbolic tensors to build a graph for
``hpcnn.Model`` (the functional API, graph.py): ``y = Conv2D(8, 3)(hpcnn.Input((32, 32, 3)))``.
``Add``, ``Multiply`` and ``Concatenate`` take a list of tensors (``add``, ``multiply`` and
``concatenate`` are Keras' functional forms: ``add([a, b])`` is ``Add()([a, b])``).

One module per kind of layer, as in Keras: ``layer`` (the base, InputLayer, Input), ``graph``
(symbolic tensors: the bottom of this package), ``convolutional``, ``pooling``, ``reshaping``,
``core`` (Dense, Activation), ``regularization`` (Dropout), ``activations``, ``normalization``,
``preprocessing`` (Rescaling, augmentation), ``merging``; ``serialization`` (Keras' serialized
form); ``weight_home`` (where a layer's weights live, shared between the models that hold it) and
``variable`` (``Variable``, one weight as Keras shows it). Each layer gives the C++ core one config (``core_config``); the core lowers it to its own
layers (fusions, the softmax split: csrc/nn/lowering.h).
"""
from .activations import ELU, LeakyReLU, ReLU, Softmax
from .convolutional import Conv2D, DepthwiseConv2D, SeparableConv2D
from .core import Activation, Dense
from .graph import KerasTensor
from .layer import Input, InputLayer, Layer
from .merging import Add, Concatenate, Multiply, add, concatenate, multiply
from .normalization import BatchNormalization
from .pooling import (AveragePooling2D, AvgPool2D, GlobalAveragePooling2D, GlobalAvgPool2D, GlobalMaxPool2D,
                      GlobalMaxPooling2D, MaxPool2D, MaxPooling2D)
from .preprocessing import (Normalization, RandomCrop, RandomFlip, RandomRotation, RandomTranslation, RandomZoom,
                            Rescaling)
from .regularization import Dropout
from .reshaping import Flatten, Reshape, ZeroPadding2D
from .serialization import LAYER_CLASSES, deserialize, serialize
from .variable import Variable

__all__ = ["Layer", "InputLayer", "Input", "Conv2D", "DepthwiseConv2D", "SeparableConv2D", "MaxPooling2D",
           "MaxPool2D", "AveragePooling2D", "AvgPool2D", "GlobalAveragePooling2D", "GlobalAvgPool2D",
           "GlobalMaxPooling2D", "GlobalMaxPool2D", "ZeroPadding2D", "Flatten", "Dense", "Dropout", "Activation",
           "ReLU", "LeakyReLU", "ELU", "Softmax", "Rescaling", "BatchNormalization", "RandomFlip",
           "RandomTranslation", "RandomRotation", "RandomZoom", "RandomCrop", "Add", "Concatenate", "Multiply",
           "multiply", "Reshape", "Normalization", "add", "concatenate", "KerasTensor", "serialize", "deserialize",
           "LAYER_CLASSES", "Variable"]
