"""BackupAndRestore across replica counts (docs/distributed.md, "Resuming on another replica
count"): a backup written mid-epoch on R replicas, resumed on R' replicas, ends within 1e-5
relative of the uninterrupted run on one device: 2 CPU replicas -> 1, 1 -> 2 (one process), and
`mpirun -np 2` -> `mpirun -np 3`; arrays and an HDF5 dataset, shuffled (its rows shuffle, and its
chunk-group shuffle: kind "groups"), with dropout, so that the shuffle order and the dropout masks
after the resume matter. A backup resumed with another shuffle mode is refused, naming both. Where the new count cannot split
the backup's global batch: a ValueError naming the backup and both counts, before any weight changes.

Each test prints the measured difference (pytest -s shows it)."""
import hashlib
import os
import pathlib

import numpy as np
import pytest

import hpcnn
from hpcnn.distribute import MirroredStrategy
from tests.support.dist_common import (RESUME_BATCH, RESUME_EPOCHS, STOP_AFTER, fit_resumable, make_arrays, make_model, rel_err,
                         write_h5)
from tests.support.mpi_runs import checked, load_ranks, mpi_missing, mpirun

STEPS = -(-80 // RESUME_BATCH)  # batches per epoch (dist_common.ROWS rows)


def weights(model):
    return np.concatenate([w.ravel() for w in model.get_weights()])


def model_on(replicas):
    """make_model() on `replicas` CPU replicas of this process (1: no strategy at all)."""
    if replicas == 1:
        return make_model()
    with MirroredStrategy(["cpu"] * replicas).scope():
        return make_model()


def shuffle_of(kind):
    return "chunk_groups" if kind == "groups" else True


def data_for(kind, tmp_path):
    if kind == "arrays":
        return "arrays"
    path = str(tmp_path / "data.h5")
    if not os.path.exists(path):
        write_h5(path, *make_arrays())
    return path


def uninterrupted(data, shuffle=True):
    """The final weights of the same training on one device, never stopped."""
    model = make_model()
    x, y = make_arrays()
    if data == "arrays":
        model.fit(x, y, batch_size=RESUME_BATCH, epochs=RESUME_EPOCHS, shuffle=True, verbose=0)
    else:
        with hpcnn.data.HDF5Dataset(data, batch_size=RESUME_BATCH, shuffle=shuffle, seed=7) as ds:
            model.fit(ds, epochs=RESUME_EPOCHS, verbose=0)
    return weights(model)


@pytest.mark.parametrize("kind", ["arrays", "hdf5", "groups"])
@pytest.mark.parametrize("before,after", [(2, 1), (1, 2)])
def test_a_backup_resumes_on_another_replica_count_in_one_process(tmp_path, kind, before, after):
    data, shuffle = data_for(kind, tmp_path), shuffle_of(kind)
    backup_dir = str(tmp_path / "backup")
    history, _ = fit_resumable(model_on(before), data, backup_dir, stop=True, shuffle=shuffle)
    assert history.interrupted and os.path.exists(os.path.join(backup_dir, "backup.h5"))
    model = model_on(after)
    history, backup = fit_resumable(model, data, backup_dir, shuffle=shuffle)
    assert backup.resumed_from == {"epoch": 0, "batch": STOP_AFTER}  # mid-epoch 1
    assert not history.interrupted and model.optimizer.iterations == RESUME_EPOCHS * STEPS
    diff = rel_err(weights(model), uninterrupted(data, shuffle))
    print(f"\n{kind}: {before} replica(s) -> {after}: max relative difference of the final weights {diff:.3g}")
    assert diff <= 1e-5  # not bitwise: the gradient sums ran in another order


def test_a_backup_whose_global_batch_the_new_count_cannot_split_is_refused_naming_it(tmp_path):
    # Written on 2 replicas with a global batch of 16; 3 replicas cannot split 16, and a resumed
    # fit cannot change the batch size (its batches would be other batches).
    backup_dir = str(tmp_path / "backup")
    history, _ = fit_resumable(model_on(2), "arrays", backup_dir, stop=True, batch_size=16)
    assert history.interrupted
    path = os.path.join(backup_dir, "backup.h5")
    digest = hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
    model = model_on(3)
    before = weights(model)
    with pytest.raises(ValueError) as err:
        fit_resumable(model, "arrays", backup_dir, batch_size=16)
    message = str(err.value)
    print(f"\n{message}")
    assert f"the backup '{path}' (written on 2 replicas, global batch 16) on 3 replicas" in message
    assert "replica count that divides 16 (1, 2, 4, 8, 16)" in message
    assert f"delete '{backup_dir}'" in message and "divisible by 3" in message
    np.testing.assert_array_equal(weights(model), before)  # before any weight changed
    assert model.optimizer.iterations == 0
    assert hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest() == digest  # the backup is intact
    # ... and it still resumes on a count that divides its batch.
    model = model_on(1)
    history, backup = fit_resumable(model, "arrays", backup_dir, batch_size=16)
    assert backup.resumed_from == {"epoch": 0, "batch": STOP_AFTER} and not history.interrupted


def test_a_backup_of_another_shuffle_mode_is_refused_naming_both(tmp_path):
    data = data_for("hdf5", tmp_path)
    backup_dir = str(tmp_path / "backup")
    history, _ = fit_resumable(model_on(1), data, backup_dir, stop=True, shuffle="chunk_groups")
    assert history.interrupted
    model = model_on(1)
    before = weights(model)
    with pytest.raises(ValueError, match=r"shuffle_mode 'chunk_groups', this fit's dataset has 'rows': another order "
                                         r"makes other batches; resume with HDF5Dataset\(shuffle='chunk_groups'\)"):
        fit_resumable(model, data, backup_dir, shuffle="rows")
    np.testing.assert_array_equal(weights(model), before)
    history, backup = fit_resumable(model, data, backup_dir, shuffle="chunk_groups")  # the same mode resumes
    assert backup.resumed_from == {"epoch": 0, "batch": STOP_AFTER} and not history.interrupted


def test_without_a_backup_the_uneven_split_keeps_fits_own_message(tmp_path):
    with pytest.raises(ValueError, match=r"batch_size 16 is the global batch and must be divisible by the 3 replicas"):
        fit_resumable(model_on(3), "arrays", str(tmp_path / "backup"), batch_size=16)


_MISSING = mpi_missing()


@pytest.mark.skipif(bool(_MISSING) and os.environ.get("HPCNN_EXPECT_MPI") != "1", reason=_MISSING or "MPI")
@pytest.mark.parametrize("kind", ["arrays", "hdf5", "groups"])
def test_a_two_rank_backup_resumes_on_three_ranks(tmp_path, kind):
    # `mpirun -np 2` stops mid-epoch (SIGUSR1 on rank 0: every rank stops at that batch, the chief
    # writes the backup); `mpirun -np 3` resumes it (the last batch of 8 rows splits 3/3/2).
    checked(mpirun(f"rankchange_stop_{kind}", tmp_path, ranks=2))
    stopped = load_ranks(tmp_path, f"rankchange_stop_{kind}", n=2)
    assert all(bool(r["interrupted"]) for r in stopped)
    assert os.path.exists(tmp_path / "backup" / "backup.h5")
    checked(mpirun(f"rankchange_resume_{kind}", tmp_path, ranks=3))
    ranks = load_ranks(tmp_path, f"rankchange_resume_{kind}", n=3)
    for r in ranks:
        assert int(r["replicas"]) == 3 and list(r["resumed_from"]) == [0, STOP_AFTER]
        assert int(r["iterations"]) == RESUME_EPOCHS * STEPS and not bool(r["interrupted"])
        np.testing.assert_array_equal(r["weights"], ranks[0]["weights"])
    data = "arrays" if kind == "arrays" else str(tmp_path / "data.h5")
    diff = rel_err(ranks[0]["weights"], uninterrupted(data, shuffle_of(kind)))
    print(f"\n{kind}: mpirun -np 2 -> mpirun -np 3: max relative difference of the final weights {diff:.3g}")
    assert diff <= 1e-5


@pytest.mark.skipif(bool(_MISSING) and os.environ.get("HPCNN_EXPECT_MPI") != "1", reason=_MISSING or "MPI")
def test_three_ranks_refuse_a_two_rank_backup_of_a_batch_they_cannot_split(tmp_path):
    # The ValueError is raised before the first step, and ends the job as any rank's error does
    # (the others stop at once, naming it: no rank waits for the timeout); the backup is untouched.
    checked(mpirun("rankchange_stop16", tmp_path, ranks=2))
    path = tmp_path / "backup" / "backup.h5"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    proc = mpirun("rankchange_refused16", tmp_path, ranks=3, timeout=100)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert (f"ValueError: fit: BackupAndRestore cannot resume the backup '{path}' (written on 2 replicas, global "
            "batch 16) on 3 replicas") in text
    assert "no answer" not in text  # stopped by the error, not by the collective timeout
    assert not list(tmp_path.glob("rankchange_refused16_rank*.npz"))  # no rank trained to the end
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
