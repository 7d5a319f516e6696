# Generated from the installed hpcnn._core by tools/gen_core_stubs.py: do not edit by hand.
# After changing csrc/bindings/ and reinstalling, regenerate with: python tools/gen_core_stubs.py
"""HDF5 loader, prefetcher and writer (use hpcnn.data)"""
import collections.abc
import numpy
import numpy.typing
import typing
CHUNK_GROUP_LANES: int
H5_TREE_LIMITS: dict

class EpochIterator:

    def __iter__(self) -> object:
        ...

    def __next__(self) -> object:
        ...

    def close(self) -> None:
        ...

    @property
    def pinned(self) -> bool:
        ...

class H5Reader:
    """An HDF5 file opened read-only, listed and read as a tree (Keras' layouts)."""

    def __enter__(self) -> object:
        ...

    def __exit__(self, *args) -> None:
        ...

    def __init__(self, path: str) -> None:
        ...

    def close(self) -> None:
        ...

    @staticmethod
    def from_bytes(data: bytes, label: str) -> H5Reader:
        """An HDF5 file held in memory; `label` names it in messages."""

    @property
    def label(self) -> str:
        ...

    def list(self, max_objects: typing.SupportsInt | typing.SupportsIndex=1000000) -> list:
        """Every group and dataset reached by hard links, the root first: dicts of path, kind ('group' or 'dataset'), shape and dtype (datasets) and attrs (str, list of str, float or float64 array; None for a type hpcnn does not read)."""

    def read(self, path: str) -> numpy.ndarray:
        """Dataset `path` as float32 (any float type) or int64 (any integer type)."""

class Loader:

    def __init__(self, path: str, x: str, y: str, batch_size: typing.SupportsInt | typing.SupportsIndex, shuffle: str, seed: object, scale: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex], shift: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex], num_classes: typing.SupportsInt | typing.SupportsIndex, one_hot: bool, drop_remainder: bool, cache: str, memory_budget: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...

    def __len__(self) -> int:
        ...

    def __repr__(self) -> str:
        ...

    def batch(self, epoch: typing.SupportsInt | typing.SupportsIndex, index: typing.SupportsInt | typing.SupportsIndex) -> tuple[numpy.ndarray, object]:
        ...

    def batch_rows(self, index: typing.SupportsInt | typing.SupportsIndex) -> int:
        """Rows of batch `index` (of the global batch)."""

    @property
    def block_rows(self) -> int:
        ...

    @property
    def blocks_read(self) -> int:
        ...

    @property
    def bytes_inflated(self) -> int:
        ...

    @property
    def bytes_read(self) -> int:
        ...

    @property
    def decode(self) -> tuple[list[float], list[float]]:
        ...

    @property
    def decode_seconds(self) -> float:
        ...

    def epoch(self, epoch: typing.SupportsInt | typing.SupportsIndex, prefetch: typing.SupportsInt | typing.SupportsIndex=4, device: str='cpu', stored_u8: bool=False, first_batch: typing.SupportsInt | typing.SupportsIndex=0, shard_rank: typing.SupportsInt | typing.SupportsIndex=0, shard_ranks: typing.SupportsInt | typing.SupportsIndex=1) -> EpochIterator:
        """Batches of one epoch, made ahead on a C++ thread: (x, y), or with stored_u8 (x, y, decode), where a uint8 dataset's x comes as stored with decode = (scale, shift) per channel, for a model that decodes on its GPU (decode None for float32 x). first_batch: start at this batch of the epoch (a resumed run). shard_rank of shard_ranks: each batch holds only that rank's share of the global batch (0 rows when the share of a small last batch is empty)."""

    @property
    def has_labels(self) -> bool:
        ...

    @property
    def in_memory(self) -> bool:
        ...

    @property
    def inflate_seconds(self) -> float:
        ...

    @property
    def io_seconds(self) -> float:
        ...

    @property
    def lanes(self) -> int:
        ...

    @property
    def num_blocks(self) -> int:
        ...

    @property
    def num_classes(self) -> int:
        ...

    @property
    def num_rows(self) -> int:
        ...

    @property
    def peak_cached_bytes(self) -> int:
        ...

    @property
    def raw_chunk_path(self) -> bool:
        ...

    @property
    def row_shape(self) -> tuple:
        ...

    @property
    def scatter_seconds(self) -> float:
        ...

    @property
    def seed(self) -> int:
        ...

    def set_seed(self, seed: typing.SupportsInt | typing.SupportsIndex) -> None:
        """Replaces the shuffle seed (a resumed run repeats the order of the run it continues; a data-parallel run gives every rank rank 0's)."""

    @property
    def shuffle_mode(self) -> str:
        ...

    def wait_warm_up(self) -> None:
        """Waits for the background load of an epoch's first windows, if one is running (then the counters stand still)."""

    @property
    def warm_blocks_read(self) -> int:
        ...

    @property
    def warm_bytes_inflated(self) -> int:
        ...

    @property
    def warm_bytes_read(self) -> int:
        ...

    @property
    def window_blocks(self) -> int:
        ...

    @property
    def x_info(self) -> dict:
        ...

    @property
    def y_info(self) -> object:
        ...

class StreamWriter:
    """A new HDF5 file written a block of rows at a time, renamed onto `path` by commit() (data/writer.h)."""

    def __init__(self, path: str, compression: str='gzip', level: typing.SupportsInt | typing.SupportsIndex=4) -> None:
        ...

    def chunk_rows(self, name: str) -> int:
        ...

    def close(self) -> None:
        ...

    def commit(self) -> None:
        ...

    def create(self, name: str, shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], dtype: numpy.dtype, chunk_rows: typing.SupportsInt | typing.SupportsIndex=0) -> None:
        ...

    @property
    def open(self) -> bool:
        ...

    def set_rows(self, name: str, rows: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...

    def write(self, name: str, first_row: typing.SupportsInt | typing.SupportsIndex, rows: numpy.ndarray) -> None:
        ...

def check_epoch_plan(order: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], windows: collections.abc.Sequence[collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]], window_end: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], rows: typing.SupportsInt | typing.SupportsIndex, block_rows: typing.SupportsInt | typing.SupportsIndex, batch_size: typing.SupportsInt | typing.SupportsIndex=0, lane_windows: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]=[]) -> None:
    """The check the loader makes of every epoch plan it makes: RuntimeError naming what is wrong (a plan that misses or repeats rows, or whose windows do not load the blocks its positions read). A chunk-group plan gives its batch_size and lane_windows."""

def dataset_info(path: str, name: str) -> dict:
    ...

def default_chunk_rows(rows: typing.SupportsInt | typing.SupportsIndex, row_bytes: typing.SupportsInt | typing.SupportsIndex) -> int:
    ...

def epoch_plan(rows: typing.SupportsInt | typing.SupportsIndex, block_rows: typing.SupportsInt | typing.SupportsIndex, window_blocks: typing.SupportsInt | typing.SupportsIndex, shuffle: str, seed: typing.SupportsInt | typing.SupportsIndex, epoch: typing.SupportsInt | typing.SupportsIndex, batch_size: typing.SupportsInt | typing.SupportsIndex=0, lanes: typing.SupportsInt | typing.SupportsIndex=64) -> tuple[numpy.typing.NDArray[numpy.int64], list[list[int]], list[int], list[int]]:
    """The loader's row order for one epoch (data/shuffle_plan.h), for tests of its distribution: (order: the rows in delivery order, windows: the block ids of each window, window_end: each window's end (position; chunk groups: in its lane's rows), lane_windows: lane k's windows [lane_windows[k], lane_windows[k+1]) (chunk groups; empty otherwise)). shuffle: 'off', 'rows' or 'chunk_groups' (which needs batch_size)."""

def h5_tree_image(items: list, caller: str='h5_tree_image') -> bytes:
    """The HDF5 file write_h5_tree would write, as bytes."""

def inflate_library() -> str:
    ...

def read_dataset(path: str, name: str) -> numpy.ndarray:
    ...

def resize_image(image: numpy.ndarray, height: typing.SupportsInt | typing.SupportsIndex, width: typing.SupportsInt | typing.SupportsIndex, method: str='bilinear', to_uint8: bool=False) -> numpy.ndarray:
    """tf.image.resize of a uint8 image (half-pixel centres, no antialiasing; data/image_resize.h): float32, or uint8 rounded to the nearest integer."""

def write_file_atomically(path: str, data: bytes, caller: str='write_file_atomically') -> None:
    """Writes bytes to `path` through a temporary file renamed into place (the rules of write_hdf5's target)."""

def write_h5_tree(path: str, items: list, caller: str='write_h5_tree') -> None:
    """Writes items (path, array or None for a group, attributes dict) to a new HDF5 file, atomically."""

def write_hdf5(path: str, arrays: collections.abc.Sequence[tuple[str, numpy.ndarray]], chunk_rows: typing.SupportsInt | typing.SupportsIndex=0, compression: str='gzip', level: typing.SupportsInt | typing.SupportsIndex=4, shuffle: bool=True) -> None:
    ...
