"""Keras archives (``.keras``): a zip of ``config.json``, ``metadata.json`` and ``model.weights.h5``
(Keras 3's weights layout), written and read with hpcnn's own code. Archives hpcnn writes add two
members Keras does not read: ``hpcnn.json`` (hpcnn's description) and ``hpcnn_state.h5`` (the
optimizer state).

Reading never extracts: the listing is checked first (file_limits' bounds on the members and the
directory; no name with ``..``, an absolute path, a backslash or a drive; no symbolic link,
duplicate, encrypted member or member hpcnn does not read; only stored or deflated members), then
each member hpcnn needs is streamed into memory, at most its limit plus one byte (a zip's declared
sizes can lie), and must be exactly as long as declared (zipfile checks its CRC)."""
from __future__ import annotations

import io
import json
import os
import stat
import struct
import time
import zipfile
import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import _core
from ..errors import FileProblem
from .config_json import config_json_bytes, read_config_json
from .file_limits import (INFLATION_SLACK_BYTES, MAX_ARCHIVE_DIRECTORY_BYTES, MAX_ARCHIVE_MEMBER_BYTES,
                          MAX_ARCHIVE_MEMBERS, MAX_CONFIG_BYTES, MAX_MEMBER_INFLATION)
from .h5tree import H5Tree
from .keras_config import model_to_keras
from .keras_objects import KERAS_VERSION
from .keras_weights import keras3_weight_items

ARCHIVE_CONFIG, ARCHIVE_METADATA, ARCHIVE_WEIGHTS, ARCHIVE_HPCNN, ARCHIVE_STATE = (
    "config.json", "metadata.json", "model.weights.h5", "hpcnn.json", "hpcnn_state.h5")
# Every member hpcnn reads or recognizes (the npz weights only to name them in a refusal). Anything
# else in an archive is refused by name: hpcnn reads nothing it does not know.
KNOWN_MEMBERS = (ARCHIVE_CONFIG, ARCHIVE_METADATA, ARCHIVE_WEIGHTS, ARCHIVE_HPCNN, ARCHIVE_STATE, "model.weights.npz")
_JSON_MEMBERS = (ARCHIVE_CONFIG, ARCHIVE_METADATA, ARCHIVE_HPCNN)
_READ_CHUNK = 1 << 20


def write_archive(path: str, model: Any, hpcnn_meta: Dict[str, Any], caller: str,
                  state_items: Sequence[Tuple[str, Optional[np.ndarray], Dict[str, Any]]] = ()) -> None:
    """A Keras 3 archive (config.json, metadata.json, model.weights.h5) plus hpcnn.json and, when
    `state_items` (the optimizer state's datasets) are given, hpcnn_state.h5; written atomically."""
    config = model_to_keras(model, legacy=False)
    metadata = {"keras_version": KERAS_VERSION, "date_saved": time.strftime("%Y-%m-%d@%H:%M:%S"),
                "hpcnn_version": hpcnn_meta.get("hpcnn_version")}
    weights = _core.data.h5_tree_image(keras3_weight_items(model), caller)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:  # stored, not deflated, as Keras writes them
        zf.writestr(ARCHIVE_METADATA, json.dumps(metadata))
        zf.writestr(ARCHIVE_CONFIG, config_json_bytes(config, "the model's config.json"))
        zf.writestr(ARCHIVE_WEIGHTS, weights)
        zf.writestr(ARCHIVE_HPCNN, config_json_bytes(hpcnn_meta, "the model's hpcnn.json"))
        if state_items:
            zf.writestr(ARCHIVE_STATE, _core.data.h5_tree_image(list(state_items), caller))
    _core.data.write_file_atomically(path, buf.getvalue(), caller)


def _directory_bounds(path: str) -> None:
    """The central directory's size and entry count, from the end-of-archive record (zip64's too),
    checked before zipfile parses the directory (it builds an object per entry). An archive
    without a readable end record is left to zipfile, which refuses it."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - (65535 + 22)))
        tail = f.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < 22:
            return
        entries, directory = struct.unpack("<xxxxxxxxxxHIxxxxxx", tail[at:at + 22])[:2]
        if entries == 0xFFFF or directory == 0xFFFFFFFF:  # zip64: the real values are in its own record
            locator = tail[at - 20:at] if at >= 20 else b""
            if locator[:4] == b"PK\x06\x07":
                (offset,) = struct.unpack("<Q", locator[8:16])
                if 0 <= offset <= size - 56:
                    f.seek(offset)
                    record = f.read(56)
                    if record[:4] == b"PK\x06\x06":
                        entries, directory = struct.unpack("<QQ", record[32:48])
    if entries > MAX_ARCHIVE_MEMBERS:
        raise FileProblem(f"it lists {entries} members, more than the {MAX_ARCHIVE_MEMBERS} hpcnn reads "
                          "(file_limits.MAX_ARCHIVE_MEMBERS)")
    if directory > MAX_ARCHIVE_DIRECTORY_BYTES:
        raise FileProblem(f"its listing of members is {directory} bytes, more than the {MAX_ARCHIVE_DIRECTORY_BYTES} "
                          "hpcnn reads (file_limits.MAX_ARCHIVE_DIRECTORY_BYTES)")


def _unsafe_name(name: str) -> Optional[str]:
    """Why a member name is refused (None when it is a plain relative name)."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if ".." in parts:
        return "climbs out of the archive ('..')"
    if "\\" in name:
        return "holds a backslash"
    if "\0" in name or any(ord(c) < 32 for c in name):
        return "holds control characters"
    return None


def _check_listing(zf: zipfile.ZipFile, size: int) -> None:
    """Every member of the archive, checked before any is read (see the module's docstring)."""
    infos = zf.infolist()
    if len(infos) > MAX_ARCHIVE_MEMBERS:
        raise FileProblem(f"it lists {len(infos)} members, more than the {MAX_ARCHIVE_MEMBERS} hpcnn reads "
                          "(file_limits.MAX_ARCHIVE_MEMBERS)")
    names = [info.filename for info in infos]
    seen = set()
    for info in infos:
        name = info.filename
        why = _unsafe_name(name)
        if why is not None:
            raise FileProblem(f"its member {name[:200]!r} {why}: hpcnn refuses archives with such names")
        if name in seen:
            raise FileProblem(f"it holds two members named {name[:200]!r}: which one is the model is ambiguous")
        seen.add(name)
        mode = info.external_attr >> 16
        if info.create_system == 3 and stat.S_ISLNK(mode):
            raise FileProblem(f"its member {name[:200]!r} is a symbolic link: hpcnn refuses links in archives")
    extra = [n for n in names if n not in KNOWN_MEMBERS]
    if extra:
        raise FileProblem(f"it holds members hpcnn does not read: {', '.join(repr(n[:100]) for n in extra[:10])} (a "
                          f"Keras model archive holds {', '.join(KNOWN_MEMBERS[:3])}, hpcnn's also "
                          f"{', '.join(KNOWN_MEMBERS[3:5])})")
    for info in infos:
        check_member(info, size)


def check_member(info: zipfile.ZipInfo, size: int) -> None:
    """One member's declared sizes and coding, against the limits and the archive's own size."""
    name = info.filename
    if info.flag_bits & 0x1:
        raise FileProblem(f"its '{name}' is encrypted: hpcnn reads unencrypted archives only")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise FileProblem(f"its '{name}' uses compression method {info.compress_type}: hpcnn reads stored and "
                          "deflated members only")
    limit = MAX_CONFIG_BYTES if name in _JSON_MEMBERS else MAX_ARCHIVE_MEMBER_BYTES
    constant = "MAX_CONFIG_BYTES" if name in _JSON_MEMBERS else "MAX_ARCHIVE_MEMBER_BYTES"
    if info.file_size > limit:
        raise FileProblem(f"its '{name}' is {info.file_size} bytes, more than the {limit} hpcnn reads "
                          f"(file_limits.{constant})")
    if info.compress_size > size:
        raise FileProblem(f"its '{name}' declares {info.compress_size} stored bytes in an archive of {size}")
    if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
        raise FileProblem(f"its '{name}' is stored (not compressed) but declares {info.file_size} bytes in "
                          f"{info.compress_size}")
    if info.file_size > MAX_MEMBER_INFLATION * info.compress_size + INFLATION_SLACK_BYTES:
        raise FileProblem(f"its '{name}' inflates {info.file_size // max(info.compress_size, 1)}-fold: a zip bomb? "
                          f"(at most {MAX_MEMBER_INFLATION}-fold: file_limits.MAX_MEMBER_INFLATION)")


class Archive:
    """A .keras archive opened for reading: its config, hpcnn's description (None when Keras wrote
    it) and its weights file (an H5Tree in memory). Nothing is extracted to disk."""

    def __init__(self, path: str) -> None:
        try:
            _directory_bounds(path)
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, struct.error) as e:
            if isinstance(e, FileProblem):
                raise
            raise FileProblem(f"it is not a valid zip archive ({type(e).__name__}: {e})") from None
        try:
            _check_listing(self._zip, os.path.getsize(path))
        except BaseException:
            self._zip.close()
            raise

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def names(self) -> List[str]:
        return self._zip.namelist()

    def _member(self, name: str) -> Optional[bytes]:
        """The member's bytes (None when there is no such member), streamed: never more than its
        declared size, which the listing checked, plus one byte."""
        try:
            info = self._zip.getinfo(name)
        except KeyError:
            return None
        chunks, total = [], 0
        try:
            with self._zip.open(info) as f:
                while total <= info.file_size:
                    chunk = f.read(min(_READ_CHUNK, info.file_size + 1 - total))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    total += len(chunk)
        except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError, ValueError, RuntimeError,
                zlib.error) as e:
            raise FileProblem(f"its '{name}' cannot be read ({type(e).__name__}: {str(e)[:200]})") from None
        if total != info.file_size:
            raise FileProblem(f"its '{name}' holds {'more' if total > info.file_size else total} bytes, its listing "
                              f"says {info.file_size}")
        return b"".join(chunks)

    def json(self, name: str) -> Optional[Any]:
        raw = self._member(name)
        if raw is None:
            return None
        return read_config_json(raw, f"its '{name}'")

    def weights(self, label: str) -> H5Tree:
        if ARCHIVE_WEIGHTS not in self._zip.namelist() and "model.weights.npz" in self._zip.namelist():
            raise FileProblem("its weights are in the npz format (weights_format='npz'), which hpcnn does not read")
        return self.tree(ARCHIVE_WEIGHTS, label)

    def tree(self, member: str, label: str) -> H5Tree:
        """The archive's HDF5 member `member`, opened in memory (FileProblem when it is missing)."""
        raw = self._member(member)
        if raw is None:
            raise FileProblem(f"it has no '{member}' (members: {', '.join(self._zip.namelist())[:200]})")
        try:
            return H5Tree.from_bytes(raw, f"{label}/{member}")
        except ValueError as e:
            raise FileProblem(str(e)) from None
