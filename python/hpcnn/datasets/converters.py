"""Readers of the official dataset formats, and converters into the tutorial's HDF5 layout.

The tutorial layout: datasets x_train, y_train, x_valid, y_valid (images uint8 (N,H,W,C) or
(N,H,W), labels uint8 (N,1) for CIFAR-10 as Keras gives them, (N,) for MNIST), gzip-compressed,
written by hpcnn.data.write_hdf5 (atomic; whole-image chunks of about 1 MiB).
"""
from __future__ import annotations

import gzip
import io
import os
import pickle
import tarfile
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np

from .. import data as hdata

Split = Tuple[np.ndarray, np.ndarray]

CIFAR10_TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
CIFAR10_TEST_BATCH = "test_batch"
IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_valid": "t10k-images-idx3-ubyte",
    "y_valid": "t10k-labels-idx1-ubyte",
}
_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
              0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


# ------------------------------------------------------------------ IDX (MNIST, Fashion-MNIST)
def parse_idx(blob: bytes, name: str = "IDX data") -> np.ndarray:
    """An IDX array (LeCun's format: magic 0 0 type ndim, big-endian int32 dims, data)."""
    if len(blob) < 4 or blob[0] != 0 or blob[1] != 0:
        raise ValueError(f"{name}: not an IDX file (bad magic {blob[:4]!r})")
    code, ndim = blob[2], blob[3]
    if code not in _IDX_TYPES:
        raise ValueError(f"{name}: unknown IDX element type 0x{code:02x}")
    if not 1 <= ndim <= 4 or len(blob) < 4 + 4 * ndim:
        raise ValueError(f"{name}: bad IDX header (ndim={ndim})")
    dims = tuple(int.from_bytes(blob[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    dt = np.dtype(_IDX_TYPES[code])
    need = int(np.prod(dims)) * dt.itemsize
    body = blob[4 + 4 * ndim:]
    if len(body) != need:
        raise ValueError(f"{name}: IDX header says {dims} ({need} bytes) but holds {len(body)} bytes "
                         "(truncated download?)")
    return np.frombuffer(body, dtype=dt).reshape(dims).astype(dt.newbyteorder("="), copy=True)


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file, gzip-compressed (.gz) or not."""
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    try:
        with opener(path, "rb") as f:
            blob = f.read()
    except (OSError, EOFError) as e:
        raise ValueError(f"'{path}': cannot read ({e})") from e
    return parse_idx(blob, f"'{path}'")


def find_idx_files(folder: str) -> Dict[str, str]:
    """The four IDX files of an MNIST-style folder (names with or without .gz)."""
    out = {}
    for key, stem in IDX_FILES.items():
        for cand in (stem + ".gz", stem, stem.replace("-idx", ".idx") + ".gz", stem.replace("-idx", ".idx")):
            p = os.path.join(folder, cand)
            if os.path.exists(p):
                out[key] = p
                break
        else:
            raise ValueError(f"'{folder}': no {stem}[.gz] (expected the four MNIST IDX files)")
    return out


def load_idx_folder(folder: str) -> Tuple[Split, Split]:
    f = find_idx_files(folder)
    x_train, y_train, x_valid, y_valid = (read_idx(f[k]) for k in ("x_train", "y_train", "x_valid", "y_valid"))
    for x, y, split in ((x_train, y_train, "train"), (x_valid, y_valid, "t10k")):
        if x.ndim != 3 or y.ndim != 1 or x.shape[0] != y.shape[0]:
            raise ValueError(f"'{folder}': {split} images {x.shape} and labels {y.shape} do not match")
    return (x_train, y_train.astype(np.uint8)), (x_valid, y_valid.astype(np.uint8))


# ------------------------------------------------------------------ CIFAR-10
# The only globals a CIFAR-10 python batch refers to: NumPy's array reconstruction (numpy.core in the
# official files, written by NumPy 1; numpy._core when NumPy 2 wrote them). Anything else in a
# pickle (os.system, a class of some module) is refused before it is looked up: a batch from a
# course page or a mirror must not run code (issue 26).
_CIFAR_PICKLE_GLOBALS = frozenset({("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                                   ("numpy", "ndarray"), ("numpy", "dtype")})


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    """What Python 3's pickle protocol 2 writes bytes as (_codecs.encode(text, 'latin1')), allowing
    that one encoding only: a codec name from the file selects nothing else."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise pickle.UnpicklingError(f"it encodes text as {encoding!r:.40}, which a CIFAR-10 batch never does")
    return text.encode("latin1")


class _CifarUnpickler(pickle.Unpickler):
    """An unpickler that resolves only _CIFAR_PICKLE_GLOBALS (names fixed here, never the file's)."""

    def find_class(self, module: str, name: str):  # noqa: D102 (pickle's hook)
        if (module, name) == ("_codecs", "encode"):  # bytes, as NumPy 2 / Python 3 pickle them
            return _latin1_bytes
        if (module, name) not in _CIFAR_PICKLE_GLOBALS:
            raise pickle.UnpicklingError(f"it refers to {module}.{name}, which a CIFAR-10 batch never does "
                                         "(refused: nothing from the file is imported or called)")
        return super().find_class(module, name)


def _cifar_python_batch(blob: bytes, name: str) -> Split:
    try:
        d = _CifarUnpickler(io.BytesIO(blob), encoding="bytes").load()
    except Exception as e:  # a damaged pickle raises many kinds of errors
        raise ValueError(f"{name}: not a CIFAR-10 python batch ({e})") from e
    if not isinstance(d, dict):
        raise ValueError(f"{name}: not a CIFAR-10 python batch (a {type(d).__name__}, not a dict)")
    data = d.get(b"data", d.get("data"))
    labels = d.get(b"labels", d.get("labels"))
    if data is None or labels is None:
        raise ValueError(f"{name}: CIFAR-10 batch without 'data'/'labels'")
    data = np.asarray(data, dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3072 or data.shape[0] != len(labels):
        raise ValueError(f"{name}: data {data.shape} / {len(labels)} labels, expected (N, 3072)")
    x = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # CHW planes -> HWC, as Keras gives them
    return np.ascontiguousarray(x), np.asarray(labels, dtype=np.uint8).reshape(-1, 1)


def _cifar_binary_batch(blob: bytes, name: str) -> Split:
    if len(blob) % 3073 != 0 or not blob:
        raise ValueError(f"{name}: {len(blob)} bytes is not a whole number of 3073-byte CIFAR-10 records")
    rec = np.frombuffer(blob, dtype=np.uint8).reshape(-1, 3073)
    x = rec[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x), rec[:, :1].copy()


def _concat(parts):
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def load_cifar10(path: str) -> Tuple[Split, Split]:
    """CIFAR-10 from the python or binary tarball, or from an extracted batches folder."""
    if os.path.isdir(path):
        for sub in ("cifar-10-batches-py", "cifar-10-batches-bin"):
            if os.path.isdir(os.path.join(path, sub)):
                path = os.path.join(path, sub)
                break
        files = set(os.listdir(path))
        if all(b in files for b in CIFAR10_TRAIN_BATCHES + [CIFAR10_TEST_BATCH]):
            read = lambda n: Path(path, n).read_bytes()  # noqa: E731
            train = _concat([_cifar_python_batch(read(b), b) for b in CIFAR10_TRAIN_BATCHES])
            return train, _cifar_python_batch(read(CIFAR10_TEST_BATCH), CIFAR10_TEST_BATCH)
        if all(b + ".bin" in files for b in CIFAR10_TRAIN_BATCHES + [CIFAR10_TEST_BATCH]):
            read = lambda n: Path(path, n + ".bin").read_bytes()  # noqa: E731
            train = _concat([_cifar_binary_batch(read(b), b) for b in CIFAR10_TRAIN_BATCHES])
            return train, _cifar_binary_batch(read(CIFAR10_TEST_BATCH), CIFAR10_TEST_BATCH)
        raise ValueError(f"'{path}': no CIFAR-10 batches (data_batch_1..5, test_batch[.bin])")
    try:
        tf = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as e:
        raise ValueError(f"'{path}': not a CIFAR-10 archive ({e})") from e
    with tf:
        members = {os.path.basename(m.name): m for m in tf.getmembers() if m.isfile()}

        def read(n):
            return tf.extractfile(members[n]).read()
        names = CIFAR10_TRAIN_BATCHES + [CIFAR10_TEST_BATCH]
        if all(n in members for n in names):
            parse = _cifar_python_batch
            key = lambda n: n  # noqa: E731
        elif all(n + ".bin" in members for n in names):
            parse = _cifar_binary_batch
            key = lambda n: n + ".bin"  # noqa: E731
        else:
            raise ValueError(f"'{path}': archive lacks the CIFAR-10 batches (python or binary version)")
        try:
            train = _concat([parse(read(key(b)), f"{path}:{key(b)}") for b in CIFAR10_TRAIN_BATCHES])
            test = parse(read(key(CIFAR10_TEST_BATCH)), f"{path}:{key(CIFAR10_TEST_BATCH)}")
        except (tarfile.TarError, OSError, EOFError) as e:
            raise ValueError(f"'{path}': damaged archive ({e})") from e
    return train, test


# ------------------------------------------------------------------ NumPy / HDF5
def load_npz(path: str) -> Tuple[Split, Split]:
    """A Keras-style .npz (x_train, y_train, x_test|x_valid, y_test|y_valid)."""
    with np.load(path) as d:
        keys = set(d.files)
        vx = "x_valid" if "x_valid" in keys else "x_test"
        vy = "y_valid" if "y_valid" in keys else "y_test"
        missing = {"x_train", "y_train", vx, vy} - keys
        if missing:
            raise ValueError(f"'{path}': missing arrays {sorted(missing)} (has {sorted(keys)})")
        return (d["x_train"], d["y_train"]), (d[vx], d[vy])


def load_hdf5(path: str, require_valid: bool = True) -> Tuple[Split, Optional[Split]]:
    """The tutorial datasets of an HDF5 file, read whole (labels as uint8 when they fit).

    Without x_valid/y_valid in the file, the second split is None unless `require_valid`.
    """
    out = []
    for x, y in (("x_train", "y_train"), ("x_valid", "y_valid")):
        if x == "x_valid" and not require_valid:
            try:
                hdata.dataset_info(path, x)
            except ValueError as e:
                if "no dataset" in str(e):
                    out.append(None)
                    continue
                raise
        xa = hdata.read_dataset(path, x)
        ya = hdata.read_dataset(path, y)
        if ya.size and ya.min() >= 0 and ya.max() < 256:
            ya = ya.astype(np.uint8)
        out.append((xa, ya))
    return out[0], out[1]


def to_hdf5(out: str, train: Split, valid: Optional[Split] = None, chunk_rows: Optional[int] = None,
            compression: Optional[str] = "gzip", level: int = 4) -> str:
    """Write (x_train, y_train)[, (x_valid, y_valid)] in the tutorial layout, atomically."""
    arrays = {"x_train": train[0], "y_train": train[1]}
    if valid is not None:
        arrays.update({"x_valid": valid[0], "y_valid": valid[1]})
    for k, v in arrays.items():
        if len(v) != len(arrays["x_" + k[2:]]):
            raise ValueError(f"to_hdf5: {k} has {len(v)} rows, x_{k[2:]} has {len(arrays['x_' + k[2:]])}")
    hdata.write_hdf5(out, arrays, chunk_rows=chunk_rows, compression=compression, level=level)
    return out


def load_any(kind: str, src: str) -> Tuple[Split, Split]:
    """Read `src` as `kind` ('cifar10', 'mnist', 'fashion_mnist', 'npz', 'hdf5')."""
    if not os.path.exists(src):
        raise FileNotFoundError(f"'{src}' not found")
    if kind == "cifar10":
        return load_cifar10(src)
    if kind in ("mnist", "fashion_mnist", "idx"):
        if os.path.isfile(src) and src.endswith(".npz"):
            return load_npz(src)
        return load_idx_folder(src)
    if kind == "npz":
        return load_npz(src)
    if kind == "hdf5":
        return load_hdf5(src, require_valid=False)
    raise ValueError(f"unknown dataset kind '{kind}' (cifar10, mnist, fashion_mnist, npz, hdf5)")


def convert(kind: str, src: str, out: str, **kw) -> str:
    """Convert a dataset in an official format to the tutorial's HDF5 layout."""
    train, valid = load_any(kind, src)
    return to_hdf5(out, train, valid, **kw)
