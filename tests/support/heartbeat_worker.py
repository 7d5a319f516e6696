"""One rank of the lost-rank tests (tests/core/distribute/test_distribute_heartbeat.py, bench/bench_heartbeat.py start it
with mpirun): a rank killed without a word, a step slower than the heartbeat limit.

    mpirun -np 3 python -m tests.support.heartbeat_worker SCENARIO OUTDIR

Scenarios:
  lost    the last rank SIGKILLs itself after batch KILL_BATCH of epoch KILL_EPOCH (BackupAndRestore
          writes a backup at every epoch's end). It writes the time of the kill to OUTDIR/killed.txt;
          every other rank writes what fit raised and when to OUTDIR/lost_rank<R>.npz, then lets the
          error end the process (hpcnn's exit: MPI_Abort). A rank that finishes writes
          OUTDIR/finished_rank<R>.npz. STEP_SECONDS (bench/bench_heartbeat.py): every rank sleeps that
          long after each batch, so that the kill falls anywhere between two heartbeats.
  lost_computing  as lost, but at that batch the survivors compute for COMPUTE_SECONDS (outside any
          collective): each records in OUTDIR/noticed_rank<R>.npz when its group first reported the
          failure during that time (the communication thread noticed it), then raises at its next
          collective.
  resume  the same fit, restarted: resumes from the backup and finishes (finished_rank<R>.npz).
  slow    at batch 2, rank 0 takes SLOW_SECONDS more, the others half as long: they first compute (their
          communication threads idle), then wait for rank 0 inside a collective; the run must finish.
  alone   the fit ends on every rank; the others then leave (their process ends: hpcnn says goodbye),
          while rank 0 works on alone for ALONE_SECONDS (as a chief saving a model) with its group
          open, its communication thread watching; it writes finished_rank0.npz with `failed`, what
          its group says after that time.

With 4 or more ranks the lost rank (the last) has ranks that are not its ring neighbours: they learn
of the loss only from the notice of a rank that noticed it.

The heartbeat limit comes from HPCNN_DIST_HEARTBEAT (the test sets it small).
"""
import os
import signal
import sys
import time

import numpy as np

import hpcnn
from tests.support.dist_common import make_arrays, make_model

ROWS, BATCH, EPOCHS = 72, 12, 3  # 6 steps per epoch, 4 rows per rank on 3 ranks
KILL_EPOCH, KILL_BATCH = 1, 2    # after the 3rd batch of the 2nd epoch: the backup of epoch 1 is the last


def main() -> None:
    scenario, out = sys.argv[1], sys.argv[2]
    strategy = hpcnn.distribute.MultiWorkerMirroredStrategy(device="cpu")
    rank, ranks = strategy.worker_index, strategy.num_workers
    with open(os.path.join(out, f"pid_rank{rank}.txt"), "w") as f:  # for a test that must end a hung run
        f.write(str(os.getpid()))
    with strategy.scope():
        model = make_model()
    x, y = make_arrays(ROWS)
    epoch = [0]
    cbs = [hpcnn.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: epoch.__setitem__(0, e))]
    if scenario in ("lost", "resume"):
        backup = hpcnn.callbacks.BackupAndRestore(os.path.join(out, "backup"), delete_checkpoint=False)
        cbs.append(backup)
    if scenario in ("lost", "lost_computing"):
        def kill(batch, logs):
            if epoch[0] != KILL_EPOCH or batch != KILL_BATCH:
                return
            if rank == ranks - 1:
                with open(os.path.join(out, "killed.txt"), "w") as f:
                    f.write(repr(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer: no word to anyone
            if scenario == "lost_computing":  # a long computation (no collective) while the peer dies
                end, noticed = time.time() + float(os.environ["COMPUTE_SECONDS"]), None
                while time.time() < end:
                    if noticed is None and strategy.group.failed:
                        noticed = time.time()
                    time.sleep(0.05)
                np.savez(os.path.join(out, f"noticed_rank{rank}.npz"), time=np.array(noticed or -1.0),
                         computed_until=np.array(end))
        step = float(os.environ.get("STEP_SECONDS", "0"))
        if step:
            cbs.append(hpcnn.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: time.sleep(step)))
        cbs.append(hpcnn.callbacks.LambdaCallback(on_train_batch_end=kill))
    elif scenario == "slow":
        slow = float(os.environ["SLOW_SECONDS"])

        def pause(batch, logs):
            if epoch[0] == 0 and batch == 1:
                time.sleep(slow if rank == 0 else slow / 2)
        cbs.append(hpcnn.callbacks.LambdaCallback(on_train_batch_end=pause))
    elif scenario not in ("resume", "alone"):
        raise SystemExit(f"unknown scenario {scenario}")
    try:
        model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle=True, verbose=0, callbacks=cbs)
    except RuntimeError as err:
        np.savez(os.path.join(out, f"lost_rank{rank}.npz"), message=np.array(str(err)), time=np.array(time.time()))
        raise  # uncaught: printed, then hpcnn's exit ends the job
    result = {"weights": np.concatenate([w.ravel() for w in model.get_weights()]),
              "iterations": np.array(model.optimizer.iterations), "time": np.array(time.time())}
    if scenario == "alone":
        if rank != 0:
            return  # leaves normally: the process ends
        time.sleep(float(os.environ["ALONE_SECONDS"]))
        result["failed"] = np.array(bool(strategy.group.failed))
    if scenario == "resume":
        rf = backup.resumed_from
        result["resumed_from"] = np.array([-1, -1] if rf is None else [rf["epoch"], rf["batch"]])
    np.savez(os.path.join(out, f"finished_rank{rank}.npz"), **result)


if __name__ == "__main__":
    main()
