"""hpcnn.data.write_hdf5: layouts, dtypes, atomicity."""
import os

import numpy as np
import pytest

from hpcnn import data

h5py = pytest.importorskip("h5py")


def test_roundtrip_with_h5py_and_default_chunks(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (1000, 32, 32, 3), dtype=np.uint8),
        "y_train": rng.integers(0, 10, (1000, 1)).astype(np.uint8),
        "f32": rng.standard_normal((50, 7)).astype(np.float32),
        "f64": rng.standard_normal(9),
        "i16": np.arange(-5, 5, dtype=np.int16),
        "u64": np.arange(4, dtype=np.uint64),
        "grp/nested": np.ones((3, 2), np.int32),
        "flags": np.array([True, False, True]),
    }
    p = str(tmp_path / "w.h5")
    data.write_hdf5(p, arrays)
    with h5py.File(p, "r") as f:
        for k, v in arrays.items():
            got = f[k][:]
            np.testing.assert_array_equal(got, v.astype(np.uint8) if v.dtype == bool else v)
            assert f[k].compression == "gzip"
        chunks = f["x_train"].chunks
        assert chunks[1:] == (32, 32, 3) and 10 <= chunks[0] <= 1000  # whole images per chunk
        assert f["f32"].shuffle  # byte shuffle for multi-byte types
    assert data.dataset_info(p, "x_train")["chunks"] == chunks


@pytest.mark.parametrize("kw,chunked", [(dict(compression=None), False), (dict(compression=None, chunk_rows=10), True),
                                        (dict(chunk_rows=7, level=9), True)])
def test_layout_options(tmp_path, kw, chunked):
    x = np.arange(100 * 12, dtype=np.uint8).reshape(100, 12)
    p = str(tmp_path / "w.h5")
    data.write_hdf5(p, {"x": x}, **kw)
    with h5py.File(p, "r") as f:
        assert (f["x"].chunks is not None) == chunked
        if kw.get("chunk_rows"):
            assert f["x"].chunks[0] == kw["chunk_rows"]
        np.testing.assert_array_equal(f["x"][:], x)
    ds = data.HDF5Dataset(p, x="x", y=None, batch_size=30, shuffle=False, scale=1.0)
    np.testing.assert_array_equal(np.concatenate([a.copy() for a, _ in ds.epoch_batches(0)]), x)


def test_default_chunk_rows():
    from hpcnn import _core
    assert _core.data.default_chunk_rows(50000, 3072) == 341
    assert _core.data.default_chunk_rows(10, 3072) == 10
    assert _core.data.default_chunk_rows(10 ** 6, 1) == 65536
    assert _core.data.default_chunk_rows(5, 10 ** 8) == 1


def test_replaces_existing_file_atomically(tmp_path):
    p = str(tmp_path / "w.h5")
    data.write_hdf5(p, {"a": np.zeros(3)})
    data.write_hdf5(p, {"b": np.ones(4)})
    with h5py.File(p, "r") as f:
        assert list(f) == ["b"]
    assert os.listdir(tmp_path) == ["w.h5"]  # no temporary left behind


def test_failure_leaves_no_file(tmp_path):
    p = str(tmp_path / "w.h5")
    with pytest.raises(ValueError, match="complex"):
        data.write_hdf5(p, {"ok": np.zeros(3), "bad": np.zeros(3, np.complex64)})
    assert os.listdir(tmp_path) == []
    data.write_hdf5(p, {"a": np.zeros(3)})
    with pytest.raises(ValueError, match="complex"):
        data.write_hdf5(p, {"ok": np.zeros(3), "bad": np.zeros(3, np.complex64)})
    assert os.listdir(tmp_path) == ["w.h5"]  # the previous file is untouched
    with h5py.File(p, "r") as f:
        assert list(f) == ["a"]


@pytest.mark.parametrize("args,match", [
    (({},), "non-empty"),
    (({"a": np.zeros(2)}, None, "lzf"), "compression"),
    (({"a": np.zeros(2)}, 0), "chunk_rows"),
    (({"a": np.zeros(2)}, None, "gzip", 12), "level"),
])
def test_bad_arguments(tmp_path, args, match):
    with pytest.raises(ValueError, match=match):
        data.write_hdf5(str(tmp_path / "w.h5"), *args)
    assert os.listdir(tmp_path) == []


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no_such_dir"):
        data.write_hdf5(str(tmp_path / "no_such_dir" / "w.h5"), {"a": np.zeros(2)})


def test_object_dtype_rejected(tmp_path):
    with pytest.raises(ValueError, match="dtype"):
        data.write_hdf5(str(tmp_path / "w.h5"), {"a": np.array(["x", "y"], dtype=object)})


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int64])
def test_parallel_gzip_chunks_mixed_compressibility(tmp_path, dtype):
    rng = np.random.default_rng(1)
    x = np.zeros((103, 9, 7), dtype)
    x[60:] = rng.integers(0, 250, (43, 9, 7)).astype(dtype) if dtype != np.float32 else rng.standard_normal((43, 9, 7))
    p = str(tmp_path / "w.h5")
    data.write_hdf5(p, {"x": x}, chunk_rows=10, level=6)  # 11 chunks, the last one partial
    with h5py.File(p, "r") as f:
        d = f["x"]
        np.testing.assert_array_equal(d[:], x)
        masks = {d.id.get_chunk_info(i).filter_mask for i in range(d.id.get_num_chunks())}
        sizes = [d.id.get_chunk_info(i).size for i in range(d.id.get_num_chunks())]
    assert min(sizes) < 100  # the zero chunks really are compressed
    if dtype == np.uint8:
        assert masks == {0, 1}  # random bytes: deflate skipped for those chunks, as HDF5 does
    np.testing.assert_array_equal(data.read_dataset(p, "x"), x.astype(np.int64) if dtype == np.int64 else x)


def test_failure_midway_removes_the_temporary(tmp_path):
    p = str(tmp_path / "w.h5")
    # 'a' is a dataset, so 'a/b' cannot be created inside it: HDF5 fails after the file exists.
    with pytest.raises(ValueError, match=r"'a/b'"):
        data.write_hdf5(p, {"a": np.zeros((50, 3)), "a/b": np.ones(2)})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("dtype", [">f4", ">i8", ">u2", ">f8", ">i4", "<f4", "=i2"])
@pytest.mark.parametrize("compression", ["gzip", None])
def test_any_byte_order_is_stored_as_its_values(tmp_path, dtype, compression):
    """Issue 12, item 2: arrays in big-endian byte order ('>f4' from a FITS file or a network
    stream, '>i8' from Java). Before the fix write_hdf5 copied their bytes under a native
    (little-endian) type: h5py read byte-swapped garbage, silently."""
    rng = np.random.default_rng(3)
    v = (rng.standard_normal((30, 5)) * 1000).astype(np.dtype(dtype).newbyteorder("="))
    a = v.astype(dtype)  # the same values, in the requested byte order
    p = str(tmp_path / "be.h5")
    data.write_hdf5(p, {"x": a, "y": a[:, 0].copy()}, compression=compression)
    with h5py.File(p, "r") as f:
        np.testing.assert_array_equal(f["x"][()], v)
        np.testing.assert_array_equal(f["y"][()], v[:, 0])
        assert f["x"].dtype == v.dtype  # stored in this machine's byte order: hpcnn's fast path
    if v.dtype in (np.float32,):
        np.testing.assert_array_equal(data.read_dataset(p, "x"), v)
    if v.dtype.kind in "iu":
        np.testing.assert_array_equal(data.read_dataset(p, "x"), v.astype(np.int64))


def test_big_endian_file_written_by_h5py_reads_correctly(tmp_path):
    """The other direction: a file h5py wrote in big-endian types ('>f4' images, '>i8' labels)
    reads as its values, on hpcnn's own chunk reader (it swaps bytes after decoding)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((50, 4, 4, 2)).astype(">f4")
    y = rng.integers(0, 9, 50).astype(">i8")
    p = str(tmp_path / "be2.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", data=x, chunks=(10, 4, 4, 2), compression="gzip", shuffle=True)
        f.create_dataset("y_train", data=y, chunks=(25,), compression="gzip")
    np.testing.assert_array_equal(data.read_dataset(p, "x_train"), x.astype(np.float32))
    np.testing.assert_array_equal(data.read_dataset(p, "y_train"), y.astype(np.int64))
    ds = data.HDF5Dataset(p, batch_size=20, shuffle=False, scale=1.0)
    assert ds.stats["raw_chunk_path"]
    xs, ys = zip(*[(a.copy(), b.copy()) for a, b in ds.epoch_batches(0)])
    np.testing.assert_array_equal(np.concatenate(xs), x.astype(np.float32))
    np.testing.assert_array_equal(np.concatenate(ys), y.astype(np.int32))
