"""What each rank of a data-parallel run reads (HDF5Dataset.model_batches with a shard): the
global batches do not depend on the rank count (the shards' rows of a batch, concatenated in rank
order, are the unsharded batch), every row comes once per epoch, and with the chunk-group shuffle
each of N ranks reads about 1/N of a streamed file (issue 25: at most 1.2/N for N = 2, 4, 8),
where the rows shuffle reads all of it on every rank."""
import numpy as np
import pytest

from hpcnn import data

ROWS, CHUNK = 6400, 16  # 400 blocks of 16 rows: the lanes' boundary blocks are a few per cent
BUDGET = 160 * 1024     # the file (6400 rows x 48 bytes, 300 KiB) does not fit: it streams
# 64 lanes of batches of 256: a lane takes 4 rows a batch, a window of one 16-row block holds them;
# one process holds 64 x (2 + 1) blocks of 768 bytes, 144 KiB.


def ids_of(xb):
    """The row index stored in the first two pixels (as written by write_indexed)."""
    x = np.rint(np.asarray(xb) * 255).astype(np.int64)
    return x[:, 0, 0, 0] + 256 * x[:, 0, 1, 0]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("shards") / "d.h5")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (ROWS, 4, 4, 3), dtype=np.uint8)
    x[:, 0, 0, 0] = np.arange(ROWS) % 256
    x[:, 0, 1, 0] = np.arange(ROWS) // 256
    data.write_hdf5(p, {"x_train": x, "y_train": (np.arange(ROWS) % 10).astype(np.uint8)}, chunk_rows=CHUNK)
    return p


def dataset(path, shuffle, **kw):
    return data.HDF5Dataset(path, batch_size=kw.pop("batch_size", 256), shuffle=shuffle, seed=5,
                            memory_budget=kw.pop("memory_budget", BUDGET), **kw)


def epoch_rows(ds, epoch, shard=None):
    """Per batch: the row ids this shard gets."""
    return [ids_of(b[0]) for b in ds.model_batches(epoch, "cpu", shard=shard)]


def read_by_epochs(ds):
    """(blocks, bytes read, bytes inflated) of a chunk-group dataset's one epoch read, without its
    warm-up of the next one: the counters once that warm-up has finished, minus what it read (with
    chunk groups nothing warms up epoch 0: the rank's lanes are not known before it asks)."""
    ds.settle()
    st = ds.stats
    return st["blocks_read"] - st["warm_blocks_read"], st["bytes_read"] - st["warm_bytes_read"], \
        st["bytes_inflated"] - st["warm_bytes_inflated"]


def test_true_picks_chunk_groups_for_a_streamed_file_and_rows_for_a_cached_one(path):
    streamed, cached = dataset(path, True), dataset(path, True, memory_budget=1 << 30)
    assert (streamed.shuffle_mode, streamed.in_memory) == ("chunk_groups", False)
    assert (cached.shuffle_mode, cached.in_memory) == ("rows", True)
    assert dataset(path, True, memory_budget=1 << 30, cache="none").shuffle_mode == "chunk_groups"
    assert dataset(path, False).shuffle_mode == "off" and not dataset(path, False).shuffle
    assert "shuffle='chunk_groups'" in repr(streamed) and "64 lanes" in repr(streamed)
    assert streamed.stats["lanes"] == 64 and streamed.stats["window_blocks"] == 1


@pytest.mark.parametrize("shuffle", ["chunk_groups", "rows"])
def test_the_global_batches_do_not_depend_on_the_rank_count(path, shuffle):
    whole = dataset(path, shuffle)
    for epoch in range(2):
        full = epoch_rows(whole, epoch)
        assert sorted(np.concatenate(full).tolist()) == list(range(ROWS))  # every row once
        for ranks in (2, 3, 4, 8):
            shards = [epoch_rows(dataset(path, shuffle), epoch, (r, ranks)) for r in range(ranks)]
            for i, batch in enumerate(full):
                np.testing.assert_array_equal(np.concatenate([s[i] for s in shards]), batch, err_msg=f"{ranks} ranks")


def test_chunk_groups_read_a_rank_its_share_of_the_file(path):
    whole = dataset(path, "chunk_groups")
    epoch_rows(whole, 0)
    blocks = whole.stats["num_blocks"]
    read, file_bytes, inflated = read_by_epochs(whole)
    assert read == blocks  # one process: every block once, none twice
    assert inflated == ROWS * 48
    assert whole.stats["peak_cached_bytes"] <= BUDGET
    for ranks in (2, 4, 8):
        for r in range(ranks):
            ds = dataset(path, "chunk_groups")
            epoch_rows(ds, 0, (r, ranks))
            read, nbytes, inflated = read_by_epochs(ds)
            assert read <= 1.2 * blocks / ranks, (ranks, r, read, blocks)
            assert nbytes <= 1.2 * file_bytes / ranks, (ranks, r, nbytes, file_bytes)
            assert inflated <= 1.2 * ROWS * 48 / ranks
            assert ds.stats["peak_cached_bytes"] <= BUDGET


def test_the_rows_shuffle_reads_every_window_on_every_rank(path):
    """The contrast (and why shuffle=True does not pick it for a streamed file)."""
    for r in range(2):
        ds = dataset(path, "rows")
        epoch_rows(ds, 0, (r, 2))
        assert ds.stats["blocks_read"] >= ds.stats["num_blocks"]


def test_later_epochs_and_a_resumed_epoch_read_only_the_share(path):
    """Epoch 1 after epoch 0 (the warm-up at the end of epoch 0 loads only this rank's first
    windows) and an epoch started mid-way (a resumed run) read about 1/4 each on rank 1 of 4."""
    ds = dataset(path, "chunk_groups")
    blocks = ds.stats["num_blocks"]
    for epoch in range(2):
        epoch_rows(ds, epoch, (1, 4))
    ds.settle()
    st = ds.stats
    assert st["blocks_read"] - st["warm_blocks_read"] <= 2 * 1.2 * blocks / 4
    assert 0 < st["warm_blocks_read"] <= 2 * (64 // 4 + 1)  # two warm-ups: its lanes' first windows
    resumed = dataset(path, "chunk_groups")
    got = [ids_of(b[0]) for b in resumed.model_batches(0, "cpu", first_batch=10, shard=(1, 4))]
    np.testing.assert_array_equal(np.concatenate(got), np.concatenate(epoch_rows(dataset(path, "chunk_groups"), 0, (1, 4))[10:]))
    assert read_by_epochs(resumed)[0] <= 1.2 * blocks / 4


def test_a_small_budget_has_fewer_lanes_and_stays_within_it(path):
    """Each lane's window and the next (and a block) must fit the budget for one process: with
    768-byte blocks, 40 KiB give 16 lanes (a window of one block holds a lane's 16 rows of a
    batch: 16 x 3 blocks, 36 KiB); 32 lanes would need 72 KiB."""
    ds = dataset(path, "chunk_groups", memory_budget=40 * 1024)
    assert (ds.stats["lanes"], ds.stats["window_blocks"]) == (16, 1)
    full = epoch_rows(ds, 0)
    assert sorted(np.concatenate(full).tolist()) == list(range(ROWS))
    assert ds.stats["peak_cached_bytes"] <= 40 * 1024
    half = [dataset(path, "chunk_groups", memory_budget=40 * 1024) for _ in range(2)]
    parts = [epoch_rows(d, 0, (r, 2)) for r, d in enumerate(half)]
    for i, batch in enumerate(full):
        np.testing.assert_array_equal(np.concatenate([parts[0][i], parts[1][i]]), batch)
    assert all(read_by_epochs(d)[0] <= 1.2 * d.stats["num_blocks"] / 2 for d in half)
    # A batch larger than the budget can hold twice: one lane, windows of a batch's rows.
    tiny = dataset(path, "chunk_groups", memory_budget=1024)
    assert (tiny.stats["lanes"], tiny.stats["window_blocks"]) == (1, 16)
    assert sorted(np.concatenate(epoch_rows(tiny, 0)).tolist()) == list(range(ROWS))


def test_the_cached_chunk_group_shuffle_keeps_a_rank_to_its_lanes(path):
    """cache='memory' with chunk groups: each lane is one window (the file fits the budget), and
    a rank caches only its lanes' blocks."""
    ds = dataset(path, "chunk_groups", memory_budget=1 << 30)
    blocks = ds.stats["num_blocks"]
    assert ds.in_memory and ds.stats["window_blocks"] == blocks
    epoch_rows(ds, 0, (0, 4))
    assert read_by_epochs(ds)[0] <= 1.2 * blocks / 4
    # Later epochs give the rank other groups: it reads the blocks it has not cached yet, never
    # one twice (over the epochs, the file once).
    for epoch in range(1, 12):
        epoch_rows(ds, epoch, (0, 4))
    assert ds.stats["blocks_read"] <= blocks
