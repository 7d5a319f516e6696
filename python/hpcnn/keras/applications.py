"""``keras.applications``: hpcnn has no pretrained ImageNet models (they are Keras downloads, and
use layers hpcnn lacks); hpcnn.applications has the tutorial's CNN, DeepMNIST and CIFAR ResNets."""
from __future__ import annotations

from ._compat import install

install(__name__, "applications", sources=["hpcnn.applications"],
        default_advice="no pretrained models (they are Keras downloads built from layers hpcnn lacks): "
                       "hpcnn.applications has tutorial_cnn(), deep_mnist() and the CIFAR ResNets "
                       "(resnet20_cifar(), ...), trained from scratch")
