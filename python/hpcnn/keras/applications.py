"""``keras.applications``: hpcnn has no pretrained ImageNet models (they are Keras downloads, and
use layers hpcnn lacks); hpcnn.applications has the tutorial's CNN and DeepMNIST."""
from __future__ import annotations

from ._compat import install

install(__name__, "applications", sources=["hpcnn.applications"],
        default_advice="no pretrained models: hpcnn.applications has tutorial_cnn() and deep_mnist()")
