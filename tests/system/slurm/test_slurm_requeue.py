"""slurm/cpu-train.sbatch under a real Slurm: stopped three ways in the middle of training (USR1 from
`scancel --signal=USR1 --batch`, the time limit's `--signal=B:USR1@N`, `scontrol requeue`), the job
runs again under the same id, continues from its backup, and ends with the weights of an
uninterrupted run bit for bit.

All jobs of the test are submitted together (one CPU each: they run two at a time here) and watched
in one loop that interrupts each once training is under way. A requeued job waits 120 s before
Slurm starts it again (its begin time); the loop moves that to 3 s from now, which changes when the
run starts, not what it does; the time-limit job's later runs also get a 10-minute limit (on a
loaded machine each 1-minute run would otherwise make little progress before its own signal)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import h5py
import numpy as np

from tests.support import slurm_cluster, slurm_jobs
from tests.support.paths import ROOT

SCRIPT = str(ROOT / "slurm" / "cpu-train.sbatch")
LOG = "hpcnn-cpu-%j.out"
# slurmctld checks time limits every 30 s (PERIODIC_TIMEOUT): with --time=1 and @50 the signal comes
# 10 to 40 s into the run, so that job's training must last longer than that on the fastest machine:
# LONG_EPOCHS of 2,000 images on one thread take about 1.4 s each on this machine kind, 56 s in all.
SHORT_EPOCHS, LONG_EPOCHS = 3, 40
COMMON = ("--cpus-per-task=1", "--mem=2G", "--gres=none")


def weights(path: Path) -> dict:
    with h5py.File(path, "r") as f:
        out = {}
        f["model_weights"].visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    assert out, f"no weights in {path}"
    return out


def assert_same_bits(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for name in wa:
        assert wa[name].dtype == wb[name].dtype and wa[name].shape == wb[name].shape, name
        assert np.array_equal(wa[name].view(np.uint32), wb[name].view(np.uint32)), \
            f"{name}: the resumed run's weights differ from the uninterrupted run's"


def test_cpu_train_resumes_bitwise_after_usr1_time_limit_and_requeue(slurm, job_data, tmp_path):
    env = slurm_jobs.job_env(job_data, QUICK="1")
    short = dict(env, EPOCHS=str(SHORT_EPOCHS))
    long = dict(env, EPOCHS=str(LONG_EPOCHS))
    sub = lambda e, *a: slurm_jobs.submit(slurm, tmp_path, e, *COMMON, *a, SCRIPT, log_name=LOG)
    # The long ones first: they set the test's length.
    jobs = {
        "time limit": sub(long, "--time=1", "--signal=B:USR1@50"),
        "long reference": sub(long, "--time=10"),
        "usr1": sub(short, "--time=10"),
        "requeue": sub(short, "--time=10"),
        "short reference": sub(short, "--time=10"),
    }
    interrupt = {  # how each is stopped once its second epoch has begun
        "usr1": lambda j: slurm.run("scancel", "--signal=USR1", "--batch", str(j.id)),
        "requeue": lambda j: slurm.run("scontrol", "requeue", str(j.id)),
    }
    interrupted, moved = set(), {}  # moved: job -> the requeue whose begin time was moved
    ended = {}

    def step():
        for name, job in jobs.items():
            if name in ended:
                continue
            info = job.info()
            state = info.get("JobState")
            if state in slurm_cluster.END_STATES:
                ended[name] = info
            elif name in interrupt and name not in interrupted and state == "RUNNING" \
                    and f"Epoch 2/{SHORT_EPOCHS}" in job.text():
                interrupt[name](job)
                interrupted.add(name)
            elif state == "PENDING" and info.get("Reason") == "BeginTime" \
                    and int(info.get("Restarts", 0)) > moved.get(name, 0):
                # Once per requeue, and not to now: slurmd refuses a launch whose credential is not
                # newer (to the second) than the revocation at the requeue ("Job credential
                # revoked": the job FAILED).
                update = ["StartTime=now+3"]
                if name == "time limit":
                    # Stopped once by its time limit's signal (the run this test is about): the runs
                    # after it get a longer limit, so that each one is not cut again after 10-40 s.
                    update.append("TimeLimit=10")
                slurm.run("scontrol", "update", f"JobId={job.id}", *update)
                moved[name] = int(info["Restarts"])
        return len(ended) == len(jobs)

    try:
        slurm_cluster.wait_for("the requeue test's jobs to end", step, timeout=600, every=0.3)
    except TimeoutError as e:
        raise TimeoutError(f"{e}: " + "; ".join(f"{n}: {slurm.describe(j.id)}" for n, j in jobs.items())) from None

    for name, job in jobs.items():
        info, text = ended[name], job.text()
        assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", (name, slurm_jobs.state_of(info), text[-3000:])
        out = tmp_path / "results" / f"cpu-{job.id}"
        summary = json.loads((out / "summary.json").read_text())
        epochs = LONG_EPOCHS if "long" in name or name == "time limit" else SHORT_EPOCHS
        assert len(summary["runs"]["cpu"]["history"]["loss"]) == epochs, (name, text[-3000:])
        assert not (out / "backup").exists(), name  # removed once the run is complete
        if "reference" in name:
            assert info["Restarts"] == "0" and "BackupAndRestore: resuming" not in text, (name, text[-3000:])
            continue
        # Stopped by the signal in training, requeued, and continued from the backup in a later run.
        assert int(info["Restarts"]) >= 1, (name, slurm_jobs.state_of(info))
        if name == "time limit":
            assert int(info["Restarts"]) == 1 and info["TimeLimit"] == "00:10:00", slurm_jobs.state_of(info)
        signal = "SIGTERM" if name == "requeue" else "SIGUSR1"
        assert f"hpcnn job: {signal} received: training writes a backup and stops" in text, (name, text[-3000:])
        assert f"Training stopped by {signal}" in text, (name, text[-3000:])
        assert "BackupAndRestore: resuming from" in text, (name, text[-3000:])
        if name != "requeue":  # the script requeued itself; scontrol did it for the other one
            assert "hpcnn job: requeued; the next run continues from the backup" in text, (name, text[-3000:])
        assert (tmp_path / "results" / "bench.csv").exists()
        reference = jobs["long reference" if name == "time limit" else "short reference"]
        assert_same_bits(out / "model_cpu.h5", tmp_path / "results" / f"cpu-{reference.id}" / "model_cpu.h5")
    assert {"usr1", "requeue"} <= interrupted
