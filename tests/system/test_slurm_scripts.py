"""Every script in slurm/ runs with plain `bash` on a machine without Slurm or conda (QUICK=1: a
tiny run), activates conda only where it exists, and leaves hpcnn's thread count alone."""
import atexit
import csv
import functools
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import hpcnn
from hpcnn import _core
from tests.support import paths

ROOT = paths.ROOT
SCRIPTS = sorted((ROOT / "slurm").iterdir())
BASH = shutil.which("bash")


# What "without Slurm or conda" hides: where the machine has them installed system-wide (the Slurm
# tests' machine has Debian's slurm-client in /usr/bin), plain_path() shadows their folder.
HIDDEN = frozenset({"sbatch", "srun", "salloc", "scontrol", "squeue", "scancel", "sinfo", "sacct", "conda"})


@functools.lru_cache(maxsize=None)
def shadow(folder: str) -> str:
    """`folder` itself, or, where it holds a command of HIDDEN, a temporary folder of links to
    everything else in it (removed when the tests end)."""
    if not any(os.path.exists(os.path.join(folder, c)) for c in HIDDEN):
        return folder
    copy = tempfile.mkdtemp(prefix="hpcnn-no-slurm-")
    atexit.register(shutil.rmtree, copy, True)
    for name in os.listdir(folder):
        if name not in HIDDEN:
            os.symlink(os.path.join(folder, name), os.path.join(copy, name))
    return copy


def plain_path():
    """PATH with this interpreter's bin folder (python3, hpcnn) and the system's, without conda
    or Slurm."""
    dirs = [os.path.dirname(sys.executable)]
    hpcnn_cmd = shutil.which("hpcnn")
    if hpcnn_cmd:
        dirs.append(os.path.dirname(hpcnn_cmd))
    if any(os.path.exists(os.path.join(d, c)) for d in dirs for c in HIDDEN):
        pytest.skip("conda or sbatch is installed beside this interpreter: cannot test their absence")
    dirs += [shadow(d) for d in ("/usr/local/bin", "/usr/bin", "/bin") if os.path.isdir(d)]
    path = os.pathsep.join(dict.fromkeys(dirs))
    if not shutil.which("hpcnn", path=path) or not shutil.which("python3", path=path):
        pytest.skip("the hpcnn command is not installed beside this interpreter")
    return path


def run_script(script, tmp_path, path, **env_extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "CONDA", "HPCNN_NUM_THREADS", "OMP_NUM_THREADS"))}
    env.update(PATH=path, HPCNN_DATA_DIR=str(tmp_path / "data"), QUICK="1", MPLBACKEND="Agg")
    env.update(env_extra)
    return subprocess.run([BASH, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bash_syntax(script):
    r = subprocess.run([BASH, "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = script.read_text()
    assert "OMP_NUM_THREADS" not in text.replace("does not read OMP_NUM_THREADS", ""), \
        "hpcnn ignores OMP_NUM_THREADS; scripts set the BLAS's own variables"
    assert 'conda info --base' not in text or "command -v conda" in text, "conda must be optional"


def test_cpu_train_without_slurm_or_conda(tmp_path):
    # OMP_NUM_THREADS=1 as many clusters' login profiles set it: it must not slow hpcnn down.
    r = run_script(ROOT / "slurm" / "cpu-train.sbatch", tmp_path, plain_path(), OMP_NUM_THREADS="1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    cpus = len(os.sched_getaffinity(0))
    # All the CPUs this shell may use: neither OMP_NUM_THREADS nor a missing SLURM_CPUS_PER_TASK
    # reduces them (the old script trained on one thread here).
    assert f"Training on cpu with {cpus} CPU threads" in out, out
    assert (tmp_path / "results" / "cpu-local" / "model_cpu.h5").exists()
    rows = list(csv.DictReader(io.StringIO((tmp_path / "results" / "bench.csv").read_text())))
    assert {row["mode"] for row in rows} == {"train", "infer"} and rows[0]["threads"] == str(cpus)
    assert (tmp_path / "data" / "synthetic_cifar10_seed0_train2000.hdf5").exists()


def test_gpu_train_without_a_gpu_runs_the_cpu_part_and_says_why(tmp_path):
    if hpcnn.list_physical_devices("GPU"):
        pytest.skip("a GPU is usable here")
    r = run_script(ROOT / "slurm" / "gpu-train.sbatch", tmp_path, plain_path())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "No GPU run:" in r.stdout and "No GPU benchmark: no GPU is usable here" in r.stdout
    assert (tmp_path / "results" / "gpu-local" / "summary.json").exists()


def test_bench_sweep_without_slurm_runs_here(tmp_path):
    r = run_script(ROOT / "slurm" / "bench-sweep.sh", tmp_path, plain_path(), THREADS="1 2 64")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "sbatch not found" in r.stdout
    cpus = len(os.sched_getaffinity(0))
    labels = {row["label"] for row in csv.DictReader(io.StringIO((tmp_path / "results" / "all.csv").read_text()))}
    assert labels == {f"local-{c}c" for c in (1, 2, 64) if c <= cpus}
    assert "skipping 64 threads" in r.stdout


GPU_SECTIONS = ("pytest -m gpu", "cuDNN algorithms", "compute-sanitizer memcheck", "compute-sanitizer racecheck",
                "multi-GPU tests", "bench/bench_gpu.py")


def summary_of(report):
    """{section: 'passed' | 'failed (...)' | 'skipped (...)'} from the report's summary."""
    lines = report.split("===== summary =====\n", 1)[1].strip().splitlines()
    return {name.strip(): status.strip() for name, status in (line.split(":", 1) for line in lines)}


def selftest_without_gpu(tmp_path, script, report_name):
    if hpcnn.list_physical_devices("GPU"):
        pytest.skip("a GPU is usable here: this covers machines without one")
    for name in ("tests", "bench", "pyproject.toml"):
        (tmp_path / name).symlink_to(ROOT / name)
    r = run_script(ROOT / "slurm" / script, tmp_path, plain_path())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = (tmp_path / report_name).read_text()
    for section in ("build_info", "devices", "host self-test", "pytest -m gpu -rs", "compute-sanitizer --tool memcheck",
                    "compute-sanitizer --tool racecheck", "multi-GPU tests (pytest -m multi_gpu)", "bench/bench_gpu.py",
                    "summary"):
        assert f"===== {section} =====" in report
    summary = summary_of(report)
    assert summary["host self-test"] == "passed", report[-3000:]
    assert "pytest exit code: 0" in report  # the host self-test's run
    reason = _core.cuda_unavailable_reason()
    for section in GPU_SECTIONS:
        assert summary[section] == f"skipped (no usable GPU: {reason})", (section, summary)
    # the summary is the script's last words too
    assert "host self-test:" in r.stdout and "skipped (no usable GPU" in r.stdout and report_name in r.stdout
    return report


def test_gpu_selftest_without_slurm_or_gpu(tmp_path):
    selftest_without_gpu(tmp_path, "gpu-selftest.sbatch", "hpcnn-gpu-selftest-local.txt")


def test_gpu_selftest_two_gpu_variant_without_slurm_or_gpu(tmp_path):
    report = selftest_without_gpu(tmp_path, "gpu-selftest-2gpu.sbatch", "hpcnn-gpu-selftest-2gpu-local.txt")
    assert "GPUs wanted: 2" in report
    text = (ROOT / "slurm" / "gpu-selftest-2gpu.sbatch").read_text()
    assert "#SBATCH --gres=gpu:2" in text


def test_gpu_selftest_sections_with_a_gpu_and_their_failure_reruns(tmp_path):
    """The script's logic where a GPU is usable, checked here with stand-ins: a fake
    compute-sanitizer that fails for one test, a `python3` that reports a GPU, and a pytest run
    whose first test fails: each section is reported, and the failing tests run again with
    CUDA_LAUNCH_BLOCKING=1."""
    path = plain_path()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real_python = shutil.which("python3", path=path)
    log = tmp_path / "calls.log"
    # python3: the real one, except that hpcnn reports 2 usable GPUs and pytest/bench runs are logged
    (bin_dir / "python3").write_text(f"""#!/bin/bash
echo "python3 CUDA_LAUNCH_BLOCKING=${{CUDA_LAUNCH_BLOCKING:-}} $*" >> "{log}"
case "$*" in
  *cuda_unavailable_reason*) echo ""; exit 0 ;;
  *cuda_devices*) echo 2; exit 0 ;;
  *"-m pytest"*"-m gpu"*) case "$*" in *--lf*) exit 1 ;; *) echo "1 failed"; exit 1 ;; esac ;;
  *"-m pytest"*"-m multi_gpu"*) echo "2 passed"; exit 0 ;;
  *"-m pytest"*) case "$*" in *test_cuda_backend*) exec "{real_python}" "$@" ;; *) exit 0 ;; esac ;;
  *bench_gpu.py*) echo "bench ran"; exit 0 ;;
  -) cat > /dev/null; echo "(cuDNN algorithms: stand-in)"; exit 0 ;;
esac
exec "{real_python}" "$@"
""")
    (bin_dir / "compute-sanitizer").write_text(f"""#!/bin/bash
echo "sanitizer $*" >> "{log}"
case "$*" in *test_adam_step*) echo "========= Invalid __global__ read"; exit 86 ;; esac
exit 0
""")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    for name in ("tests", "bench", "pyproject.toml"):
        (tmp_path / name).symlink_to(ROOT / name)
    r = run_script(ROOT / "slurm" / "gpu-selftest-2gpu.sbatch", tmp_path, f"{bin_dir}{os.pathsep}{path}", QUICK="0")
    report = (tmp_path / "hpcnn-gpu-selftest-2gpu-local.txt").read_text()
    assert r.returncode == 1, report[-3000:]  # a section failed
    summary = summary_of(report)
    assert summary["host self-test"] == "passed"
    assert summary["pytest -m gpu"].startswith("failed (pytest exit code 1; re-run with CUDA_LAUNCH_BLOCKING=1")
    assert summary["cuDNN algorithms"] == "passed"
    assert summary["compute-sanitizer memcheck"] == \
        "failed (1 of 8: tests/gpu/test_gpu_ops.py::test_adam_step)", summary
    assert summary["compute-sanitizer racecheck"] == "passed (1 tests)"
    assert summary["multi-GPU tests"] == "passed"
    assert summary["bench/bench_gpu.py"] == "passed"
    calls = log.read_text().splitlines()
    # the failing gpu tests again, with CUDA_LAUNCH_BLOCKING=1; the test the sanitizer flagged, alone
    assert any("CUDA_LAUNCH_BLOCKING=1" in c and "--lf" in c and "-m gpu" in c for c in calls), calls
    assert any(c.startswith("python3 CUDA_LAUNCH_BLOCKING=1") and c.endswith("tests/gpu/test_gpu_ops.py::test_adam_step")
               for c in calls), calls
    sanitized = [c for c in calls if c.startswith("sanitizer")]
    assert len(sanitized) == 9 and all("--error-exitcode" in c for c in sanitized)
    assert sum("--tool racecheck" in c for c in sanitized) == 1
    assert "========= Invalid __global__ read" in report


def test_gpu_selftest_two_gpu_variant_with_one_gpu_fails_the_multi_gpu_section(tmp_path):
    path = plain_path()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real_python = shutil.which("python3", path=path)
    (bin_dir / "python3").write_text(f"""#!/bin/bash
case "$*" in
  *cuda_unavailable_reason*) echo ""; exit 0 ;;
  *cuda_devices*) echo 1; exit 0 ;;
  *"-m pytest"*) exit 0 ;;
  *bench_gpu.py*) exit 0 ;;
  -) cat > /dev/null; exit 0 ;;
esac
exec "{real_python}" "$@"
""")
    (bin_dir / "compute-sanitizer").write_text("#!/bin/bash\nexit 0\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    for variant, want in (("gpu-selftest.sbatch", "skipped (1 GPU visible: run slurm/gpu-selftest-2gpu.sbatch for them)"),
                          ("gpu-selftest-2gpu.sbatch", "failed (the 2-GPU variant sees 1 GPU: check --gres and "
                                                       "CUDA_VISIBLE_DEVICES)")):
        r = run_script(ROOT / "slurm" / variant, tmp_path, f"{bin_dir}{os.pathsep}{path}")
        name = "hpcnn-gpu-selftest-2gpu-local.txt" if "2gpu" in variant else "hpcnn-gpu-selftest-local.txt"
        summary = summary_of((tmp_path / name).read_text())
        assert summary["multi-GPU tests"] == want
        assert r.returncode == (1 if "2gpu" in variant else 0)


def test_scripts_use_conda_when_it_is_there(tmp_path):
    """A conda without an env named hpcnn: the script says so and goes on with what is on PATH."""
    fake = tmp_path / "fakeconda"
    (fake / "bin").mkdir(parents=True)
    (fake / "etc" / "profile.d").mkdir(parents=True)
    (fake / "bin" / "conda").write_text(f"#!/bin/sh\n[ \"$1 $2\" = 'info --base' ] && echo {fake}\n")
    (fake / "bin" / "conda").chmod(0o755)
    (fake / "etc" / "profile.d" / "conda.sh").write_text(
        "conda() { if [ \"$1\" = activate ]; then echo \"activate $2\" >> \"$CONDA_LOG\"; return 1; fi; }\n")
    log = tmp_path / "conda.log"
    r = run_script(ROOT / "slurm" / "cpu-train.sbatch", tmp_path, f"{fake / 'bin'}{os.pathsep}{plain_path()}",
                   CONDA_LOG=str(log), EPOCHS="1", TRAIN_ROWS="300")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert log.read_text().strip() == "activate hpcnn"
    assert "no conda env 'hpcnn': using what is on PATH" in r.stdout


def test_scripts_without_hpcnn_say_so(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    for script in ("cpu-train.sbatch", "gpu-train.sbatch", "notebook.sbatch"):
        r = run_script(ROOT / "slurm" / script, tmp_path, str(empty))
        assert r.returncode == 1 and "hpcnn is not on PATH" in r.stderr, r.stderr


def test_train_script_requeues_itself_on_usr1_and_the_next_run_continues(tmp_path):
    """--signal=B:USR1@120 and --requeue, without Slurm: USR1 sent to the batch script (as Slurm does
    two minutes before the time limit) makes training write a backup and stop, and the script
    requeue the job (a stand-in scontrol records the call); the next run of the same job finds the
    backup and continues, then finishes the script's work (the benchmark) and removes the backup."""
    import signal
    import threading

    path = plain_path()
    fake = tmp_path / "fake-slurm"
    fake.mkdir()
    log = tmp_path / "scontrol.log"
    (fake / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    (fake / "scontrol").chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "CONDA", "HPCNN_NUM_THREADS", "OMP_NUM_THREADS"))}
    env.update(PATH=f"{fake}{os.pathsep}{path}", HPCNN_DATA_DIR=str(tmp_path / "data"), QUICK="1",
               MPLBACKEND="Agg", EPOCHS="6", SLURM_JOB_ID="4242", PYTHONUNBUFFERED="1")
    script = ROOT / "slurm" / "cpu-train.sbatch"
    proc = subprocess.Popen([BASH, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    started = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Training on cpu with"):  # printed by fit: its handlers are in place
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert started.wait(timeout=600), "".join(lines)[-3000:]
        proc.send_signal(signal.SIGUSR1)  # to the batch shell only, as --signal=B:USR1 sends it
        assert proc.wait(timeout=600) == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(timeout=60)
        proc.stdout.close()
    out = "".join(lines)
    assert "hpcnn job: SIGUSR1 received" in out and "Training stopped by SIGUSR1" in out, out[-3000:]
    assert log.read_text().split() == ["requeue", "4242"]
    results = tmp_path / "results" / "cpu-4242"
    assert (results / "backup" / "cpu" / "backup.h5").exists()
    assert not (tmp_path / "results" / "bench.csv").exists()  # the script stopped after training
    # The requeued job: same script, same job id.
    r = subprocess.run([BASH, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "BackupAndRestore: resuming from" in r.stdout, r.stdout[-3000:]
    assert (results / "model_cpu.h5").exists() and (tmp_path / "results" / "bench.csv").exists()
    assert not (results / "backup").exists()
    summary = __import__("json").loads((results / "summary.json").read_text())
    assert len(summary["runs"]["cpu"]["history"]["loss"]) == 6  # every epoch, across both runs
    assert log.read_text().split() == ["requeue", "4242"]  # no second requeue


@pytest.mark.parametrize("script", ["cpu-train.sbatch", "gpu-train.sbatch"])
def test_train_scripts_ask_for_the_signal_and_requeue(script):
    text = (ROOT / "slurm" / script).read_text()
    for line in ("#SBATCH --signal=B:USR1@120", "#SBATCH --requeue", "#SBATCH --open-mode=append",
                 "trap 'on_signal USR1' USR1", "--backup \"$OUT/backup\""):
        assert line in text, line


def test_dist_bench_sweep_without_slurm_runs_one_rank_here(tmp_path):
    # No sbatch: the sweep runs slurm/multi-gpu.sbatch once here (one rank; the GPU if usable, else
    # the CPU), whose `hpcnn dist-train` appends a timing row with the replica count.
    r = run_script(ROOT / "slurm" / "dist-bench-sweep.sh", tmp_path, plain_path())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "sbatch not found: one configuration here" in r.stdout
    assert "srun not found: one rank here" in r.stdout
    rows = list(csv.DictReader(io.StringIO((tmp_path / "results" / "dist-all.csv").read_text())))
    assert len(rows) == 1 and rows[0]["mode"] == "dist-train" and rows[0]["replicas"] == "1"
    assert rows[0]["label"] == "local-1rank" and float(rows[0]["mean_speed"]) > 0


def test_multi_node_cpu_without_slurm_runs_one_rank_here(tmp_path):
    r = run_script(ROOT / "slurm" / "multi-node.sbatch", tmp_path, plain_path(), KIND="cpu")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "srun not found: one rank here" in r.stdout
    assert "MirroredStrategy(replicas=1, devices=['cpu']" in r.stdout
    assert (tmp_path / "results" / "multinode-local" / "training_log.csv").exists()


def jupyter_or_skip():
    if os.environ.get("HPCNN_EXPECT_JUPYTER") != "1":
        import importlib.util
        for package in ("nbclient", "nbformat", "ipykernel"):
            if importlib.util.find_spec(package) is None:
                pytest.skip('slurm/notebook.sbatch needs `pip install --no-build-isolation ".[jupyter]"`')


def test_notebook_script_runs_notebook_01_quick_and_keeps_it_beside_its_files(tmp_path):
    jupyter_or_skip()
    r = run_script(ROOT / "slurm" / "notebook.sbatch", tmp_path, plain_path(), OMP_NUM_THREADS="1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = tmp_path / "results" / "notebook-local"
    executed = out / "01_cifar10_cpu_vs_gpu.ipynb"
    nb = __import__("json").loads(executed.read_text())
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert "".join(injected[0]["source"]).splitlines()[1:] == ["EPOCHS = 1", "SYNTHETIC = True", "TRAIN_ROWS = 1000"]
    assert (out / "cifar10_model.h5").exists()
    assert (tmp_path / "data" / "synthetic_cifar10_seed0_train1000.hdf5").exists()
    cpus = len(os.sched_getaffinity(0))
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"])
    assert f"Training on cpu with {cpus} CPU threads" in text      # OMP_NUM_THREADS=1 changes nothing
    assert re.search(r"^\[ ?1/\d+\] import os$", r.stdout, re.M), r.stdout              # progress, for the job log
    assert f"done in " in r.stdout and str(executed.relative_to(tmp_path)) in r.stdout


def test_notebook_script_fails_with_the_notebook(tmp_path):
    """A failing cell fails the job (exit status 1), naming the cell; options after the script's name
    reach `hpcnn notebook run`."""
    jupyter_or_skip()
    nb = {"cells": [{"cell_type": "code", "id": "a1", "metadata": {"tags": ["parameters"]}, "outputs": [],
                     "execution_count": None, "source": "N = 1"},
                    {"cell_type": "code", "id": "a2", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": "assert N == 1, f'N is {N}'"}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "mine.ipynb").write_text(__import__("json").dumps(nb))
    r = subprocess.run([BASH, str(ROOT / "slurm" / "notebook.sbatch"), "-p", "N=2"], cwd=tmp_path,
                       env=dict(os.environ, PATH=plain_path(), NOTEBOOK="mine.ipynb"),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert "cell [3/3] (assert N == 1, f'N is {N}') failed: AssertionError: N is 2" in r.stderr, r.stderr
    assert (tmp_path / "results" / "notebook-local" / "mine.ipynb").exists()


# ---- multi-node binding and the data-parallel sweep (issue 25)
def stand_in(bin_dir, name, log):
    """A command `name` that only records its arguments, one call per line."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text(f'#!/bin/sh\necho "$@" >> "{log}"\n')
    (bin_dir / name).chmod(0o755)


def srun_calls(tmp_path, **env):
    """multi-node.sbatch as a Slurm job would run it, with a stand-in srun: its calls."""
    log = tmp_path / "srun.log"
    stand_in(tmp_path / "fake-slurm", "srun", log)
    r = run_script(ROOT / "slurm" / "multi-node.sbatch", tmp_path, f"{tmp_path / 'fake-slurm'}{os.pathsep}{plain_path()}",
                   SLURM_JOB_ID="77", SLURM_NNODES="2", **env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout, log.read_text().splitlines()


def test_multi_node_binds_one_rank_per_numa_domain_on_cpu_nodes(tmp_path):
    out, calls = srun_calls(tmp_path, KIND="cpu", DOMAINS="2", CORES_PER_DOMAIN="16")
    assert "binding: one rank per NUMA domain, 2 per node, 16 cores (hpcnn threads) each" in out
    (call,) = calls
    args = call.split()
    for option in ("--ntasks-per-node=2", "--cpus-per-task=16", "--hint=nomultithread", "--cpu-bind=ldoms",
                   "--distribution=block:block", "--kill-on-bad-exit=1"):
        assert option in args, call
    # 2 nodes x 2 domains = 4 ranks of 256 rows; CPU ranks; a backup that a requeued job resumes
    assert "--batch-size 1024" in call and "--device cpu" in call and "--backup" in args, call
    assert "hpcnn dist-train --strategy multiworker" in call


def test_multi_node_finds_the_numa_domains_of_this_machine(tmp_path):
    out, _ = srun_calls(tmp_path, KIND="cpu")
    lines = subprocess.run(["lscpu", "-p=CORE,NODE"], capture_output=True, text=True).stdout.splitlines()
    pairs = {line for line in lines if not line.startswith("#")}
    domains = len({p.split(",")[1] for p in pairs}) or 1
    assert f"one rank per NUMA domain, {domains} per node, {max(1, len(pairs) // domains)} cores" in out, out


def test_multi_node_binds_one_rank_per_gpu_on_gpu_nodes(tmp_path):
    out, calls = srun_calls(tmp_path, SLURM_NTASKS_PER_NODE="4")
    assert "binding: one rank per GPU, 4 per node" in out
    args = calls[-1].split()
    for option in ("--ntasks-per-node=4", "--cpu-bind=cores", "--kill-on-bad-exit=1"):
        assert option in args, calls
    assert "--device" not in args and "--batch-size" in args and args[args.index("--batch-size") + 1] == "2048"


def test_dist_bench_sweep_dry_run_prints_every_configuration(tmp_path):
    path = plain_path()
    r = run_script(ROOT / "slurm" / "dist-bench-sweep.sh", tmp_path, path, DRY_RUN="1", DATA="/scratch/u/c.h5",
                   GPU_PARTITIONS="a100 h100")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 * 3 * 2 and all(line.startswith("sbatch ") for line in lines)
    for p in ("a100", "h100"):
        for n in (1, 2, 4):
            for s in ("scratch", "local"):
                (line,) = [x for x in lines if f"--job-name=hpcnn-dist-{p}-{n}gpu-{s} " in x]
                assert f"--partition={p} --gres=gpu:{n} --ntasks-per-node={n}" in line
                export = line.split("--export=")[1].split()[0]
                assert "DATA=/scratch/u/c.h5" in export and f"LABEL={p}-{n}gpu-{s}" in export
                assert ("LOCAL=,TMPDIR=" in export) == (s == "scratch")  # scratch: no staging directory
                assert line.endswith("slurm/multi-gpu.sbatch")
    # the same commands reach a real sbatch (a stand-in here)
    log = tmp_path / "sbatch.log"
    stand_in(tmp_path / "fake-slurm", "sbatch", log)
    r = run_script(ROOT / "slurm" / "dist-bench-sweep.sh", tmp_path, f"{tmp_path / 'fake-slurm'}{os.pathsep}{path}",
                   DATA="/scratch/u/c.h5", GPU_PARTITIONS="a100 h100")
    assert r.returncode == 0 and "submitted" in r.stdout, r.stderr
    assert ["sbatch " + x for x in log.read_text().splitlines()] == lines
    # no data file named: refused, saying what to set
    r = run_script(ROOT / "slurm" / "dist-bench-sweep.sh", tmp_path, path, DRY_RUN="1")
    assert r.returncode == 2 and "set DATA=" in r.stderr


def test_dist_bench_sweep_without_slurm_runs_one_configuration_here(tmp_path):
    r = run_script(ROOT / "slurm" / "dist-bench-sweep.sh", tmp_path, plain_path())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "sbatch not found: one configuration here" in r.stdout
    rows = list(csv.DictReader(io.StringIO((tmp_path / "results" / "dist-all.csv").read_text())))
    assert [row["label"] for row in rows] == ["local-1rank"] and rows[0]["replicas"] == "1"


@pytest.mark.parametrize("alloc, want", [
    # the job's own layout, which uses every CPU it holds: kept (srun refused the NUMA layout here)
    (dict(SLURM_JOB_CPUS_PER_NODE="2(x2)", SLURM_NTASKS_PER_NODE="2", SLURM_CPUS_PER_TASK="1"),
     ["--ntasks-per-node=2", "--cpus-per-task=1", "--cpu-bind=cores"]),
    (dict(SLURM_JOB_CPUS_PER_NODE="16(x2)", SLURM_NTASKS="8", SLURM_CPUS_PER_TASK="4"),
     ["--ntasks-per-node=4", "--cpus-per-task=4", "--cpu-bind=cores"]),
    # a whole node (--exclusive: more CPUs than the tasks ask for): one rank per NUMA domain in it
    (dict(SLURM_JOB_CPUS_PER_NODE="64(x2)", SLURM_NTASKS_PER_NODE="4", SLURM_CPUS_PER_TASK="8",
          DOMAINS="2", CORES_PER_DOMAIN="32"),
     ["--ntasks-per-node=2", "--cpus-per-task=32", "--cpu-bind=ldoms"]),
    # domains asked for that do not fit in what the job holds: the job's layout
    (dict(SLURM_JOB_CPUS_PER_NODE="16", SLURM_NTASKS_PER_NODE="2", SLURM_CPUS_PER_TASK="8",
          DOMAINS="2", CORES_PER_DOMAIN="32"),
     ["--ntasks-per-node=2", "--cpus-per-task=8", "--cpu-bind=cores"]),
])
def test_multi_node_binds_within_the_jobs_allocation(tmp_path, alloc, want):
    out, calls = srun_calls(tmp_path, KIND="cpu", **alloc)
    args = calls[-1].split()
    for option in want:
        assert option in args, (option, calls[-1], out)
    assert ("one rank per NUMA domain" in out) == ("--cpu-bind=ldoms" in want), out


def test_train_script_is_not_requeued_by_a_signal_after_training(tmp_path):
    """USR1 (the time limit's warning) after training is complete, during the benchmark: requeued
    then, the job would train again from the start (its backup is gone); it ends instead, without
    `scontrol requeue`."""
    import signal
    import threading

    path = plain_path()
    fake = tmp_path / "fake-slurm"
    fake.mkdir()
    log = tmp_path / "scontrol.log"
    (fake / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    (fake / "scontrol").chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "CONDA", "HPCNN_NUM_THREADS", "OMP_NUM_THREADS"))}
    env.update(PATH=f"{fake}{os.pathsep}{path}", HPCNN_DATA_DIR=str(tmp_path / "data"), QUICK="1", MPLBACKEND="Agg",
               SLURM_JOB_ID="4343", PYTHONUNBUFFERED="1", TRAIN_ROWS="500", BENCH_ARGS="--batch 32 --steps 30 --warmup 1")
    proc = subprocess.Popen([BASH, str(ROOT / "slurm" / "cpu-train.sbatch")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, benching = [], threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("# FP32 peak"):  # the benchmark, after training
                benching.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert benching.wait(timeout=600), "".join(lines)[-3000:]
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(timeout=600) == 0, "".join(lines)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(timeout=60)
        proc.stdout.close()
    out = "".join(lines)
    assert "hpcnn job: SIGUSR1 received after training was complete: the job ends here, not requeued" in out, out[-3000:]
    assert not log.exists()  # no scontrol requeue
    assert (tmp_path / "results" / "cpu-4343" / "model_cpu.h5").exists()


def test_multi_gpu_passes_the_jobs_cpus_per_task_to_srun(tmp_path):
    """srun of Slurm 22.05 to 23.02 does not take --cpus-per-task from the job (checked on the test
    cluster: a `-c 2` job's `srun -n 2` ran 2 tasks of one CPU): each rank would get one CPU while
    hpcnn starts SLURM_CPUS_PER_TASK threads in it. The script passes it on."""
    log = tmp_path / "srun.log"
    stand_in(tmp_path / "fake-slurm", "srun", log)
    r = run_script(ROOT / "slurm" / "multi-gpu.sbatch", tmp_path, f"{tmp_path / 'fake-slurm'}{os.pathsep}{plain_path()}",
                   SLURM_JOB_ID="78", SLURM_NTASKS="4", SLURM_CPUS_PER_TASK="8")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (call,) = log.read_text().splitlines()
    assert "--cpus-per-task=8" in call.split() and "hpcnn dist-train --strategy multiworker" in call, call
