"""Convert datasets to the tutorial's HDF5 layout: ``python -m hpcnn.convert KIND SRC OUT``.

    python -m hpcnn.convert cifar10 cifar-10-python.tar.gz dataset_cifar10.hdf5
    python -m hpcnn.convert cifar10 cifar-10-binary.tar.gz dataset_cifar10.hdf5
    python -m hpcnn.convert fashion_mnist /usr/share/datasets/fashion-mnist fashion.hdf5
    python -m hpcnn.convert mnist mnist.npz mnist.hdf5
    python -m hpcnn.convert npz arrays.npz out.hdf5          (x_train, y_train, x_test|x_valid, ...)
    python -m hpcnn.convert hdf5 tutorial.hdf5 rechunked.hdf5 (rewrite with hpcnn's chunk layout)
    python -m hpcnn.convert info file.hdf5                    (datasets, shapes, chunks, compression)
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import List, Optional

KINDS = ["cifar10", "mnist", "fashion_mnist", "npz", "hdf5"]


def _info(path: str) -> int:
    from . import data
    shown = 0
    for name in ("x_train", "y_train", "x_valid", "y_valid", "x_test", "y_test"):
        try:
            i = data.dataset_info(path, name)
        except ValueError as e:
            if "no dataset" in str(e):
                continue
            raise
        chunks = i["chunks"] if i["chunks"] is not None else "contiguous"
        print(f"{name:8s} shape={i['shape']} dtype={i['dtype']} chunks={chunks} compression={i['compression']}")
        shown += 1
    if not shown:
        print(f"{path}: none of the tutorial datasets (x_train, y_train, x_valid, y_valid) found")
        return 1
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="hpcnn convert", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=KINDS + ["info"], help="source format (or 'info' to describe a file)")
    ap.add_argument("src", help="archive, folder or file to read (the HDF5 file for 'info')")
    ap.add_argument("out", nargs="?", help="HDF5 file to write (replaced atomically)")
    ap.add_argument("--chunk-rows", type=int, default=None, help="rows per chunk (default: about 1 MiB of rows)")
    ap.add_argument("--compression", choices=["gzip", "none"], default="gzip")
    ap.add_argument("--level", type=int, default=4, help="gzip level 0..9 (default 4)")
    args = ap.parse_args(argv)
    try:
        if args.kind == "info":
            return _info(args.src)
        if not args.out:
            ap.error("OUT is required")
        from .datasets import converters
        t0 = time.perf_counter()
        train, valid = converters.load_any(args.kind, args.src)
        converters.to_hdf5(args.out, train, valid, chunk_rows=args.chunk_rows,
                           compression=None if args.compression == "none" else "gzip", level=args.level)
        vdesc = f"x_valid {valid[0].shape}, y_valid {valid[1].shape}" if valid is not None else "no valid split"
        print(f"wrote {args.out}: x_train {train[0].shape} {train[0].dtype}, y_train {train[1].shape}, "
              f"{vdesc} in {time.perf_counter() - t0:.1f} s")
        return _info(args.out)
    except (ValueError, FileNotFoundError, OSError) as e:
        print(f"hpcnn convert: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
