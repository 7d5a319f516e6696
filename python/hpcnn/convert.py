"""Convert datasets to the tutorial's HDF5 layout: ``hpcnn convert KIND SRC OUT``
(also ``python -m hpcnn.convert ...``).

    hpcnn convert cifar10 --download                         (download, verify, convert: see below)
    hpcnn convert cifar10 cifar-10-python.tar.gz dataset_cifar10.hdf5
    hpcnn convert cifar10 cifar-10-binary.tar.gz dataset_cifar10.hdf5
    hpcnn convert fashion_mnist /usr/share/datasets/fashion-mnist fashion.hdf5
    hpcnn convert mnist mnist.npz mnist.hdf5
    hpcnn convert npz arrays.npz out.hdf5          (x_train, y_train, x_test|x_valid, ...)
    hpcnn convert hdf5 tutorial.hdf5 rechunked.hdf5 (rewrite with hpcnn's chunk layout)
    hpcnn convert info file.hdf5                    (datasets, shapes, chunks, compression)

--download (cifar10, mnist, fashion_mnist; on a login node: compute nodes usually have no
internet) fetches the official files into the data directory (--data-dir, else $HPCNN_DATA_DIR,
else ~/.hpcnn/datasets), verifies their MD5 checksums, and converts them to
<data dir>/dataset_<kind>.hdf5 (or OUT). Files already there are verified and reused.
`hpcnn tutorial` and hpcnn.datasets.<kind>.load_data() then find them there.
$HPCNN_CIFAR10_URL (and _MNIST_, _FASHION_MNIST_) names a mirror to download from instead.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List, Optional

from . import data, datasets, suggestions
from .datasets import DatasetUnavailable, converters

KINDS = ["cifar10", "mnist", "fashion_mnist", "npz", "hdf5"]


def _info(path: str) -> int:
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


def _download(args, ap: argparse.ArgumentParser) -> int:
    """`--download`: the official files into the data dir (verified), then the tutorial HDF5."""
    if args.kind not in suggestions.DOWNLOADABLE:
        ap.error(f"--download works for {', '.join(suggestions.DOWNLOADABLE)}, not '{args.kind}'")
    if args.src and args.out:
        ap.error("with --download, give at most OUT (the HDF5 file to write), not SRC")
    directory = os.path.abspath(os.path.expanduser(args.data_dir or datasets.data_dir()))
    out = args.out or args.src or os.path.join(directory, f"dataset_{args.kind}.hdf5")
    module = getattr(datasets, args.kind)
    src = module.fetch(directory)
    print(f"{args.kind}: {src} (checksums verified)" if src.startswith(directory)
          else f"{args.kind}: {src} (installed copy)")
    if os.path.exists(out):
        print(f"{out} is already there: reused (delete it to convert again)")
        return _info(out)
    return _convert(args.kind, src, out, args)


def _convert(kind: str, src: str, out: str, args) -> int:
    t0 = time.perf_counter()
    train, valid = converters.load_any(kind, src)
    converters.to_hdf5(out, train, valid, chunk_rows=args.chunk_rows,
                       compression=None if args.compression == "none" else "gzip", level=args.level)
    vdesc = f"x_valid {valid[0].shape}, y_valid {valid[1].shape}" if valid is not None else "no valid split"
    print(f"wrote {out}: x_train {train[0].shape} {train[0].dtype}, y_train {train[1].shape}, "
          f"{vdesc} in {time.perf_counter() - t0:.1f} s")
    return _info(out)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="hpcnn convert", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=KINDS + ["info"], help="source format (or 'info' to describe a file)")
    ap.add_argument("src", nargs="?", help="archive, folder or file to read (the HDF5 file for 'info'); "
                                           "with --download: OUT")
    ap.add_argument("out", nargs="?", help="HDF5 file to write (replaced atomically)")
    ap.add_argument("--download", action="store_true",
                    help="fetch the official files (MD5-verified) into the data dir instead of reading SRC; "
                         "OUT defaults to <data dir>/dataset_KIND.hdf5")
    ap.add_argument("--data-dir", default=None,
                    help="with --download: where the files go (default: $HPCNN_DATA_DIR, else ~/.hpcnn/datasets)")
    ap.add_argument("--chunk-rows", type=int, default=None, help="rows per chunk (default: about 1 MiB of rows)")
    ap.add_argument("--compression", choices=["gzip", "none"], default="gzip")
    ap.add_argument("--level", type=int, default=4, help="gzip level 0..9 (default 4)")
    args = ap.parse_args(argv)
    try:
        if args.download:
            return _download(args, ap)
        if args.data_dir:
            ap.error("--data-dir goes with --download")
        if not args.src:
            ap.error(f"SRC is required (a local copy to read), or use --download: {suggestions.convert_download()}"
                     if args.kind in suggestions.DOWNLOADABLE else "SRC is required")
        if args.kind == "info":
            return _info(args.src)
        if not args.out:
            ap.error("OUT is required")
        return _convert(args.kind, args.src, args.out, args)
    except DatasetUnavailable as e:
        print(f"hpcnn convert: error: {e.name} cannot be downloaded here ({e.reason}).\n"
              f"Run `{suggestions.convert_download(args.kind)}` on a node with internet (a login node), or copy "
              f"the official files to '{e.where}' and run it again (they are verified, not downloaded).",
              file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, OSError) as e:
        print(f"hpcnn convert: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
