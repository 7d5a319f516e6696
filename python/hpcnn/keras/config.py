"""``keras.config`` on hpcnn: the settings hpcnn has fixed values for (float32, channels_last)."""
from __future__ import annotations

from ._compat import install
from .backend import backend, epsilon, floatx, image_data_format, set_epsilon, set_floatx, set_image_data_format


def enable_unsafe_deserialization() -> None:
    """Nothing to enable: hpcnn's files never hold code (no Lambda layers)."""


_FLOAT32 = "hpcnn computes in float32 (TF32 on GPUs: hpcnn.config.set_tf32)"
_LOGGING = "fit, evaluate and predict print less with verbose=0 (nothing) or verbose=2 (one line per epoch)"
_TRACEBACKS = "hpcnn's errors are Python exceptions with their whole traceback (their types: hpcnn.errors)"
_ATTENTION = "hpcnn has no attention layers; its convolutions use cuDNN (hpcnn.config.set_tf32 on GPUs)"
_LIMITS = "pass epochs= and steps_per_epoch= to fit"
_BACKEND = "hpcnn is its own backend (C++ and CUDA): keras.backend.backend() is 'hpcnn'"
_ADVICE = {"dtype_policy": _FLOAT32, "set_dtype_policy": _FLOAT32,
           "disable_interactive_logging": _LOGGING, "enable_interactive_logging": _LOGGING,
           "is_interactive_logging_enabled": _LOGGING,
           "disable_traceback_filtering": _TRACEBACKS, "enable_traceback_filtering": _TRACEBACKS,
           "is_traceback_filtering_enabled": _TRACEBACKS,
           "disable_flash_attention": _ATTENTION, "enable_flash_attention": _ATTENTION,
           "is_flash_attention_enabled": _ATTENTION,
           "max_epochs": _LIMITS, "set_max_epochs": _LIMITS, "max_steps_per_epoch": _LIMITS,
           "set_max_steps_per_epoch": _LIMITS, "set_backend": _BACKEND, "is_nnx_enabled": _BACKEND}
install(__name__, "config", advice=_ADVICE,
        default_advice="hpcnn.keras.config has floatx, epsilon, image_data_format and backend")

__all__ = ["backend", "epsilon", "floatx", "image_data_format", "set_epsilon", "set_floatx", "set_image_data_format",
           "enable_unsafe_deserialization"]
