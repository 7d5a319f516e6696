"""A rank killed without a word (SIGKILL) is noticed by the heartbeat: `mpirun -np 3` on loopback
(tests/support/heartbeat_worker.py), with mpirun told not to end the job itself when a rank dies, so that
only hpcnn can stop the survivors. A step slower than the limit is no loss.

Skipped, with the reason, where the build has no MPI or no mpirun is on PATH (HPCNN_EXPECT_MPI=1
turns that skip into a failure, as in test_distribute_mpi.py).
"""
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

import hpcnn
from tests.support.dist_common import make_arrays, make_model, rel_err
from tests.support.mpi_runs import mpi_missing, mpirun, mpirun_command

_MISSING = mpi_missing()
if _MISSING and os.environ.get("HPCNN_EXPECT_MPI") == "1":
    raise RuntimeError(f"HPCNN_EXPECT_MPI=1 but {_MISSING}")
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=_MISSING)

LIMIT = 4.0  # the heartbeat limit of these tests (HPCNN_DIST_HEARTBEAT; the default is 30 s)
# Open MPI 4.1's mpirun ends every rank when one dies by a signal; with this it leaves them running,
# as a launcher that does not notice (srun without --kill-on-bad-exit) would.
KEEP_RUNNING = ("--mca", "orte_abort_on_non_zero_status", "0")
WORKER = "heartbeat_worker"


def run_lost(out, heartbeat, scenario="lost", ranks=3, **env):
    """The `lost` scenario (the last rank SIGKILLs itself mid-epoch 2) started in the background."""
    cmd, env = mpirun_command(scenario, out, ranks=ranks, dist_timeout=300, worker=WORKER, mpirun_args=KEEP_RUNNING,
                              env={"HPCNN_DIST_HEARTBEAT": str(heartbeat), **env})
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(path, seconds):
    end = time.time() + seconds
    while not os.path.exists(path):
        assert time.time() < end, f"{path} did not appear within {seconds} s"
        time.sleep(0.05)


def end_run(proc, out, ranks=3):
    """Ends a run that hangs: its ranks by their process ids (each wrote one), then mpirun."""
    for r in range(ranks):
        pid_file = out / f"pid_rank{r}.txt"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        # also closes its pipe. mpirun told to leave ranks running (KEEP_RUNNING) may outlive them by
        # more than this (it did by 20 s): it is killed then, nothing is left to wait for.
        proc.communicate(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def test_a_killed_rank_stops_the_others_within_the_limit_and_a_restart_resumes(tmp_path):
    proc = run_lost(tmp_path, LIMIT)
    try:
        text, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            end_run(proc, tmp_path)
    ended = time.time()
    killed = float((tmp_path / "killed.txt").read_text())
    assert proc.returncode != 0, text[-4000:]
    for r in (0, 1):  # every survivor: the error names the lost rank and the step, then the process ends
        assert not (tmp_path / f"finished_rank{r}.npz").exists()
        with np.load(tmp_path / f"lost_rank{r}.npz") as f:
            message, caught = str(f["message"]), float(f["time"])
        # rank 2 died after batch 3 of epoch 2 (step 9 of 6 per epoch): the survivors stop before step 10
        assert message.startswith("epoch 2, batch 4 of 6 (training step 10): "), message
        assert re.search(r"lost rank 2 \(host [^)]*, pid \d+\): no heartbeat for [\d.]+ s \(limit 4 s", message), \
            message
        assert LIMIT - 1 <= caught - killed <= LIMIT + 3, (r, caught - killed)
        assert re.search(rf"hpcnn: rank {r} stopped at epoch 2, batch 4 of 6 \(training step 10\): .*lost rank 2", text)
    # the kill to mpirun's end: the limit, the exit's agreement among the survivors, MPI_Abort
    assert ended - killed <= LIMIT + 8, ended - killed
    assert "no answer" not in text  # noticed by the heartbeat, not by the collective timeout

    # A restart (as Slurm's requeue would) resumes from the last backup, epoch 2's start, and finishes
    # with the weights of an uninterrupted run.
    done = mpirun("resume", tmp_path, ranks=3, worker=WORKER, timeout=180,
                  env={"HPCNN_DIST_HEARTBEAT": str(LIMIT)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    res = []
    for r in range(3):
        with np.load(tmp_path / f"finished_rank{r}.npz") as f:
            res.append({k: f[k] for k in f.files})
    for r in res:
        assert list(r["resumed_from"]) == [1, 0] and int(r["iterations"]) == 18
        np.testing.assert_array_equal(r["weights"], res[0]["weights"])
    x, y = make_arrays(72)
    ref = make_model()
    ref.fit(x, y, batch_size=12, epochs=3, shuffle=True, verbose=0)
    assert rel_err(res[0]["weights"], np.concatenate([w.ravel() for w in ref.get_weights()])) <= 1e-5


def test_survivors_that_compute_when_the_peer_dies_learn_it_at_once_and_raise_at_their_next_collective(tmp_path):
    # At the kill the survivors compute for LIMIT + 6 s, outside any collective: their communication
    # threads notice the loss within the limit (the group reports it failed; stderr has the line at
    # once), and fit raises at the first collective after the computation, naming the rank and step.
    compute = LIMIT + 6
    proc = run_lost(tmp_path, LIMIT, "lost_computing", COMPUTE_SECONDS=str(compute))
    try:
        text, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            end_run(proc, tmp_path)
    killed = float((tmp_path / "killed.txt").read_text())
    assert proc.returncode != 0, text[-4000:]
    for r in (0, 1):
        with np.load(tmp_path / f"noticed_rank{r}.npz") as f:
            noticed, computed_until = float(f["time"]), float(f["computed_until"])
        assert noticed > 0 and LIMIT - 1 <= noticed - killed <= LIMIT + 3, (r, noticed - killed)
        with np.load(tmp_path / f"lost_rank{r}.npz") as f:
            message, caught = str(f["message"]), float(f["time"])
        assert computed_until <= caught <= computed_until + 3, (r, caught - computed_until)
        assert message.startswith("epoch 2, batch 4 of 6 (training step 10): ") and "lost rank 2" in message, message
        assert re.search(rf"hpcnn: rank {r} \(host [^)]*\) (lost rank 2|stops: .*lost rank 2)", text), text[-3000:]


@pytest.mark.parametrize("ranks", [4, 6])
def test_a_loss_reaches_the_ranks_that_are_not_the_lost_ranks_neighbours(tmp_path, ranks):
    # The last rank is killed. With 4 ranks, rank 3's ring neighbours are 2 and 0: rank 1 does not
    # watch it and learns of the loss only from their failure notice. With 6, rank 2 is not even a
    # neighbour of those that notice (4 and 0): a notice sent only along the ring would not reach it.
    # Every survivor stops within the limit, as the noticing ones do, naming the lost rank.
    proc = run_lost(tmp_path, LIMIT, ranks=ranks)
    try:
        text, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            end_run(proc, tmp_path, ranks=ranks)
    killed = float((tmp_path / "killed.txt").read_text())
    assert proc.returncode != 0, text[-4000:]
    lost = ranks - 1
    for r in range(lost):
        assert (tmp_path / f"lost_rank{r}.npz").exists(), (r, text[-4000:])
        with np.load(tmp_path / f"lost_rank{r}.npz") as f:
            message, caught = str(f["message"]), float(f["time"])
        assert message.startswith("epoch 2, batch 4 of 6 (training step 10): "), message
        assert re.search(rf"lost rank {lost} \(host [^)]*, pid \d+\): no heartbeat for", message), (r, message)
        assert LIMIT - 1 <= caught - killed <= LIMIT + 3, (r, caught - killed)
        assert re.search(rf"hpcnn: rank {r} stopped at epoch 2, batch 4 of 6 \(training step 10\): .*lost rank {lost}",
                         text)
    assert "no answer" not in text  # the notice, not the collective timeout


def test_a_rank_working_alone_after_the_others_left_normally_is_not_lost(tmp_path):
    # The others' fit ends and their processes leave (each says goodbye to its neighbours); rank 0
    # works on alone for longer than the limit with its group open: nobody is declared lost.
    proc = mpirun("alone", tmp_path, ranks=3, worker=WORKER, timeout=120,
                  env={"HPCNN_DIST_HEARTBEAT": str(LIMIT), "ALONE_SECONDS": str(LIMIT + 4)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "lost rank" not in proc.stdout + proc.stderr
    with np.load(tmp_path / "finished_rank0.npz") as f:
        assert not bool(f["failed"]) and int(f["iterations"]) == 18


def test_without_the_heartbeat_the_survivors_would_still_wait(tmp_path):
    # The control: the same kill with the heartbeat off (HPCNN_DIST_HEARTBEAT=0). Past the limit
    # and more, the survivors are still inside their collective (mpirun leaves them running): what
    # stops them in the test above is the heartbeat, not mpirun or Open MPI.
    proc = run_lost(tmp_path, 0)
    try:
        wait_for(tmp_path / "killed.txt", 120)
        time.sleep(LIMIT + 6)
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        assert not list(tmp_path.glob("lost_rank*.npz")) and not list(tmp_path.glob("finished_rank*.npz"))
    finally:
        end_run(proc, tmp_path)


def test_a_step_slower_than_the_limit_is_no_loss(tmp_path):
    # Rank 0 spends LIMIT + 10 s more in one step, the others half as long, then they wait for it
    # in a collective: the heartbeat beats on in both (the communication thread idle, then waiting).
    proc = mpirun("slow", tmp_path, ranks=3, worker=WORKER, timeout=240,
                  env={"HPCNN_DIST_HEARTBEAT": str(LIMIT), "SLOW_SECONDS": str(LIMIT + 10)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "lost rank" not in proc.stdout + proc.stderr
    for r in range(3):
        with np.load(tmp_path / f"finished_rank{r}.npz") as f:
            assert int(f["iterations"]) == 18


def test_the_heartbeat_setting():
    options = hpcnn.distribute.CommunicationOptions(heartbeat_seconds=12)
    assert options.heartbeat_seconds == 12.0 and "heartbeat_seconds=12.0" in repr(options)
    assert hpcnn.distribute.CommunicationOptions().heartbeat_seconds is None  # HPCNN_DIST_HEARTBEAT or 30
    assert hpcnn.distribute.CommunicationOptions(heartbeat_seconds=0).heartbeat_seconds == 0.0  # off
    with pytest.raises(ValueError, match="heartbeat_seconds"):
        hpcnn.distribute.CommunicationOptions(heartbeat_seconds=-1)


def test_the_default_heartbeat_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("HPCNN_DIST_HEARTBEAT", raising=False)
    assert hpcnn._core.distribute.default_heartbeat_seconds() == 30.0
    monkeypatch.setenv("HPCNN_DIST_HEARTBEAT", "7.5")
    assert hpcnn._core.distribute.default_heartbeat_seconds() == 7.5
    monkeypatch.setenv("HPCNN_DIST_HEARTBEAT", "0")
    assert hpcnn._core.distribute.default_heartbeat_seconds() == 0.0
