"""``keras.config`` on hpcnn: the settings hpcnn has fixed values for (float32, channels_last)."""
from __future__ import annotations

from ._compat import install
from .backend import backend, epsilon, floatx, image_data_format, set_epsilon, set_floatx, set_image_data_format


def enable_unsafe_deserialization() -> None:
    """Nothing to enable: hpcnn's files never hold code (no Lambda layers)."""


install(__name__, "config", default_advice="not a setting hpcnn has")

__all__ = ["backend", "epsilon", "floatx", "image_data_format", "set_epsilon", "set_floatx", "set_image_data_format",
           "enable_unsafe_deserialization"]
