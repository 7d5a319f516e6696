"""The models the export tests write and run in ONNX Runtime and OpenVINO: every model of
hpcnn.applications (with logits outputs where they end in a softmax, and as they come), a functional
model with every kind of layer hpcnn exports, augmentation at a model's start, nested models, and
the models Keras saved (tests/data/keras). Each builder returns a model with randomized weights
(export_engines.randomize: BatchNormalization's moving statistics not at their neutral start)."""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np

import hpcnn
from hpcnn import applications
from hpcnn.layers import (ELU, Activation, Add, AveragePooling2D, BatchNormalization, Concatenate, Conv2D, Dense,
                          DepthwiseConv2D, Dropout, Flatten, GlobalAveragePooling2D, GlobalMaxPooling2D, Input,
                          LeakyReLU, MaxPooling2D, Multiply, Normalization, RandomCrop, RandomFlip, RandomRotation,
                          RandomTranslation, RandomZoom, ReLU, Rescaling, Reshape, SeparableConv2D, Softmax,
                          ZeroPadding2D)
from hpcnn.models import load_model
from tests.support import paths
from tests.support.export_engines import randomize


def with_logits(model):
    """The same model (a copy from its config, with its weights) with its last layer's activation
    linear: the logits, which the comparison is made on."""
    config = model.get_config()
    config["layers"][-1]["config"]["activation"] = "linear"
    twin = type(model).from_config(config)
    twin.set_weights(model.get_weights())
    return twin


def tutorial_logits():
    m = applications.tutorial_cnn(seed=1)
    randomize(m)
    return with_logits(m)


def every_layer():
    """A functional model with each layer rule: Rescaling per channel, convolutions 'same' and
    'valid' and strided, an Add of three, BatchNormalization on images and on vectors,
    ZeroPadding2D, Concatenate on the channels and on the width, both poolings 'same' and 'valid',
    the activation layers, Dense with BatchNormalization after it, both global poolings
    (keepdims too), Dropout, Flatten of channels-last order."""
    x = Input(shape=(12, 12, 3), name="pixels")
    r = Rescaling([0.5, 1.0, 2.0], offset=[0.1, 0.0, -0.1])(x)
    a = Conv2D(8, 3, padding="same", activation="relu")(r)
    b = Conv2D(8, 1, activation="tanh")(r)
    c = Conv2D(8, 3, strides=2, padding="same")(r)                 # 6x6
    s = Add()([a, b, Conv2D(8, 5, padding="same", use_bias=False)(r)])
    s = BatchNormalization(epsilon=1e-2)(s)
    v = ZeroPadding2D(((1, 2), (0, 3)))(Conv2D(4, 3, padding="valid")(r))    # 10x10 -> 13x13
    v = Conv2D(4, (2, 2), padding="valid")(v)                      # 12x12
    m = Concatenate()([s, v])                                       # 12x12x12
    p = AveragePooling2D(3, strides=2, padding="same")(m)           # 6x6
    q = MaxPooling2D(2)(m)                                          # 6x6
    w = Concatenate(axis=2)([p, q, Conv2D(12, 1)(c)])              # 6x18x12
    w = ReLU(max_value=6)(ELU(alpha=0.7)(LeakyReLU(negative_slope=0.1)(w)))
    w = ReLU(negative_slope=0.05)(Activation("selu")(w))
    d = Conv2D(5, 1, activation="sigmoid")(w)                       # 6x18x5
    gk = GlobalAveragePooling2D(keepdims=True)(d)                   # 1x1x5
    f = Concatenate()([Flatten()(d), GlobalMaxPooling2D()(m), Flatten()(gk)])
    f = BatchNormalization()(Dense(16, activation="gelu")(Dropout(0.3)(f)))
    f = Softmax()(Dense(10, activation="swish")(f))
    model = hpcnn.Model(x, Dense(6)(f), name="every_layer", seed=2)
    randomize(model)
    return model


def mobile_blocks():
    """The layers of the ImageNet backbones (issue 38): Normalization (adapted weights and given
    constants), depthwise convolutions (strided 'same' with an odd total, 'valid' with a depth
    multiplier, dilated, ReLU6), SeparableConv2D with hard_silu, a squeeze-and-excitation block
    (GlobalAveragePooling2D, Reshape, Multiply), Dropout with a noise shape, ReLU's general form,
    Reshape of an image to a vector."""
    x = Input(shape=(13, 13, 3), name="pixels")
    n = Normalization()
    t = n(x)
    t = Normalization(mean=[0.1, -0.2, 0.3], variance=[1.5, 0.5, 2.0])(t)
    t = Conv2D(8, 1)(t)
    t = DepthwiseConv2D(3, strides=2, padding="same", activation="relu6")(t)      # 7x7x8
    t = DepthwiseConv2D(3, padding="valid", depth_multiplier=2)(t)                  # 5x5x16
    t = DepthwiseConv2D(3, padding="same", dilation_rate=2, use_bias=False, activation="swish")(t)
    t = SeparableConv2D(12, 3, padding="same", activation="hard_silu")(t)           # 5x5x12
    se = Reshape((1, 1, 12))(GlobalAveragePooling2D()(t))
    se = Conv2D(12, 1, activation="sigmoid")(Conv2D(4, 1, activation="swish")(se))
    t = Multiply()([t, se])
    t = Add()([t, Dropout(0.2, noise_shape=(None, 1, 1, 1))(Conv2D(12, 1)(t))])
    t = ReLU(max_value=3.0, negative_slope=0.1, threshold=0.2)(t)
    f = Reshape((-1,))(t)
    model = hpcnn.Model(x, Dense(5)(f), name="mobile_blocks", seed=4)
    randomize(model)
    model.get_layer(n.name).set_weights([np.array([0.4, 0.5, 0.6], np.float32), np.array([0.09, 0.04, 0.25],
                                         np.float32), np.array(0.0, np.float32)])
    return model


def separable_variants():
    """SeparableConv2D and DepthwiseConv2D beyond the backbones' uses (mobile_blocks): separable
    convolutions with a depth multiplier, strided, and dilated 'valid' with a non-square window;
    a depthwise window dilated differently per axis with 'same' padding; BatchNormalization after a
    depthwise convolution; hard_swish (hard_silu's other name)."""
    x = Input(shape=(13, 11, 6))
    a = BatchNormalization()(DepthwiseConv2D(3, padding="same", activation="relu6")(x))
    b = DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2, use_bias=False)(a)       # 7x6x12
    c = DepthwiseConv2D((3, 2), padding="valid", dilation_rate=2, activation="hard_swish")(x)     # 9x9x6
    d = DepthwiseConv2D(3, padding="same", dilation_rate=(2, 3))(c)                               # 9x9x6
    s = SeparableConv2D(8, 3, padding="same", depth_multiplier=2, activation="hard_silu")(b)      # 7x6x8
    t = SeparableConv2D(8, 3, strides=2, padding="same", use_bias=False)(d)                        # 5x5x8
    u = SeparableConv2D(4, (2, 3), padding="valid", dilation_rate=2, activation="relu")(x)        # 11x7x4
    f = Concatenate()([GlobalAveragePooling2D()(s), GlobalMaxPooling2D()(t), Flatten()(u)])
    model = hpcnn.Model(x, Dense(5)(f), name="separable_variants", seed=3)
    randomize(model)
    return model


def augmented(size: int):
    """Augmentation at the model's start, as hpcnn runs it (identity in predict; RandomCrop the centre
    of a `size` x `size` image, ZeroPadding2D + RandomCrop the CIFAR recipe)."""
    inp = Input(shape=(size, size, 3))
    x = RandomFlip("horizontal")(inp)
    x = RandomTranslation(0.1, 0.1)(RandomRotation(0.1)(RandomZoom(0.1)(x)))
    x = RandomCrop(16, 16)(ZeroPadding2D(2)(x) if size == 16 else x)
    x = Conv2D(4, 3, activation="relu")(x)
    model = hpcnn.Model(inp, Dense(3)(Flatten()(x)), seed=3)
    randomize(model)
    return model


def nested_sequential():
    base = hpcnn.Sequential([Input(shape=(16, 16, 3)), Conv2D(8, 3, padding="same", use_bias=False),
                             BatchNormalization(), ReLU(), MaxPooling2D()], name="base")
    model = hpcnn.Sequential([base, Flatten(), Dense(7)], name="outer", seed=4)
    randomize(model)
    return model


def nested_functional():
    inner_in = Input(shape=(16, 16, 3))
    y = Conv2D(8, 3, padding="same", activation="relu")(inner_in)
    y = Add()([y, Conv2D(8, 1)(inner_in)])
    base = hpcnn.Model(inner_in, BatchNormalization()(y), name="block")
    head = hpcnn.Sequential([Input(shape=(8,)), Dense(8, activation="tanh")], name="head")
    inp = Input(shape=(16, 16, 3))
    z = GlobalAveragePooling2D()(base(inp, training=False))
    model = hpcnn.Model(inp, Dense(5)(head(z)), name="nested", seed=5)
    randomize(model)
    return model


def _resnet(depth: int, **kwargs) -> Callable[[], object]:
    def build():
        m = applications.resnet_cifar(depth, seed=depth, **kwargs)
        randomize(m)
        return m
    return build


def _seeded(builder: Callable[..., object]) -> Callable[[], object]:
    def build():
        m = builder(seed=1)
        randomize(m)
        return m
    return build


# name -> builder; the logits of each application, and some as they come (softmax outputs)
MODELS: Dict[str, Callable[[], object]] = {
    "tutorial_cnn": _seeded(applications.tutorial_cnn),
    "tutorial_cnn_logits": tutorial_logits,
    "deep_mnist": _seeded(applications.deep_mnist),
    **{f"resnet{d}_cifar_logits": _resnet(d, classifier_activation=None) for d in (20, 32, 44, 56, 110)},
    "resnet20_cifar": _resnet(20),
    "resnet20_cifar_shortcut_b": _resnet(20, shortcut="B", classifier_activation=None),
    "resnet20_cifar_features": _resnet(20, include_top=False),               # a channels-last image out
    "resnet20_cifar_max_pool": _resnet(20, include_top=False, pooling="max"),
    "every_layer": every_layer,
    "mobile_blocks": mobile_blocks,
    "separable_variants": separable_variants,
    "augmented_centre_crop": lambda: augmented(19),
    "augmented_padded_crop": lambda: augmented(16),
    "nested_sequential": nested_sequential,
    "nested_functional": nested_functional,
}

KERAS_FILES = ["k3_cnn.keras", "k3_cnn.h5", "k3_bn.keras", "k3_resblock.keras", "k3_resblock.h5", "tfk2_cnn.h5",
               "tfk2_bn.h5", "tfk2_resblock.h5", "tfk2_recognition_model.hdf5"]


def keras_file(name: str):
    return load_model(paths.KERAS_DATA / name)
