"""``keras.backend`` on hpcnn: the settings scripts query (hpcnn is float32 and channels-last) and
``clear_session`` (nothing to clear: hpcnn keeps no global graph)."""
from __future__ import annotations

import gc

from ._compat import install

_EPSILON = [1e-7]


def backend() -> str:
    """'hpcnn'."""
    return "hpcnn"


def clear_session(free_memory: bool = True) -> None:
    """Keras resets its global state here; hpcnn keeps none. Runs the garbage collector so that
    models nobody references release their memory (host and GPU) now."""
    if free_memory:
        gc.collect()


def floatx() -> str:
    return "float32"


def set_floatx(value: str) -> None:
    if value != "float32":
        raise NotImplementedError(f"set_floatx({value!r}): hpcnn computes in float32 only")


def image_data_format() -> str:
    return "channels_last"


def set_image_data_format(data_format: str) -> None:
    if data_format != "channels_last":
        raise NotImplementedError(f"set_image_data_format({data_format!r}): hpcnn is NHWC (channels_last) only")


def epsilon() -> float:
    """The fuzz factor Keras' losses use (hpcnn's losses are log-sum-exp stable and need none)."""
    return _EPSILON[0]


def set_epsilon(value: float) -> None:
    _EPSILON[0] = float(value)


install(__name__, "backend", default_advice="hpcnn has no tensor backend to call into")

__all__ = ["backend", "clear_session", "floatx", "set_floatx", "image_data_format", "set_image_data_format",
           "epsilon", "set_epsilon"]
