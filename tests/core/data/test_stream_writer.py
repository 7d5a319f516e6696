"""StreamWriter (csrc/data/writer.h): a new HDF5 file written a block of rows at a time, atomically;
what `hpcnn convert images` and image_dataset_from_directory write their decoded images with."""
import os

import numpy as np
import pytest

from hpcnn import _core
from hpcnn.data import dataset_info, read_dataset

StreamWriter = _core.data.StreamWriter


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_blocks_in_order_then_shrunk(tmp_path, compression):
    out = tmp_path / "x.hdf5"
    rows = np.random.default_rng(0).integers(0, 256, (23, 4, 5, 3), dtype=np.uint8)
    w = StreamWriter(str(out), compression, 1)
    w.create("x_train", [30, 4, 5, 3], np.dtype(np.uint8), 4)
    assert w.chunk_rows("x_train") == 4
    w.write("x_train", 0, rows[:8])
    w.write("x_train", 8, rows[8:20])
    w.write("x_train", 20, rows[20:])       # part of a chunk: the last block
    w.set_rows("x_train", 23)                # 30 created (files listed), 23 kept
    w.create("y_train", [23], np.dtype(np.int32), 0)
    w.write("y_train", 0, np.arange(23, dtype=np.int32))
    assert not out.exists()                  # nothing at the target before commit
    w.commit()
    np.testing.assert_array_equal(read_dataset(str(out), "x_train"), rows)
    assert read_dataset(str(out), "y_train").tolist() == list(range(23))
    assert dataset_info(str(out), "x_train")["shape"] == (23, 4, 5, 3)
    h5py = pytest.importorskip("h5py")
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f["x_train"][...], rows)


def test_refusals_name_the_problem(tmp_path):
    w = StreamWriter(str(tmp_path / "y.hdf5"), "gzip", 1)
    w.create("x", [10, 2], np.dtype(np.uint8), 4)
    with pytest.raises(ValueError, match="must be written in order: the next block starts at row 0, not 4"):
        w.write("x", 4, np.zeros((4, 2), np.uint8))
    with pytest.raises(ValueError, match="shape"):
        w.write("x", 0, np.zeros((4, 3), np.uint8))
    with pytest.raises(ValueError, match="another element type"):
        w.write("x", 0, np.zeros((4, 2), np.float32))
    with pytest.raises(ValueError, match="no dataset 'z'"):
        w.write("z", 0, np.zeros((4, 2), np.uint8))
    w.write("x", 0, np.zeros((3, 2), np.uint8))
    with pytest.raises(ValueError, match="after a block of part of a chunk, none"):
        w.write("x", 3, np.zeros((4, 2), np.uint8))
    with pytest.raises(ValueError, match="has 3 of its 10 rows written"):
        w.commit()
    with pytest.raises(ValueError, match="needs at least one row"):
        w.create("e", [0, 2], np.dtype(np.uint8), 0)


def test_abandoned_writer_leaves_nothing(tmp_path):
    out = tmp_path / "z.hdf5"
    out.write_bytes(b"old")
    w = StreamWriter(str(out), "none", 0)
    w.create("x", [4, 2], np.dtype(np.uint8), 0)
    w.write("x", 0, np.ones((4, 2), np.uint8))
    w.close()  # an error or Ctrl-C before commit
    assert out.read_bytes() == b"old" and os.listdir(tmp_path) == ["z.hdf5"]
    del w


def test_target_rules_as_write_hdf5(tmp_path):
    os.symlink(tmp_path / "elsewhere", tmp_path / "link.hdf5")
    with pytest.raises(ValueError, match="symbolic link"):
        StreamWriter(str(tmp_path / "link.hdf5"), "gzip", 1)
    with pytest.raises(ValueError, match="compression must be"):
        StreamWriter(str(tmp_path / "a.hdf5"), "lzf", 1)
