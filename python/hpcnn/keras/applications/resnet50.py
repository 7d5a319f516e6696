"""``keras.applications.resnet50``: ResNet50 and its ``preprocess_input`` / ``decode_predictions``
(hpcnn.applications.resnet) under Keras' name."""
from __future__ import annotations

from .._compat import install

install(__name__, "applications.resnet50", sources=["hpcnn.applications.resnet"], exclude=["ResNet101", "ResNet152"])
