"""How long a rank killed without a word (SIGKILL) keeps the others waiting: the heartbeat's detection
time, measured with `mpirun -np 3` on loopback (tests/support/heartbeat_worker.py, scenario 'lost'). Run it from the repository
root as a module, which makes the tests' helpers (tests.support) importable:

    python -m bench.bench_heartbeat                     # the default limit (30 s), 3 runs
    python -m bench.bench_heartbeat --limit 5 --runs 3  # HPCNN_DIST_HEARTBEAT=5

Rank 2 SIGKILLs itself mid-epoch (as the out-of-memory killer would); mpirun is told to leave the
other ranks running (--mca orte_abort_on_non_zero_status 0), so only hpcnn can stop them. Per run:
the seconds from the kill to each survivor's Python exception (the error naming the lost rank and
the step) and to mpirun's end (the survivors' exit: their agreement, then MPI_Abort). Every rank
sleeps --step-seconds after each batch (default 1.7: 9 batches before the kill), so that the kill
falls at another point between two heartbeats in each run: the detection time then spreads over
[limit - interval, limit + 0.25 s] (interval = limit / 6, at most 5 s) instead of sitting at its
upper end, as with instant steps right after the communicator started.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time

import numpy as np

try:
    from tests.support.mpi_runs import mpi_missing, mpirun_command
except ModuleNotFoundError as e:  # run as a file: the tests package is found from the root, by python -m
    raise SystemExit("run from the repository root: python -m bench.bench_heartbeat [options]") from e


def one_run(limit: float, step_seconds: float) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cmd, env = mpirun_command("lost", out, ranks=3, dist_timeout=600, worker="heartbeat_worker",
                                  mpirun_args=("--mca", "orte_abort_on_non_zero_status", "0"),
                                  env={"HPCNN_DIST_HEARTBEAT": str(limit), "STEP_SECONDS": str(step_seconds)})
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit + 300)
        ended = time.time()
        killed = float(open(os.path.join(out, "killed.txt")).read())
        caught = []
        for r in (0, 1):
            with np.load(os.path.join(out, f"lost_rank{r}.npz")) as f:
                caught.append(float(f["time"]) - killed)
                message = str(f["message"])
        return {"rc": p.returncode, "caught": caught, "exit": ended - killed, "message": message}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=float, default=30.0, help="HPCNN_DIST_HEARTBEAT in seconds (default 30)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--step-seconds", type=float, default=1.7, help="added to every batch (default 1.7)")
    args = ap.parse_args()
    why = mpi_missing()
    if why:
        raise SystemExit(f"skipped: {why}")
    print(f"mpirun -np 3 on loopback, rank 2 SIGKILLed mid-epoch, HPCNN_DIST_HEARTBEAT={args.limit:g}, "
          f"steps of {args.step_seconds:g} s (+30 % per run)")
    print(f"{'run':>4}{'rank 0 raised s':>17}{'rank 1 raised s':>17}{'mpirun ended s':>16}{'rc':>5}")
    exits = []
    for i in range(args.runs):
        r = one_run(args.limit, args.step_seconds * (1 + 0.3 * i))  # another phase each run
        exits.append(r["exit"])
        print(f"{i + 1:>4}{r['caught'][0]:>17.2f}{r['caught'][1]:>17.2f}{r['exit']:>16.2f}{r['rc']:>5}")
    print(f"kill -> every survivor ended: {min(exits):.1f}-{max(exits):.1f} s (limit {args.limit:g} s)")
    print(f"rank 1's error: {r['message']}")


if __name__ == "__main__":
    main()
