"""Checks for the public API's arguments, with Keras' messages where Keras has them.

Every public function and constructor checks its arguments here before anything is built or run,
so a wrong value is a ``ValueError`` naming the argument and the value received, never a silent
conversion (``batch_size=16.7`` trained as 16), a default quietly substituted (``batch_size=0``
as 32), or a pybind11 cast error from deep inside. The wording follows Keras ("Invalid value for
argument `filters`. Expected a strictly positive value. Received filters=0.") so that messages
read the same as in the tutorial's original framework.

Integers are Python or NumPy integers (``bool`` is not an integer here, and neither is ``16.0``:
Keras' ``Dense(16.0)`` is an error too); values passed to the C++ core as ``int`` are at most
``INT32_MAX``.
"""
from __future__ import annotations

import errno
import math
import os
from typing import Any, Iterable, Optional, Sequence, Tuple

import numpy as np

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def is_integer(value: Any) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _prefix(caller: Optional[str]) -> str:
    return f"{caller}: " if caller else ""


def output_directory(path: str, caller: str) -> None:
    """FileNotFoundError when the folder a file is to be written into does not exist: a missing
    path is a FileNotFoundError wherever hpcnn meets one, for reading and for writing (as Python's
    own open() and Keras' save do)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, f"{caller}: cannot write '{path}': no such directory", folder)


def integer(value: Any, name: str, caller: Optional[str] = None, *, minimum: int = 1,
            maximum: Optional[int] = INT32_MAX, allow_none: bool = False) -> Optional[int]:
    """``value`` as an int in [minimum, maximum] (None passes when allow_none)."""
    if value is None and allow_none:
        return None
    if minimum == 1:
        what = "a positive integer"
    elif minimum == 0:
        what = "a non-negative integer"
    else:
        what = f"an integer >= {minimum}"
    if maximum is not None:
        what += f" (at most {maximum})"
    if allow_none:
        what += " or None"
    if not is_integer(value) or value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{_prefix(caller)}Invalid value for argument `{name}`. Expected {what}. "
                         f"Received: {name}={value!r}")
    return int(value)


def number(value: Any, name: str, caller: Optional[str] = None, *, low: Optional[float] = None,
           high: Optional[float] = None, low_open: bool = False, high_open: bool = False,
           expected: Optional[str] = None) -> float:
    """A finite real number (not a bool) in the given interval, as float."""
    ok = (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
          and math.isfinite(float(value)))
    if ok:
        v = float(value)
        if low is not None and (v < low or (low_open and v == low)):
            ok = False
        if high is not None and (v > high or (high_open and v == high)):
            ok = False
    if not ok:
        if expected is None:
            lo = "(" if low_open else "["
            hi = ")" if high_open else "]"
            expected = ("a finite number" if low is None and high is None else
                        f"a number in {lo}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi}")
        raise ValueError(f"{_prefix(caller)}Invalid value for argument `{name}`. Expected {expected}. "
                         f"Received: {name}={value!r}")
    return float(value)


def boolean(value: Any, name: str, caller: Optional[str] = None) -> bool:
    """True/False (NumPy bools and the integers 0 and 1 too)."""
    if isinstance(value, (bool, np.bool_)) or (is_integer(value) and value in (0, 1)):
        return bool(value)
    raise ValueError(f"{_prefix(caller)}Invalid value for argument `{name}`. Expected a boolean (True or False). "
                     f"Received: {name}={value!r}")


def choice(value: Any, name: str, allowed: Sequence[Any], caller: str) -> Any:
    """One of ``allowed`` (Keras' validate_string_arg message)."""
    if any(value is a or (type(value) is type(a) and value == a) for a in allowed):
        return value
    raise ValueError(f"Unknown value for `{name}` argument of {caller}. Allowed values are: {list(allowed)}. "
                     f"Received: {name}={value!r}")


def int_tuple(value: Any, n: int, name: str, caller: Optional[str] = None) -> Tuple[int, ...]:
    """An int or n ints, each in [1, INT32_MAX] (Keras' standardize_tuple messages)."""
    msg = f"{_prefix(caller)}The `{name}` argument must be a tuple of {n} integers. Received {name}={value!r}"
    if is_integer(value):
        values: Tuple[Any, ...] = (value,) * n
    else:
        try:
            values = tuple(value)
        except TypeError:
            raise ValueError(msg) from None
        if len(values) != n:
            raise ValueError(msg)
        for v in values:
            if not is_integer(v):
                raise ValueError(f"{msg} including element {v!r} of type {type(v)}")
    bad = [int(v) for v in values if not 0 < v <= INT32_MAX]
    if bad:
        raise ValueError(f"{msg}, including values {bad} that do not satisfy `0 < value <= {INT32_MAX}`")
    return tuple(int(v) for v in values)


def shape(value: Any, name: str, caller: Optional[str] = None) -> Tuple[int, ...]:
    """A per-sample shape: a non-empty sequence of positive integers (no batch axis)."""
    msg = (f"{_prefix(caller)}Invalid value for argument `{name}`. Expected a tuple of positive integers "
           f"(the shape of one sample, without the batch axis). Received: {name}={value!r}")
    if isinstance(value, (str, bytes)) or is_integer(value):
        raise ValueError(msg)
    try:
        dims = tuple(value)
    except TypeError:
        raise ValueError(msg) from None
    if not dims or not all(is_integer(d) and 0 < d <= INT64_MAX for d in dims):
        raise ValueError(msg)
    return tuple(int(d) for d in dims)


def name(value: Any, caller: Optional[str] = None) -> Optional[str]:
    """A layer or model name: None or a string without '/' (Keras' rule)."""
    if value is None:
        return None
    if not isinstance(value, str) or "/" in value or not value:
        raise ValueError(f"{_prefix(caller)}Argument `name` must be a string and cannot contain character `/`. "
                         f"Received: name={value!r} (of type {type(value)})")
    return value


def no_other_arguments(kwargs: dict, caller: str) -> None:
    """Keras' message for keyword arguments nobody takes (a TypeError, as Python gives for a
    misspelt keyword)."""
    if kwargs:
        raise TypeError(f"Unrecognized keyword arguments passed to {caller}: {kwargs}")


def class_indices(y: np.ndarray, classes: int, what: str = "") -> np.ndarray:
    """Integer (or whole-number float) class indices as int32, range-checked in [0, classes) on
    their ORIGINAL type before the cast: an int64 label 2**32+3 would otherwise wrap to 3 and train
    silently as class 3. The error names the first bad label and its row."""
    y = np.asarray(y)
    if y.dtype.kind == "f":
        finite = np.isfinite(y)
        if not finite.all():
            row = int(np.flatnonzero(~finite.ravel())[0])
            raise ValueError(f"{what}sparse_categorical_crossentropy needs whole-number class indices; "
                             f"label {y.ravel()[row]} (row {row}) is not one")
        whole = y == np.round(y)
        if not whole.all():
            row = int(np.flatnonzero(~whole.ravel())[0])
            raise ValueError(f"{what}sparse_categorical_crossentropy needs whole-number class indices; "
                             f"label {y.ravel()[row]} (row {row}) is not one")
    elif y.dtype.kind not in "iub":
        raise ValueError(f"{what}targets have dtype {y.dtype}; expected integers (class indices)")
    flat = y.ravel()
    bad = (flat < 0) | (flat >= classes)  # compared in y's own type (NumPy promotes, never wraps)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        label = flat[row]
        shown = int(label) if y.dtype.kind != "f" else label
        raise ValueError(f"{what}label {shown} (row {row}) is outside [0, {classes}) for a model with {classes} outputs")
    return np.ascontiguousarray(y, dtype=np.int32)


def layer_list(value: Any, caller: str) -> Optional[list]:
    """None or an iterable (not a string) turned into a list."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"{caller}: expected a list, got {value!r}")
    return list(value)
