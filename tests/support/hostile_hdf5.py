"""A seeded generator of damaged and hostile HDF5 files, and the judge of what hpcnn does with them.

Used by tests/hostile/test_hostile_hdf5.py, which runs the cases in worker subprocesses (a crash or a
hang there must not take pytest down) and reports any case that fails. Run by hand:

    python -m tests.support.hostile_hdf5 --seed 12 --cases 0:400          # run cases, one JSON line each
    python -m tests.support.hostile_hdf5 --seed 12 --cases 137 --verbose  # one case, with details
    python -m tests.support.hostile_hdf5 --seed 12 --cases 137 --keep DIR # ... and keep its file in DIR

Each case prints "START i", "H5PY i" once the reference (h5py) has read the file, and a
"RESULT {json}" line; a worker that dies between START and H5PY crashed in h5py, not in hpcnn.

A case is a pure function of (seed, index): a base file written by h5py (or by hpcnn's writer)
in one of several layouts, and one damage: bit flips or overwritten bytes in the superblock, an
object header, a chunk index (v1 B-tree, v2 B-tree, fixed and extensible arrays), chunk data,
contiguous data or a heap; the size, filter mask or offset field of a chunk B-tree key;
truncation; dimensions patched to huge values; or no damage but the wrong types and shapes.

For every case hpcnn reads the file four ways (dataset_info, read_dataset of x and y, and a full
epoch of HDF5Dataset, cache 'memory' or 'none'), and each must either raise a clean exception
(ValueError or MemoryError whose message names the file) or return the right data: what h5py
reads from the damaged file, or the undamaged original (h5py is HDF5 2.x, which checks more than
the HDF5 1.10 hpcnn links on Debian, and reads some damage differently: where hpcnn still finds
the original data, that is right too). Anything else is a silently wrong answer.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import struct
import sys
import tempfile

import numpy as np

from tests.support import hostile_driver

DEFAULT_SEED = 12
# Cases whose declared data is larger than this are not read into memory by the reference (h5py)
# and, without an address-space limit (sanitizer runs), not by hpcnn either. (Base files hold well
# under a megabyte; only damaged dimensions declare more.)
BIG = 32 << 20
# The worker's address-space limit: hpcnn's memory checks must refuse huge declared datasets
# before allocating; this makes "huge" mean the same on every machine. Not under ASan (its
# shadow memory reserves terabytes of address space).
ADDRESS_SPACE_LIMIT = 2 << 30


def sanitized() -> bool:
    return "asan" in os.environ.get("LD_PRELOAD", "") or bool(os.environ.get("HPCNN_SANITIZE"))


# ---------------------------------------------------------------------------------------------
# Base files: valid HDF5 files in the layouts hpcnn meets, each with x (images or features) and
# y (labels). `make_bases` writes them once per worker.
# ---------------------------------------------------------------------------------------------

def _images(n, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal((n,) + shape).astype(dtype)
    # Smooth values with some noise: gzip compresses, and every byte matters.
    base = np.arange(n * int(np.prod(shape))).reshape((n,) + shape) // 7
    return ((base + rng.integers(0, 3, base.shape)) % 256).astype(dtype)


def _labels(n, dtype, seed, classes=10):
    return np.random.default_rng(seed + 1).integers(0, classes, n).astype(dtype)


def _base_specs():
    """name -> (writer(path, h5py) -> None, x, y); x/y None where the base has no such dataset."""
    import h5py  # noqa: F401  (imported by callers; the writers receive it)

    specs = {}

    def add(name, x, y, write):
        specs[name] = (write, x, y)

    x = _images(60, (6, 6, 3), np.uint8, 1)
    y = _labels(60, np.uint8, 1)
    add("gzip_u8", x, y, lambda p, h5, x=x, y=y: _write(h5, p, x, y, xkw=dict(chunks=(10, 6, 6, 3), compression="gzip",
                                                                                shuffle=True)))
    x = _images(64, (8, 8, 3), np.uint8, 2)
    y = _labels(64, np.int64, 2)
    add("auto_chunks", x, y, lambda p, h5, x=x, y=y: _write(h5, p, x, y, xkw=dict(chunks=(16, 4, 4, 1), compression="gzip"),
                                                             ykw=dict(chunks=(16,), compression="gzip")))
    x = _images(50, (12,), np.float32, 3)
    y = _labels(50, np.int32, 3)
    add("contiguous_f32", x, y, lambda p, h5, x=x, y=y: _write(h5, p, x, y))
    x = _images(48, (5, 5), np.uint8, 4)
    y = _labels(48, np.uint16, 4)
    add("chunked_plain", x, y, lambda p, h5, x=x, y=y: _write(h5, p, x, y, xkw=dict(chunks=(8, 5, 5)), ykw=dict(chunks=(12,))))
    x = _images(40, (3, 3, 2), np.float32, 5).astype(">f4")
    y = _labels(40, ">i8", 5)
    add("big_endian", x, y, lambda p, h5, x=x, y=y: _write(h5, p, x, y, xkw=dict(chunks=(10, 3, 3, 2), compression="gzip")))
    x = _images(40, (4, 4, 1), np.uint8, 6)
    y = _labels(40, np.uint8, 6)
    add("fletcher32", x, y, lambda p, h5, x=x, y=y: _write(h5, p, x, y, xkw=dict(chunks=(10, 4, 4, 1), compression="gzip",
                                                                                   fletcher32=True)))
    x = _images(60, (4, 4, 2), np.uint8, 7)
    y = _labels(60, np.uint8, 7)
    add("v110_fixed_array", x, y, lambda p, h5, x=x, y=y: _write(h5, p, x, y, libver=("v110", "v110"),
                                                                  xkw=dict(chunks=(10, 4, 4, 2), compression="gzip"),
                                                                  ykw=dict(chunks=(15,), maxshape=(None,))))
    x = _images(45, (6, 4), np.float32, 8)
    y = _labels(45, np.int16, 8)
    add("v110_btree2", x, y, lambda p, h5, x=x, y=y: _write(h5, p, x, y, libver=("v110", "v110"),
                                                             xkw=dict(chunks=(5, 3, 2), maxshape=(None, None, None), compression="gzip",
                                                                      shuffle=True)))
    x = _images(30, (5, 5, 1), np.uint8, 9)
    y = _labels(30, np.uint8, 9)
    add("v110_single_chunk", x, y, lambda p, h5, x=x, y=y: _write(h5, p, x, y, libver=("v110", "v110"),
                                                                   xkw=dict(chunks=(30, 5, 5, 1), compression="gzip"),
                                                                   ykw=dict(chunks=(30,))))
    # Sparse chunked data with fill values: chunks never written read as the fill value.
    x = np.full((40, 3, 3), 2.5, np.float32)
    x[0:10] = _images(10, (3, 3), np.float32, 10)
    x[30:40] = _images(10, (3, 3), np.float32, 11)
    y = np.full(40, 7, np.uint8)
    y[0:8] = _labels(8, np.uint8, 10)

    def write_sparse(p, h5, x=x, y=y):
        with h5.File(p, "w") as f:
            d = f.create_dataset("x_train", shape=x.shape, dtype=x.dtype, chunks=(10, 3, 3), compression="gzip",
                                 fillvalue=2.5)
            d[0:10] = x[0:10]
            d[30:40] = x[30:40]
            e = f.create_dataset("y_train", shape=y.shape, dtype=y.dtype, chunks=(8,), fillvalue=7)
            e[0:8] = y[0:8]
    add("sparse_fill", x, y, write_sparse)
    x = _images(70, (4, 4, 3), np.uint8, 12)
    y = _labels(70, np.int64, 12)

    def write_hpcnn(p, h5, x=x, y=y):
        from hpcnn import data
        data.write_hdf5(p, {"x_train": x, "y_train": y}, chunk_rows=16)
    add("hpcnn_writer", x, y, write_hpcnn)
    x = _images(20, (4, 3), np.uint8, 13)
    y = _labels(20, np.uint8, 13)

    def write_compact(p, h5, x=x, y=y):
        with h5.File(p, "w") as f:
            f.create_dataset("x_train", data=x)
            space = h5.h5s.create_simple(y.shape)
            dcpl = h5.h5p.create(h5.h5p.DATASET_CREATE)
            dcpl.set_layout(h5.h5d.COMPACT)
            d = h5.h5d.create(f.id, b"y_train", h5.h5t.NATIVE_UINT8, space, dcpl=dcpl)
            d.write(h5.h5s.ALL, h5.h5s.ALL, y)
    add("compact_labels", x, y, write_compact)
    return specs


def _write(h5, path, x, y, xkw=None, ykw=None, libver=None):
    with h5.File(path, "w", libver=libver) if libver else h5.File(path, "w") as f:
        f.create_dataset("x_train", data=x, **(xkw or {}))
        f.create_dataset("y_train", data=y, **(ykw or {}))


# Valid files with the wrong types or shapes for training: (writer, expect the loader to refuse).
def _wrong_specs():
    w = {}

    def both(x, y, **kw):
        return lambda p, h5: _write(h5, p, x, y, **kw)
    n = 12
    w["x_float64"] = both(np.zeros((n, 4, 4), np.float64), np.zeros(n, np.uint8))
    w["x_int16"] = both(np.zeros((n, 4, 4), np.int16), np.zeros(n, np.uint8))
    w["x_rank1"] = both(np.zeros(n, np.uint8), np.zeros(n, np.uint8))
    w["x_rank5"] = both(np.zeros((n, 2, 2, 2, 2), np.uint8), np.zeros(n, np.uint8))
    w["x_empty"] = both(np.zeros((0, 4, 4), np.uint8), np.zeros(0, np.uint8))
    w["x_empty_rows"] = both(np.zeros((n, 0, 4), np.uint8), np.zeros(n, np.uint8))
    w["x_strings"] = both(np.array([b"abc"] * n), np.zeros(n, np.uint8))
    w["x_compound"] = both(np.zeros(n, [("a", "u1"), ("b", "f4")]), np.zeros(n, np.uint8))
    w["x_bool"] = both(np.zeros((n, 3), np.bool_), np.zeros(n, np.uint8))
    w["x_float16"] = both(np.zeros((n, 3), np.float16), np.zeros(n, np.uint8))
    w["x_complex"] = both(np.zeros((n, 3), np.complex64), np.zeros(n, np.uint8))
    w["y_float32"] = both(np.zeros((n, 3), np.uint8), np.zeros(n, np.float32))
    w["y_2d"] = both(np.zeros((n, 3), np.uint8), np.zeros((n, 2), np.uint8))
    w["y_strings"] = both(np.zeros((n, 3), np.uint8), np.array([b"1"] * n))
    w["y_short"] = both(np.zeros((n, 3), np.uint8), np.zeros(n - 1, np.uint8))
    w["y_negative"] = both(np.zeros((n, 3), np.uint8), np.full(n, -1, np.int8))
    w["y_huge_label"] = both(np.zeros((n, 3), np.uint8), np.full(n, 2 ** 40, np.int64))
    w["y_scalar"] = both(np.zeros((n, 3), np.uint8), np.uint8(3))
    w["x_scalar"] = both(np.float32(1.0), np.zeros(n, np.uint8))

    def group_x(p, h5):
        with h5.File(p, "w") as f:
            f.create_group("x_train")
            f.create_dataset("y_train", data=np.zeros(n, np.uint8))
    w["x_is_group"] = group_x

    def huge(rows, chunk_rows, row=(4,), chunk_row=None, ydtype=np.uint8, fill=0):
        def write(p, h5):
            with h5.File(p, "w") as f:
                f.create_dataset("x_train", shape=(rows,) + row, dtype=np.float32, chunks=(chunk_rows,) + (chunk_row or row),
                                 maxshape=(None,) + row)
                f.create_dataset("y_train", shape=(rows,), dtype=ydtype, chunks=(chunk_rows,), maxshape=(None,),
                                 fillvalue=fill)
        return write
    # Huge declared shapes in small, valid (sparse) files: nothing of the declared size may be
    # allocated before a check.
    w["huge_2e12_rows"] = huge(2 * 10 ** 12, 4096)
    w["huge_2p40_rows"] = huge(2 ** 40, 1 << 20, row=(32, 32, 3))
    w["huge_2p62_rows"] = huge(2 ** 62, 1 << 16)
    w["huge_row"] = huge(4, 1, row=(1 << 20, 1 << 20), chunk_row=(1024, 1024))
    return w


# ---------------------------------------------------------------------------------------------
# Where things are in a base file, for targeted damage.
# ---------------------------------------------------------------------------------------------

SIGNATURES = {
    "btree": [b"TREE", b"BTHD", b"BTIN", b"BTLF", b"FAHD", b"FADB", b"EAHD", b"EAIB", b"EASB", b"EADB"],
    "heap": [b"HEAP", b"SNOD", b"GCOL", b"FRHP", b"FHDB", b"FHIB", b"FSHD", b"FSSE"],
}


def _find_all(blob, sig):
    out, i = [], blob.find(sig)
    while i >= 0:
        out.append(i)
        i = blob.find(sig, i + 1)
    return out


def file_map(path, blob):
    """Regions of the file by role: name -> list of (start, end) byte ranges."""
    import h5py
    regions = {"superblock": [(0, 96 if blob[8] in (0, 1) else 48)], "anywhere": [(0, len(blob))]}
    for role, sigs in SIGNATURES.items():
        for s in sigs:
            for i in _find_all(blob, s):
                regions.setdefault(role, []).append((i, min(len(blob), i + 512)))
    keys = []  # v1 chunk B-tree keys: (offset of the key, rank + 1)
    with h5py.File(path, "r") as f:
        for name in ("x_train", "y_train"):
            if name not in f or not isinstance(f[name], h5py.Dataset):
                continue
            d = f[name]
            info = h5py.h5o.get_info(d.id)
            span = (info.addr, info.addr + max(16, info.hdr.space.total))
            regions.setdefault("object_header", []).append(span)
            regions["object_header:" + name] = [span]
            off = d.id.get_offset()
            if off is not None and d.chunks is None:
                regions.setdefault("contiguous_data", []).append((off, off + d.id.get_storage_size()))
            if d.chunks is not None:
                addrs = set()
                for k in range(d.id.get_num_chunks()):
                    c = d.id.get_chunk_info(k)
                    regions.setdefault("chunk_data", []).append((c.byte_offset, c.byte_offset + c.size))
                    addrs.add(c.byte_offset)
                keys += v1_chunk_keys(blob, d.ndim + 1, addrs)
    if keys:
        regions["chunk_key"] = keys
    return regions


def v1_chunk_keys(blob, ndims, chunk_addrs):
    """Keys of v1 B-tree leaf nodes whose children are these chunks."""
    keys = []
    ksize = 8 + 8 * ndims
    for i in _find_all(blob, b"TREE"):
        if blob[i + 4] != 1 or blob[i + 5] != 0:
            continue
        n = struct.unpack_from("<H", blob, i + 6)[0]
        p = i + 24
        children, pos = [], []
        for k in range(n):
            pos.append(p)
            if p + ksize + 8 > len(blob):
                break
            children.append(struct.unpack_from("<Q", blob, p + ksize)[0])
            p += ksize + 8
        if children and all(c in chunk_addrs for c in children):
            keys += [(q, ndims) for q in pos]
    return keys


# ---------------------------------------------------------------------------------------------
# Damage
# ---------------------------------------------------------------------------------------------

def _pick_region(rng, regions, role):
    spans = regions.get(role) or regions["anywhere"]
    a, b = spans[int(rng.integers(len(spans)))]
    return a, max(a + 1, b)


def damage(rng, blob, regions, shapes):
    """One damage to `blob` (a bytearray, changed in place); returns its description."""
    kinds = ["flip:superblock", "flip:object_header", "flip:btree", "flip:chunk_data", "flip:contiguous_data",
             "flip:heap", "flip:anywhere", "bytes:object_header", "bytes:btree", "bytes:superblock",
             "bytes:anywhere", "key:size", "key:mask", "key:offset", "truncate", "dims"]
    weights = np.array([6, 10, 10, 6, 3, 3, 6, 8, 8, 3, 4, 6, 3, 6, 8, 6], float)
    kind = kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]
    if kind.startswith("flip:"):
        role = kind.split(":")[1]
        if role not in regions:  # a contiguous base has no chunks, a chunked one no contiguous data
            role = {"chunk_data": "contiguous_data", "contiguous_data": "chunk_data"}.get(role, role)
        a, b = _pick_region(rng, regions, role)
        flips = []
        for _ in range(1 if role == "anywhere" else int(rng.integers(1, 4))):
            pos, bit = int(rng.integers(a, b)), int(rng.integers(8))
            blob[pos] ^= 1 << bit
            flips.append(f"{pos}.{bit}")
        return f"{kind} bits {' '.join(flips)}"
    if kind.startswith("bytes:"):
        role = kind.split(":")[1]
        a, b = _pick_region(rng, regions, role)
        pos = int(rng.integers(a, b))
        n = int(rng.integers(1, 9))
        style = ["zero", "ff", "random"][int(rng.integers(3))]
        val = {"zero": b"\0" * n, "ff": b"\xff" * n, "random": rng.integers(0, 256, n).astype(np.uint8).tobytes()}[style]
        val = val[: len(blob) - pos]
        blob[pos:pos + len(val)] = val
        return f"{kind} {style} x{len(val)} at {pos}"
    if kind.startswith("key:") and regions.get("chunk_key"):
        keys = regions["chunk_key"]
        kp, ndims = keys[int(rng.integers(len(keys)))]
        field = kind.split(":")[1]
        if field == "size":
            old = struct.unpack_from("<I", blob, kp)[0]
            new = [0, 1, max(0, old - 1), old + 1, old // 2, old * 2, 2 ** 31, 2 ** 32 - 1][int(rng.integers(8))]
            struct.pack_into("<I", blob, kp, new)
            return f"{kind} {old} -> {new} at {kp}"
        if field == "mask":
            new = [1, 2, 3, 0xFFFFFFFF][int(rng.integers(4))]
            struct.pack_into("<I", blob, kp + 4, new)
            return f"{kind} -> {new:#x} at {kp}"
        d = int(rng.integers(ndims))
        old = struct.unpack_from("<Q", blob, kp + 8 + 8 * d)[0]
        new = [old + 1, old + 2, old * 2 + 1, old + 64, 2 ** 32, 2 ** 40 + old, 2 ** 63, 0][int(rng.integers(8))]
        struct.pack_into("<Q", blob, kp + 8 + 8 * d, new % 2 ** 64)
        return f"{kind} dim {d}: {old} -> {new % 2 ** 64} at {kp}"
    if kind == "dims" and shapes:
        name, shape = list(shapes.items())[int(rng.integers(len(shapes)))]
        pat = struct.pack("<" + "Q" * len(shape), *shape)
        a, b = regions.get("object_header:" + name, [(0, 0)])[0]
        hits = [a + h for h in _find_all(bytes(blob[a:b]), pat)]
        if hits:
            which = [hits[0]] if rng.random() < 0.5 else hits  # the dimensions, or dims and max dims
            d = int(rng.integers(len(shape)))
            new = [2 ** 32 + shape[d], 2 ** 40, 2 ** 62, 2 ** 63 + 5, 2 ** 64 - 1, shape[d] * 2 + 1, 0,
                   shape[d] ^ (1 << int(rng.integers(20, 60)))][int(rng.integers(8))]
            for h in which:
                struct.pack_into("<Q", blob, h + 8 * d, new)
            return f"dims {name} dim {d} -> {new} ({'dims and maxdims' if len(which) > 1 else 'dims'}) at {which}"
    # truncate (and the fallback when a targeted damage has no target in this base)
    r = rng.random()
    cut = int(len(blob) * (rng.uniform(0.9, 1.0) if r < 0.5 else rng.uniform(0.0, 0.9)))
    cut = min(cut, len(blob) - 1)
    del blob[cut:]
    return f"truncate to {cut} bytes"


# ---------------------------------------------------------------------------------------------
# Running hpcnn and judging
# ---------------------------------------------------------------------------------------------

class Raised:
    def __init__(self, e):
        self.type = type(e).__name__
        self.msg = str(e)

    def __repr__(self):
        return f"{self.type}: {self.msg[:300]}"


def _attempt(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001  (the judge decides which exceptions are clean)
        return Raised(e)


def _declared_bytes(path, name):
    import h5py
    try:
        with h5py.File(path, "r") as f:
            d = f[name]
            return int(np.prod(d.shape, dtype=object)) * d.dtype.itemsize
    except Exception:  # noqa: BLE001
        return 0


def _declared_shape(path, name):
    import h5py
    try:
        with h5py.File(path, "r") as f:
            return f[name].shape
    except Exception:  # noqa: BLE001
        return None


def _h5py_read(path, name):
    import h5py
    if _declared_bytes(path, name) > BIG:
        return Raised(MemoryError("declared too large for the reference"))

    def read():
        with h5py.File(path, "r") as f:
            return f[name][()]
    return _attempt(read)


class LinkedHDF5:
    """The HDF5 C library hpcnn itself links (Debian: 1.10), called through ctypes: a third
    reading of a file, consulted only where h5py (HDF5 2.x) read the damaged file without an
    error but hpcnn's data matches neither h5py's nor the original. Then no reader detected the
    damage and the two libraries merely disagree on garbage (a damaged chunk address pointing
    at other bytes of the file, say): hpcnn reading what its own library reads is as right as
    h5py. Where h5py raised, this reading is never consulted."""

    _lib = None

    @classmethod
    def lib(cls):
        import ctypes
        if cls._lib is None:
            import hpcnn  # noqa: F401  (maps the library)
            with open("/proc/self/maps") as maps:
                paths = [line.split()[-1] for line in maps
                         if re.search(r"/libhdf5(_serial)?\.so", line) and "h5py" not in line]
            lib = ctypes.CDLL(paths[0])
            lib.H5open()
            lib.H5Eset_auto2(ctypes.c_int64(0), None, None)
            for f in ("H5Fopen", "H5Dopen2"):
                getattr(lib, f).restype = ctypes.c_int64
            cls._lib = lib
        return cls._lib

    @classmethod
    def read(cls, path, name, like):
        """The dataset as `like` (hpcnn's reading: its shape and dtype), or Raised."""
        import ctypes
        lib = cls.lib()
        mem = {np.dtype(np.uint8): "H5T_NATIVE_UINT8_g", np.dtype(np.float32): "H5T_NATIVE_FLOAT_g",
               np.dtype(np.int64): "H5T_NATIVE_INT64_g"}[np.asarray(like).dtype]
        out = np.empty_like(like)
        f = lib.H5Fopen(path.encode(), ctypes.c_uint(0), ctypes.c_int64(0))
        if f < 0:
            return Raised(OSError("H5Fopen failed"))
        try:
            d = lib.H5Dopen2(ctypes.c_int64(f), name.encode(), ctypes.c_int64(0))
            if d < 0:
                return Raised(OSError("H5Dopen2 failed"))
            try:
                t = ctypes.c_int64.in_dll(lib, mem).value
                rc = lib.H5Dread(ctypes.c_int64(d), ctypes.c_int64(t), ctypes.c_int64(0), ctypes.c_int64(0),
                                 ctypes.c_int64(0), out.ctypes.data_as(ctypes.c_void_p))
                return Raised(OSError("H5Dread failed")) if rc < 0 else out
            finally:
                lib.H5Dclose(ctypes.c_int64(d))
        finally:
            lib.H5Fclose(ctypes.c_int64(f))


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return bool(np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True))
    return bool(np.array_equal(a, b))


def _close(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-6, atol=1e-7, equal_nan=True))


def _as_stored(ref):
    """What hpcnn's read_dataset returns for an array h5py read: uint8/float32 as stored, other
    integers as int64."""
    ref = np.asarray(ref)
    if ref.dtype.kind == "u" and ref.dtype.itemsize == 1:
        return ref
    if ref.dtype.kind == "f" and ref.dtype.itemsize == 4:
        return ref.astype(np.float32)
    if ref.dtype.kind in "iu":
        return ref.astype(np.int64)
    return None


def judge(op, got, candidates, path, declared=None, linked=None):
    """None when `got` is acceptable, else the reason. `linked`: a function giving the linked
    HDF5's reading, when h5py read the file (see LinkedHDF5)."""
    base = os.path.basename(path)
    if isinstance(got, Raised):
        if got.type not in ("ValueError", "MemoryError"):
            return f"{op}: unclean exception {got!r}"
        if base not in got.msg:
            return f"{op}: the message does not name the file: {got!r}"
        return None
    for c in candidates:
        if c is not None and (_close(got, c) if op.startswith("epoch") else _same(got, c)):
            return None
    if declared is not None and np.shape(got) == tuple(declared):
        return None  # too large for the reference to read: the shape is all that can be checked
    if linked is not None:
        ref = linked()
        if not isinstance(ref, Raised) and (_close(got, ref) if op.startswith("epoch") else _same(got, ref)):
            return None
    return f"{op}: returned data that matches neither h5py's reading nor the original (shape {np.shape(got)})"


def run_hpcnn(path, x_cands, y_cands, rng, limit_big, h5py_read=(False, False)):
    """hpcnn's four readings of `path`: (failure reasons, what each reading did)."""
    from hpcnn import data
    from hpcnn import _core
    fails, did = [], {}

    def note(op, got):
        did[op] = "raised" if isinstance(got, Raised) else "data"
    big = {n: _declared_bytes(path, n) > BIG for n in ("x_train", "y_train")}
    info = _attempt(lambda: _core.data.dataset_info(path, "x_train"))
    note("info", info)
    if isinstance(info, Raised):
        r = judge("dataset_info", info, [], path)
        if r:
            fails.append(r)
    for name, cands in (("x_train", x_cands), ("y_train", y_cands)):
        if limit_big and big[name]:
            continue
        got = _attempt(lambda: _core.data.read_dataset(path, name))
        note(name, got)
        stored = [_as_stored(c) for c in cands if c is not None]
        linked = None
        if h5py_read[name == "y_train"] and not isinstance(got, Raised):
            linked = lambda name=name, got=got: _linked_read(path, name, got)  # noqa: E731
        r = judge(f"read_dataset({name})", got, stored, path, declared=_declared_shape(path, name) if big[name] else None,
                  linked=linked)
        if r:
            fails.append(r)
    if limit_big and (big["x_train"] or big["y_train"]):
        return fails, did
    cache = ["memory", "none"][int(rng.integers(2))]
    batch = int(rng.integers(1, 33))

    def epoch():
        ds = data.HDF5Dataset(path, batch_size=batch, shuffle=False, cache=cache, memory_budget=int(rng.integers(1, 8)) << 10)
        if ds.num_rows > 20000:  # a declared size hpcnn accepted: read both ends only
            return ("ends", ds[0][0], ds[len(ds) - 1][0])
        xs, ys = [], []
        for xb, yb in ds.epoch_batches(0):
            xs.append(xb)
            ys.append(yb)
        return ("full", np.concatenate(xs), np.concatenate(ys))
    got = _attempt(epoch)
    note("epoch", got)
    if isinstance(got, Raised):
        r = judge("epoch", got, [], path)
        if r:
            fails.append(f"{r} (cache={cache}, batch_size={batch})")
    elif got[0] == "full":
        _, gx, gy = got
        xs = []
        for c in x_cands:
            if c is None or c.ndim < 2 or c.dtype.kind not in "uf":
                continue
            c = c.astype(np.float32) * (np.float32(1 / 255) if c.dtype == np.uint8 else np.float32(1))
            if c.ndim == 3:
                c = c[..., None]
            xs.append(c)
        linked = None
        if h5py_read[0]:
            def linked():
                raw = _core.data.read_dataset(path, "x_train")
                ref = _linked_read(path, "x_train", raw)
                if isinstance(ref, Raised):
                    return ref
                ref = ref.astype(np.float32) * (np.float32(1 / 255) if ref.dtype == np.uint8 else np.float32(1))
                return ref[..., None] if ref.ndim == 3 else ref
        declared = None
        if big["x_train"]:  # too large for the reference: the shape is what can be checked
            declared = tuple(_declared_shape(path, "x_train") or ())
            declared = declared + (1,) if len(declared) == 3 else declared
        r = judge("epoch x", gx, xs, path, declared=declared, linked=linked)
        if r:
            fails.append(f"{r} (cache={cache}, batch_size={batch})")
        ys = [np.asarray(c).reshape(-1).astype(np.int64) for c in y_cands if c is not None and np.asarray(c).dtype.kind in "iu"]
        linked = None
        if h5py_read[1]:
            def linked():
                raw = _core.data.read_dataset(path, "y_train")
                ref = _linked_read(path, "y_train", raw)
                return ref if isinstance(ref, Raised) else ref.reshape(-1)
        r = judge("epoch y", gy.astype(np.int64), ys, path, linked=linked,
                  declared=tuple(_declared_shape(path, "y_train") or ())[:1] if big["y_train"] else None)
        if r:
            fails.append(f"{r} (cache={cache}, batch_size={batch})")
    return fails, did


def _linked_read(path, name, like):
    print(f"LINKED {name}", flush=True)  # a crash from here on is HDF5 1.10's, reading a file hpcnn misread
    return LinkedHDF5.read(path, name, like)


_BASES = None
_WRONG = None


def _ensure_bases(workdir):
    """Writes every base file once into workdir; returns name -> (path, x, y, blob, regions)."""
    import h5py
    global _BASES, _WRONG
    if _BASES is None:
        bases = {}
        for name, (write, x, y) in _base_specs().items():
            p = os.path.join(workdir, f"base_{name}.h5")
            write(p, h5py)
            with open(p, "rb") as f:
                blob = f.read()
            bases[name] = (p, x, y, blob, file_map(p, blob))
        _BASES, _WRONG = bases, _wrong_specs()
    return _BASES, _WRONG


def case_names():
    """Every base and wrong-type name, in the order cases draw from."""
    return sorted(_base_specs()), sorted(_wrong_specs())


def make_case(seed, index, workdir):
    """Writes case `index` of `seed` to a file; returns (path, description, x_orig, y_orig)."""
    import h5py
    bases, wrong = _ensure_bases(workdir)
    rng = np.random.default_rng([seed, index])
    path = os.path.join(workdir, f"case_{seed}_{index}.h5")
    if rng.random() < 0.08:
        name = sorted(wrong)[int(rng.integers(len(wrong)))]
        wrong[name](path, h5py)
        return path, f"wrong:{name}", None, None, rng
    name = sorted(bases)[int(rng.integers(len(bases)))]
    _, x, y, blob, regions = bases[name]
    b = bytearray(blob)
    desc = damage(rng, b, regions, {"x_train": x.shape, "y_train": y.shape})
    with open(path, "wb") as f:
        f.write(b)
    return path, f"{name}: {desc}", x, y, rng


def check_case(seed, index, workdir, keep=None, reference=True):
    """Runs one case; returns (description, failure reasons, what each reading did, whether h5py
    read the damaged file). reference=False: h5py is not asked (it crashed on this file: HDF5 2.x
    segfaults on some damaged chunks that hpcnn refuses), only the original counts as right."""
    path, desc, x, y, rng = make_case(seed, index, workdir)
    try:
        if reference:
            hx, hy = _h5py_read(path, "x_train"), _h5py_read(path, "y_train")
        else:
            hx = hy = Raised(RuntimeError("h5py crashed on this file"))
        x_c = [c for c in (None if isinstance(hx, Raised) else np.asarray(hx), x) if c is not None]
        y_c = [c for c in (None if isinstance(hy, Raised) else np.asarray(hy), y) if c is not None]
        print(f"H5PY {index}", flush=True)
        fails, did = run_hpcnn(path, x_c, y_c, rng, limit_big=sanitized(),
                               h5py_read=(not isinstance(hx, Raised), not isinstance(hy, Raised)))
        h5py_read = not isinstance(hx, Raised) and not isinstance(hy, Raised)
    finally:
        hostile_driver.keep_or_remove(path, keep)
    return desc, fails, did, h5py_read


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--cases", required=True, help="indices: '0:100', '5,9,12'")
    ap.add_argument("--keep", help="keep the case files in this directory")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--inject", help="test the harness: 'crash:I' or 'hang:I' at case I")
    ap.add_argument("--no-reference", default="", help="cases not to read with h5py (it crashed on them)")
    args = ap.parse_args(argv)
    if not sanitized():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    import hpcnn
    hpcnn.set_num_threads(args.threads)
    no_reference = set(hostile_driver.parse_cases(args.no_reference))
    with tempfile.TemporaryDirectory(prefix="hpcnn-hostile-") as workdir:
        def run_case(i):
            if args.inject and args.inject == f"h5py-crash:{i}" and i not in no_reference:
                os.abort()  # a crash while h5py reads the reference (a test of the driver)
            desc, fails, did, h5py_read = check_case(args.seed, i, workdir, args.keep, reference=i not in no_reference)
            return {"desc": desc, "fails": fails, "did": did, "h5py_read": h5py_read}

        hostile_driver.serve(args.cases, args.inject, run_case, reference=True, verbose_line=(lambda i, r: (
            f"  case {i}: {r['desc']}: {'ok' if not r['fails'] else r['fails']}")) if args.verbose else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
