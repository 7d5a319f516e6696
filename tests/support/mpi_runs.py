"""Running tests/support/dist_worker.py under `mpirun` on loopback, and reading what its ranks wrote: shared by
the MPI tests of the CPU (test_distribute_mpi.py) and of GPUs (test_gpu_distribute.py)."""
import os
import shutil
import subprocess

import numpy as np

from hpcnn import _core
from tests.support import paths

def mpi_missing():
    """Why `mpirun` tests cannot run here ('' when they can)."""
    if not _core.distribute.mpi_compiled():
        return "this build has no MPI (HPCNN_MPI; Debian: libopenmpi-dev openmpi-bin)"
    if shutil.which("mpirun") is None:
        return "no mpirun on PATH (Debian: openmpi-bin)"
    return ""


def mpirun_command(scenario, out, ranks=2, dist_timeout=120, device="cpu", implementation="auto",
                   worker="dist_worker", mpirun_args=(), env=None):
    """(command, environment) of `ranks` processes of `worker` (a module of tests/support) running `scenario`,
    writing under `out`; one thread each, Open MPI over loopback TCP (as root too), oversubscribed.
    device / implementation: what each rank's strategy is given (dist_worker.py reads them from
    HPCNN_TEST_DIST_*); env: more variables."""
    environ = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_btl="self,tcp", OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo",
                   OMPI_MCA_rmaps_base_oversubscribe="1", HPCNN_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   HPCNN_DIST_TIMEOUT=str(dist_timeout), HPCNN_TEST_DIST_DEVICE=device,
                   HPCNN_TEST_DIST_IMPLEMENTATION=implementation)
    environ.update(env or {})
    # -wdir: the ranks start in the repository root, where `python -m tests.support.<worker>` finds the tests package.
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "-wdir", str(paths.ROOT), *mpirun_args,
           *paths.module_command(worker, scenario, out)]
    return cmd, environ


def mpirun(scenario, out, ranks=2, timeout=240, dist_timeout=120, device="cpu", implementation="auto", **more):
    """mpirun_command's run, to its end (or `timeout` seconds)."""
    cmd, env = mpirun_command(scenario, out, ranks, dist_timeout, device, implementation, **more)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def load_ranks(out, scenario, n=2):
    """The arrays each rank saved (`<scenario>_rank<r>.npz`), rank order."""
    res = []
    for r in range(n):
        with np.load(os.path.join(out, f"{scenario}_rank{r}.npz")) as f:
            res.append({k: f[k] for k in f.files})
    return res


def checked(proc):
    assert proc.returncode == 0, f"mpirun failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
