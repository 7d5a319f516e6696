"""HDF5 datasets for training: a native, shuffled, prefetched loader and an atomic writer.

    ds = hpcnn.data.HDF5Dataset('dataset_cifar10.hdf5', x='x_train', y='y_train',
                                batch_size=250, one_hot=10)
    model.fit(ds, epochs=10)

The reading, decompression, shuffling and decoding (uint8 -> float32, scaling, one-hot) run in
C++ on hpcnn's threads, off the GIL; docs/data.md has the design.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core, image_folders, paths, validation
from .image_folders import AUTOTUNE, ImageDataset
from .image_folders.tf_data import (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Cardinality, cardinality,
                                    experimental)

__all__ = ["HDF5Dataset", "write_hdf5", "read_dataset", "dataset_info", "image_dataset_from_directory", "ImageDataset",
           "AUTOTUNE", "DEFAULT_MEMORY_BUDGET", "SHUFFLE_MODES", "Cardinality", "cardinality", "experimental",
           "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY"]

#: Default byte budget for cache='auto': a dataset whose stored bytes fit is cached in memory
#: (exact full shuffle); a larger one is streamed through windows of chunks within this budget.
DEFAULT_MEMORY_BUDGET = 1 << 30

#: What ``HDF5Dataset(shuffle=...)`` accepts besides True and False (docs/data.md, "Shuffling").
SHUFFLE_MODES = ("rows", "chunk_groups")

_C = _core.data
_C_dist = _core.distribute


def _scale_shift(scale):
    """(mean, std) arrays for a (mean, std) pair, else (None, factor)."""
    if isinstance(scale, (tuple, list)):
        if len(scale) != 2:
            raise ValueError(f"scale must be a number or a (mean, std) pair, got {scale!r}")
        mean = np.atleast_1d(np.asarray(scale[0], dtype=np.float64))
        std = np.atleast_1d(np.asarray(scale[1], dtype=np.float64))
        if mean.ndim != 1 or std.ndim != 1 or (mean.size != std.size and 1 not in (mean.size, std.size)):
            raise ValueError(f"scale=(mean, std): mean {mean.shape} and std {std.shape} must be scalars or "
                             "equal-length per-channel sequences")
        mean, std = np.broadcast_arrays(mean, std)
        if np.any(std <= 0):
            raise ValueError(f"scale=(mean, std): std must be > 0, got {std.tolist()}")
        return mean, std
    try:
        return None, float(scale)
    except (TypeError, ValueError):
        raise ValueError(f"scale must be a number or a (mean, std) pair, got {scale!r}") from None


def _check_path(path, caller: str) -> str:
    """The file to open: `path`, or for a bare name not in the working directory, that name in the
    data directory (where `hpcnn convert ... --download` writes), as ``datasets.*.load_data`` finds
    its files. A MissingFile (FileNotFoundError) saying where it looked and what is close, else."""
    found = paths.resolve_data_file(path)
    if not os.path.exists(found):
        raise paths.missing_file(caller, found, data_too=True)
    return found


def _value_range(scale: Sequence[float], shift: Sequence[float]) -> Tuple[float, float]:
    """(lowest, highest) of stored bytes 0..255 after x * scale + shift, over the channels."""
    s, b = np.broadcast_arrays(np.asarray(scale, np.float64), np.asarray(shift, np.float64))
    ends = np.concatenate([b, 255.0 * s + b])
    return float(ends.min()), float(ends.max())


class HDF5Dataset:
    """Batches of (x, y) from datasets of an HDF5 file, for ``model.fit``/``evaluate``/``predict``.

    Parameters
    ----------
    path : str
        The HDF5 file. A bare name that is not in the working directory is looked for in the data
        directory ($HPCNN_DATA_DIR, default ~/.hpcnn/datasets), where ``hpcnn convert ...
        --download`` writes; a missing file's FileNotFoundError says where it looked and lists
        close matches.
    x : str
        The images' dataset (e.g. ``'x_train'``, ``'x_valid'``): uint8 or float32, shape (N,H,W,C),
        (N,H,W) or (N,F).
    y : str or None
        The labels' dataset (e.g. ``'y_train'``, ``'y_valid'``): any integer type, shape (N,) or
        (N,1); None for images only (predict).
    batch_size : int
        Rows per batch (the last one may be smaller: ``drop_remainder``).
    shuffle : bool, 'rows' or 'chunk_groups'
        A new order every epoch, a pure function of (seed, epoch) and the file:

        - ``'rows'``: the chunk order permuted, then the rows permuted within windows of chunks
          of ``memory_budget``: an exact, uniform permutation of all rows when the dataset is
          cached in memory. In a multi-process data-parallel run every rank reads every window
          (the whole file), once if cached, every epoch if streamed.
        - ``'chunk_groups'``: every global batch is split into 64 lanes; each lane draws its rows
          from its own group of ~1/64 of the chunks (the chunk order permuted, then cut into 64
          groups), shuffled within windows of chunks. Each rank of a data-parallel run reads only
          its lanes' chunks: ~1/N of the file per epoch on N ranks. The global batches do not
          depend on N.
        - ``True`` (default): ``'rows'`` when the stored bytes fit ``memory_budget`` (or
          ``cache='memory'``): read once, the exact shuffle costs nothing; else (streamed)
          ``'chunk_groups'``, where the bytes read per epoch matter. A rule on the file and the
          arguments only, the same on every rank.
        - ``False``: file order.
        ``shuffle_mode`` says which one the dataset uses.
    seed : int or None
        None draws one at construction (epochs still differ from each other).
    scale : float or (mean, std)
        A float multiplies the stored values (default ``'auto'``: 1/255 for uint8, so images come
        in [0, 1]; 1 for float32). A pair of per-channel sequences normalizes:
        ``(x * (1/255 for uint8) - mean) / std``. A model that begins with ``Rescaling(1./255)``
        (TensorFlow's and Keras' image tutorials) wants the 0-255 values: give ``scale=1.0``
        (fit warns when it sees both scalings).
    one_hot : None, int or True
        None: y is int32 class indices (B,). An int: y is float32 one-hot (B, one_hot). True:
        one-hot over num_classes (or max label + 1).
    num_classes : int or None
        Checks every label is in [0, num_classes); default: one_hot, else max label + 1.
    drop_remainder : bool
        Drop the last partial batch (default: deliver it).
    cache : 'auto' | 'memory' | 'none'
        'memory' keeps the stored bytes in RAM after the first epoch (with ``shuffle=True``, the
        exact full row shuffle); 'none' streams from the file every epoch through windows of
        chunks within ``memory_budget`` (with ``shuffle=True``, the chunk-group shuffle); 'auto'
        picks 'memory' when the dataset's stored bytes fit ``memory_budget``.
    memory_budget : int
        Bytes per process (default 1 GiB). It also shapes the orders (the rows shuffle's window,
        the chunk groups' lanes and windows), so every rank of a data-parallel run must give the
        same value (as it must give the same seed).
    prefetch : int
        Batches prepared ahead by the background producer (default 4).

    Attributes
    ----------
    value_range : tuple of two floats, or None
        (lowest, highest) value x can take after ``scale``, where the stored type bounds it
        (uint8: 0 and 255, scaled per channel); None for float data.
    """

    def __init__(self, path, x: str = "x_train", y: Optional[str] = "y_train", batch_size: int = 32,
                 shuffle: Union[bool, str] = True, seed: Optional[int] = None, scale: Union[float, Tuple, str, None] = "auto",
                 one_hot: Optional[int] = None, num_classes: Optional[int] = None, drop_remainder: bool = False,
                 cache: str = "auto", memory_budget: int = DEFAULT_MEMORY_BUDGET, prefetch: int = 4):
        path = _check_path(path, "HDF5Dataset")
        where = "HDF5Dataset"
        if not isinstance(x, str) or not x:
            raise ValueError(f"{where}: x must be the name of a dataset in the file, got {x!r}")
        if y is not None and (not isinstance(y, str) or not y):
            raise ValueError(f"{where}: y must be the name of a dataset in the file or None, got {y!r}")
        batch_size = validation.integer(batch_size, "batch_size", where)
        prefetch = validation.integer(prefetch, "prefetch", where)
        if isinstance(shuffle, str):
            validation.choice(shuffle, "shuffle", (True, False) + SHUFFLE_MODES, where)
            mode = shuffle
        else:
            mode = "auto" if validation.boolean(shuffle, "shuffle", where) else "off"
        drop_remainder = validation.boolean(drop_remainder, "drop_remainder", where)
        validation.choice(cache, "cache", ("auto", "memory", "none"), where)
        memory_budget = validation.integer(memory_budget, "memory_budget", where, maximum=None)
        seed = validation.integer(seed, "seed", where, minimum=0, maximum=2**64 - 1, allow_none=True)
        num_classes = validation.integer(num_classes, "num_classes", where, allow_none=True)
        if one_hot is False:
            one_hot = None
        if one_hot is True:  # one-hot over num_classes, or over the classes found in the labels
            one_hot = num_classes if num_classes is not None else 0
        elif one_hot is not None and not (validation.is_integer(one_hot) and 1 <= one_hot <= validation.INT32_MAX):
            raise ValueError(f"one_hot must be None, True or a number of classes >= 1, got {one_hot!r}")
        if num_classes is None:
            num_classes = one_hot
        elif one_hot and int(one_hot) != int(num_classes):
            raise ValueError(f"one_hot={one_hot} and num_classes={num_classes} disagree")
        info = _C.dataset_info(path, x)
        is_u8 = info["dtype"] == "uint8"
        base = 1.0 / 255.0 if is_u8 else 1.0
        if isinstance(scale, str) and scale == "auto":
            scale = base
        if scale is None:
            scale = 1.0
        mean, s = _scale_shift(scale)
        if mean is not None:
            std = s
            scale_l = (base / std).tolist()
            shift_l = (-mean / std).tolist()
        else:
            scale_l, shift_l = [s], [0.0]
        self._path = path
        self._names = (x, y)
        self._prefetch = int(prefetch)
        self._epoch = 0
        self._loader = _C.Loader(path, x, y or "", int(batch_size), mode, None if seed is None else int(seed),
                                 scale_l, shift_l, int(num_classes or 0), one_hot is not None,
                                 bool(drop_remainder), str(cache), int(memory_budget))
        self.batch_size = int(batch_size)
        self.shuffle = mode != "off"
        self.value_range = _value_range(scale_l, shift_l) if is_u8 else None

    # ---------------------------------------------------------------- Keras Sequence protocol
    def __len__(self) -> int:
        """Batches per epoch."""
        return len(self._live())

    def __getitem__(self, i: int):
        """Batch i of the current epoch (random access; ``epoch_batches`` is the fast path)."""
        if not validation.is_integer(i):
            raise TypeError(f"HDF5Dataset indices must be integers, got {type(i).__name__}")
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"batch index {i} out of range for {n} batches")
        return self._live().batch(self._epoch, int(i))

    def on_epoch_end(self) -> None:
        """Advance to the next epoch's order (the Keras Sequence hook)."""
        self._epoch += 1

    def __iter__(self):
        """Iterates over one epoch (the current one) with prefetching, then advances the epoch."""
        epoch = self._epoch
        yield from self.epoch_batches(epoch)
        if self._epoch == epoch:
            self._epoch += 1

    # ---------------------------------------------------------------- the fast path
    def epoch_batches(self, epoch: int, device: str = "cpu") -> Iterator[Tuple[np.ndarray, Optional[np.ndarray]]]:
        """Iterator of (x, y) NumPy batches for `epoch`, produced in C++ in the background.

        x is float32 C-contiguous (B, H, W, C) / (B, H, W, 1) / (B, F); y int32 (B,) or float32
        (B, classes) when one_hot; None without labels. Arrays stay valid as long as referenced
        (their buffers are recycled only when released). Pinned host memory when `device` is a
        usable GPU. Leaving the loop early (break, exception, Ctrl-C) stops the producer.
        """
        validation.integer(epoch, "epoch", "epoch_batches", minimum=0, maximum=None)
        if not isinstance(device, str):
            raise ValueError(f"epoch_batches: device must be a string such as 'cpu' or 'gpu:0', got {device!r}")
        it = self._live().epoch(int(epoch), self._prefetch, str(device))
        try:
            for batch in it:
                yield batch
        finally:
            it.close()

    def model_batches(self, epoch: int, device: str, first_batch: int = 0,
                      shard: Optional[Tuple[int, int]] = None) -> Iterator[Tuple[Any, ...]]:
        """(x, y, decode) batches for a model on `device` (what fit, evaluate and predict use). On
        a GPU a uint8 dataset's x comes as stored, with decode = (scale, shift) per channel, and
        the model decodes it on the device: a quarter of float32's bytes cross PCIe. Elsewhere x
        comes decoded to float32 on the loader's threads (overlapped with training), decode None.
        `first_batch`: the epoch's batches from that one on (a run resumed mid-epoch; the ones
        before are not read). `shard` = (rank, ranks): a data-parallel process's share of every
        batch (only its rows are read), as (x, y, decode, first_row, global_rows): rows
        [first_row, first_row + len(x)) of a global batch of global_rows rows."""
        if int(epoch) < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        stored_u8 = str(device) != "cpu"
        rank, ranks = shard if shard is not None else (0, 1)
        loader = self._live()
        it = loader.epoch(int(epoch), self._prefetch, str(device), stored_u8, int(first_batch), int(rank), int(ranks))
        try:
            for i, batch in enumerate(it, start=int(first_batch)):
                out = batch if stored_u8 else (batch[0], batch[1], None)
                if shard is not None:
                    rows = int(loader.batch_rows(i))
                    out = tuple(out) + (int(_C_dist.share_range(rows, ranks, rank)[0]), rows)
                yield out
        finally:
            it.close()

    # ---------------------------------------------------------------- description
    @property
    def num_rows(self) -> int:
        return self._live().num_rows

    @property
    def x_shape(self) -> tuple:
        """Shape of one x row as delivered ((H, W, C), (H, W, 1) or (F,))."""
        return tuple(self._live().row_shape)

    @property
    def num_classes(self) -> Optional[int]:
        n = self._live().num_classes
        return n if n > 0 else None

    @property
    def path(self) -> str:
        return self._path

    @property
    def seed(self) -> int:
        """The shuffle seed: the one given, or the one drawn at construction (seed=None). Each
        epoch's order is a pure function of (seed, epoch); BackupAndRestore saves this seed and
        sets it again when it resumes training in a new process (set_seed)."""
        return int(self._live().seed)

    def set_seed(self, seed: int) -> None:
        """A new shuffle seed (a resumed training's, or rank 0's in a data-parallel run)."""
        self._live().set_seed(int(seed))

    @property
    def shuffle_mode(self) -> str:
        """The order's kind: 'rows', 'chunk_groups' or 'off' (shuffle=True resolved; see the
        ``shuffle`` argument). Every rank of a data-parallel run must use the same one, and a
        backup resumes only with the mode it was written with."""
        return str(self._live().shuffle_mode)

    @property
    def in_memory(self) -> bool:
        """Whether rows are cached in memory across epochs (cache='memory' or 'auto' that fits)."""
        return self._live().in_memory

    @property
    def info(self) -> dict:
        """Stored layout: {'x': {...shape, dtype, chunks, compression...}, 'y': {...} or None}."""
        return {"x": self._live().x_info, "y": self._live().y_info}

    @property
    def stats(self) -> dict:
        """Counters: row blocks read from the file so far, the bytes read for them (as stored:
        compressed) and inflated (decoded), the part of those the background warm-ups read (each
        epoch's first windows, loaded at the end of the epoch before: ``settle()`` waits for one),
        peak bytes cached, window size and lanes."""
        l = self._live()
        return {"blocks_read": l.blocks_read, "num_blocks": l.num_blocks, "bytes_read": l.bytes_read,
                "bytes_inflated": l.bytes_inflated, "warm_blocks_read": l.warm_blocks_read,
                "warm_bytes_read": l.warm_bytes_read, "warm_bytes_inflated": l.warm_bytes_inflated,
                "peak_cached_bytes": l.peak_cached_bytes,
                "io_seconds": l.io_seconds, "inflate_seconds": l.inflate_seconds, "scatter_seconds": l.scatter_seconds, "decode_seconds": l.decode_seconds,
                "block_rows": l.block_rows, "window_blocks": l.window_blocks, "lanes": l.lanes, "raw_chunk_path": l.raw_chunk_path}

    def settle(self) -> None:
        """Waits for the background load of an epoch's first windows, if one is running, so that
        ``stats`` stand still (benchmarks and tests of the bytes read)."""
        self._live().wait_warm_up()

    def __repr__(self) -> str:
        if self._loader is None:
            return f"HDF5Dataset('{self._path}', closed)"
        return repr(self._loader)

    # ---------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Release the file and the cached rows (iterators already running keep theirs)."""
        self._loader = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _live(self):
        if self._loader is None:
            raise ValueError(f"HDF5Dataset('{self._path}') is closed")
        return self._loader


def write_hdf5(path, arrays: Dict[str, np.ndarray], chunk_rows: Optional[int] = None,
               compression: Optional[str] = "gzip", level: int = 4, shuffle: bool = True) -> None:
    """Write NumPy arrays as datasets of a new HDF5 file, atomically (temp file + rename).

    chunk_rows=None picks whole rows, about 1 MiB per chunk (e.g. 341 CIFAR-10 images);
    compression 'gzip' (level 0..9, with the byte-shuffle filter for multi-byte types) or None
    (contiguous unless chunk_rows is given). Gzip chunks are compressed in parallel on hpcnn's
    threads (libdeflate when available) and stored with HDF5's raw-chunk API; any HDF5 reader
    (h5py included) reads them. An existing file at `path` is replaced.
    """
    path = os.fspath(path)
    validation.output_directory(path, "write_hdf5")
    if not isinstance(arrays, dict) or not arrays:
        raise ValueError("write_hdf5: arrays must be a non-empty dict of name -> array")
    if compression in (None, "none", False):
        compression = "none"
    elif compression in ("gzip", "deflate", "zlib"):
        compression = "gzip"
    else:
        raise ValueError(f"write_hdf5: compression must be 'gzip' or None, got {compression!r}")
    validation.integer(chunk_rows, "chunk_rows", "write_hdf5", maximum=None, allow_none=True)
    validation.integer(level, "level", "write_hdf5", minimum=0, maximum=9)
    shuffle = validation.boolean(shuffle, "shuffle", "write_hdf5")
    items = []
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype == np.bool_:
            a = a.astype(np.uint8)
        items.append((str(name), a))
    _C.write_hdf5(path, items, int(chunk_rows or 0), compression, int(level), bool(shuffle))


def read_dataset(path, name: str) -> np.ndarray:
    """A whole dataset as a NumPy array: uint8/float32 as stored, other integers as int64.

    Read with hpcnn's reader (parallel inflate); meant for datasets that fit in memory.
    """
    return _C.read_dataset(_check_path(path, "read_dataset"), name)


def dataset_info(path, name: str) -> dict:
    """Shape, dtype, chunks, compression and rows of one dataset (read with the C API)."""
    return dict(_C.dataset_info(_check_path(path, "dataset_info"), name))


def image_dataset_from_directory(directory, labels="inferred", label_mode: Optional[str] = "int",
                                 class_names=None, color_mode: str = "rgb", batch_size: Optional[int] = 32,
                                 image_size=(256, 256), shuffle: bool = True, seed: Optional[int] = None,
                                 validation_split: Optional[float] = None, subset: Optional[str] = None,
                                 interpolation: str = "bilinear", follow_links: bool = False,
                                 crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
                                 data_format: Optional[str] = None, format: str = "tf", verbose: bool = True,
                                 cache_dir: Optional[str] = None):
    """A dataset of the images in a folder of class folders, as Keras 3's function of that name.

    The same files in the same subset and order as Keras for the same seed (its listing, seeded
    shuffle and split), decoded once with Pillow and resized as TensorFlow resizes (no
    antialiasing) into an HDF5 file that is reused while the folder is unchanged; then read by
    HDF5Dataset's native loader (fit, evaluate, predict, the augmentation layers, MirroredStrategy
    and MPI sharding, BackupAndRestore). Images come as float32 0-255 (as Keras'), labels as Keras'
    ``label_mode`` says. docs/data.md, "A folder of images", has the details and the differences.

    Parameters
    ----------
    directory : str or path
        The folder: one sub-folder of images per class (labels='inferred'), or any layout (labels
        given or None). Files ending in .bmp, .gif, .jpeg, .jpg, .png (any case) are listed.
    labels : 'inferred', list of int, or None
        'inferred': from the class folders (sorted names); a list: one label per file, in the
        sorted order of the files' paths; None: no labels.
    label_mode : 'int', 'categorical', 'binary' or None
        int32 class indices (batch,), float32 one-hot (batch, classes), float32 (batch, 1) for two
        classes, or no labels.
    class_names : list of str or None
        With labels='inferred': the class folders to use, in this order.
    color_mode : 'rgb', 'grayscale' or 'rgba'
        3, 1 or 4 channels.
    batch_size : int or None
        Images per batch; None: one image at a time (``.batch(n)`` batches again).
    image_size : (int, int)
        (height, width) every image is resized to.
    shuffle : bool
        Shuffle the files before the split (seeded, as Keras) and the rows every epoch.
    seed : int or None
        The shuffle seed (required with validation_split and shuffle); None draws one.
    validation_split : float or None
        The fraction (the last files after the shuffle) kept for validation.
    subset : 'training', 'validation', 'both' or None
        Which part of the split; 'both' returns [training, validation].
    interpolation : str
        'bilinear' or 'nearest' (TensorFlow's, half-pixel centres); Keras' other names are refused.
    follow_links : bool
        Walk into sub-folders that are symbolic links.
    crop_to_aspect_ratio : bool
        Crop the centre to image_size's aspect ratio before resizing (Keras' smart_resize).
    pad_to_aspect_ratio : bool
        Resize into image_size keeping the aspect ratio, padded with zeros.
    data_format : None or 'channels_last'
        hpcnn's images are channels_last.
    format : 'tf'
        Accepted as Keras accepts it; the dataset is hpcnn's either way.
    verbose : bool
        Print Keras' "Found N files belonging to K classes." and the decoding progress.
    cache_dir : str or None
        Where the decoded images' file goes (hpcnn only): default <directory>/.hpcnn_cache when
        writable, else <data directory>/image_cache.

    Returns
    -------
    ImageDataset, or [training, validation] for subset='both'
        With ``class_names``, ``file_paths`` (Keras'), ``refused_files`` and ``cache_file``.
    """
    return image_folders.from_directory(
        HDF5Dataset, directory, labels=labels, label_mode=label_mode, class_names=class_names, color_mode=color_mode,
        batch_size=batch_size, image_size=image_size, shuffle=shuffle, seed=seed, validation_split=validation_split,
        subset=subset, interpolation=interpolation, follow_links=follow_links,
        crop_to_aspect_ratio=crop_to_aspect_ratio, pad_to_aspect_ratio=pad_to_aspect_ratio, data_format=data_format,
        format=format, verbose=verbose, cache_dir=cache_dir)

