"""Bad files and arguments: a clear Python exception naming the file and dataset, never a crash."""
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")
from hpcnn import data  # noqa: E402
from tests.support import hostile_hdf5


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


# ---------------------------------------------------------------------------------------------
# Issue 12: files that lie. Each test says what hpcnn did before the fix.
# ---------------------------------------------------------------------------------------------

def run_isolated(code, timeout=120, limit_as=None):
    """Runs `code` in a fresh interpreter (a crash or hang must not take pytest down); returns
    (exit status, stdout + stderr)."""
    pre = ""
    if limit_as:
        pre = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({limit_as}, {limit_as}))\n"
    out = subprocess.run([sys.executable, "-c", pre + code], capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


def chunk_keys(path, name="x_train"):
    """Offsets in the file of the v1 B-tree keys of `name`'s chunks, in chunk order: each key is
    the chunk's size (4 bytes), filter mask (4), then its offset in each dimension and 0 for the
    element (8 bytes each), followed by the chunk's address."""
    with h5py.File(path, "r") as f:
        d = f[name]
        addrs = {d.id.get_chunk_info(k).byte_offset for k in range(d.id.get_num_chunks())}
        ndims = d.ndim + 1
    keys = hostile_hdf5.v1_chunk_keys(Path(path).read_bytes(), ndims, addrs)
    assert len(keys) == len(addrs)
    return [k for k, _ in keys]


def patch(path, at, fmt, value):
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(struct.pack(fmt, value))


def h5py_reads(path, name="x_train"):
    """What h5py reads from a damaged file: the array, or None where it raises. In a child
    process without the sanitizer runtime: h5py's own HDF5 (2.x) reads past its buffers on some
    damaged files, and the sanitizer run must report hpcnn's errors, not h5py's."""
    out = os.path.join(os.path.dirname(path), "h5py_read.npy")
    code = ("import sys, numpy as np, h5py\n"
            "try:\n    f = h5py.File(sys.argv[1], 'r'); a = f[sys.argv[2]][()]\n"
            "except Exception:\n    sys.exit(3)\n"
            "np.save(sys.argv[3], a)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    rc = subprocess.run([sys.executable, "-c", code, path, name, out], env=env, timeout=120).returncode
    if rc != 0:
        return None  # an exception, or h5py's own crash
    a = np.load(out)
    os.remove(out)
    return a


def h5py_refuses(path, name="x_train"):
    return h5py_reads(path, name) is None


@pytest.mark.parametrize("field,at,fmt,value", [
    ("size", 0, "<I", 0),                 # a stored chunk of size 0
    ("offset", 8 + 8, "<Q", 5),           # offset in dim 1 off the chunk grid
    ("offset", 8, "<Q", 2 ** 40 + 10),    # offset in dim 0 far outside the dataset
])
@pytest.mark.parametrize("compression", ["gzip", None])
def test_damaged_chunk_key_raises(tmp_path, field, at, fmt, value, compression):
    """Issue 12, item 5: a damaged key of the chunk B-tree. Before the fix hpcnn looked a chunk
    up by walking the index only (H5Dget_chunk_info_by_coord) and read a chunk of size 0, or one
    the walk could not find, as never written: zeros, where h5py raises."""
    p = good_file(tmp_path / "key.h5", n=40, chunks=(10, 4, 4, 3), compression=compression)
    patch(p, chunk_keys(p)[1] + at, fmt, value)
    # (HDF5 ignores the stored size of an unfiltered chunk; hpcnn refuses a key of size 0 anyway.)
    assert h5py_refuses(p) or (field == "size" and compression is None)
    with pytest.raises(ValueError, match=r"chunk index of dataset 'x_train' in file '.*key\.h5' is damaged"):
        data.read_dataset(p, "x_train")
    with pytest.raises(ValueError, match=r"x_train.*key\.h5"):
        consume(data.HDF5Dataset(p, batch_size=10, cache="none", memory_budget=1))


def test_damaged_chunk_key_of_a_partly_written_dataset(tmp_path):
    """Item 5 where the fill value is legitimate: chunks never written read as the fill value, so
    a stored chunk that a damaged key hides cannot be told from one never written by a lookup.
    hpcnn lists the stored chunks of such a dataset when it opens it. Before the fix the hidden
    chunk read as the fill value."""
    p = str(tmp_path / "sparse.h5")
    with h5py.File(p, "w") as f:
        d = f.create_dataset("x_train", shape=(40, 3, 3), dtype=np.float32, chunks=(10, 3, 3), fillvalue=2.5)
        d[0:10] = 1.0
        d[30:40] = 3.0
        f.create_dataset("y_train", data=np.zeros(40, np.uint8))
    patch(p, chunk_keys(p)[0] + 8, "<Q", 2 ** 40)  # the stored chunk at row 0 claims row 2^40
    assert h5py_refuses(p)
    with pytest.raises(ValueError, match=r"chunk index of dataset 'x_train' in file '.*sparse\.h5' is damaged"):
        data.read_dataset(p, "x_train")


def test_chunk_key_whose_element_offset_is_damaged(tmp_path):
    """Item 5, a variant HDF5 itself misreads: a key's last offset (the element, always 0) set.
    HDF5's search (H5Dread) then misses the chunk while its walk finds it; h5py and HDF5 1.10
    both read zeros. Before the fix hpcnn read the chunk the walk found; now the disagreement
    between the two views of the index raises."""
    p = good_file(tmp_path / "elem.h5", n=40, chunks=(10, 4, 4, 3), compression=None)
    patch(p, chunk_keys(p)[2] + 8 + 8 * 4, "<Q", 3)
    assert not h5py_reads(p)[20:30].any()  # h5py: zeros, silently
    with pytest.raises(ValueError, match=r"chunk index of dataset 'x_train' in file '.*elem\.h5' is damaged"):
        data.read_dataset(p, "x_train")


def test_duplicate_chunk_key_cannot_overflow_a_buffer(tmp_path):
    """Item 5: two keys claiming the same chunk. Before the fix, hpcnn sized its buffer from the
    walk (H5Dget_chunk_info_by_coord: the first key, 573 bytes) and HDF5's H5Dread_chunk read the
    other chunk its search found (591 bytes) into it: heap corruption, the process aborted. Now
    hpcnn reads a chunk's bytes itself, into a buffer of the size it read, and the two views of
    the index must agree."""
    p = str(tmp_path / "dup.h5")
    x = np.zeros((70, 4, 4, 3), np.uint8)  # chunk 0: zeros, a few bytes compressed
    x[32:48] = np.random.default_rng(1).integers(0, 256, (16, 4, 4, 3))  # chunk 2: 768 bytes, stored as is
    data.write_hdf5(p, {"x_train": x, "y_train": np.zeros(70, np.uint8)}, chunk_rows=16)
    patch(p, chunk_keys(p)[2] + 8, "<Q", 0)  # the third chunk now claims row 0 too
    rc, out = run_isolated(
        "from hpcnn import data\n"
        f"for name in ('x_train',):\n"
        f"    try:\n        data.read_dataset({p!r}, name)\n    except ValueError as e:\n        print('ERR', e)\n")
    assert rc == 0 and "ERR" in out and "dup.h5" in out and "damaged" in out, (rc, out)


def test_fletcher32_chunk_whose_mask_skips_its_filters(tmp_path):
    """Item 5: a key's filter mask damaged to say "no filter applied" on a gzip + Fletcher-32
    chunk. Before the fix hpcnn let HDF5 1.10 decode such chunks (filters other than gzip and
    shuffle went through H5Dread), and HDF5 copied a full chunk out of the shorter compressed
    buffer: garbage that changed from one read to the next. hpcnn now decodes Fletcher-32 itself
    and checks every size."""
    p = str(tmp_path / "f32.h5")
    x = (np.arange(40 * 16) % 7).astype(np.uint8).reshape(40, 4, 4, 1)
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", data=x, chunks=(10, 4, 4, 1), compression="gzip", fletcher32=True)
        f.create_dataset("y_train", data=np.zeros(40, np.uint8))
    np.testing.assert_array_equal(data.read_dataset(p, "x_train"), x)  # the checksums verify
    patch(p, chunk_keys(p)[1] + 4, "<I", 3)
    with pytest.raises(ValueError, match=r"decompress the chunk at \(10, 0, 0, 0\).*x_train.*f32\.h5"):
        data.read_dataset(p, "x_train")


def test_fletcher32_checksum_mismatch(tmp_path):
    p = str(tmp_path / "sum.h5")
    x = np.arange(40 * 16, dtype=np.uint8).reshape(40, 16)
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", data=x, chunks=(10, 16), fletcher32=True)
        info = f["x_train"].id.get_chunk_info(3)
    with open(p, "r+b") as fh:  # one bit of the data: no compression to notice, the checksum does
        fh.seek(info.byte_offset + 5)
        b = fh.read(1)
        fh.seek(info.byte_offset + 5)
        fh.write(bytes([b[0] ^ 4]))
    assert h5py_refuses(p)
    with pytest.raises(ValueError, match=r"Fletcher-32.*|x_train.*sum\.h5.*Fletcher-32"):
        data.read_dataset(p, "x_train")


@pytest.mark.parametrize("libver", [None, ("v110", "v110")])
@pytest.mark.parametrize("layout", ["contiguous", "chunked"])
def test_file_truncated_while_an_epoch_streams_it(tmp_path, libver, layout):
    """Issue 12, item 4: a file truncated in place while an epoch reads it with cache='none'.
    Before the fix HDF5's sec2 driver returned zeros for the bytes past the new end (contiguous
    data, and hpcnn's raw reads of uncompressed chunks): the epoch went on with zero images."""
    n = 12000  # 27 MB: 7 blocks of 4 MiB, read one window (block) at a time
    x = (1 + np.arange(n * 48 * 48) % 250).astype(np.uint8).reshape(n, 48, 48)  # never 0
    p = str(tmp_path / "cut.h5")
    with h5py.File(p, "w", **({"libver": libver} if libver else {})) as f:
        f.create_dataset("x_train", data=x, chunks=(250, 48, 48) if layout == "chunked" else None)
        f.create_dataset("y_train", data=np.zeros(n, np.uint8))
    ds = data.HDF5Dataset(p, batch_size=100, shuffle=False, cache="none", memory_budget=1, prefetch=1, scale=1.0)
    it = ds.epoch_batches(0)
    first, _ = next(it)
    assert first.min() >= 1
    with open(p, "r+b") as fh:
        fh.truncate(os.path.getsize(p) // 2)
    with pytest.raises(ValueError, match=r"cut\.h5.*(truncated|ends at byte)"):
        for xb, _ in it:
            assert xb.min() >= 1, "zeros delivered from past the end of a truncated file"


def test_file_rewritten_while_an_epoch_streams_it(tmp_path):
    """Item 4's sibling: the file rewritten in place (same size) while an epoch reads it; the
    batches would mix old and new contents."""
    n = 12000
    x = (1 + np.arange(n * 48 * 48) % 250).astype(np.uint8).reshape(n, 48, 48)
    p = str(tmp_path / "rw.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", data=x)
        f.create_dataset("y_train", data=np.zeros(n, np.uint8))
        off = f["x_train"].id.get_offset()
    ds = data.HDF5Dataset(p, batch_size=100, shuffle=False, cache="none", memory_budget=1, prefetch=1)
    it = ds.epoch_batches(0)
    next(it)
    time.sleep(0.02)  # a later modification time on file systems with coarse timestamps
    with open(p, "r+b") as fh:
        fh.seek(off + x.nbytes - 4096)
        fh.write(b"\x07" * 4096)
    with pytest.raises(ValueError, match=r"rw\.h5.*modified while hpcnn was reading it"):
        consume_iter(it)


def test_a_file_replaced_by_rename_is_not_a_change(tmp_path):
    """The safe way to update a file under a running job keeps working: the open file still
    reads the old, complete contents."""
    n = 3000
    x = (1 + np.arange(n * 48 * 48) % 250).astype(np.uint8).reshape(n, 48, 48)
    p = str(tmp_path / "ren.h5")
    data.write_hdf5(p, {"x_train": x, "y_train": np.zeros(n, np.uint8)}, compression=None)
    ds = data.HDF5Dataset(p, batch_size=100, shuffle=False, cache="none", memory_budget=1, prefetch=1, scale=1.0)
    it = ds.epoch_batches(0)
    got = [next(it)[0].copy()]
    data.write_hdf5(p, {"x_train": x[:10], "y_train": np.zeros(10, np.uint8)})  # atomic replace
    got += [xb.copy() for xb, _ in it]
    np.testing.assert_array_equal(np.concatenate(got), x[..., None].astype(np.float32))


def consume_iter(it):
    for _ in it:
        pass


def test_2p62_rows_message_names_file_and_dataset(tmp_path):
    """Issue 12, item 6: a (valid, sparse) file declaring 2^62 rows. Before the fix the messages
    were std::vector's ("cannot create std::vector larger than max_size()") and NumPy's, without
    the file or the dataset."""
    p = str(tmp_path / "big62.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", shape=(2 ** 62, 4), dtype=np.float32, chunks=(1024, 4), maxshape=(None, 4))
        f.create_dataset("y_train", shape=(2 ** 62,), dtype=np.uint8, chunks=(1024,), maxshape=(None,))
    with pytest.raises(ValueError, match=r"x_train.*big62\.h5.*\(4611686018427387904, 4\).*64 bits"):
        data.HDF5Dataset(p)
    with pytest.raises(ValueError, match=r"x_train.*big62\.h5"):
        data.read_dataset(p, "x_train")
    with pytest.raises(MemoryError, match=r"y_train.*big62\.h5"):
        data.read_dataset(p, "y_train")  # 4 EiB of uint8: fits 64 bits, not memory


def test_huge_declared_rows_are_refused_before_allocating(tmp_path):
    """Item 6: a small file declaring 10^12 rows (chunked, never written: valid HDF5). Before the
    fix hpcnn read the labels first, allocating 8 TB: std::bad_alloc without the file's name (or
    the OOM killer). Now the memory the loader needs is checked first, naming file and dataset."""
    p = str(tmp_path / "huge.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", shape=(10 ** 12, 4), dtype=np.float32, chunks=(4096, 4), maxshape=(None, 4))
        f.create_dataset("y_train", shape=(10 ** 12,), dtype=np.uint8, chunks=(4096,), maxshape=(None,))
    assert os.path.getsize(p) < 10000
    with pytest.raises(MemoryError, match=r"x_train.*huge\.h5.*needs .* of memory"):
        data.HDF5Dataset(p)
    with pytest.raises(MemoryError, match=r"x_train.*huge\.h5.*needs"):
        data.read_dataset(p, "x_train")
    with pytest.raises(MemoryError, match=r"y_train.*huge\.h5.*needs"):
        data.read_dataset(p, "y_train")


@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""),
                    reason="an address-space limit cannot be combined with AddressSanitizer's shadow memory; "
                           "test_huge_declared_rows_are_refused_before_allocating covers the check there")
def test_1e9_rows_within_an_address_space_limit(tmp_path):
    """Item 6 as filed: 10^9 rows in a small file, here under a 2 GiB address-space limit (what
    `ulimit -v` gives a job): hpcnn must refuse with MemoryError naming file and dataset before
    it allocates the labels (before the fix: 'std::bad_alloc', nothing else)."""
    p = str(tmp_path / "e9.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", shape=(10 ** 9, 4), dtype=np.float32, chunks=(4096, 4), maxshape=(None, 4))
        f.create_dataset("y_train", shape=(10 ** 9,), dtype=np.uint8, chunks=(4096,), maxshape=(None,))
    rc, out = run_isolated(
        "from hpcnn import data\n"
        f"try:\n    data.HDF5Dataset({p!r})\nexcept MemoryError as e:\n    print('MEM', e)\n",
        limit_as=2 << 30)
    assert rc == 0 and "MEM" in out and "e9.h5" in out and "x_train" in out, (rc, out)


def contiguous_file(path, rows=64):
    x = np.arange(rows * 12, dtype=np.uint8).reshape(rows, 4, 3)
    with h5py.File(path, "w") as f:
        f.create_dataset("x_train", data=x)
        f.create_dataset("y_train", data=np.zeros(rows, np.uint8))
    return str(path), Path(path).read_bytes().find(struct.pack("<QQQ", rows, 4, 3))


def test_contiguous_rows_beyond_the_file_are_refused_at_open(tmp_path):
    """Item 6: a contiguous dataset whose dimensions (and maximum dimensions) were damaged to 10^9
    rows in a 3 KB file. Before the fix hpcnn opened it, and read_dataset allocated 12 GB before
    HDF5 failed to read it. Now the declared size is checked against the stored size and the
    file at open."""
    p, at = contiguous_file(tmp_path / "c.h5")
    patch(p, at, "<Q", 10 ** 9)
    patch(p, at + 24, "<Q", 10 ** 9)  # the maximum dimensions follow
    with pytest.raises(ValueError, match=r"x_train.*c\.h5.*declares shape \(1000000000, 4, 3\).*stores 768 bytes"):
        data.dataset_info(p, "x_train")


def test_dimension_above_its_maximum_is_refused(tmp_path):
    """Item 6: a damaged dimension larger than the dataset's maximum. HDF5 2.x (h5py) refuses the
    file; HDF5 1.10 opens it. Before the fix hpcnn read 65 rows of a 64-row dataset."""
    p, at = contiguous_file(tmp_path / "m.h5")
    patch(p, at, "<Q", 65)
    assert h5py_refuses(p)
    with pytest.raises(ValueError, match=r"x_train.*m\.h5.*dimension 0 is 65, above its maximum 64"):
        data.read_dataset(p, "x_train")


def test_nonstandard_number_type_is_refused(tmp_path):
    """A damaged type message (here the bit offset of a uint8 label) that HDF5 1.10 converts to
    zeros without an error (HDF5 2.x refuses it). Before the fix hpcnn trained on zero labels."""
    p = str(tmp_path / "t.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", data=np.zeros((20, 3), np.uint8))
        f.create_dataset("y_train", data=np.arange(20, dtype=np.uint8) % 5)
    blob = Path(p).read_bytes()
    # The fixed-point type of y: class 0 version 1, flags, size 1, then bit offset 0 and precision 8.
    at = blob.rfind(bytes([0x10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 8, 0]))
    patch(p, at + 8, "<H", 256)
    assert h5py_refuses(p, "y_train")
    with pytest.raises(ValueError, match=r"y_train.*t\.h5.*bit offset 256.*standard integers"):
        data.HDF5Dataset(p)


def test_damaged_layout_message_does_not_crash(tmp_path):
    """A damaged chunked layout message (dimensionality 0, or version 2). Before the fix HDF5 1.10
    divided by zero inside H5Dopen2 and the process died with SIGFPE; h5py (HDF5 2.x) raises.
    hpcnn now checks the layout message before HDF5 decodes it."""
    x = np.arange(40 * 6, dtype=np.uint8).reshape(40, 6)
    for i, (where, value) in enumerate([(2, 0), (0, 2)]):
        p = str(tmp_path / f"lay{i}.h5")
        with h5py.File(p, "w") as f:
            f.create_dataset("x_train", data=x, chunks=(10, 6), compression="gzip")
            f.create_dataset("y_train", data=np.zeros(40, np.uint8))
        at = Path(p).read_bytes().find(bytes([3, 2, 3]))  # layout v3, chunked, 3 dimensions
        patch(p, at + where, "<B", value)
        assert h5py_refuses(p)
        rc, out = run_isolated(
            "from hpcnn import data\n"
            f"try:\n    data.HDF5Dataset({p!r})\nexcept ValueError as e:\n    print('ERR', e)\n")
        assert rc == 0 and "ERR" in out and f"lay{i}.h5" in out and "layout message" in out, (rc, out)


def lookup3(data):
    """HDF5's metadata checksum (Bob Jenkins' lookup3 hashlittle, initial value 0)."""
    m = 0xFFFFFFFF

    def rot(x, k):
        return ((x << k) | (x >> (32 - k))) & m
    n, i = len(data), 0
    a = b = c = (0xDEADBEEF + n) & m
    while n > 12:
        a = (a + int.from_bytes(data[i:i + 4], "little")) & m
        b = (b + int.from_bytes(data[i + 4:i + 8], "little")) & m
        c = (c + int.from_bytes(data[i + 8:i + 12], "little")) & m
        a = (a - c) & m; a ^= rot(c, 4); c = (c + b) & m  # noqa: E702
        b = (b - a) & m; b ^= rot(a, 6); a = (a + c) & m  # noqa: E702
        c = (c - b) & m; c ^= rot(b, 8); b = (b + a) & m  # noqa: E702
        a = (a - c) & m; a ^= rot(c, 16); c = (c + b) & m  # noqa: E702
        b = (b - a) & m; b ^= rot(a, 19); a = (a + c) & m  # noqa: E702
        c = (c - b) & m; c ^= rot(b, 4); b = (b + a) & m  # noqa: E702
        n, i = n - 12, i + 12
    if n == 0:
        return c
    tail = data[i:i + n] + bytes(12 - n)
    a = (a + int.from_bytes(tail[0:4], "little")) & m
    b = (b + int.from_bytes(tail[4:8], "little")) & m
    c = (c + int.from_bytes(tail[8:12], "little")) & m
    c ^= b; c = (c - rot(b, 14)) & m  # noqa: E702
    a ^= c; a = (a - rot(c, 11)) & m  # noqa: E702
    b ^= a; b = (b - rot(a, 25)) & m  # noqa: E702
    c ^= b; c = (c - rot(b, 16)) & m  # noqa: E702
    a ^= c; a = (a - rot(c, 4)) & m  # noqa: E702
    b ^= a; b = (b - rot(a, 14)) & m  # noqa: E702
    c ^= b; c = (c - rot(b, 24)) & m  # noqa: E702
    return c


def test_layout_check_reads_version2_object_headers(tmp_path):
    """The layout check walks version-2 object headers too (HDF5 1.10 file format). Their
    checksum stops random damage before HDF5 decodes anything; here the checksum is recomputed,
    so the damaged chunk dimension reaches the layout message, where hpcnn's check finds it."""
    p = str(tmp_path / "v2.h5")
    with h5py.File(p, "w", libver=("v110", "v110")) as f:
        f.create_dataset("x_train", data=np.arange(40 * 6, dtype=np.uint8).reshape(40, 6), chunks=(10, 6),
                         compression="gzip")
        f.create_dataset("y_train", data=np.zeros(40, np.uint8))
        addr = h5py.h5o.get_info(f["x_train"].id).addr
    b = bytearray(Path(p).read_bytes())
    assert b[addr:addr + 4] == b"OHDR"
    flags = b[addr + 5]
    q = addr + 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
    width = 1 << (flags & 3)
    end = q + width + int.from_bytes(b[q:q + width], "little")
    assert int.from_bytes(b[end:end + 4], "little") == lookup3(bytes(b[addr:end]))
    # Layout message version 4, chunked: flags, 3 dimensions, 1..8 bytes each, then the dimensions.
    at = next(j for j in range(addr, end - 5) if b[j:j + 2] == b"\x04\x02" and b[j + 3] == 3 and b[j + 4] in (1, 2, 4, 8))
    b[at + 5] = 0  # chunk dimension 0 of 0 rows
    struct.pack_into("<I", b, end, lookup3(bytes(b[addr:end])))
    Path(p).write_bytes(b)
    with pytest.raises(ValueError, match=r"x_train.*v2\.h5.*layout message has chunk dimension 0 of 0"):
        data.HDF5Dataset(p)


@pytest.mark.parametrize("layout", ["contiguous", "gzip"])
def test_uint64_labels_above_int64_are_named_not_clipped(tmp_path, layout):
    """Issue 12, item 7 (file side): uint64 labels above 2^63-1 were clipped to 2^63-1 when read
    as int64 (HDF5's conversion, or hpcnn's chunk reader), so the error named a label that is not
    in the file, and read_dataset returned clipped values silently. Contiguous labels go through
    HDF5's conversion, gzip ones through hpcnn's own reader."""
    p = str(tmp_path / "u64.h5")
    y = np.arange(8, dtype=np.uint64) % 3
    y[5] = 2**64 - 1
    y[6] = 2**63
    opts = {"compression": "gzip", "chunks": (4,)} if layout == "gzip" else {}
    with h5py.File(p, "w") as f:
        f.create_dataset("x_train", data=np.zeros((8, 2, 2, 1), np.uint8))
        f.create_dataset("y_train", data=y, **opts)
    msg = r"y_train.*u64\.h5.* holds 18446744073709551615 at element 5: larger than 2\^63-1"
    with pytest.raises(ValueError, match=msg):
        data.HDF5Dataset(p)
    with pytest.raises(ValueError, match=msg):
        data.HDF5Dataset(p, num_classes=3)
    with pytest.raises(ValueError, match=msg):
        data.read_dataset(p, "y_train")
    # Values that fit are read as they are, the largest int64 included.
    with h5py.File(p, "a") as f:
        f["y_train"][5] = 2**63 - 1
        f["y_train"][6] = 1
    got = data.read_dataset(p, "y_train")
    assert got.dtype == np.int64 and got[5] == 2**63 - 1 and got[:5].tolist() == [0, 1, 2, 0, 1]


def test_fifo_is_refused_without_hanging(tmp_path):
    """Issue 12, item 12 (input half): a FIFO named as the input file. Before the fix HDF5's
    signature check opened and read it, waiting for a writer forever."""
    p = str(tmp_path / "pipe.h5")
    os.mkfifo(p)
    code = ("from hpcnn import data\n"
            "for f in (lambda: data.HDF5Dataset(%r), lambda: data.dataset_info(%r, 'x_train'),\n"
            "          lambda: data.read_dataset(%r, 'x_train')):\n"
            "    try:\n        f()\n    except ValueError as e:\n        print('ERR', e)\n") % (p, p, p)
    try:
        rc, out = run_isolated(code, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a FIFO hangs")
    assert rc == 0 and out.count("ERR") == 3 and "FIFO" in out and "pipe.h5" in out, out


def test_device_and_socket_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"'/dev/null' is a character device"):
        data.HDF5Dataset("/dev/null")
    import socket
    p = str(tmp_path / "sock.h5")
    s = socket.socket(socket.AF_UNIX)
    s.bind(p)
    try:
        with pytest.raises(ValueError, match=r"sock\.h5' is a socket"):
            data.HDF5Dataset(p)
    finally:
        s.close()


def drop_root_file_access():
    """preexec_fn for a child of root that must obey file permissions: drops CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH from the capability bounding set, so the exec'd process lacks them."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_unreadable_file_is_named(tmp_path):
    """A file without read permission. Before the fix HDF5's signature check failed and hpcnn
    said "not an HDF5 file (or is truncated/damaged...)". As root (CI) permissions do not apply, so the child process that
    opens it gives up root's right to ignore them."""
    p = good_file(tmp_path / "secret.h5")
    os.chmod(p, 0o000)
    code = ("from hpcnn import data\n"
            f"try:\n    data.HDF5Dataset({p!r})\nexcept (ValueError, PermissionError) as e:\n"
            "    print('ERR', type(e).__name__, e)\n")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             preexec_fn=drop_root_file_access if os.geteuid() == 0 else None)
        text = out.stdout + out.stderr
        assert re.search(r"ERR ValueError cannot read HDF5 file '.*secret\.h5': Permission denied", text), text
    finally:
        os.chmod(p, 0o600)
