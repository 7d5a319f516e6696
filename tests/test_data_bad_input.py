"""Bad files and arguments: a clear Python exception naming the file and dataset, never a crash."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")
from hpcnn import data  # noqa: E402


def good_file(path, n=64, compression="gzip", chunks=True, x=None, y=None):
    rng = np.random.default_rng(0)
    if x is None:
        # Smooth, compressible images: deflate really compresses every chunk.
        x = np.repeat(np.arange(n, dtype=np.uint8)[:, None, None, None], 4 * 4 * 3, axis=1).reshape(n, 4, 4, 3)
    if y is None:
        y = rng.integers(0, 10, (n, 1)).astype(np.uint8)
    with h5py.File(path, "w") as f:
        f.create_dataset("x_train", data=x, compression=compression, chunks=chunks)
        f.create_dataset("y_train", data=y)
    return str(path)


def consume(ds):
    for _ in ds.epoch_batches(0):
        pass


def test_missing_file(tmp_path):
    p = str(tmp_path / "nope.h5")
    with pytest.raises(FileNotFoundError, match="nope.h5"):
        data.HDF5Dataset(p)
    from hpcnn import _core
    with pytest.raises(ValueError, match="nope.h5"):
        _core.data.dataset_info(p, "x_train")


def test_not_an_hdf5_file(tmp_path):
    p = tmp_path / "notes.h5"
    p.write_text("x_train,y_train\n1,2\n" * 100)
    with pytest.raises(ValueError, match=r"notes\.h5.*not an HDF5 file"):
        data.HDF5Dataset(str(p))


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ValueError, match="directory"):
        data.HDF5Dataset(str(tmp_path))


@pytest.mark.parametrize("keep", [0.2, 0.6, 0.97])
def test_truncated_file(tmp_path, keep):
    src = good_file(tmp_path / "full.h5", n=2000, chunks=(100, 4, 4, 3))
    blob = Path(src).read_bytes()
    p = tmp_path / "cut.h5"
    p.write_bytes(blob[: int(len(blob) * keep)])
    with pytest.raises(ValueError, match="cut.h5"):
        consume(data.HDF5Dataset(str(p), batch_size=100))


def test_corrupted_chunk_names_file_dataset_and_chunk(tmp_path):
    p = good_file(tmp_path / "bad.h5", n=400, chunks=(100, 4, 4, 3))
    with h5py.File(p, "r") as f:
        info = f["x_train"].id.get_chunk_info(2)
    assert info.filter_mask == 0 and info.size > 20  # the chunk really is deflated
    with open(p, "r+b") as fh:
        fh.seek(info.byte_offset + 2)  # keep the zlib header, trash the stream
        fh.write(b"\xff\x13\x77" * ((info.size - 6) // 3))
    ds = data.HDF5Dataset(p, batch_size=50, cache="none")
    with pytest.raises(ValueError, match=r"decompress.*x_train.*bad\.h5"):
        consume(ds)
    with pytest.raises(ValueError, match="x_train"):
        data.HDF5Dataset(p, batch_size=50, shuffle=False)[4]
    # The failure leaves the dataset usable for chunks that are fine.
    ok = data.HDF5Dataset(p, batch_size=100, shuffle=False, cache="none", memory_budget=1)
    assert ok[0][0].shape == (100, 4, 4, 3)


def test_missing_dataset(tmp_path):
    p = good_file(tmp_path / "d.h5")
    with pytest.raises(ValueError, match=r"'x_tarin'.*d\.h5"):
        data.HDF5Dataset(p, x="x_tarin")
    with pytest.raises(ValueError, match=r"'labels'.*d\.h5"):
        data.HDF5Dataset(p, y="labels")
    with pytest.raises(ValueError, match=r"'grp/x'"):
        data.HDF5Dataset(p, x="grp/x")


def test_group_instead_of_dataset(tmp_path):
    p = str(tmp_path / "g.h5")
    with h5py.File(p, "w") as f:
        f.create_group("x_train")
    with pytest.raises(ValueError, match="x_train"):
        data.HDF5Dataset(p)


@pytest.mark.parametrize("x,what", [
    (np.zeros(10, np.uint8), "shape"),
    (np.zeros((10, 2, 2, 2, 2), np.uint8), "shape"),
    (np.zeros((10, 4, 4, 3), np.int16), "int16"),
    (np.zeros((10, 4, 4, 3), np.float64), "float64"),
])
def test_wrong_rank_or_dtype_of_x(tmp_path, x, what):
    p = good_file(tmp_path / "d.h5", x=x, y=np.zeros(10, np.uint8), compression=None, chunks=None)
    with pytest.raises(ValueError, match=rf"x_train.*d\.h5.*{what}"):
        data.HDF5Dataset(p)


@pytest.mark.parametrize("y,what", [
    (np.zeros(64, np.float32), "float32"),
    (np.zeros((64, 2), np.uint8), r"\(64, 2\)"),
])
def test_wrong_labels(tmp_path, y, what):
    p = good_file(tmp_path / "d.h5", y=y)
    with pytest.raises(ValueError, match=rf"y_train.*d\.h5.*{what}"):
        data.HDF5Dataset(p)


def test_x_and_y_lengths_differ(tmp_path):
    p = good_file(tmp_path / "d.h5", y=np.zeros(63, np.uint8))
    with pytest.raises(ValueError, match=r"different lengths.*d\.h5.*64.*63"):
        data.HDF5Dataset(p)


def test_labels_outside_num_classes(tmp_path):
    y = np.zeros(64, np.int64)
    y[17] = 12
    p = good_file(tmp_path / "d.h5", y=y)
    with pytest.raises(ValueError, match=r"label 12 at row 17.*y_train.*d\.h5.*\[0, 10\)"):
        data.HDF5Dataset(p, one_hot=10)
    y[17] = -1
    p = good_file(tmp_path / "e.h5", y=y)
    with pytest.raises(ValueError, match=r"y_train.*e\.h5.*negative"):
        data.HDF5Dataset(p)


def test_empty_dataset(tmp_path):
    p = good_file(tmp_path / "d.h5", x=np.zeros((0, 4, 4, 3), np.uint8), y=np.zeros(0, np.uint8), chunks=None,
                  compression=None)
    with pytest.raises(ValueError, match=r"x_train.*d\.h5.*empty"):
        data.HDF5Dataset(p)


def test_unknown_filter_is_named(tmp_path):
    p = str(tmp_path / "zstd.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", data=np.zeros((8, 4, 4, 3), np.uint8), chunks=(4, 4, 4, 3),
                         compression=32015, allow_unknown_filter=True)
        f.create_dataset("y_train", data=np.zeros(8, np.uint8))
    with pytest.raises(ValueError, match=r"x_train.*zstd\.h5.*'zstd'.*32015"):
        data.HDF5Dataset(p)


def test_lzf_is_named(tmp_path):
    p = str(tmp_path / "lzf.h5")
    with h5py.File(p, "w") as f:  # h5py's own lzf filter: not in the HDF5 C library hpcnn uses
        f.create_dataset("x_train", data=np.zeros((8, 4, 4, 3), np.uint8), compression="lzf")
        f.create_dataset("y_train", data=np.zeros(8, np.uint8))
    code = ("import hpcnn.data as d\n"
            "try:\n    d.HDF5Dataset(%r)\nexcept ValueError as e:\n    print('ERR', e)\n" % p)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ERR" in out.stdout and "'lzf'" in out.stdout and "x_train" in out.stdout, out.stdout + out.stderr
    assert "HDF5-DIAG" not in out.stderr  # HDF5's own error printing is silenced


def test_hdf5_error_stack_is_silenced_and_folded(tmp_path):
    p = tmp_path / "cut.h5"
    blob = Path(good_file(tmp_path / "full.h5", n=500)).read_bytes()
    p.write_bytes(blob[: len(blob) // 2])
    code = ("import hpcnn.data as d\n"
            "try:\n    d.HDF5Dataset(%r)\nexcept ValueError as e:\n    print('ERR', e)\n" % str(p))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ERR" in out.stdout and "cut.h5" in out.stdout, out.stdout + out.stderr
    assert "HDF5-DIAG" not in out.stderr and "H5F" not in out.stderr, out.stderr


@pytest.mark.parametrize("kw,match", [
    (dict(batch_size=0), "batch_size"),
    (dict(cache="disk"), "cache"),
    (dict(memory_budget=0), "memory_budget"),
    (dict(prefetch=0), "prefetch"),
    (dict(one_hot=0), "one_hot"),
    (dict(one_hot=10, num_classes=5), "disagree"),
    (dict(num_classes=-1), r"num_classes`?\. Expected a positive integer"),
    (dict(scale=((0.5, 0.5), (1.0, 2.0, 3.0))), "mean"),
    (dict(scale=((0.5, 0.5), (1.0, 1.0))), "scale"),
    (dict(scale=(0.5, 0.0)), "std"),
    (dict(scale="big"), "scale"),
])
def test_bad_arguments(tmp_path, kw, match):
    p = good_file(tmp_path / "d.h5")
    with pytest.raises(ValueError, match=match):
        data.HDF5Dataset(p, **kw)


def test_read_dataset_of_a_scalar_is_a_clear_error(tmp_path):
    p = tmp_path / "s.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=np.float32(1.5))
        f.create_dataset("b", data=np.uint8(7))
    for name in ("x", "b"):
        with pytest.raises(ValueError, match=f"dataset '{name}'.*is a scalar"):
            data.read_dataset(str(p), name)


def test_bad_epoch(tmp_path):
    ds = data.HDF5Dataset(good_file(tmp_path / "d.h5"))
    with pytest.raises(ValueError, match="epoch"):
        next(iter(ds.epoch_batches(-1)))


@pytest.mark.parametrize("bad_chunk", [3, 30])
def test_corrupted_chunk_in_a_pipelined_read(tmp_path, bad_chunk):
    # 23 MB in 35 chunks: more than one 16 MiB group, so chunk reads of the next group run on a
    # helper thread while the current group inflates; a failure in either group must surface.
    n = 350
    x = np.zeros((n, 256, 256), np.uint8)
    x[:, 0, 0] = np.arange(n) % 256
    p = good_file(tmp_path / "big.h5", x=x, y=np.zeros(n, np.uint8), chunks=(10, 256, 256))
    with h5py.File(p, "r") as f:
        info = f["x_train"].id.get_chunk_info(bad_chunk)
    assert info.filter_mask == 0
    with open(p, "r+b") as fh:
        fh.seek(info.byte_offset + 2)
        fh.write(b"\xff\x13\x77" * ((info.size - 6) // 3))
    ds = data.HDF5Dataset(p, batch_size=50, cache="memory")
    for _ in range(2):  # and again: the reader's buffers are left consistent
        with pytest.raises(ValueError, match=rf"decompress the chunk at \({bad_chunk * 10}, 0, 0\).*big\.h5"):
            consume(ds)
