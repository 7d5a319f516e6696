"""``keras.applications``: Keras' ImageNet backbones built by hpcnn (``VGG16``, ``ResNet50``,
``ResNet101``, ``ResNet152``, ``MobileNetV2``, and the other families as hpcnn gains their layers), with Keras'
module layout: ``keras.applications.vgg16.preprocess_input``, ``resnet50.decode_predictions``,
``imagenet_utils``. ``weights='imagenet'`` loads the very files Keras downloads (Keras' cache
folder ``~/.keras/models``, its URLs and checksums). hpcnn.applications also has the tutorial's
CNN, DeepMNIST and the CIFAR ResNets."""
from __future__ import annotations

from .._compat import install
from . import efficientnet, imagenet_utils, mobilenet_v2, resnet, resnet50, vgg16

install(__name__, "applications", sources=["hpcnn.applications"], keras_only=True,
        default_advice="not in hpcnn yet: hpcnn.keras.applications has VGG16, ResNet50, ResNet101, ResNet152 "
                       "and MobileNetV2 (weights='imagenet' loads Keras' files); hpcnn.applications also has tutorial_cnn(), "
                       "deep_mnist() and the CIFAR ResNets (resnet20_cifar(), ...)")
