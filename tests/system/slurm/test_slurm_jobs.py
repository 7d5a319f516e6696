"""The slurm/ scripts submitted with sbatch to a real one-node Slurm (the partition, CPUs, memory and
time given on the command line, the scripts as they are): the CPU tutorial job, the notebook job,
both sweeps, hpcnn's thread count inside jobs and steps, and the GPU scripts on a cluster without
GPUs. Their end states come from Slurm (`scontrol show job`), their outputs from the files."""
from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support import slurm_jobs
from tests.support.paths import ROOT

SLURM_DIR = ROOT / "slurm"
SMALL = ("--mem=2G", "--time=10")


def completed(job, timeout=600):
    info = job.wait_end(timeout=timeout)
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", \
        (slurm_jobs.state_of(info), job.text()[-3000:])
    return info


def rows(path):
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_cpu_train_quick(slurm, job_data, tmp_path):
    job = slurm_jobs.submit(slurm, tmp_path, slurm_jobs.job_env(job_data, QUICK="1"), "--cpus-per-task=2", *SMALL,
                            str(SLURM_DIR / "cpu-train.sbatch"), log_name="hpcnn-cpu-%j.out")
    completed(job)
    text = job.text()
    assert "Training on cpu with 2 CPU threads" in text, text[-3000:]  # --cpus-per-task=2
    assert f"hpcnn job: run 0 (requeues so far) of job {job.id}" in text
    out = tmp_path / "results" / f"cpu-{job.id}"
    for name in ("model_cpu.h5", "summary.json", "curves.png", "predictions.png", "timings.csv"):
        assert (out / name).is_file(), name
    assert not (out / "backup").exists()
    bench = rows(tmp_path / "results" / "bench.csv")
    assert {r["mode"] for r in bench} == {"train", "infer"}
    assert {(r["label"], r["threads"]) for r in bench} == {("cpu-2c", "2")}


PROBE = ("import os, hpcnn; print('probe', hpcnn.get_num_threads(), "
         "','.join(map(str, sorted(os.sched_getaffinity(0)))), os.environ.get('SLURM_PROCID', '-'), flush=True)")


def test_hpcnn_threads_follow_cpus_per_task_and_the_affinity_mask(slurm, job_data, tmp_path):
    """hpcnn's thread count in a job is its --cpus-per-task, or without one the CPUs of the mask
    Slurm set (one core here); in an srun step each task's own CPUs."""
    env = slurm_jobs.job_env(job_data)
    python = sys.executable
    cases = {
        "-c 1": ("--cpus-per-task=1",),
        "-c 2": ("--cpus-per-task=2",),
        "-n 1, no -c": ("--ntasks=1",),
    }
    jobs = {name: slurm_jobs.submit(slurm, tmp_path, env, *opts, *SMALL, f"--wrap={python} -c \"{PROBE}\"")
            for name, opts in cases.items()}
    step = slurm_jobs.submit(slurm, tmp_path, env, "--ntasks=2", "--cpus-per-task=1", *SMALL,
                             f"--wrap=srun --ntasks=2 --cpus-per-task=1 --cpu-bind=cores {python} -c \"{PROBE}\"")
    want = {"-c 1": (1, 1), "-c 2": (2, 2), "-n 1, no -c": (1, 1)}
    for name, job in jobs.items():
        completed(job)
        (line,) = re.findall(r"^probe .*$", job.text(), re.M)
        _, threads, cpus, _ = line.split()
        assert (int(threads), len(cpus.split(","))) == want[name], (name, line)
    completed(step)
    lines = re.findall(r"^probe .*$", step.text(), re.M)
    assert len(lines) == 2, step.text()
    masks = set()
    for line in lines:
        _, threads, cpus, rank = line.split()
        assert threads == "1" and len(cpus.split(",")) == 1, line  # each task: one thread on its one CPU
        masks.add(cpus)
    assert len(masks) == 2, lines  # on different cores


GPU_SCRIPTS = ["gpu-train.sbatch", "gpu-selftest.sbatch", "gpu-selftest-2gpu.sbatch", "multi-gpu.sbatch",
               "multi-node.sbatch"]


@pytest.mark.parametrize("script", GPU_SCRIPTS)
def test_gpu_scripts_are_refused_by_sbatch_on_a_cluster_without_gpus(slurm, job_data, tmp_path, script):
    """Refused at submission, by sbatch, for the GRES the script asks for (its #SBATCH --gres line):
    before anything queues or runs, with Slurm's own message."""
    env = slurm.env(slurm_jobs.job_env(job_data))
    r = slurm.run("sbatch", "--partition=hpcnntest", "--nodes=1", *SMALL, str(SLURM_DIR / script),
                  cwd=tmp_path, env=env, check=False)
    assert r.returncode != 0 and r.stdout == "", (r.stdout, r.stderr)
    assert "sbatch: error: Invalid generic resource (gres) specification" in r.stderr, r.stderr
    assert "#SBATCH --gres=gpu:" in (SLURM_DIR / script).read_text()
    assert not list(tmp_path.glob("*.out"))


def test_notebook_job_writes_the_executed_notebook_and_its_files_together(slurm, job_data, tmp_path):
    if os.environ.get("HPCNN_EXPECT_JUPYTER") != "1":
        for package in ("nbclient", "nbformat", "ipykernel"):
            if importlib.util.find_spec(package) is None:
                pytest.skip('slurm/notebook.sbatch needs `pip install --no-build-isolation ".[jupyter]"`')
    job = slurm_jobs.submit(slurm, tmp_path, slurm_jobs.job_env(job_data, QUICK="1"), "--cpus-per-task=2", *SMALL,
                            str(SLURM_DIR / "notebook.sbatch"), log_name="hpcnn-notebook-%j.out")
    completed(job)
    out = tmp_path / "results" / f"notebook-{job.id}"
    nb = json.loads((out / "01_cifar10_cpu_vs_gpu.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["execution_count"] for c in code)
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    text = "".join("".join(o.get("text", "")) for c in code for o in c["outputs"])
    assert "Training on cpu with 2 CPU threads" in text  # the kernel inherits the job's SLURM_CPUS_PER_TASK
    assert (out / "cifar10_model.h5").is_file()
    assert any("image/png" in o.get("data", {}) for c in code for o in c["outputs"])  # its figures
    assert f"results/notebook-{job.id}/01_cifar10_cpu_vs_gpu.ipynb" in job.text()


def run_sweep(slurm, tmp_path, script, env):
    r = subprocess.run(["bash", str(SLURM_DIR / script)], cwd=tmp_path, env=slurm.env(env),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    ids = [int(m) for m in re.findall(r"^Submitted batch job (\d+)$", r.stdout, re.M)]
    return r.stdout, ids


def collect(tmp_path, out, inp):
    hpcnn = shutil.which("hpcnn", path=os.path.dirname(sys.executable))
    r = subprocess.run([hpcnn, "collect", out, inp], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return rows(tmp_path / out)


def test_bench_sweep_submits_its_cpu_jobs_and_collects_one_row_each(slurm, job_data, tmp_path):
    env = slurm_jobs.job_env(job_data, QUICK="1", THREADS="1 2", CPU_PARTITION="hpcnntest", GPU_PARTITIONS="",
                             SBATCH_MEM_PER_NODE="2G")
    _, ids = run_sweep(slurm, tmp_path, "bench-sweep.sh", env)
    assert len(ids) == 2
    for job_id in ids:
        info = slurm.wait_end(job_id, timeout=600)
        assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", slurm.describe(job_id)
    table = collect(tmp_path, "results/all.csv", "results/bench.csv")
    # one row per configuration and mode (train, infer), each on its thread count
    assert sorted((r["label"], r["mode"], r["threads"]) for r in table) == \
        [("cpu-1c", "infer", "1"), ("cpu-1c", "train", "1"), ("cpu-2c", "infer", "2"), ("cpu-2c", "train", "2")]


def test_dist_bench_sweep_cpu_variant_submits_its_jobs_and_collects_one_row_each(slurm, job_data, tmp_path):
    local = tmp_path / "node-local"
    local.mkdir()
    data = job_data / "synthetic_cifar10_seed0_train2000.hdf5"
    env = slurm_jobs.job_env(job_data, KIND="cpu", QUICK="1", COUNTS="1 2", CPUS_PER_RANK="1", CPU_PARTITION="hpcnntest",
                             DATA=str(data), TMPDIR=str(local), SBATCH_MEM_PER_NODE="4G")
    _, ids = run_sweep(slurm, tmp_path, "dist-bench-sweep.sh", env)
    assert len(ids) == 4
    for job_id in ids:
        info = slurm.wait_end(job_id, timeout=600)
        assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", slurm.describe(job_id)
    table = collect(tmp_path, "results/dist-all.csv", "results/dist.csv")
    assert sorted((r["label"], r["replicas"]) for r in table) == \
        [("cpu-1rank-local", "1"), ("cpu-1rank-scratch", "1"), ("cpu-2rank-local", "2"), ("cpu-2rank-scratch", "2")]
    assert all(r["mode"] == "dist-train" and float(r["mean_speed"]) > 0 for r in table)
    assert (local / data.name).is_file()  # the "local" jobs staged the file there
