"""Prebuilt models (Keras keeps these in ``keras.applications``): the two reference networks
(``tutorial_cnn``, ``deep_mnist``; also importable from ``hpcnn.models``) and the CIFAR ResNets of
He et al. 2016 (``resnet_cifar(depth)``, ``resnet20_cifar()``, ``resnet32_cifar()``, ...), all
uncompiled, with fresh weights (from ``seed`` when given); and Keras' ImageNet backbones, one
module per family as in ``keras.applications`` (``vgg16``, ``resnet``, ...), each with its
``preprocess_input`` and ``decode_predictions``, built with Keras' layer names so that
``weights='imagenet'`` loads the very files Keras downloads (``weight_files``: Keras' cache folder,
URLs and checksums) and hpcnn's saves load in Keras.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from .. import regularizers, validation
from ..layers import (Add, BatchNormalization, Concatenate, Conv2D, Dense, Dropout, Flatten, GlobalAveragePooling2D,
                     Input, InputLayer, KerasTensor, MaxPooling2D, ReLU, Rescaling)
from ..models import Model, Sequential
from ..regularizers import Regularizer
from . import efficientnet, imagenet_utils, mobilenet_v2, resnet, vgg16, weight_files
from .efficientnet import (EfficientNetB0, EfficientNetB1, EfficientNetB2, EfficientNetB3, EfficientNetB4,
                           EfficientNetB5, EfficientNetB6, EfficientNetB7)
from .mobilenet_v2 import MobileNetV2
from .resnet import ResNet50, ResNet101, ResNet152
from .vgg16 import VGG16


def tutorial_cnn(seed: Optional[int] = None) -> Sequential:
    """The CIFAR-10 tutorial CNN (input 32x32x3, 787,530 parameters)."""
    m = Sequential(name="tutorial_cnn", seed=seed)
    m.add(InputLayer(input_shape=[32, 32, 3]))
    for f in (32, 64, 128, 256):
        m.add(Conv2D(filters=f, kernel_size=3, padding="same", activation="relu"))
        m.add(MaxPooling2D(pool_size=[2, 2], strides=[2, 2], padding="same"))
    m.add(Flatten())
    m.add(Dense(256, activation="relu"))
    m.add(Dropout(0.2))
    m.add(Dense(512, activation="relu"))
    m.add(Dropout(0.2))
    m.add(Dense(10, activation="softmax"))
    return m


def deep_mnist(seed: Optional[int] = None) -> Sequential:
    """DeepMNIST (input 28x28x1, 3,274,634 parameters)."""
    m = Sequential(name="deep_mnist", seed=seed)
    m.add(InputLayer(input_shape=[28, 28, 1]))
    m.add(Conv2D(32, 5, padding="same", activation="relu"))
    m.add(MaxPooling2D(2))
    m.add(Conv2D(64, 5, padding="same", activation="relu"))
    m.add(MaxPooling2D(2))
    m.add(Flatten())
    m.add(Dense(1024, activation="relu"))
    m.add(Dropout(0.5))
    m.add(Dense(10, activation="softmax"))
    return m


# ---------------------------------------------------------------------- ResNet for CIFAR (He et al. 2016)
def _source_input(tensor: Any) -> Any:
    """The hpcnn.Input() tensor a tensor was computed from (Keras applications' get_source_inputs):
    ``input_tensor`` may be the output of augmentation layers applied to an Input."""
    if not isinstance(tensor, KerasTensor):
        raise TypeError(f"resnet_cifar: input_tensor must be an hpcnn tensor (hpcnn.Input(shape=...) or a layer's "
                        f"output), got {type(tensor).__name__}")
    t = tensor
    while not t.layer.is_input:
        inbound = t.layer.inbound_tensors or []
        if len(inbound) != 1:
            raise ValueError(f"resnet_cifar: input_tensor must come from one hpcnn.Input() through single-input "
                             f"layers, but {t!r} reads {len(inbound)} tensors")
        t = inbound[0]
    return t


def _zero_padding_shortcut(x: Any, stride: int, name: str) -> Any:
    """Option A's shortcut where a stage starts: ``x[:, ::stride, ::stride, :]`` (a 1x1 max-pool
    of that stride) followed by as many zero channels (Rescaling by 0), doubling the channels."""
    sub = MaxPooling2D(1, strides=stride, name=f"{name}_subsample")(x)
    return Concatenate(name=f"{name}_pad_channels")([sub, Rescaling(0.0, name=f"{name}_zeros")(sub)])


def _basic_block(x: Any, filters: int, stride: int, name: str, regularizer: Optional[Regularizer],
                 shortcut: str) -> Any:
    """He et al.'s basic block (v1): 3x3 Conv-BN-ReLU, 3x3 Conv-BN, plus the shortcut, Add, ReLU.
    The shortcut is the identity where the shape stays; where it halves the size and doubles the
    channels it is, with shortcut 'A' (the paper's CIFAR networks), the input subsampled by 2 with
    zero channels appended (no weights), with 'B' a 1x1 convolution of stride 2 with BN."""
    y = Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, kernel_regularizer=regularizer,
               name=f"{name}_conv1")(x)
    y = ReLU(name=f"{name}_relu1")(BatchNormalization(name=f"{name}_bn1")(y))  # BN+ReLU fused by the core
    y = Conv2D(filters, 3, padding="same", use_bias=False, kernel_regularizer=regularizer, name=f"{name}_conv2")(y)
    y = BatchNormalization(name=f"{name}_bn2")(y)
    res = x
    if stride != 1 or x.shape[-1] != filters:
        if shortcut == "B":
            res = Conv2D(filters, 1, strides=stride, use_bias=False, kernel_regularizer=regularizer,
                         name=f"{name}_proj")(x)
            res = BatchNormalization(name=f"{name}_proj_bn")(res)
        else:
            res = _zero_padding_shortcut(x, stride, name)
    return ReLU(name=f"{name}_out")(Add(name=f"{name}_add")([y, res]))


def resnet_cifar(depth: int = 20, input_shape: Optional[Sequence[int]] = None, classes: int = 10,
                 weight_decay: Optional[float] = 1e-4, kernel_regularizer: Any = None, include_top: bool = True,
                 pooling: Optional[str] = None, classifier_activation: Optional[str] = "softmax",
                 input_tensor: Any = None, shortcut: str = "A", name: Optional[str] = None,
                 seed: Optional[int] = None) -> Model:
    """The CIFAR ResNet of He et al. 2016 (section 4.2), ``depth = 6n + 2``: a 3x3 convolution with 16
    filters, three stages of n basic blocks with 16, 32 and 64 filters (the second and third start
    with stride 2), global average pooling and a ``classes``-way Dense.

    Trainable parameters, as the paper's table 6: ResNet-20 0.27 M (269,722), ResNet-32 0.46 M,
    ResNet-44 0.66 M, ResNet-56 0.85 M, ResNet-110 1.7 M; ``count_params()`` adds the BN moving
    statistics (non-trainable: 1,376 for ResNet-20).

    - ``shortcut``: where a stage halves the size and doubles the channels, 'A' (the paper's CIFAR
      choice, the default): the input subsampled by 2 and zero channels appended, no weights; 'B':
      a 1x1 convolution of stride 2 with BN (+2,752 weights for ResNet-20: 272,474 trainable).

    - ``input_shape``: per-sample (H, W, C), default (32, 32, 3); or ``input_tensor``: an
      ``hpcnn.Input()`` tensor or what augmentation layers made of one (the model's input is then
      that Input, so the augmentation is part of the model and runs only in ``fit``).
    - ``weight_decay``: the paper's weight decay (1e-4): its gradient ``weight_decay * w`` is added
      for every convolution and Dense kernel, as an ``L2(weight_decay / 2)`` kernel regularizer (so
      the penalty shows in the loss, as in Keras). ``kernel_regularizer`` instead gives the
      regularizer itself (then leave weight_decay at its default or None); ``weight_decay=None``
      and no regularizer: none.
    - ``include_top=False``: no Dense; the output is the last block's (H/4, W/4, 64) feature map, or
      with ``pooling='avg'`` / ``'max'`` its global average / maximum.
    - ``seed``: the initial weights (Keras' default initializers: Glorot uniform kernels).

    Uncompiled. The paper trains with SGD(0.1, momentum=0.9), batch 128, the rate divided by 10 at
    32k and 48k steps, random crops of the image padded by 4 and horizontal flips (see
    notebooks/03_resnet_cifar10.ipynb).
    """
    caller = "resnet_cifar"
    depth = validation.integer(depth, "depth", caller, minimum=8, maximum=1202)
    if (depth - 2) % 6:
        raise ValueError(f"{caller}: Invalid value for argument `depth`. Expected 6n + 2 (20, 32, 44, 56, 110, "
                         f"...). Received: depth={depth}")
    n = (depth - 2) // 6
    classes = validation.integer(classes, "classes", caller)
    include_top = validation.boolean(include_top, "include_top", caller)
    shortcut = validation.choice(shortcut, "shortcut", ["A", "B"], caller)
    if pooling is not None:
        validation.choice(pooling, "pooling", ["avg", "max", None], caller)
    if weight_decay is not None:
        weight_decay = validation.number(weight_decay, "weight_decay", caller, low=0.0)
    regularizer = regularizers.get(kernel_regularizer, "kernel_regularizer")
    if regularizer is not None and weight_decay not in (None, 1e-4):
        raise ValueError(f"{caller}: give weight_decay or kernel_regularizer, not both (got weight_decay="
                         f"{weight_decay!r} and kernel_regularizer={regularizer!r})")
    if regularizer is None and weight_decay:
        regularizer = regularizers.L2(weight_decay / 2)
    if input_tensor is not None:
        if input_shape is not None:
            raise ValueError(f"{caller}: give input_shape or input_tensor, not both")
        model_input = _source_input(input_tensor)
        x = input_tensor
        if len(x.shape) != 4:
            raise ValueError(f"{caller}: input_tensor must be images (batch, height, width, channels), got {x!r}")
    else:
        shape = validation.shape((32, 32, 3) if input_shape is None else input_shape, "input_shape", caller)
        if len(shape) != 3:
            raise ValueError(f"{caller}: Invalid value for argument `input_shape`. Expected (height, width, "
                             f"channels). Received: input_shape={input_shape!r}")
        model_input = x = Input(shape=shape, name="input")
    x = Conv2D(16, 3, padding="same", use_bias=False, kernel_regularizer=regularizer, name="stem_conv")(x)
    x = ReLU(name="stem_relu")(BatchNormalization(name="stem_bn")(x))
    for stage, filters in enumerate((16, 32, 64), start=1):
        for block in range(1, n + 1):
            stride = 2 if stage > 1 and block == 1 else 1
            x = _basic_block(x, filters, stride, f"stage{stage}_block{block}", regularizer, shortcut)
    if include_top:
        x = GlobalAveragePooling2D(name="avg_pool")(x)
        x = Dense(classes, activation=classifier_activation, kernel_regularizer=regularizer, name="predictions")(x)
    else:
        x = imagenet_utils.pooling_head(x, pooling, "avg_pool", "max_pool")
    return Model(model_input, x, name=name or f"resnet{depth}_cifar", seed=seed)


def _depth_variant(depth: int) -> Callable[..., Model]:
    def build(input_shape: Optional[Sequence[int]] = None, classes: int = 10, weight_decay: Optional[float] = 1e-4,
              kernel_regularizer: Any = None, include_top: bool = True, pooling: Optional[str] = None,
              classifier_activation: Optional[str] = "softmax", input_tensor: Any = None, shortcut: str = "A",
              name: Optional[str] = None, seed: Optional[int] = None) -> Model:
        return resnet_cifar(depth, input_shape, classes, weight_decay, kernel_regularizer, include_top, pooling,
                            classifier_activation, input_tensor, shortcut, name, seed)
    build.__name__ = build.__qualname__ = f"resnet{depth}_cifar"
    build.__doc__ = f"ResNet-{depth} for CIFAR: ``resnet_cifar({depth}, ...)`` (see there for the arguments)."
    return build


resnet20_cifar = _depth_variant(20)
resnet32_cifar = _depth_variant(32)
resnet44_cifar = _depth_variant(44)
resnet56_cifar = _depth_variant(56)
resnet110_cifar = _depth_variant(110)


__all__ = ["tutorial_cnn", "deep_mnist", "resnet_cifar", "resnet20_cifar", "resnet32_cifar", "resnet44_cifar",
           "resnet56_cifar", "resnet110_cifar", "VGG16", "ResNet50", "ResNet101", "ResNet152", "MobileNetV2",
           "EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4", "EfficientNetB5",
           "EfficientNetB6", "EfficientNetB7", "imagenet_utils", "vgg16", "resnet", "mobilenet_v2", "efficientnet",
           "weight_files"]
