"""A folder's images decoded once into an HDF5 file of the tutorial layout (``x_train``/``y_train``
and, with a validation split, ``x_valid``/``y_valid``: uint8 (n, h, w, c) and int32 (n,)), which
``hpcnn.data.HDF5Dataset`` then trains from; plus ``image_meta``, a uint8 dataset holding UTF-8
JSON: class names, each row's file path, the files refused and why, and the cache key.

- Decoding runs on worker threads (one per CPU hpcnn may use: HPCNN_NUM_THREADS, else
  SLURM_CPUS_PER_TASK, else the affinity mask), on blocks of BLOCK files, at most two blocks per
  worker in flight: memory stays bounded whatever the folder's size, and rows reach the file in order.
  Threads, not processes: Pillow decodes and the C++ resize runs without the GIL, and worker
  processes measured slower (start-up, pickling the rows: docs/data.md) and would re-run a user's
  script that lacks a ``__main__`` guard (multiprocessing's spawn) or fail from stdin.
- The file is written through a temporary file renamed into place (never half-written).
- ``build_or_reuse`` keys the file by the listing (paths in order, labels), every file's size and
  modification time, and how files become rows (size, channels, interpolation, aspect): an
  unchanged folder reuses the file; a changed, added or removed file rebuilds it.
- A file that cannot be an image (decode.py) is left out, its row never written: the caller
  warns naming it. Its subset is otherwise the one Keras gives.
"""
from __future__ import annotations

import concurrent.futures as futures
import hashlib
import json
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import _core
from .decode import Recipe, decode_many

#: Files per block a worker decodes (about 6 MB of 180x180 RGB rows).
BLOCK = 64
FORMAT_VERSION = 1

__all__ = ["Subset", "Built", "BLOCK", "cache_key", "build_or_reuse", "write_images", "read_meta", "decode_workers"]


class Subset:
    """Files of one subset: ``name`` ('train' or 'valid': the datasets x_<name>, y_<name>), ``paths``
    and ``labels`` (int array or None)."""

    def __init__(self, name: str, paths: Sequence[str], labels: Optional[np.ndarray]) -> None:
        self.name, self.paths, self.labels = name, list(paths), labels


class Built:
    """What an images file holds: its path, the meta dict, and whether it was reused."""

    def __init__(self, path: str, meta: dict, reused: bool) -> None:
        self.path, self.meta, self.reused = path, meta, reused


def decode_workers() -> int:
    """Worker threads for decoding: hpcnn's CPU thread count (the job's CPUs, threads.py)."""
    return max(1, int(_core.get_num_threads()))


def _recipe_dict(recipe: Recipe) -> dict:
    return {"size": list(recipe.size), "channels": recipe.channels, "interpolation": recipe.interpolation,
            "aspect": recipe.aspect}


def cache_key(subsets: Sequence[Subset], recipe: Recipe, class_names: Optional[Sequence[str]]) -> str:
    """SHA-256 of the listing (paths in order, labels), each file's size and mtime, the recipe."""
    h = hashlib.sha256()
    h.update(json.dumps({"version": FORMAT_VERSION, "recipe": _recipe_dict(recipe),
                         "class_names": list(class_names) if class_names is not None else None}).encode())
    for s in subsets:
        h.update(f"\0subset {s.name} {len(s.paths)}\0".encode())
        if s.labels is not None:
            h.update(np.ascontiguousarray(s.labels, dtype=np.int64).tobytes())
        for p in s.paths:
            try:
                st = os.stat(p)
                stamp = f"{st.st_size} {st.st_mtime_ns}"
            except OSError as e:
                stamp = f"unreadable {e.errno}"
            h.update(os.fsencode(p) + f"\0{stamp}\0".encode())
    return h.hexdigest()


def read_meta(path: str) -> dict:
    """The ``image_meta`` JSON of an images file (ValueError when it has none)."""
    raw = _core.data.read_dataset(path, "image_meta")
    return json.loads(bytes(np.asarray(raw, dtype=np.uint8)).decode("utf-8"))


def _blocks(paths: Sequence[str], recipe: Recipe, workers: int):
    """(rows, problems) per block of BLOCK files, in order, decoded on `workers` threads (Pillow's
    decoders and the C++ resize run without the GIL), at most two blocks per worker in flight."""
    blocks = [paths[i:i + BLOCK] for i in range(0, len(paths), BLOCK)]
    if workers <= 1 or len(blocks) <= 1:
        for b in blocks:
            yield decode_many(b, recipe)
        return
    with futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hpcnn-decode") as pool:
        pending: List[futures.Future] = []
        nxt = 0
        try:
            while nxt < len(blocks) or pending:
                while nxt < len(blocks) and len(pending) < 2 * workers:  # bounded memory
                    pending.append(pool.submit(decode_many, blocks[nxt], recipe))
                    nxt += 1
                yield pending.pop(0).result()
        finally:
            for f in pending:
                f.cancel()


def write_images(out: str, subsets: Sequence[Subset], recipe: Recipe, class_names: Optional[Sequence[str]],
                 extra_meta: Optional[dict] = None, progress: Optional[Callable[[int], None]] = None,
                 workers: Optional[int] = None, compression: str = "none", level: int = 1) -> dict:
    """Decodes every subset's files into `out` (atomically) and returns the meta written.
    Uncompressed by default: decoded photos shrink by about a fifth with gzip, which halved the
    conversion's speed and costs inflating at every epoch that streams from the file.
    `progress(files_done)` is called after each block. A refused file is listed in
    meta['refused'] as [path, reason]; a subset with no usable file is a ValueError naming it."""
    workers = decode_workers() if workers is None else max(1, int(workers))
    writer = _core.data.StreamWriter(os.fspath(out), compression, int(level))
    meta: Dict = {"format": "hpcnn images", "version": FORMAT_VERSION, "recipe": _recipe_dict(recipe),
                  "class_names": list(class_names) if class_names is not None else None,
                  "file_paths": {}, "refused": []}
    meta.update(extra_meta or {})
    done = 0
    try:
        for s in subsets:
            n = len(s.paths)
            x_name = f"x_{s.name}"
            writer.create(x_name, [n] + list(recipe.row_shape()), np.dtype(np.uint8), 0)
            chunk = int(writer.chunk_rows(x_name))
            kept: List[int] = []
            buffer: List[np.ndarray] = []
            buffered = written = 0
            for b, (rows, problems) in enumerate(_blocks(s.paths, recipe, workers)):
                bad = {i for i, _ in problems}
                for i, reason in problems:
                    meta["refused"].append([s.paths[b * BLOCK + i], reason])
                good = [i for i in range(len(rows)) if i not in bad]
                kept.extend(b * BLOCK + i for i in good)
                if good:
                    buffer.append(rows[good] if bad else rows)
                    buffered += len(good)
                if buffered >= chunk:  # whole chunks out; the rest waits for the next block
                    block = np.concatenate(buffer) if len(buffer) > 1 else buffer[0]
                    whole = (buffered // chunk) * chunk
                    writer.write(x_name, written, np.ascontiguousarray(block[:whole]))
                    written += whole
                    buffer, buffered = ([block[whole:]] if whole < buffered else []), buffered - whole
                done += len(rows)
                if progress is not None:
                    progress(done)
            if buffered:
                block = np.concatenate(buffer) if len(buffer) > 1 else buffer[0]
                writer.write(x_name, written, np.ascontiguousarray(block))
                written += buffered
            if not written:
                raise ValueError(f"no usable image in the {'training' if s.name == 'train' else 'validation'} "
                                 f"files ({n} listed, all refused; the first: "
                                 f"{meta['refused'][-n][0]}: {meta['refused'][-n][1]})" if n else
                                 f"no image files for the {s.name} subset")
            if written < n:
                writer.set_rows(x_name, written)
            meta["file_paths"][s.name] = [s.paths[i] for i in kept]
            if s.labels is not None:
                y = np.ascontiguousarray(np.asarray(s.labels)[kept], dtype=np.int32)
                writer.create(f"y_{s.name}", [len(y)], np.dtype(np.int32), 0)
                writer.write(f"y_{s.name}", 0, y)
        blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
        writer.create("image_meta", [len(blob)], np.dtype(np.uint8), 0)
        writer.write("image_meta", 0, np.ascontiguousarray(blob))
        writer.commit()
    finally:
        writer.close()
    return meta


def build_or_reuse(out: str, subsets: Sequence[Subset], recipe: Recipe, class_names: Optional[Sequence[str]],
                   progress_factory: Optional[Callable[[int], Callable[[int], None]]] = None) -> Built:
    """`out` reused when its key matches the folder now, else (re)written (write_images)."""
    key = cache_key(subsets, recipe, class_names)
    if os.path.exists(out):
        try:
            meta = read_meta(out)
            if meta.get("key") == key:
                return Built(out, meta, True)
        except (ValueError, OSError, RuntimeError, UnicodeDecodeError, json.JSONDecodeError):
            pass  # not a readable cache: written again
    total = sum(len(s.paths) for s in subsets)
    progress = progress_factory(total) if progress_factory is not None else None
    meta = write_images(out, subsets, recipe, class_names, {"key": key}, progress)
    return Built(out, meta, False)
