"""What ``image_dataset_from_directory`` returns: batches of a folder's images, trained natively, with
the tf.data methods the tutorials call on it (docs/data.md, "A folder of images").

``ImageDataset`` wraps the native HDF5 dataset of its decoded images (cache.py): ``fit``,
``evaluate`` and ``predict`` read it through its ``model_batches`` (C++ reading, shuffling and
prefetching, MirroredStrategy/MPI sharding, BackupAndRestore's resume to the batch), and it adds
Keras' ``class_names`` and ``file_paths`` and the tf.data idioms:

- ``.cache()``, ``.prefetch(n)``: the dataset itself (decoded once into its file; the file's bytes
  kept in memory after the first epoch when they fit 1 GiB; 4 batches prepared ahead in C++).
- ``.shuffle(n)``: a dataset whose rows are shuffled every epoch (a full shuffle, at least as random
  as tf.data's buffer of n elements).
- ``.take(k)``, ``.skip(k)``: the first k batches of every epoch / all but the first k.
- iteration: (images, labels) NumPy batches (float32 0-255 images; images only when label_mode=None),
  arrays with a ``.numpy()`` method so that the tutorials' ``images[i].numpy()`` reads.
- ``.map(fn)``: fn applied to every batch in Python (``MappedDataset``); a ``Rescaling`` layer in it
  computes on the batch (as in Keras), nothing dropped.
- ``.unbatch()`` and ``.batch(n)``; ``len()`` (batches per epoch).
- Anything else of tf.data (``repeat``, ``filter``, ``interleave``, ...) is refused with what to do.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

#: tf.data.AUTOTUNE's value: ``.prefetch(AUTOTUNE)`` (hpcnn prefetches in C++ whatever is given).
AUTOTUNE = -1

__all__ = ["AUTOTUNE", "Tensor", "ImageDataset", "MappedDataset", "UnbatchedDataset"]

_REFUSED = {
    "repeat": "fit runs the epochs itself: drop .repeat() and pass epochs=... (steps_per_epoch limits an epoch)",
    "filter": "move the files you do not want out of the folder (or list them with labels=[...]) and load it again",
    "flat_map": "write a Python generator over the batches and give it to fit with steps_per_epoch=...",
    "interleave": "write a Python generator over the batches and give it to fit with steps_per_epoch=...",
    "window": "write a Python generator over the batches and give it to fit with steps_per_epoch=...",
    "zip": "iterate the datasets side by side with Python's zip(...) and write a generator for fit",
    "concatenate": "put the images in one folder (or use itertools.chain in a generator for fit)",
    "padded_batch": "images are resized to image_size when loaded: use .batch(n)",
    "rebatch": "load the folder again with batch_size=...",
    "shard": "MirroredStrategy and MPI ranks shard an image dataset by themselves: give fit the whole dataset",
    "with_options": "hpcnn's loader has no tf.data options: its threads are hpcnn.set_num_threads(...)",
    "apply": "call the transformation on the dataset directly",
    "enumerate": "use Python's enumerate(dataset)",
    "snapshot": "the images are decoded once into an HDF5 file already (ds.cache_file)",
}


class Tensor(np.ndarray):
    """A NumPy array with TensorFlow's ``.numpy()`` (the plain array), so that a tutorial's
    ``images[i].numpy().astype("uint8")`` runs unchanged."""

    def numpy(self) -> np.ndarray:
        """The values as a plain NumPy array."""
        return np.asarray(self).view(np.ndarray)


def _tensor(a: Optional[np.ndarray]) -> Any:
    return None if a is None else np.asarray(a).view(Tensor)


class NumpyIterator:
    """What ``as_numpy_iterator()`` gives: an iterator of the batches with tf.data's ``next()`` too
    (the transfer-learning tutorial's ``test_dataset.as_numpy_iterator().next()``)."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self._batches = batches

    def __iter__(self) -> "NumpyIterator":
        return self

    def __next__(self) -> Any:
        return next(self._batches)

    def next(self) -> Any:
        """The next batch (tf.data's spelling of ``next(it)``)."""
        return next(self._batches)


class _Refusals:
    """The tf.data methods that cannot mean here what they mean there: each refused with advice."""

    def __getattr__(self, name: str) -> Any:
        if name in _REFUSED:
            def refused(*args: Any, **kwargs: Any) -> Any:
                raise NotImplementedError(f"{type(self).__name__}.{name}() (tf.data) is not supported: "
                                          f"{_REFUSED[name]}")
            return refused
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def as_numpy_iterator(self) -> NumpyIterator:
        """The batches as NumPy arrays (tf.data's name for iterating), with tf.data's ``next()``."""
        return NumpyIterator(iter(self))  # type: ignore[call-overload]

    def cardinality(self) -> int:
        """Batches per epoch (tf.data's name for len())."""
        return len(self)  # type: ignore[arg-type]


class ImageDataset(_Refusals):
    """Batches of a folder's decoded images, read natively (see the module's text).

    Parameters
    ----------
    open_rows : callable
        ``open_rows(shuffle=..., batch_size=..., seed=...)`` opens the native dataset of the rows.
    label_mode : str or None
        'int', 'categorical', 'binary' or None (Keras' meanings).
    class_names : list of str or None
        The class names (Keras' ``class_names``).
    file_paths : list of str
        Keras' ``file_paths``: the files in the order Keras lists them (shuffled by the seed when
        ``shuffle``; a shuffled dataset's batches come in a new order every epoch, in Keras too).
    shuffle : bool
        Rows shuffled every epoch.
    batch_size : int
        Rows per batch.
    seed : int or None
        The shuffle seed.
    refused : list
        ``[path, reason]`` of the files left out of this subset.
    """

    def __init__(self, open_rows: Callable[..., Any], label_mode: Optional[str], class_names: Optional[List[str]],
                 file_paths: List[str], shuffle: bool, batch_size: int, seed: Optional[int],
                 refused: List[List[str]]) -> None:
        self._open_rows = open_rows
        self.label_mode = label_mode
        self.class_names = class_names
        self.file_paths = file_paths
        self.refused_files = refused
        self._args: Dict[str, Any] = {"shuffle": bool(shuffle), "batch_size": int(batch_size), "seed": seed}
        self._rows = open_rows(**self._args)
        self._range: Tuple[int, Optional[int]] = (0, None)

    # -------------------------------------------------------------- what fit/evaluate/predict read
    def _variant(self, **changes: Any) -> "ImageDataset":
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        args = dict(self._args, **{k: v for k, v in changes.items() if k in self._args})
        if args != self._args:
            out._args = args
            out._rows = self._open_rows(**args)
        if "range" in changes:
            out._range = changes["range"]
        return out

    def _batches(self) -> range:
        start, stop = self._range
        n = len(self._rows)
        return range(min(start, n), n if stop is None else min(stop, n))

    def __len__(self) -> int:
        """Batches per epoch."""
        return len(self._batches())

    def _labels(self, y: Any) -> Any:
        if y is None or self.label_mode != "binary":
            return y
        return np.asarray(y, dtype=np.float32).reshape(-1, 1)  # Keras: float32 (batch, 1)

    def model_batches(self, epoch: int, device: str, first_batch: int = 0,
                      shard: Optional[Tuple[int, int]] = None) -> Iterator[Tuple[Any, ...]]:
        """The native batches for a model (``HDF5Dataset.model_batches``), within take/skip."""
        r = self._batches()
        it = self._rows.model_batches(epoch, device, first_batch=r.start + first_batch, shard=shard)
        try:
            for item in itertools.islice(it, max(len(r) - first_batch, 0)):
                yield (item[0], self._labels(item[1])) + tuple(item[2:])
        finally:
            it.close()

    def epoch_batches(self, epoch: int, device: str = "cpu") -> Iterator[Tuple[Any, Any]]:
        """(images, labels) NumPy batches of `epoch` (labels None with label_mode=None)."""
        r = self._batches()
        it = self._rows.epoch_batches(epoch, device)
        try:
            for x, y in itertools.islice(it, r.start, r.stop):
                yield _tensor(x), _tensor(self._labels(y))
        finally:
            it.close()

    def __iter__(self) -> Iterator[Any]:
        """One epoch of batches (the next epoch's order each time it is run to its end): (images,
        labels), or images alone when the dataset has no labels, as Keras' dataset yields them."""
        r = self._batches()
        it = iter(self._rows)
        try:
            for x, y in itertools.islice(it, r.start, r.stop):
                x, y = _tensor(x), _tensor(self._labels(y))
                yield x if self.label_mode is None else (x, y)
        finally:
            it.close()

    @property
    def num_rows(self) -> int:
        """Images per epoch."""
        r = self._batches()
        bs = self.batch_size
        return min(self._rows.num_rows - r.start * bs, len(r) * bs) if len(r) else 0

    @property
    def x_shape(self) -> tuple:
        """One image's shape (height, width, channels)."""
        return self._rows.x_shape

    @property
    def batch_size(self) -> int:
        return int(self._args["batch_size"])

    @property
    def shuffle_mode(self) -> str:
        return self._rows.shuffle_mode

    @property
    def seed(self) -> int:
        return self._rows.seed

    def set_seed(self, seed: int) -> None:
        """A new shuffle seed (BackupAndRestore, rank 0's in a data-parallel run)."""
        self._rows.set_seed(seed)

    @property
    def stats(self) -> dict:
        return self._rows.stats

    @property
    def cache_file(self) -> str:
        """The HDF5 file of the decoded images (reused while the folder is unchanged)."""
        return self._rows.path

    def __repr__(self) -> str:
        return (f"<ImageDataset {len(self.file_paths)} images {self.x_shape} from {self.cache_file}, batch_size="
                f"{self.batch_size}, classes={self.class_names}>")

    # -------------------------------------------------------------- tf.data idioms
    def cache(self, filename: str = "") -> "ImageDataset":
        """The dataset itself: its images are decoded once into ``cache_file`` already, and kept in
        memory after the first epoch when they fit. A ``filename`` is refused (the file is
        ``cache_file``)."""
        if filename:
            raise ValueError(f"cache(filename={filename!r}): the decoded images are cached in {self.cache_file} "
                             "already (reused while the folder is unchanged); call .cache() without a file name")
        return self

    def prefetch(self, buffer_size: int = AUTOTUNE) -> "ImageDataset":
        """The dataset itself: batches are prepared ahead in C++ (4), whatever `buffer_size` says."""
        if not isinstance(buffer_size, (int, np.integer)) or buffer_size < -1:
            raise ValueError(f"prefetch: buffer_size must be AUTOTUNE (-1) or a number of batches >= 0, got "
                             f"{buffer_size!r}")
        return self

    def shuffle_rows(self, seed: Optional[int] = None) -> "ImageDataset":
        """The same rows shuffled every epoch (by `seed`, else this dataset's)."""
        return self._variant(shuffle=True, seed=self._args["seed"] if seed is None else int(seed))

    def take(self, count: int) -> "ImageDataset":
        """The first `count` batches of every epoch (all of them for count=-1)."""
        start, stop = self._range
        count = int(count)
        if count < 0:
            return self
        new_stop = start + count if stop is None else min(stop, start + count)
        return self._variant(range=(start, new_stop))

    def skip(self, count: int) -> "ImageDataset":
        """All but the first `count` batches of every epoch."""
        start, stop = self._range
        return self._variant(range=(start + max(int(count), 0), stop))

    def map(self, map_func: Callable[..., Any], num_parallel_calls: Any = None, deterministic: Any = None,
            name: Optional[str] = None) -> "MappedDataset":
        """A dataset whose batches are ``map_func(images, labels)`` (``map_func(images)`` without
        labels), applied in Python to each NumPy batch."""
        return MappedDataset(self, [map_func])

    def unbatch(self) -> "UnbatchedDataset":
        """One (image, label) at a time (for plotting or counting)."""
        return UnbatchedDataset(self)

    def batch(self, batch_size: int, drop_remainder: bool = False, **kwargs: Any) -> "ImageDataset":
        """Refused: batching a batched dataset would batch its batches; load the folder with that
        batch size (or ``.unbatch().batch(n)``)."""
        raise NotImplementedError(f"batch({batch_size}) on a batched dataset would batch its batches; load the "
                                  f"folder with batch_size={batch_size} instead (or .unbatch().batch({batch_size}))")


# tf.data's ds.shuffle(n) is a method; hpcnn's data adapters read ``ds.shuffle`` as a flag (predict
# refuses a shuffled dataset). The attribute is both: a bool that can be called.
class _ShuffleFlag(int):
    """``ds.shuffle``: True/False (whether rows are shuffled every epoch), and callable as tf.data's
    ``ds.shuffle(buffer_size, seed=None, reshuffle_each_iteration=True)``."""

    def __new__(cls, value: bool, reshuffled: Callable[[Optional[int]], Any]) -> "_ShuffleFlag":
        out = super().__new__(cls, bool(value))
        out.reshuffled = reshuffled
        return out

    def __call__(self, buffer_size: int, seed: Optional[int] = None, reshuffle_each_iteration: bool = True,
                 name: Optional[str] = None) -> Any:
        if not reshuffle_each_iteration:
            raise NotImplementedError("shuffle(reshuffle_each_iteration=False) is not supported: hpcnn's loader "
                                      "draws a new order every epoch (shuffle=False when loading keeps file order)")
        if int(buffer_size) < 1 and int(buffer_size) != AUTOTUNE:
            raise ValueError(f"shuffle: buffer_size must be >= 1, got {buffer_size}")
        return self.reshuffled(seed)

    def __repr__(self) -> str:
        return repr(bool(self))


ImageDataset.shuffle = property(  # type: ignore[assignment]
    lambda self: _ShuffleFlag(bool(self._args["shuffle"]), self.shuffle_rows),
    doc="Whether rows are shuffled every epoch; ``ds.shuffle(n)`` is tf.data's method (a full shuffle).")


class MappedDataset(_Refusals):
    """An ImageDataset's batches passed through Python functions (``ds.map(fn)``)."""

    def __init__(self, source: ImageDataset, funcs: List[Callable[..., Any]]) -> None:
        self._source, self._funcs = source, list(funcs)
        self.class_names, self.file_paths = source.class_names, source.file_paths

    def __len__(self) -> int:
        return len(self._source)

    def _apply(self, x: Any, y: Any) -> Tuple[Any, Any]:
        for f in self._funcs:
            if self._source.label_mode is None:
                x = f(x)
            else:
                out = f(x, y)
                if not isinstance(out, (tuple, list)) or len(out) != 2:
                    raise ValueError(f"map: the function must return (images, labels), got {type(out).__name__}")
                x, y = out
        return x, y

    def epoch_batches(self, epoch: int, device: str = "cpu") -> Iterator[Tuple[Any, Any]]:
        """The mapped batches of `epoch`."""
        for x, y in self._source.epoch_batches(epoch, device):
            x, y = self._apply(x, y)
            yield _tensor(np.asarray(x)), (None if y is None else _tensor(np.asarray(y)))

    def __iter__(self) -> Iterator[Any]:
        for x, y in self._source:  # type: ignore[misc]
            x, y = self._apply(x, y) if self._source.label_mode is not None else (self._apply(x, None)[0], None)
            yield _tensor(np.asarray(x)) if y is None else (_tensor(np.asarray(x)), _tensor(np.asarray(y)))

    def map(self, map_func: Callable[..., Any], num_parallel_calls: Any = None, deterministic: Any = None,
            name: Optional[str] = None) -> "MappedDataset":
        return MappedDataset(self._source, self._funcs + [map_func])

    def cache(self, filename: str = "") -> "MappedDataset":
        self._source.cache(filename)
        return self

    def prefetch(self, buffer_size: int = AUTOTUNE) -> "MappedDataset":
        self._source.prefetch(buffer_size)
        return self

    @property
    def shuffle(self) -> Any:
        """As ImageDataset.shuffle: a flag, and tf.data's ``ds.shuffle(n)``."""
        return _ShuffleFlag(bool(self._source.shuffle),
                            lambda seed: MappedDataset(self._source.shuffle_rows(seed), self._funcs))

    def take(self, count: int) -> "MappedDataset":
        return MappedDataset(self._source.take(count), self._funcs)

    def skip(self, count: int) -> "MappedDataset":
        return MappedDataset(self._source.skip(count), self._funcs)

    def unbatch(self) -> "UnbatchedDataset":
        return UnbatchedDataset(self)


class UnbatchedDataset(_Refusals):
    """One element at a time of a dataset (``ds.unbatch()``, or ``batch_size=None``); ``.batch(n)``
    gives batches again."""

    def __init__(self, source: Any) -> None:
        self._source = source
        self.class_names, self.file_paths = source.class_names, source.file_paths

    def __len__(self) -> int:
        if isinstance(self._source, ImageDataset):
            return self._source.num_rows
        raise TypeError("the length of an unbatched mapped dataset is not known before iterating it")

    def __iter__(self) -> Iterator[Any]:
        for item in self._source:
            if isinstance(item, tuple):
                x, y = item
                for i in range(len(x)):
                    yield x[i], y[i]
            else:
                for i in range(len(item)):
                    yield item[i]

    def take(self, count: int) -> "UnbatchedTake":
        return UnbatchedTake(self, int(count))

    def batch(self, batch_size: int, drop_remainder: bool = False, **kwargs: Any) -> ImageDataset:
        """Batches of `batch_size` images again (of an unmapped dataset: read natively)."""
        if not isinstance(self._source, ImageDataset):
            raise NotImplementedError("batch() after map().unbatch() is not supported: map the batches of a dataset "
                                      "loaded with the batch_size you want")
        if drop_remainder:
            raise NotImplementedError("batch(drop_remainder=True) is not supported: the last batch is delivered")
        return self._source._variant(batch_size=int(batch_size), range=(0, None))

    def epoch_batches(self, epoch: int, device: str = "cpu") -> Iterator[Any]:
        """Refused: a model trains on batches."""
        raise ValueError("this dataset yields one image at a time (unbatched): fit, evaluate and predict take "
                         "batches; call .batch(32) on it (or load the folder with batch_size=32)")


class UnbatchedTake:
    """The first `count` elements of an unbatched dataset."""

    def __init__(self, source: UnbatchedDataset, count: int) -> None:
        self._source, self._count = source, count

    def __iter__(self) -> Iterator[Any]:
        return itertools.islice(iter(self._source), self._count if self._count >= 0 else None)
