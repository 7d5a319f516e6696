"""The arguments the checkpointing callbacks share (save_freq, a path, a monitored value's mode)."""
from __future__ import annotations

import os
from typing import Any, Union

from .. import validation


def save_freq_argument(value: Any, caller: str, allow_false: bool) -> Union[str, int, bool]:
    if isinstance(value, str) and value == "epoch":
        return value
    if allow_false and value is False:
        return False
    if validation.is_integer(value) and not isinstance(value, bool) and value >= 1:
        return int(value)
    expected = "'epoch', a positive number of batches" + (" or False" if allow_false else "")
    raise ValueError(f"{caller}: Invalid value for argument `save_freq`. Expected {expected}. "
                     f"Received: save_freq={value!r}")


def path_argument(value: Any, argument: str, what: str, where: str) -> str:
    """``value`` (a str or os.PathLike) as a non-empty path string; ValueError naming the argument."""
    try:
        path = os.fspath(value)
    except TypeError:
        path = None
    if not isinstance(path, str) or not path:
        raise ValueError(f"{where}: {argument} must be a {what} (a string), got {value!r}")
    return path


def monitor_mode(monitor: str, mode: str) -> str:
    if mode == "auto":
        return "max" if "acc" in monitor or monitor.startswith("fmeasure") else "min"
    return mode
