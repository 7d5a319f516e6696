"""An HDF5 file as hpcnn's loaders see it: what a file is (zip, HDF5, other) from its first bytes,
and ``H5Tree``, a file's listing (bounded: a hostile file is refused, not walked) with its reader
(``_core.data.H5Reader``, hpcnn's own HDF5 code; no h5py; its limits: h5_limits.py). A file with
a soft or external link, a group linked into itself, a dataset stored in another file or a virtual
one, a name or text that is not UTF-8, or an attribute past the limits is refused as it is listed,
naming the object. Every dataset hpcnn loads is read here,
checked against the listing before a byte of it is read: ``read_floats`` for weights and
optimizer state (Keras' layouts and hpcnn's own), ``read_array`` for anything else."""
from __future__ import annotations

import os
import stat
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .. import _core
from ..errors import FileProblem, WeightsMismatch
from ..paths import missing_file
from .h5_limits import MAX_OBJECTS  # the reader's limits (a hostile file is refused, not walked)
#: Bounds on what is read: a JSON config or description, and the inflated size per stored byte (of a
#: .keras archive's members, and of an HDF5 dataset against the file that holds it).
MAX_CONFIG_BYTES = 64 << 20
MAX_INFLATION = 1000

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ZIP_SIGNATURE = b"PK\x03\x04"



# ---------------------------------------------------------------------- what a file is
def file_kind(path: str, caller: str) -> str:
    """'zip', 'hdf5' or 'other', from the file's first bytes. FileNotFoundError for a missing path
    (as for every other file hpcnn reads); ValueError for one that is not a regular file (a
    directory, a FIFO: opening one would block)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise missing_file(caller, path) from None
    except OSError as e:
        raise ValueError(f"{caller}: '{path}' cannot be read ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{caller}: '{path}' is a directory, not a model or weights file")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{caller}: '{path}' is not a regular file")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(ZIP_SIGNATURE):
        return "zip"
    if head == HDF5_SIGNATURE:
        return "hdf5"
    return "other"


class H5Tree:
    """An HDF5 file's listing (path -> group or dataset) and its reader."""

    def __init__(self, reader: Any, size: int) -> None:
        self.reader = reader
        self.size = size  # the file's bytes: bounds what a dataset may inflate to
        self.objects: Dict[str, Dict[str, Any]] = {o["path"]: o for o in reader.list(MAX_OBJECTS)}

    @classmethod
    def open(cls, path: str) -> "H5Tree":
        reader = _core.data.H5Reader(path)
        return cls(reader, os.path.getsize(path))

    @classmethod
    def from_bytes(cls, data: bytes, label: str) -> "H5Tree":
        return cls(_core.data.H5Reader.from_bytes(data, label), len(data))

    @property
    def label(self) -> str:
        """The file's name (or an archive member's, 'model.keras/model.weights.h5')."""
        return self.reader.label

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> "H5Tree":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def dataset(self, path: str) -> Optional[Dict[str, Any]]:
        """The listing of dataset `path` (shape, dtype, attrs), None when there is no such dataset."""
        o = self.objects.get(path)
        return o if o is not None and o["kind"] == "dataset" else None

    def is_group(self, path: str) -> bool:
        o = self.objects.get(path)
        return o is not None and o["kind"] == "group"

    def attrs(self, path: str) -> Dict[str, Any]:
        o = self.objects.get(path)
        return o["attrs"] if o is not None else {}

    def children(self, path: str) -> List[str]:
        """Names directly under group `path`."""
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.objects if p.startswith(prefix) and "/" not in p[len(prefix):]
                      and p != prefix)

    def text_list(self, path: str, name: str) -> Optional[List[str]]:
        """A list-of-texts attribute, also when Keras split it into ``name0``, ``name1``, ...
        (attributes past HDF5's 64 KiB header limit); [] for Keras' empty float64 array, None when
        absent. FileProblem when it holds something else."""
        attrs = self.attrs(path)
        if name in attrs:
            parts = [attrs[name]]
        else:
            parts, k = [], 0
            while f"{name}{k}" in attrs:
                parts.append(attrs[f"{name}{k}"])
                k += 1
            if not parts:
                return None
        out: List[str] = []
        for value in parts:
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                out.extend(value)
            elif isinstance(value, np.ndarray) and value.size == 0:
                continue
            else:
                raise FileProblem(f"attribute '{name}' of '{path}' is not a list of names ({str(value)[:80]})")
        return out

    def text(self, path: str, name: str) -> Optional[str]:
        value = self.attrs(path).get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise FileProblem(f"attribute '{name}' of '{path}' is not a text ({str(value)[:80]})")
        return value

    def read_floats(self, path: str, shape: Tuple[int, ...], label: str, *, exact_float32: bool,
                    integers: bool = False) -> np.ndarray:
        """The float dataset at `path` as float32, checked before it is read (present, a float
        type, the model's `shape`: what is read is bounded by what the model holds) and after
        (finite values). `exact_float32`: the file must hold float32 itself (hpcnn's own layout);
        otherwise any float type is converted (Keras' layouts). `label` names the weight or buffer
        in messages ("layer 'dense' (Dense) kernel", "optimizer state 'momentum'"). `integers`: an
        integer dataset is read too (a weight Keras keeps as an integer: Normalization's count).

        WeightsMismatch when the file does not fit the model (missing, another shape); FileProblem
        when it is damaged (not floats, NaN/inf)."""
        shape = tuple(shape)
        o = self.dataset(path)
        if o is None:
            raise WeightsMismatch(f"{label}: '{path}' is missing")
        dtype = str(o["dtype"])
        if exact_float32 and dtype != "float32":
            raise FileProblem(f"{label}: '{path}' holds {dtype} values; hpcnn's own files hold float32")
        if not dtype.startswith("float") and not (integers and dtype.startswith(("int", "uint"))):
            raise FileProblem(f"{label}: '{path}' holds {dtype} values, not floats")
        if tuple(o["shape"]) != shape:
            raise WeightsMismatch(f"{label} has shape {tuple(o['shape'])} in the file, the model needs {shape} "
                                  f"(dataset '{path}')")
        a = np.asarray(self.read_values(path), dtype=np.float32)
        if a.shape != shape:
            raise FileProblem(f"{label}: '{path}' reads as shape {a.shape}, its listing says {shape}")
        if not np.isfinite(a).all():
            # Refused rather than loaded: a model with NaN/inf weights predicts NaN for every input.
            bad = int(np.count_nonzero(~np.isfinite(a)))
            wide = "" if dtype in ("float16", "float32") else " (a float64 value beyond float32's range reads as inf)"
            raise FileProblem(f"{label} ('{path}') holds {bad} NaN/inf value(s){wide}: the file is damaged or "
                              "training had diverged when it was written")
        return a

    def read_array(self, path: str, label: str) -> np.ndarray:
        """The numeric dataset at `path`, for arrays whose shape nothing else fixes (a callback's
        state): integers as stored, floats as float32 (what the reader gives: a float64 array
        comes back rounded). Its size is checked against the file's before it is read.
        FileProblem when it is missing, not numbers, or larger than the file can hold."""
        o = self.dataset(path)
        if o is None:
            raise FileProblem(f"{label}: '{path}' is missing")
        dtype = str(o["dtype"])
        try:
            kind = np.dtype(dtype)
        except (TypeError, ValueError):
            kind = None
        if kind is None or kind.kind not in "fiu":
            raise FileProblem(f"{label}: '{path}' holds {dtype} values, not numbers")
        stored = int(np.prod(o["shape"], dtype=object)) * kind.itemsize
        if stored > MAX_INFLATION * self.size + (1 << 20):
            raise FileProblem(f"{label}: '{path}' declares {stored} bytes in a file of {self.size}")
        a = np.asarray(self.read_values(path))
        return a if kind.kind == "f" else a.astype(kind)

    def read_values(self, path: str) -> np.ndarray:
        """Dataset `path` as the reader gives it (float32 or int64); what the reader refuses (a
        dataset stored outside the file, a non-standard number type, past MAX_WEIGHT_ELEMENTS or
        MAX_WEIGHT_BYTES, unreadable) as a FileProblem, which the caller completes with the file's name."""
        try:
            return self.reader.read(path)
        except MemoryError:
            raise
        except ValueError as e:
            text, prefix = str(e), f"'{self.label}': "
            raise FileProblem(text[len(prefix):] if text.startswith(prefix) else text) from None
