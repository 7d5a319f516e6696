"""``keras.applications.imagenet_utils``: hpcnn.applications.imagenet_utils under Keras' name."""
from __future__ import annotations

from .._compat import install

install(__name__, "applications.imagenet_utils", sources=["hpcnn.applications.imagenet_utils"])
