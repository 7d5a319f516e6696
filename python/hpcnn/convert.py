"""Convert datasets to the tutorial's HDF5 layout: ``hpcnn convert KIND SRC OUT``
(also ``python -m hpcnn.convert ...``).

    hpcnn convert cifar10 --download                         (download, verify, convert: see below)
    hpcnn convert cifar10 cifar-10-python.tar.gz dataset_cifar10.hdf5
    hpcnn convert cifar10 cifar-10-binary.tar.gz dataset_cifar10.hdf5
    hpcnn convert fashion_mnist /usr/share/datasets/fashion-mnist fashion.hdf5
    hpcnn convert mnist mnist.npz mnist.hdf5
    hpcnn convert npz arrays.npz out.hdf5          (x_train, y_train, x_test|x_valid, ...)
    hpcnn convert hdf5 tutorial.hdf5 rechunked.hdf5 (rewrite with hpcnn's chunk layout)
    hpcnn convert images photos/ photos.hdf5 --size 180 180 --validation-split 0.2 --seed 123
                                                    (a folder of class folders of JPEG/PNG/BMP/GIF files)
    hpcnn convert info file.hdf5                    (datasets, shapes, chunks, compression; class names)

images: the files, classes and split of keras.utils.image_dataset_from_directory for the same
--seed (Keras' listing and seeded shuffle; without --validation-split, the files in sorted order),
decoded with Pillow on threads, one per CPU of the job (HPCNN_NUM_THREADS, SLURM_CPUS_PER_TASK or the
affinity mask) a block at a time (memory bounded whatever the folder's size), resized as
TensorFlow resizes, written atomically as x_train/y_train (+ x_valid/y_valid) uint8 with the class
names and file paths in image_meta. Damaged files are left out and listed. Train from it with
HDF5Dataset(OUT, scale=1.0) and a model that begins with Rescaling(1./255), or scale='auto' and no
Rescaling (docs/data.md).

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

from . import data, datasets, image_folders, suggestions
from .image_folders import folder as image_folder
from .datasets import DatasetUnavailable, converters

KINDS = ["cifar10", "mnist", "fashion_mnist", "npz", "hdf5", "images"]


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
    try:
        meta = image_folders.read_meta(path)
    except ValueError:
        return 0  # not made from a folder of images
    if meta.get("class_names") is not None:
        print(f"class_names ({len(meta['class_names'])}): {', '.join(meta['class_names'])}")
    counts = {k: len(v) for k, v in meta.get("file_paths", {}).items()}
    print(f"images from files: {counts}; refused: {len(meta.get('refused', []))}; recipe: {meta.get('recipe')}")
    return 0


def _convert_images(args, ap: argparse.ArgumentParser) -> int:
    """`hpcnn convert images DIR OUT`: Keras' listing and split, decoded in parallel (image_folders)."""
    if args.validation_split is not None and args.seed is None:
        ap.error("--validation-split needs --seed (the seeded shuffle before the split: Keras' rule)")
    recipe = image_folder.recipe_of(args.color_mode, tuple(args.size), args.interpolation, args.crop_to_aspect_ratio,
                                    args.pad_to_aspect_ratio, "hpcnn convert images")
    shuffle = args.validation_split is not None
    image_folders.listing.check_validation_split_arg(args.validation_split, "both" if shuffle else None, shuffle,
                                                     args.seed)
    listing = image_folders.listing.index_directory(args.src, "inferred", None, shuffle, args.seed or 0,
                                                    args.follow_links, True)
    parts = image_folder.listed_subsets(listing, args.validation_split)
    for p in parts:
        if not p.paths:
            raise ValueError(f"no {'training' if p.name == 'train' else 'validation'} files in {args.src} "
                             f"(allowed: {', '.join(image_folders.ALLOWLIST_FORMATS)})")
    workers = args.workers or image_folders.cache.decode_workers()
    t0 = time.perf_counter()
    bar = image_folder.progress_bar(True, f"Decoding {{total}} images on {workers} decoding thread(s):")
    total = sum(len(p.paths) for p in parts)
    meta = image_folders.write_images(args.out, parts, recipe, listing.class_names,
                                      {"source": os.path.abspath(args.src), "seed": args.seed,
                                       "validation_split": args.validation_split},
                                      bar(total) if bar else None, workers=workers,
                                      compression="none" if args.compression == "none" else "gzip", level=args.level)
    for path, why in meta["refused"][:20]:
        print(f"refused: {path}: {why}", file=sys.stderr)
    if len(meta["refused"]) > 20:
        print(f"... and {len(meta['refused']) - 20} more refused files (image_meta lists all)", file=sys.stderr)
    dt = time.perf_counter() - t0
    print(f"wrote {args.out}: {total - len(meta['refused'])} images of {recipe.row_shape()} in {dt:.1f} s "
          f"({total / max(dt, 1e-9):.0f} files/s)")
    return _info(args.out)


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
    ap.add_argument("--compression", choices=["gzip", "none"], default=None,
                    help="default gzip; images: none (decoded photos shrink by about a fifth with gzip, and "
                         "compressing halves the conversion's speed)")
    ap.add_argument("--level", type=int, default=None, help="gzip level 0..9 (default 4; images: 1)")
    img = ap.add_argument_group("images (a folder of class folders)")
    img.add_argument("--size", type=int, nargs=2, metavar=("H", "W"), default=[256, 256],
                     help="image_size: every image resized to H x W (default 256 256, as Keras)")
    img.add_argument("--validation-split", type=float, default=None, help="fraction kept as x_valid/y_valid")
    img.add_argument("--seed", type=int, default=None, help="the shuffle seed before the split (needed with a split)")
    img.add_argument("--color-mode", choices=["rgb", "grayscale", "rgba"], default="rgb")
    img.add_argument("--interpolation", default="bilinear", help="bilinear (default) or nearest")
    img.add_argument("--crop-to-aspect-ratio", action="store_true")
    img.add_argument("--pad-to-aspect-ratio", action="store_true")
    img.add_argument("--follow-links", action="store_true")
    img.add_argument("--workers", type=int, default=None,
                     help="decoding threads (default: the job's CPUs, as hpcnn's threads)")
    args = ap.parse_args(argv)
    if args.compression is None:
        args.compression = "none" if args.kind == "images" else "gzip"
    if args.level is None:
        args.level = 1 if args.kind == "images" else 4  # photos barely compress: gzip's fastest level
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
        if args.kind == "images":
            return _convert_images(args, ap)
        return _convert(args.kind, args.src, args.out, args)
    except DatasetUnavailable as e:
        print(f"hpcnn convert: error: {e.name} cannot be downloaded here ({e.reason}).\n"
              f"Run `{suggestions.convert_download(args.kind)}` on a node with internet (a login node), or copy "
              f"the official files to '{e.where}' and run it again (they are verified, not downloaded).",
              file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, OSError, NotImplementedError) as e:
        print(f"hpcnn convert: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
