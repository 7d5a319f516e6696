"""hpcnn.data.HDF5Dataset: round trips in every layout, shuffling, streaming, prefetch, repr."""

import os

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")
from hpcnn import data  # noqa: E402


def indexed_images(n, h=6, w=5, c=3, seed=0):
    """uint8 images whose first two bytes encode the row index (n <= 65536)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    flat = x.reshape(n, -1)
    flat[:, 0] = np.arange(n) // 256
    flat[:, 1] = np.arange(n) % 256
    return x


def row_ids(xb):
    """Row indices encoded by indexed_images, from a float batch decoded with scale=1."""
    flat = np.asarray(xb).reshape(xb.shape[0], -1)
    return (np.rint(flat[:, 0]).astype(int) * 256 + np.rint(flat[:, 1]).astype(int)).tolist()


def write(path, x, y, **kw):
    with h5py.File(path, "w") as f:
        f.create_dataset("x_train", data=x, **kw)
        if y is not None:
            f.create_dataset("y_train", data=y, **{k: v for k, v in kw.items() if k != "chunks"})
    return str(path)


LAYOUTS = {
    "tutorial": dict(compression="gzip", chunks=True),
    "contiguous": dict(),
    "chunked_raw": dict(chunks=(16, 6, 5, 3)),
    "gzip_shuffle": dict(compression="gzip", shuffle=True, chunks=(10, 3, 2, 2)),
    "gzip_odd_chunks": dict(compression="gzip", compression_opts=9, chunks=(7, 4, 3, 2)),
    "gzip_one_row": dict(compression="gzip", chunks=(1, 6, 5, 3)),
    "fletcher32": dict(fletcher32=True, chunks=(20, 6, 5, 3)),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_values_equal_h5py_reads(tmp_path, layout):
    n = 103
    x = indexed_images(n)
    y = (np.arange(n) % 10).astype(np.uint8).reshape(n, 1)
    p = write(tmp_path / "d.h5", x, y, **LAYOUTS[layout])
    with h5py.File(p, "r") as f:
        ref = f["x_train"][:]
    ds = data.HDF5Dataset(p, batch_size=16, shuffle=False, scale=1.0)
    xs, ys = zip(*[(a.copy(), b.copy()) for a, b in ds.epoch_batches(0)])
    xs, ys = np.concatenate(xs), np.concatenate(ys)
    assert xs.dtype == np.float32 and xs.flags.c_contiguous
    np.testing.assert_array_equal(xs, ref.astype(np.float32))
    assert ys.dtype == np.int32
    np.testing.assert_array_equal(ys, y[:, 0])


@pytest.mark.parametrize("shape,dtype,kw", [
    ((37, 32, 32, 3), np.uint8, dict(compression="gzip", chunks=(10, 4, 4, 1))),  # the tutorial's chunk kind
    ((23, 7, 9, 3), np.uint8, dict(compression="gzip", chunks=(4, 3, 2, 1))),    # edge chunks in every dim
    ((23, 7, 9, 3), np.uint8, dict(compression="gzip", chunks=(4, 7, 2, 3))),    # whole rows and channels
    ((23, 6, 5, 4), np.float32, dict(compression="gzip", shuffle=True, chunks=(5, 3, 4, 2))),
    ((29, 7, 9), np.uint8, dict(compression="gzip", chunks=(4, 3, 4))),         # (N, H, W)
    ((31, 10), np.float32, dict(compression="gzip", chunks=(6, 4))),            # features
], ids=["tutorial-chunks", "u8-edges", "u8-whole-inner", "f32-shuffle", "rank3", "rank2"])
def test_chunk_patches_scatter_every_layout(tmp_path, shape, dtype, kw):
    """The raw-chunk path's copy plan (a patch per chunk and row: a run within up to two strided
    loops) puts every element where h5py reads it."""
    rng = np.random.default_rng(3)
    x = (rng.integers(0, 256, shape).astype(dtype) if dtype == np.uint8
         else rng.standard_normal(shape).astype(dtype))
    p = write(tmp_path / "d.h5", x, None, **kw)
    ds = data.HDF5Dataset(p, y=None, batch_size=8, shuffle=False, scale=1.0)
    xs = np.concatenate([b[0].copy() if isinstance(b, tuple) else b.copy() for b in ds.epoch_batches(0)])
    want = x.astype(np.float32).reshape(xs.shape)
    np.testing.assert_array_equal(xs, want)
    assert "raw chunks" in repr(ds)


def test_default_scale_matches_tutorial_decode(tmp_path):
    x = indexed_images(40)
    p = write(tmp_path / "d.h5", x, np.zeros(40, np.uint8), compression="gzip", chunks=True)
    ds = data.HDF5Dataset(p, batch_size=40, shuffle=False)
    xb, _ = next(iter(ds.epoch_batches(0)))
    np.testing.assert_allclose(xb, x.astype("float32") / 255.0, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("cache,budget", [("memory", 1 << 30), ("none", 1 << 30), ("none", 3000), ("auto", 5000)])
def test_each_row_exactly_once_per_epoch(tmp_path, cache, budget):
    n = 257
    x = indexed_images(n)
    y = (np.arange(n) % 7).astype(np.int64)
    p = write(tmp_path / "d.h5", x, y, compression="gzip", chunks=(9, 3, 5, 3))
    ds = data.HDF5Dataset(p, batch_size=32, seed=3, scale=1.0, cache=cache, memory_budget=budget)
    assert len(ds) == 9
    for epoch in range(3):
        ids, labels, sizes = [], [], []
        for xb, yb in ds.epoch_batches(epoch):
            ids += row_ids(xb)
            labels += yb.tolist()
            sizes.append(xb.shape[0])
        assert sorted(ids) == list(range(n))
        assert labels == [i % 7 for i in ids]  # labels travel with their images
        assert sizes == [32] * 8 + [1]          # the last partial batch is delivered


def test_orders_differ_between_epochs_and_repeat_for_a_seed(tmp_path):
    n = 300
    p = write(tmp_path / "d.h5", indexed_images(n), np.zeros(n, np.uint8), compression="gzip", chunks=True)

    def order(ds, epoch):
        return sum((row_ids(xb) for xb, _ in ds.epoch_batches(epoch)), [])

    a = data.HDF5Dataset(p, batch_size=50, seed=11, scale=1.0)
    b = data.HDF5Dataset(p, batch_size=50, seed=11, scale=1.0)
    c = data.HDF5Dataset(p, batch_size=50, seed=12, scale=1.0)
    assert order(a, 0) == order(b, 0)
    assert order(a, 1) == order(b, 1)
    assert order(a, 0) != order(a, 1)
    assert order(a, 0) != order(c, 0)
    assert order(a, 0) != list(range(n))  # really shuffled
    unshuffled = data.HDF5Dataset(p, batch_size=50, shuffle=False, scale=1.0)
    assert order(unshuffled, 0) == list(range(n)) == order(unshuffled, 5)


def test_streaming_under_a_budget_smaller_than_the_file(tmp_path):
    n = 2000
    x = indexed_images(n, 8, 8, 3)  # 192 bytes a row, 384 KB in all
    p = write(tmp_path / "d.h5", x, (np.arange(n) % 10).astype(np.uint8), compression="gzip", chunks=(50, 8, 8, 3))
    budget = 64 * 1024
    ds = data.HDF5Dataset(p, batch_size=64, seed=0, scale=1.0, cache="auto", memory_budget=budget)
    assert not ds.in_memory
    assert "cache='none'" in repr(ds)
    for epoch in range(2):
        ids = sum((row_ids(xb) for xb, _ in ds.epoch_batches(epoch)), [])
        assert sorted(ids) == list(range(n))
    st = ds.stats
    assert st["peak_cached_bytes"] <= budget
    # Each 50-row block read once per epoch; the next epoch's first window (streamed: chunk groups,
    # each lane's first window, the lanes' segments sharing their boundary blocks) may be warming up.
    assert ds.shuffle_mode == "chunk_groups" and st["lanes"] == 2  # two blocks per lane fit the budget
    assert 2 * 40 <= st["blocks_read"] <= 2 * 40 + st["lanes"] * st["window_blocks"] + 1
    # Shuffled across windows too: the first batch is not just one block's rows.
    first = row_ids(next(iter(ds.epoch_batches(0)))[0])
    assert len({i // 50 for i in first}) > 1


def test_memory_cache_reads_the_file_once(tmp_path):
    n = 500
    p = write(tmp_path / "d.h5", indexed_images(n), np.zeros(n, np.uint8), compression="gzip", chunks=(100, 6, 5, 3))
    ds = data.HDF5Dataset(p, batch_size=64, cache="memory")
    assert ds.in_memory
    for epoch in range(3):
        for _ in ds.epoch_batches(epoch):
            pass
    assert ds.stats["blocks_read"] == 5


@pytest.mark.parametrize("shape,expect", [((30, 7, 9), (7, 9, 1)), ((30, 12), (12,)), ((30, 4, 4, 2), (4, 4, 2))])
def test_ranks(tmp_path, shape, expect):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    p = write(tmp_path / "d.h5", x, np.arange(30) % 3, compression="gzip", chunks=True)
    ds = data.HDF5Dataset(p, batch_size=8, shuffle=False, scale=1.0)
    assert ds.x_shape == expect
    xs = np.concatenate([a.copy() for a, _ in ds.epoch_batches(0)])
    assert xs.shape == (30,) + expect
    np.testing.assert_array_equal(xs.reshape(x.shape), x.astype(np.float32))


@pytest.mark.parametrize("dtype", ["<f4", ">f4"])
@pytest.mark.parametrize("kw", [dict(compression="gzip", shuffle=True, chunks=(5, 3, 2, 1)), dict()])
def test_float32_images(tmp_path, dtype, kw):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((23, 4, 4, 2)).astype(dtype)
    p = write(tmp_path / "d.h5", x, np.arange(23) % 2, **kw)
    ds = data.HDF5Dataset(p, batch_size=10, shuffle=False)  # float data: scale 1 by default
    xs = np.concatenate([a.copy() for a, _ in ds.epoch_batches(0)])
    np.testing.assert_array_equal(xs, x.astype(np.float32))


@pytest.mark.parametrize("ydtype,yshape", [("u1", (40, 1)), ("i2", (40,)), ("i8", (40, 1)), ("u4", (40,))])
def test_label_types_and_one_hot(tmp_path, ydtype, yshape):
    y = (np.arange(40) % 4).astype(ydtype).reshape(yshape)
    p = write(tmp_path / "d.h5", indexed_images(40), y, compression="gzip", chunks=True)
    ds = data.HDF5Dataset(p, batch_size=16, shuffle=False, one_hot=4)
    assert ds.num_classes == 4
    ys = np.concatenate([b.copy() for _, b in ds.epoch_batches(0)])
    assert ys.dtype == np.float32 and ys.shape == (40, 4)
    np.testing.assert_array_equal(ys, np.eye(4, dtype=np.float32)[np.arange(40) % 4])
    assert data.HDF5Dataset(p, batch_size=16).num_classes == 4  # inferred
    ys2 = next(iter(data.HDF5Dataset(p, batch_size=16, shuffle=False, one_hot=True).epoch_batches(0)))[1]
    np.testing.assert_array_equal(ys2, ys[:16])


def test_drop_remainder_and_len(tmp_path):
    p = write(tmp_path / "d.h5", indexed_images(50), np.zeros(50, np.uint8))
    assert len(data.HDF5Dataset(p, batch_size=16)) == 4
    ds = data.HDF5Dataset(p, batch_size=16, drop_remainder=True, scale=1.0)
    assert len(ds) == 3
    sizes = [xb.shape[0] for xb, _ in ds.epoch_batches(0)]
    assert sizes == [16, 16, 16]


def test_sequence_protocol_matches_epoch_batches(tmp_path):
    n = 90
    p = write(tmp_path / "d.h5", indexed_images(n), np.arange(n) % 3, compression="gzip", chunks=(20, 6, 5, 3))
    ds = data.HDF5Dataset(p, batch_size=25, seed=5, scale=1.0, cache="none", memory_budget=2000)
    fast = [(a.copy(), b.copy()) for a, b in ds.epoch_batches(0)]
    for i in range(len(ds)):
        xb, yb = ds[i]
        np.testing.assert_array_equal(xb, fast[i][0])
        np.testing.assert_array_equal(yb, fast[i][1])
    np.testing.assert_array_equal(ds[-1][0], fast[-1][0])
    with pytest.raises(IndexError):
        ds[len(ds)]
    ds.on_epoch_end()
    np.testing.assert_array_equal(ds[0][0], next(iter(ds.epoch_batches(1)))[0])


def test_mean_std_normalization(tmp_path):
    x = indexed_images(12, 2, 2, 3)
    p = write(tmp_path / "d.h5", x, np.zeros(12, np.uint8))
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.5)
    ds = data.HDF5Dataset(p, batch_size=12, shuffle=False, scale=(mean, std))
    xb, _ = next(iter(ds.epoch_batches(0)))
    ref = (x.astype(np.float64) / 255 - np.array(mean)) / np.array(std)
    np.testing.assert_allclose(xb, ref, rtol=1e-5, atol=1e-5)


def test_break_stops_the_producer_and_arrays_stay_valid(tmp_path):
    n = 400
    p = write(tmp_path / "d.h5", indexed_images(n), np.zeros(n, np.uint8), compression="gzip", chunks=True)
    ds = data.HDF5Dataset(p, batch_size=10, seed=1, scale=1.0, prefetch=2)
    kept = []
    for k in range(20):  # many early exits: threads must not pile up or hang
        for i, (xb, yb) in enumerate(ds.epoch_batches(k)):
            kept.append((xb, row_ids(xb)))
            if i == 2:
                break
    it = ds.epoch_batches(0)
    next(it)
    del it  # dropped without exhausting: closed by the generator's finally
    for xb, ids in kept:  # held batches keep their values: buffers are recycled only when released
        assert row_ids(xb) == ids
    assert sum(1 for _ in ds.epoch_batches(0)) == 40


def test_exception_inside_the_loop_closes_cleanly(tmp_path):
    p = write(tmp_path / "d.h5", indexed_images(100), np.zeros(100, np.uint8))
    ds = data.HDF5Dataset(p, batch_size=10)
    with pytest.raises(RuntimeError, match="boom"):
        for i, _ in enumerate(ds.epoch_batches(0)):
            if i == 1:
                raise RuntimeError("boom")
    assert sum(1 for _ in ds.epoch_batches(1)) == 10


def test_no_labels_for_predict(tmp_path):
    p = write(tmp_path / "d.h5", indexed_images(30), None)
    ds = data.HDF5Dataset(p, y=None, batch_size=8, shuffle=False)
    batches = list(ds.epoch_batches(0))
    assert all(yb is None for _, yb in batches)
    assert ds.num_classes is None
    assert sum(xb.shape[0] for xb, _ in batches) == 30


def test_gpu_device_request_without_cuda_still_delivers(tmp_path):
    p = write(tmp_path / "d.h5", indexed_images(20), np.zeros(20, np.uint8))
    ds = data.HDF5Dataset(p, batch_size=8)
    assert sum(xb.shape[0] for xb, _ in ds.epoch_batches(0, device="gpu")) == 20


def test_repr_and_info(tmp_path):
    p = write(tmp_path / "cifar.h5", indexed_images(64), np.zeros((64, 1), np.uint8), compression="gzip", chunks=True)
    ds = data.HDF5Dataset(p, batch_size=16)
    r = repr(ds)
    for part in ("cifar.h5", "x_train", "y_train", "(64, 6, 5, 3)", "uint8", "chunks=(", "gzip", "rows=64"):
        assert part in r, (part, r)
    assert ds.num_rows == 64 and ds.info["x"]["compression"] == "gzip"
    info = data.dataset_info(p, "x_train")
    assert info["shape"] == (64, 6, 5, 3) and info["dtype"] == "uint8" and info["chunks"] is not None


def test_iterating_the_dataset_advances_epochs(tmp_path):
    p = write(tmp_path / "d.h5", indexed_images(60), np.zeros(60, np.uint8))
    ds = data.HDF5Dataset(p, batch_size=60, seed=2, scale=1.0)
    a = row_ids(next(iter(ds))[0])
    b = [row_ids(xb) for xb, _ in ds]  # epoch 0 again (the first iter was not finished)
    c = [row_ids(xb) for xb, _ in ds]  # epoch 1
    assert b[0] == a and c[0] != a


def test_extendible_dataset_with_unwritten_chunks(tmp_path):
    # maxshape=None, chunks larger than the data in dims 1.., rows added by resize and never
    # written: those chunks are unallocated and read as HDF5's fill value (0).
    p = str(tmp_path / "d.h5")
    x = indexed_images(45)
    with h5py.File(p, "w") as f:
        d = f.create_dataset("x_train", data=x, maxshape=(None,) * 4, chunks=(20, 8, 8, 4), compression="gzip")
        d.resize((80, 6, 5, 3))
        f.create_dataset("y_train", data=np.zeros(80, np.uint8))
        ref = f["x_train"][:]
    ds = data.HDF5Dataset(p, batch_size=32, shuffle=False, scale=1.0)
    xs = np.concatenate([a.copy() for a, _ in ds.epoch_batches(0)])
    np.testing.assert_array_equal(xs, ref.astype(np.float32))
    np.testing.assert_array_equal(data.read_dataset(p, "x_train"), ref)


def test_read_dataset(tmp_path):
    x = indexed_images(70)
    y = (np.arange(70) % 5).astype(np.int16).reshape(70, 1)
    p = write(tmp_path / "d.h5", x, y, compression="gzip", chunks=True)
    np.testing.assert_array_equal(data.read_dataset(p, "x_train"), x)
    got = data.read_dataset(p, "y_train")
    assert got.dtype == np.int64 and got.shape == (70, 1)
    np.testing.assert_array_equal(got, y)


def test_iteration_releases_the_gil(tmp_path):
    import threading
    n = 3000
    p = write(tmp_path / "d.h5", indexed_images(n, 16, 16, 3), np.zeros(n, np.uint8), compression="gzip",
              chunks=(100, 16, 16, 3))
    ds = data.HDF5Dataset(p, batch_size=50, cache="none", memory_budget=1 << 16)
    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        for epoch in range(2):
            assert sum(xb.shape[0] for xb, _ in ds.epoch_batches(epoch)) == n
    finally:
        stop.set()
        t.join()
    assert ticks[0] > 0


def test_concurrent_random_access_and_iteration(tmp_path):
    import threading
    n = 500
    p = write(tmp_path / "d.h5", indexed_images(n), np.zeros(n, np.uint8), compression="gzip", chunks=(50, 6, 5, 3))
    ds = data.HDF5Dataset(p, batch_size=25, seed=4, scale=1.0, cache="none", memory_budget=4000)
    ref = [row_ids(xb) for xb, _ in ds.epoch_batches(0)]
    errors = []

    def reader():
        try:
            for i in range(len(ds)):
                assert row_ids(ds[i][0]) == ref[i]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    th = [threading.Thread(target=reader) for _ in range(2)]
    for t in th:
        t.start()
    got = [row_ids(xb) for xb, _ in ds.epoch_batches(0)]
    for t in th:
        t.join()
    assert not errors and got == ref


def test_scalar_mean_std(tmp_path):
    x = indexed_images(8, 2, 2, 3)
    p = write(tmp_path / "d.h5", x, np.zeros(8, np.uint8))
    xb, _ = next(iter(data.HDF5Dataset(p, batch_size=8, shuffle=False, scale=(0.5, 0.25)).epoch_batches(0)))
    np.testing.assert_allclose(xb, (x / 255.0 - 0.5) / 0.25, rtol=1e-5, atol=1e-5)


def test_ctrl_c_while_iterating_stops_cleanly(tmp_path, default_sigint):
    import subprocess
    import sys
    n = 4000
    p = write(tmp_path / "d.h5", indexed_images(n, 32, 32, 3), np.zeros(n, np.uint8), compression="gzip",
              chunks=(100, 32, 32, 3))
    code = f"""
import os, signal, time, hpcnn.data as d
ds = d.HDF5Dataset({p!r}, batch_size=10, cache='none', memory_budget=1 << 16, prefetch=2)
for _ in ds.epoch_batches(999):
    pass
time.sleep(0.5)  # let the next epoch's warm-up thread finish
base = len(os.listdir('/proc/self/task'))  # OS threads once a producer has come and gone
signal.setitimer(signal.ITIMER_REAL, 0.3)
signal.signal(signal.SIGALRM, lambda *a: signal.raise_signal(signal.SIGINT))
try:
    for epoch in range(1000):
        for xb, yb in ds.epoch_batches(epoch):
            time.sleep(0.001)
except KeyboardInterrupt:
    time.sleep(0.5)
    print('interrupted', len(os.listdir('/proc/self/task')) - base)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "interrupted 0" in out.stdout, out.stdout + out.stderr


def test_datasets_inside_groups(tmp_path):
    p = str(tmp_path / "g.h5")
    x = indexed_images(33)
    with h5py.File(p, "w") as f:
        f.create_dataset("train/images", data=x, compression="gzip", chunks=(8, 6, 5, 3))
        f.create_dataset("train/labels", data=np.arange(33) % 3)
    ds = data.HDF5Dataset(p, x="train/images", y="/train/labels", batch_size=10, shuffle=False, scale=1.0)
    xs = np.concatenate([a.copy() for a, _ in ds.epoch_batches(0)])
    np.testing.assert_array_equal(xs, x.astype(np.float32))
    with pytest.raises(ValueError, match="'train/nope'"):
        data.HDF5Dataset(p, x="train/nope")


def test_the_tutorials_exact_file(tmp_path):
    rng = np.random.default_rng(7)
    x_train = rng.integers(0, 256, (500, 32, 32, 3), dtype=np.uint8)
    y_train = rng.integers(0, 10, (500, 1)).astype(np.uint8)
    x_valid = rng.integers(0, 256, (100, 32, 32, 3), dtype=np.uint8)
    y_valid = rng.integers(0, 10, (100, 1)).astype(np.uint8)
    p = str(tmp_path / "dataset_cifar10.hdf5")
    with h5py.File(p, "w") as hf:
        hf.create_dataset("x_train", data=x_train, shape=(500, 32, 32, 3), compression="gzip", chunks=True)
        hf.create_dataset("y_train", data=y_train, shape=(500, 1), compression="gzip", chunks=True)
        hf.create_dataset("x_valid", data=x_valid, shape=(100, 32, 32, 3), compression="gzip", chunks=True)
        hf.create_dataset("y_valid", data=y_valid, shape=(100, 1), compression="gzip", chunks=True)
    train = data.HDF5Dataset(p, batch_size=250, one_hot=10, seed=0)
    valid = data.HDF5Dataset(p, x="x_valid", y="y_valid", batch_size=250, one_hot=10, shuffle=False)
    assert len(train) == 2 and len(valid) == 1
    xv, yv = next(iter(valid.epoch_batches(0)))
    np.testing.assert_allclose(xv, x_valid.astype("float32") / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(yv, np.eye(10, dtype=np.float32)[y_valid[:, 0]])  # = to_categorical
    xs, ys = zip(*[(a.copy(), b.copy()) for a, b in train.epoch_batches(0)])
    xs, ys = np.concatenate(xs), np.concatenate(ys)
    order = np.lexsort(np.rint(xs * 255).reshape(500, -1).T[::-1])
    ref = np.lexsort(x_train.reshape(500, -1).T[::-1].astype(np.int64))
    np.testing.assert_allclose(xs[order], x_train[ref] / np.float32(255), rtol=1e-6)
    np.testing.assert_array_equal(ys[order].argmax(1), y_train[ref, 0])


@pytest.mark.parametrize("shuffle", ["rows", "chunk_groups"])
def test_streaming_reads_the_next_window_ahead(tmp_path, shuffle):
    import time
    n = 2000
    x = indexed_images(n, 8, 8, 3)  # 192 bytes a row; blocks of 50 rows = 9600 bytes
    p = write(tmp_path / "d.h5", x, np.zeros(n, np.uint8), compression="gzip", chunks=(50, 8, 8, 3))
    ds = data.HDF5Dataset(p, batch_size=20, seed=0, scale=1.0, cache="none", memory_budget=2 * 4 * 9600, prefetch=2,
                          shuffle=shuffle)
    # rows: windows of 4 blocks, two in memory; chunk groups: 2 lanes (each lane's window, the
    # next and a block: 3 blocks of 9600 bytes a lane fit the budget, 4 lanes would not) of windows
    # of 1 block: the first batch reads 2 blocks, or 3 where the lanes' segments share one.
    assert (ds.stats["window_blocks"], ds.stats["lanes"]) == ((4, 0) if shuffle == "rows" else (1, 2))
    first_window = 4 if shuffle == "rows" else 3
    it = ds.epoch_batches(0)
    ids = row_ids(next(it)[0])
    # A slow training step: the producer's queue is full, so it reads the next window ahead.
    deadline = time.monotonic() + 10
    while ds.stats["blocks_read"] <= first_window and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ds.stats["blocks_read"] > first_window  # more than window 0 is in
    assert ds.stats["peak_cached_bytes"] <= 2 * 4 * 9600
    for xb, _ in it:
        ids += row_ids(xb)
    assert sorted(ids) == list(range(n))
    assert 40 <= ds.stats["blocks_read"] <= 44  # nothing read twice (+ the next epoch's warm-up)


def test_close_and_context_manager(tmp_path):
    p = write(tmp_path / "d.h5", indexed_images(20), np.zeros(20, np.uint8))
    with data.HDF5Dataset(p, batch_size=8) as ds:
        assert len(ds) == 3
    assert "closed" in repr(ds)
    with pytest.raises(ValueError, match="closed"):
        len(ds)
    with pytest.raises(ValueError, match="closed"):
        next(iter(ds.epoch_batches(0)))
    os.remove(p)  # the file is no longer held open


@pytest.mark.parametrize("dtype,fill", [(np.float32, 7.5), (np.uint8, 3), (np.float32, float("nan")),
                                        (">f4", -1.25)])
@pytest.mark.parametrize("compression", ["gzip", None])
@pytest.mark.parametrize("fill_time", ["ifset", "alloc", "never"])
def test_unwritten_chunks_read_as_the_fill_value(tmp_path, dtype, fill, compression, fill_time):
    """Issue 12, item 3: chunks never written read as the dataset's fill value, as h5py reads
    them (the fill value when one was set, unless the fill time is 'never'; else zeros). Before
    the fix hpcnn's own chunk reader filled them with zeros."""
    p = str(tmp_path / "fill.h5")
    written = np.arange(10 * 9, dtype=np.float64).reshape(10, 3, 3).astype(dtype)
    with h5py.File(p, "w") as f:
        d = f.create_dataset("x_train", shape=(40, 3, 3), dtype=dtype, chunks=(10, 3, 3), compression=compression,
                             fillvalue=fill, fill_time=fill_time)
        d[10:20] = written
        y = f.create_dataset("y_train", shape=(40,), dtype=np.int16, chunks=(8,), fillvalue=2, fill_time=fill_time)
        y[0:8] = np.arange(8) % 3
        ref, yref = f["x_train"][()], f["y_train"][()]
    got = data.read_dataset(p, "x_train")
    np.testing.assert_array_equal(got, ref)  # NaN == NaN here
    assert got.dtype == np.float32 or got.dtype == np.uint8
    np.testing.assert_array_equal(data.read_dataset(p, "y_train"), yref)
    for cache in ("memory", "none"):
        ds = data.HDF5Dataset(p, batch_size=16, shuffle=False, cache=cache, memory_budget=1, scale=1.0)
        xs, ys = zip(*[(a.copy(), b.copy()) for a, b in ds.epoch_batches(0)])
        np.testing.assert_array_equal(np.concatenate(xs), ref[..., None].astype(np.float32))
        np.testing.assert_array_equal(np.concatenate(ys), yref)
