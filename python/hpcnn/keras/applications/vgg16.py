"""``keras.applications.vgg16``: hpcnn.applications.vgg16 under Keras' name."""
from __future__ import annotations

from .._compat import install

install(__name__, "applications.vgg16", sources=["hpcnn.applications.vgg16"])
