"""Jobs on the Slurm tests' cluster (tests/system/slurm/): the environment they are submitted with,
the data they train on, and a submitted job's log, state and processes."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, Iterable, Optional

from hpcnn import tutorial_data
from tests.support import slurm_cluster
from tests.support.slurm_cluster import LocalSlurm

# The training sizes the jobs use (each a QUICK setting or a TRAIN_ROWS the tests pass).
DATA_ROWS = (1000, 2000, 3000)


def write_data(folder: Path) -> None:
    """The generated CIFAR-shaped files of DATA_ROWS, where `hpcnn tutorial --synthetic` looks for them."""
    for rows in DATA_ROWS:
        (x, y), (xv, yv) = tutorial_data.synthetic_cifar10(*tutorial_data.synthetic_split_sizes(rows), seed=0)
        tutorial_data.write_tutorial_hdf5(tutorial_data.hdf5_path(True, rows, 0, str(folder)), x, y, xv, yv)


def job_env(data: Path, **extra: str) -> Dict[str, str]:
    """The environment a job is submitted with (sbatch passes it on): this interpreter's bin folder
    (python, hpcnn) first on PATH, the data dir, no conda and no thread settings of this shell."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "CONDA", "HPCNN_NUM_THREADS", "OMP_NUM_THREADS"))}
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "/usr/bin:/bin")])
    env.update(HPCNN_DATA_DIR=str(data), MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


class Job:
    """A submitted job: its id and log file."""

    def __init__(self, slurm: LocalSlurm, job_id: int, folder: Path, log_name: str) -> None:
        self.slurm, self.id, self.folder = slurm, job_id, folder
        self.log = folder / log_name.replace("%j", str(job_id))

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def info(self) -> Dict[str, str]:
        return self.slurm.job(self.id)

    def wait_end(self, timeout: float = 300) -> Dict[str, str]:
        try:
            return self.slurm.wait_end(self.id, timeout)
        except TimeoutError as e:
            raise TimeoutError(f"{e}\n--- job log {self.log}:\n{self.text()[-3000:]}") from None

    def wait_log(self, needle: str, timeout: float = 300) -> None:
        """Until the log holds `needle`; fails early, naming it, if the job ends first."""
        def seen():
            if needle in self.text():
                return True
            state = self.info().get("JobState")
            if state in slurm_cluster.END_STATES:
                raise AssertionError(f"job {self.id} ended ({state}) before printing {needle!r}:\n{self.text()[-3000:]}")
            return False
        try:
            slurm_cluster.wait_for(f"job {self.id}'s log to show {needle!r}", seen, timeout)
        except TimeoutError as e:
            raise TimeoutError(f"{e}\n--- job log:\n{self.text()[-3000:]}") from None

    def processes(self, step: Optional[str] = None, rank: Optional[int] = None) -> Iterable[int]:
        """Pids of this job's processes (found by SLURM_JOB_ID in their environment; a step's
        ranks by SLURM_STEP_ID and SLURM_PROCID), slurmstepd excluded."""
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                env = dict(kv.split(b"=", 1) for kv in (p / "environ").read_bytes().split(b"\0") if b"=" in kv)
                if b"slurmstepd" in (p / "cmdline").read_bytes():
                    continue
            except OSError:
                continue
            if env.get(b"SLURM_JOB_ID") != str(self.id).encode() or env.get(b"SLURM_CONF") is None:
                continue
            if step is not None and env.get(b"SLURM_STEP_ID") != step.encode():
                continue
            if rank is not None and env.get(b"SLURM_PROCID") != str(rank).encode():
                continue
            yield int(p.name)


def submit(slurm: LocalSlurm, folder: Path, env: Dict[str, str], *args: str,
           log_name: str = "slurm-%j.out") -> Job:
    """sbatch ARGS from `folder` (the submission directory) with `env`; log_name: the log's name
    pattern the script's --output gives (relative to `folder`)."""
    job_id = slurm.sbatch(*args, cwd=folder, env=env)
    return Job(slurm, job_id, folder, log_name)


def state_of(info: Dict[str, str]) -> str:
    return " ".join(f"{k}={info.get(k)}" for k in ("JobState", "Reason", "Restarts", "ExitCode"))
