"""A minimal reader for gzip IDX files (MNIST / Fashion-MNIST format), for tests only."""
import gzip
import struct

import numpy as np

FASHION_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path: str) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        zero, dtype_code, ndim = struct.unpack(">HBB", f.read(4))
        assert zero == 0 and dtype_code == 0x08, "only uint8 IDX files"
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)
