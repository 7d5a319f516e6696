"""MultiWorkerMirroredStrategy: `mpirun -np 2` on loopback against one process (tests/support/dist_worker.py).

Skipped, with the reason, where the build has no MPI or no mpirun is on PATH; HPCNN_EXPECT_MPI=1
(set by .ci/run) turns that skip into a failure.
"""
import os
import re

import numpy as np
import pytest

import hpcnn
from tests.support.dist_common import (BATCH, GROUPS_EPOCHS, augmented_model, groups_fit, make_arrays, make_model, rel_err,
                         residual_model, write_h5)
from tests.support.mpi_runs import checked, load_ranks, mpi_missing, mpirun



_MISSING = mpi_missing()
if _MISSING and os.environ.get("HPCNN_EXPECT_MPI") == "1":
    raise RuntimeError(f"HPCNN_EXPECT_MPI=1 but {_MISSING}")
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=_MISSING)


def run_agreeing_ranks(scenario, out):
    """Runs `scenario` on two ranks and checks that both ended with the same weights and the same
    evaluate numbers, bit for bit; returns the two ranks' results."""
    checked(mpirun(scenario, out))
    r0, r1 = load_ranks(out, scenario)
    np.testing.assert_array_equal(r0["weights"], r1["weights"])
    np.testing.assert_array_equal(r0["evaluate"], r1["evaluate"])
    return r0, r1


def assert_matches_one_epoch_in_one_process(r0, ref):
    """Rank 0's results (one epoch of make_arrays, shuffled, across the ranks) against the fresh
    model `ref` trained the same epoch in this process: the same weights and evaluate numbers, up
    to float sums."""
    x, y = make_arrays()
    ref.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    assert rel_err(r0["weights"], np.concatenate([a.ravel() for a in ref.get_weights()])) <= 1e-5
    np.testing.assert_allclose(r0["evaluate"], ref.evaluate(x, y, batch_size=BATCH, verbose=0), rtol=1e-5)


def one_process_weights(fit):
    model = make_model()
    fit(model)
    return model, np.concatenate([w.ravel() for w in model.get_weights()])


def test_two_ranks_arrays_match_one_process(tmp_path):
    r0, r1 = run_agreeing_ranks("arrays", tmp_path)
    assert int(r0["replicas"]) == 2 and int(r1["rank"]) == 1
    # 2 ranks x 8 rows = 1 process x 16 rows (5 steps, dropout on, shuffled), up to float sums.
    x, y = make_arrays()
    ref = make_model()
    ref.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    ev = ref.evaluate(x, y, batch_size=BATCH, verbose=0)
    np.testing.assert_allclose(r0["evaluate"], ev, rtol=1e-5)
    ref.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    w = np.concatenate([a.ravel() for a in ref.get_weights()])
    assert rel_err(r0["weights"], w) <= 1e-5
    assert int(r0["iterations"]) == 10
    # Only the chief wrote files (CSVLogger, save).
    assert (tmp_path / "log_rank0.csv").exists() and not (tmp_path / "log_rank1.csv").exists()
    assert (tmp_path / "model_rank0.h5").exists() and not (tmp_path / "model_rank1.h5").exists()
    loaded = hpcnn.saving.load_model(str(tmp_path / "model_rank0.h5"))
    assert rel_err(np.concatenate([a.ravel() for a in loaded.get_weights()]), r0["weights"]) == 0


def test_two_ranks_functional_model_match_one_process(tmp_path):
    r0, _ = run_agreeing_ranks("functional", tmp_path)
    assert_matches_one_epoch_in_one_process(r0, residual_model())
    assert int(r0["iterations"]) == 5


def test_two_ranks_augmentation_match_one_process(tmp_path):
    """Augmentation (staged flip + padded crop, a translation op) keyed by global rows under MPI."""
    r0, _ = run_agreeing_ranks("augment", tmp_path)
    assert_matches_one_epoch_in_one_process(r0, augmented_model())


def test_two_ranks_hdf5_shards_match_one_process(tmp_path):
    r0, _ = run_agreeing_ranks("hdf5", tmp_path)
    x, y = make_arrays()
    path = str(tmp_path / "ref.h5")
    write_h5(path, x, y)
    ref = make_model()
    with hpcnn.data.HDF5Dataset(path, batch_size=BATCH, shuffle=True, seed=7) as ds:
        ref.fit(ds, epochs=1, verbose=0)
        ev = ref.evaluate(ds, verbose=0)
    w = np.concatenate([a.ravel() for a in ref.get_weights()])
    assert rel_err(r0["weights"], w) <= 1e-5
    np.testing.assert_allclose(r0["evaluate"], ev, rtol=1e-5)


@pytest.mark.parametrize("ranks", [2, 4])
def test_chunk_group_ranks_match_one_process_and_each_read_its_share(tmp_path, ranks):
    """A streamed file shuffled by chunk groups: `ranks` ranks end with one process's weights
    (the same global batches), and each rank reads at most 1.2/ranks of the blocks and bytes one
    process reads (issue 25), beside the first windows of the epoch after the last, which the end
    of the last epoch warms up (a lane's first window: one block here)."""
    checked(mpirun("groups", tmp_path, ranks=ranks, timeout=400))
    res = load_ranks(tmp_path, "groups", n=ranks)
    for r in res[1:]:
        np.testing.assert_array_equal(r["weights"], res[0]["weights"])
    ref = make_model()
    one = groups_fit(ref, str(tmp_path / "groups.h5"))
    assert rel_err(res[0]["weights"], np.concatenate([a.ravel() for a in ref.get_weights()])) <= 1e-5
    blocks = one["num_blocks"]
    # One process: each block once an epoch, and the third epoch's first windows.
    assert GROUPS_EPOCHS * blocks < one["blocks_read"] <= GROUPS_EPOCHS * blocks + 64 + 1
    warm = 64 // ranks + 1
    for rank, r in enumerate(res):
        per_epoch = (int(r["blocks_read"]) - warm) / GROUPS_EPOCHS
        print(f"\nrank {rank} of {ranks}: {int(r['blocks_read'])} blocks, {int(r['bytes_read'])} bytes read "
              f"(one process: {one['blocks_read']}, {one['bytes_read']})")
        assert per_epoch <= 1.2 * blocks / ranks, (rank, int(r["blocks_read"]), blocks)
        assert int(r["bytes_read"]) <= 1.2 * one["bytes_read"] / ranks
        assert int(r["bytes_inflated"]) <= 1.2 * one["bytes_inflated"] / ranks


def test_ranks_reading_a_dataset_in_another_shuffle_mode_are_refused_naming_it(tmp_path):
    checked(mpirun("shuffle_mismatch", tmp_path))
    for res in load_ranks(tmp_path, "shuffle_mismatch"):
        assert int(res["iterations"]) == 0
        assert "rank 1: dataset shuffle rows vs rank 0's chunk_groups" in str(res["message"]), res["message"]


def test_a_failing_rank_stops_the_other_naming_it(tmp_path):
    # Rank 1 raises after its 3rd step; rank 0 is then waiting in step 4's collective. It must stop
    # with an error naming rank 1 (well within HPCNN_DIST_TIMEOUT=120 s: the subprocess limit below
    # is what a hang would hit).
    proc = mpirun("fail", tmp_path, timeout=100)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "boom at step 3" in text
    # Rank 0's error names rank 1 and its cause.
    assert re.search(r"rank 0 \(host [^)]*\) stops: rank 1 \(host [^)]*\) failed: RuntimeError: boom at step 3", text)
    assert "no answer" not in text  # stopped by the notice, not by the timeout


def test_resume_under_two_ranks_restores_on_every_rank(tmp_path):
    checked(mpirun("resume1", tmp_path))
    assert os.listdir(tmp_path / "backup")  # the chief's backup after epoch 1
    checked(mpirun("resume2", tmp_path))
    r0, r1 = load_ranks(tmp_path, "resume2")
    np.testing.assert_array_equal(r0["weights"], r1["weights"])
    assert int(r0["iterations"]) == int(r1["iterations"]) == 10
    x, y = make_arrays()
    ref = make_model()
    ref.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0)
    w = np.concatenate([a.ravel() for a in ref.get_weights()])
    assert rel_err(r0["weights"], w) <= 1e-5


def test_ranks_with_different_models_are_refused_before_training(tmp_path):
    proc = mpirun("mismatch", tmp_path)
    checked(proc)
    for res in load_ranks(tmp_path, "mismatch"):  # every rank raises, naming rank 1's seed: make_model(seed=21 + rank)
        assert str(res["message"]).startswith("MultiWorkerMirroredStrategy: every rank must run the same script")
        assert str(res["message"]).endswith("rank 1: seed 22 vs rank 0's 21"), res["message"]


def test_ranks_of_another_hpcnn_version_are_refused_on_every_rank_naming_it(tmp_path):
    proc = mpirun("version_mismatch", tmp_path)
    checked(proc)
    for res in load_ranks(tmp_path, "version_mismatch"):  # the messages from the files: stdout interleaves
        # that field and both values, and nothing else (the model, seed and the rest of the build agree)
        assert str(res["message"]).endswith(f"before the first step): rank 1: hpcnn version 0.0.0-test vs "
                                            f"rank 0's {hpcnn.__version__}"), res["message"]


def test_a_chief_of_another_version_is_named_by_the_first_ranks_the_rest_counted(tmp_path):
    # When rank 0 is the odd one every other rank differs from it: only the first are detailed
    # (_RANKS_SHOWN, set to 1 by the worker), so the message and its collectives stay small.
    proc = mpirun("chief_version_mismatch", tmp_path, ranks=3)
    checked(proc)
    for res in load_ranks(tmp_path, "chief_version_mismatch", n=3):
        assert str(res["message"]).endswith(f"rank 1: hpcnn version {hpcnn.__version__} vs rank 0's 0.0.0-test | "
                                            "and 1 more ranks (2, ...)"), res["message"]


def test_ranks_given_another_number_of_rows_are_refused_before_any_step(tmp_path):
    proc = mpirun("rows_mismatch", tmp_path)
    checked(proc)  # refused on every rank at once: no rank stops the others (no MPI_Abort)
    rows = len(make_arrays()[0])
    for res in load_ranks(tmp_path, "rows_mismatch"):
        assert int(res["steps"]) == 0 and int(res["iterations"]) == 0 and bool(res["unchanged"])
        # the rows and what follows from them
        assert str(res["message"]).endswith(f"rank 1: training rows {rows - BATCH} vs rank 0's {rows}; "
                                            f"steps per epoch {rows // BATCH - 1} vs rank 0's {rows // BATCH}"), \
            res["message"]


def test_a_stop_signal_to_one_rank_stops_every_rank_at_the_same_batch(tmp_path):
    # SIGUSR1 (Slurm's warning before the time limit) reaches rank 0 after batch 2 only; fit stops
    # at that batch boundary on both ranks (else rank 1 would wait in a collective nobody joins).
    checked(mpirun("signal", tmp_path))
    r0, r1 = load_ranks(tmp_path, "signal")
    assert bool(r0["interrupted"]) and bool(r1["interrupted"])
    assert int(r0["iterations"]) == int(r1["iterations"]) == 2
    np.testing.assert_array_equal(r0["weights"], r1["weights"])
