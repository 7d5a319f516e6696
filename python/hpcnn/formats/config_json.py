"""The one JSON reader for text from a file (configs, descriptions, ``model_from_json``): bounded
in length (MAX_CONFIG_BYTES) and in nesting (MAX_CONFIG_DEPTH) before Python's parser sees it.

Python's ``json`` recurses once per level of nesting, and so does every walk over what it returns:
a config nested thousands of levels deep would raise RecursionError wherever the recursion happened
to run out. The depth is counted first, in linear time and without recursion: the JSON strings are
blanked by one regular expression (an unterminated string runs to the end, so it never backtracks),
and the brackets that remain are summed."""
from __future__ import annotations

import json
import re
from typing import Any, Union

import numpy as np

from ..errors import FileProblem
from .file_limits import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH

# A JSON string: a quote, then anything but a quote or a backslash, or a backslash and what it
# escapes, up to the closing quote or the end of the text. It cannot fail once started.
_STRING = re.compile(rb'"(?:[^"\\]|\\.?)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPENS = np.zeros(256, np.int32)
_OPENS[[ord("["), ord("{")]] = 1
_OPENS[[ord("]"), ord("}")]] = -1


def nesting_depth(raw: bytes) -> int:
    """The deepest nesting of lists and objects in JSON text (for malformed text: of its brackets
    outside strings)."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    return int(np.cumsum(_OPENS[np.frombuffer(brackets, np.uint8)]).max(initial=0))


def read_config_json(text: Union[bytes, str], what: str) -> Any:
    """The value of JSON `text` (bytes: UTF-8), checked against MAX_CONFIG_BYTES and
    MAX_CONFIG_DEPTH first. FileProblem naming `what` (such as "its 'config.json'") and what is wrong."""
    if isinstance(text, str):
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as e:  # lone surrogates
            raise FileProblem(f"{what} is not valid JSON (UnicodeEncodeError: {e})") from None
    else:
        raw = bytes(text)
    if len(raw) > MAX_CONFIG_BYTES:
        raise FileProblem(f"{what} is {len(raw)} bytes long, more than the {MAX_CONFIG_BYTES} bytes hpcnn reads "
                          "(file_limits.MAX_CONFIG_BYTES)")
    depth = nesting_depth(raw)
    if depth > MAX_CONFIG_DEPTH:
        raise FileProblem(f"{what} is nested {depth} levels deep, more than the {MAX_CONFIG_DEPTH} hpcnn reads "
                          "(file_limits.MAX_CONFIG_DEPTH)")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise FileProblem(f"{what} is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None


def config_json_bytes(value: Any, what: str) -> bytes:
    """`value` as UTF-8 JSON, for a file hpcnn writes: refused (ValueError) when read_config_json
    would refuse it, so that hpcnn never writes a config or description it cannot read back."""
    raw = json.dumps(value).encode("utf-8")
    if len(raw) > MAX_CONFIG_BYTES or nesting_depth(raw) > MAX_CONFIG_DEPTH:
        raise ValueError(f"{what} would be {len(raw)} bytes nested {nesting_depth(raw)} levels deep, more than hpcnn "
                         f"reads back ({MAX_CONFIG_BYTES} bytes, {MAX_CONFIG_DEPTH} levels: file_limits."
                         "MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH)")
    return raw
