"""Keras archives (``.keras``): a zip of ``config.json``, ``metadata.json`` and ``model.weights.h5``
(Keras 3's weights layout), written and read with hpcnn's own code. Archives hpcnn writes add two
members Keras does not read: ``hpcnn.json`` (hpcnn's description) and ``hpcnn_state.h5`` (the
optimizer state). Members are bounded before they are read (size, inflation: a zip bomb is
refused, not inflated)."""
from __future__ import annotations

import io
import json
import time
import zipfile
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from .. import _core
from ..errors import FileProblem
from .h5tree import MAX_CONFIG_BYTES, MAX_INFLATION, H5Tree
from .keras_config import model_to_keras
from .keras_objects import KERAS_VERSION
from .keras_weights import keras3_weight_items

ARCHIVE_CONFIG, ARCHIVE_METADATA, ARCHIVE_WEIGHTS, ARCHIVE_HPCNN, ARCHIVE_STATE = (
    "config.json", "metadata.json", "model.weights.h5", "hpcnn.json", "hpcnn_state.h5")


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
        zf.writestr(ARCHIVE_CONFIG, json.dumps(config))
        zf.writestr(ARCHIVE_WEIGHTS, weights)
        zf.writestr(ARCHIVE_HPCNN, json.dumps(hpcnn_meta))
        if state_items:
            zf.writestr(ARCHIVE_STATE, _core.data.h5_tree_image(list(state_items), caller))
    _core.data.write_file_atomically(path, buf.getvalue(), caller)


class Archive:
    """A .keras archive opened for reading: its config, hpcnn's description (None when Keras wrote
    it) and its weights file (an H5Tree in memory)."""

    def __init__(self, path: str) -> None:
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError) as e:
            raise FileProblem(f"it is not a valid zip archive ({e})") from None

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _member(self, name: str, limit: Optional[int] = None) -> Optional[bytes]:
        try:
            info = self._zip.getinfo(name)
        except KeyError:
            return None
        if limit is not None and info.file_size > limit:
            raise FileProblem(f"its '{name}' is {info.file_size} bytes (more than hpcnn reads: {limit})")
        if info.compress_type != zipfile.ZIP_STORED and info.file_size > MAX_INFLATION * max(info.compress_size, 1) + (1 << 20):
            raise FileProblem(f"its '{name}' inflates {info.file_size // max(info.compress_size, 1)}-fold: a zip bomb?")
        try:
            return self._zip.read(name)
        except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError, ValueError) as e:
            raise FileProblem(f"its '{name}' cannot be read ({type(e).__name__}: {e})") from None

    def json(self, name: str) -> Optional[Any]:
        raw = self._member(name, MAX_CONFIG_BYTES)
        if raw is None:
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise FileProblem(f"its '{name}' is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None

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
