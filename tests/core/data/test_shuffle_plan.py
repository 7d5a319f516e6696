"""The loader's epoch order (csrc/data/shuffle_plan.*) as a distribution, and the check the loader
makes of every plan.

The data tests elsewhere check that an epoch is complete and differs between epochs; a shuffle can
pass both and still be biased (a Fisher-Yates off by one that only ever makes cyclic orders, found
by a mutation run). These tests count orders over many epochs and compare the counts with the
uniform distribution by a chi-square test at a significance of 1e-6 (a correct shuffle fails one
in a million runs; the draws are a pure function of (seed, epoch), so each run here is the same).
"""
import itertools
import math

import numpy as np
import pytest

from hpcnn._core import data as core_data

ALPHA = 1e-6


def chi2_upper(dof: int, alpha: float = ALPHA) -> float:
    """The chi-square value exceeded with probability alpha (Wilson-Hilferty, accurate to a few
    per cent for dof >= 3, ample at 1e-6)."""
    z = {1e-6: 4.753424}[alpha]  # the standard normal's upper 1e-6 quantile
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


def chi2(counts: np.ndarray, expected: float) -> float:
    return float(((counts - expected) ** 2 / expected).sum())


def orders(rows, block_rows, window_blocks, epochs, seed=7):
    return [core_data.epoch_plan(rows, block_rows, window_blocks, "rows", seed, e)[0] for e in range(epochs)]


@pytest.mark.parametrize("rows, block_rows", [(4, 4), (4, 1), (5, 2)])
def test_every_order_of_a_one_window_epoch_is_equally_likely(rows, block_rows):
    """One window holds every block: the order is a uniform permutation of all rows (all n! orders
    equally likely), whatever the block size."""
    perms = {p: i for i, p in enumerate(itertools.permutations(range(rows)))}
    per_perm = 200
    epochs = per_perm * len(perms)
    counts = np.zeros(len(perms))
    for order in orders(rows, block_rows, 1 << 20, epochs):
        counts[perms[tuple(int(r) for r in order)]] += 1
    assert counts.min() > 0, "some orders never occur (a cyclic-only shuffle makes (n-1)! of the n!)"
    assert chi2(counts, per_perm) < chi2_upper(len(perms) - 1), counts


def test_each_row_is_equally_likely_at_each_position():
    """For more rows than permutations can be counted: every (position, row) cell of 40 rows over
    8,000 epochs, and the row that follows each row (a cyclic shuffle never puts a row first after
    itself...)."""
    rows, epochs = 40, 8000
    cells = np.zeros((rows, rows))
    for order in orders(rows, 8, 1 << 20, epochs):
        cells[np.arange(rows), order] += 1
    assert chi2(cells, epochs / rows) < chi2_upper((rows - 1) ** 2)


def test_the_windowed_shuffle_permutes_blocks_and_rows_within_windows_uniformly():
    """cache='none' with a window of one block: the block order is a uniform permutation of the
    blocks, and each block's rows come in a uniform order; every row exactly once."""
    rows, block_rows, epochs = 8, 2, 4800
    block_perms = {p: i for i, p in enumerate(itertools.permutations(range(4)))}
    block_counts, first_row = np.zeros(len(block_perms)), np.zeros(rows)
    for e in range(epochs):
        order, windows, window_end, _ = core_data.epoch_plan(rows, block_rows, 1, "rows", 3, e)
        assert sorted(order.tolist()) == list(range(rows))
        assert window_end == [2, 4, 6, 8] and all(len(w) == 1 for w in windows)
        block_counts[block_perms[tuple(w[0] for w in windows)]] += 1
        for w, end in zip(windows, window_end):
            assert set(order[end - 2:end].tolist()) == {2 * w[0], 2 * w[0] + 1}
        first_row[order[0]] += 1
    assert chi2(block_counts, epochs / len(block_perms)) < chi2_upper(len(block_perms) - 1)
    assert chi2(first_row, epochs / rows) < chi2_upper(rows - 1)


def test_without_shuffle_the_order_is_the_file_order():
    order, windows, window_end, _ = core_data.epoch_plan(10, 4, 1, "off", 1, 3)
    assert order.tolist() == list(range(10)) and windows == [[0], [1], [2]] and window_end == [4, 8, 10]


def test_orders_are_a_function_of_seed_and_epoch():
    a = core_data.epoch_plan(50, 8, 2, "rows", 11, 4)[0]
    assert np.array_equal(a, core_data.epoch_plan(50, 8, 2, "rows", 11, 4)[0])
    assert not np.array_equal(a, core_data.epoch_plan(50, 8, 2, "rows", 12, 4)[0])
    assert not np.array_equal(a, core_data.epoch_plan(50, 8, 2, "rows", 11, 5)[0])


# ---------------------------------------------------------------------- the loader's check of a plan
def good_plan():
    order, windows, window_end, _ = core_data.epoch_plan(10, 4, 2, "rows", 5, 0)
    return order.tolist(), windows, window_end


def test_the_plans_it_makes_pass_the_check():
    for rows, block_rows, window_blocks in [(0, 4, 1), (1, 4, 1), (10, 4, 1), (10, 4, 2), (97, 8, 3), (64, 8, 100)]:
        for shuffle in ("off", "rows"):
            order, windows, window_end, _ = core_data.epoch_plan(rows, block_rows, window_blocks, shuffle, 9, 2)
            core_data.check_epoch_plan(order.tolist(), windows, window_end, rows, block_rows)


@pytest.mark.parametrize("damage, message", [
    (lambda o, w, e: (o[:-1], w, e[:-1] + [e[-1] - 1]), "orders 9 rows, not 10"),
    (lambda o, w, e: (o[:-1], w, e), "orders 9 rows, not 10"),
    (lambda o, w, e: (o[:1] + o[:-1], w, e), "comes twice"),
    (lambda o, w, e: ([10] + o[1:], w, e), "holds row 10"),
    (lambda o, w, e: (o, w, e[:-1] + [9]), "end at 9, not at 10"),
    (lambda o, w, e: (o, w[:-1], e), "windows but"),
    (lambda o, w, e: (o, [w[1], w[0]], e), "which window"),
    (lambda o, w, e: (o, [w[0], w[0]], e), "is in windows"),
])
def test_a_wrong_plan_is_an_error_naming_what_is_wrong(damage, message):
    """A plan shorter than the rows it should cover (or repeating a row, or whose windows do not
    load the blocks its positions read) made the loader read outside its cache: the check that the
    loader makes of every plan raises instead."""
    order, windows, window_end = damage(*good_plan())
    with pytest.raises(RuntimeError, match=message) as e:
        core_data.check_epoch_plan(order, windows, window_end, 10, 4)
    assert "internal error in the shuffle plan (10 rows in blocks of 4)" in str(e.value)


# ---------------------------------------------------------------------- the chunk-group shuffle
def group_plan(rows, block_rows, window_blocks, batch_size, epoch, seed=7, lanes=64):
    return core_data.epoch_plan(rows, block_rows, window_blocks, "chunk_groups", seed, epoch, batch_size, lanes)


def test_rank_boundaries_of_power_of_two_counts_fall_on_lane_boundaries():
    """A rank of R (R dividing the 64 lanes) fills whole lanes of every batch, of any size: its
    rows come from its lanes' chunk groups only."""
    lanes = core_data.CHUNK_GROUP_LANES
    assert lanes == 64
    for n in range(1, 300):
        lane_starts = {n * k // lanes for k in range(lanes + 1)}
        for ranks in (2, 4, 8, 16, 32, 64):
            assert {n * r // ranks for r in range(ranks + 1)} <= lane_starts, (n, ranks)


def test_each_row_is_equally_likely_at_each_position_when_lanes_hold_whole_blocks():
    """8 lanes of one row per batch, each lane's demand one block: lane k takes block perm[k] and
    delivers its rows in a uniform order, so every row is equally likely at every position (both
    the lane and the batch are uniform). A cyclic-only shuffle never gives lane k block k, nor a
    row its own block's first position."""
    lanes, block_rows = 8, 4
    rows, epochs = lanes * block_rows, 3200
    cells = np.zeros((rows, rows))
    for e in range(epochs):
        order = group_plan(rows, block_rows, 1, lanes, e, lanes=lanes)[0]
        cells[np.arange(rows), order] += 1
    assert cells.min() > 0, "some row never reaches some position"
    assert chi2(cells, epochs / rows) < chi2_upper((rows - 1) ** 2)


def test_chunk_groups_permute_blocks_and_rows_within_windows_uniformly():
    """Lanes whose segments cut blocks, windows of two pieces: the stream's first block (lane 0's
    first) is uniform over the blocks, and the row at each window's first position is uniform over
    the window's rows (counted in the order its pieces list them), for every window of whole
    blocks."""
    rows, block_rows, batch, lanes, epochs = 203, 7, 20, 4, 3000
    nblocks = -(-rows // block_rows)
    first_block = np.zeros(nblocks)
    first_row = np.zeros(2 * block_rows)
    for e in range(epochs):
        order, windows, window_end, lane_windows = group_plan(rows, block_rows, 2, batch, e, lanes=lanes)
        first_block[windows[0][0]] += 1
        # Lane k's rows in its own order: its positions batch after batch.
        lane_rows = [[] for _ in range(lanes)]
        for b0 in range(0, rows, batch):
            n = min(batch, rows - b0)
            for k in range(lanes):
                lane_rows[k] += order[b0 + n * k // lanes:b0 + n * (k + 1) // lanes].tolist()
        for k in range(lanes):
            start = 0
            for w in range(lane_windows[k], lane_windows[k + 1]):
                listed = [r for b in windows[w] for r in range(b * block_rows, min(rows, (b + 1) * block_rows))]
                got = lane_rows[k][start:window_end[w]]
                if sorted(got) == listed and len(listed) == 2 * block_rows:  # whole blocks only
                    first_row[listed.index(got[0])] += 1
                start = window_end[w]
    assert chi2(first_block, epochs / nblocks) < chi2_upper(nblocks - 1)
    assert first_row.sum() > 20 * len(first_row)
    assert chi2(first_row, first_row.sum() / len(first_row)) < chi2_upper(len(first_row) - 1)


@pytest.mark.parametrize("rows, block_rows, window_blocks, batch", [
    (1, 4, 1, 32), (5, 4, 1, 100), (100, 50, 1, 10), (1000, 7, 2, 32), (6400, 16, 3, 256), (130, 1, 1000, 64),
    (997, 13, 4, 48)])
def test_chunk_group_plans_cover_every_row_once_and_pass_the_check(rows, block_rows, window_blocks, batch):
    for epoch in range(3):
        order, windows, window_end, lane_windows = group_plan(rows, block_rows, window_blocks, batch, epoch)
        assert sorted(order.tolist()) == list(range(rows))
        assert len(lane_windows) == 65
        core_data.check_epoch_plan(order.tolist(), windows, window_end, rows, block_rows, batch, lane_windows)


def test_a_lane_draws_from_its_own_chunk_group():
    """6400 rows in 400 blocks, batches of 256, windows of 2 blocks: each lane's rows come from
    about 1/64 of the blocks (its segment of the permuted blocks, and the blocks it shares with its
    neighbours), and those groups are disjoint but for the shared blocks."""
    rows, block_rows, batch = 6400, 16, 256
    order, windows, window_end, lane_windows = group_plan(rows, block_rows, 2, batch, 0)
    groups = []
    for k in range(64):
        blocks = {b for w in range(lane_windows[k], lane_windows[k + 1]) for b in windows[w]}
        assert len(blocks) <= 400 // 64 + 2
        groups.append(blocks)
    assert sum(len(g) for g in groups) <= 400 + 63  # a block is shared by neighbouring lanes only
    rows_of_lane0 = np.concatenate([order[b0:b0 + 4] for b0 in range(0, rows, batch)])  # lane 0: 4 a batch
    assert {int(r) // block_rows for r in rows_of_lane0} <= groups[0]


@pytest.mark.parametrize("rows, block_rows, window_blocks, batch", [
    (6400, 16, 1, 256), (6400, 16, 2, 1000), (1000, 7, 2, 128), (997, 13, 1, 192)])
def test_a_block_two_neighbouring_lanes_share_is_in_both_first_or_both_last_windows(rows, block_rows,
                                                                                      window_blocks, batch):
    """The promise that lets one process read a shared block once (shuffle_plan.h): even lanes walk
    their segment forwards, odd ones backwards, so the block lanes 2j and 2j+1 share is in both
    lanes' last windows, and the one lanes 2j+1 and 2j+2 share in both lanes' first windows: the
    two lanes need it at about the same batches. Walking every lane forwards (the odd lanes'
    reversal dropped, found by a mutation run) puts it in one lane's last window and the other's
    first: held, or read again, for a whole epoch."""
    for epoch in range(3):
        _, windows, _, lane_windows = group_plan(rows, block_rows, window_blocks, batch, epoch)
        lane = [list(range(lane_windows[k], lane_windows[k + 1])) for k in range(64)]
        shared = 0
        for k in range(63):
            common = {b for w in lane[k] for b in windows[w]} & {b for w in lane[k + 1] for b in windows[w]}
            for b in common:
                shared += 1
                where = [[i for i, w in enumerate(lane[j]) if b in windows[w]] for j in (k, k + 1)]
                expected = [[len(lane[k]) - 1], [len(lane[k + 1]) - 1]] if k % 2 == 0 else [[0], [0]]
                assert where == expected, (epoch, k, b, where, [len(lane[k]), len(lane[k + 1])])
        assert shared >= 32, shared  # the cases have blocks that lanes share


def test_chunk_group_orders_are_a_function_of_seed_and_epoch():
    a = group_plan(500, 8, 2, 40, 4, seed=11)[0]
    assert np.array_equal(a, group_plan(500, 8, 2, 40, 4, seed=11)[0])
    assert not np.array_equal(a, group_plan(500, 8, 2, 40, 4, seed=12)[0])
    assert not np.array_equal(a, group_plan(500, 8, 2, 40, 5, seed=11)[0])


def good_group_plan():
    order, windows, window_end, lane_windows = group_plan(100, 4, 2, 16, 0, lanes=4)
    return order.tolist(), windows, window_end, lane_windows


@pytest.mark.parametrize("damage, message", [
    (lambda o, w, e, l: (o[:-1], w, e, l), "orders 99 rows, not 100"),
    (lambda o, w, e, l: (o[:1] + o[:-1], w, e, l), "comes twice"),
    (lambda o, w, e, l: (o, w, e, l[:-1]), "lane starts do not cover"),
    (lambda o, w, e, l: (o, w, e[:-1] + [e[-1] - 1], l), "not at its"),
    (lambda o, w, e, l: (o, [w[1]] + w[1:], e, l), "is in windows|which window"),
    (lambda o, w, e, l: (o, w[::-1], e, l), "which window|is in windows"),
])
def test_a_wrong_chunk_group_plan_is_an_error_naming_what_is_wrong(damage, message):
    order, windows, window_end, lane_windows = damage(*good_group_plan())
    with pytest.raises(RuntimeError, match=message):
        core_data.check_epoch_plan(order, windows, window_end, 100, 4, 16, lane_windows)
