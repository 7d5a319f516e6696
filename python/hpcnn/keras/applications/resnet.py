"""``keras.applications.resnet``: hpcnn.applications.resnet under Keras' name."""
from __future__ import annotations

from .._compat import install

install(__name__, "applications.resnet", sources=["hpcnn.applications.resnet"])
