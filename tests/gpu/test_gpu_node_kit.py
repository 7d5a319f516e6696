"""tools/gpu-node-kit.sh (issues 22 and 41): the cheap checks of the kit for a GPU node without
network, and of the self-test's smoke list and its report on a kill.

The heavy steps (gather: download Debian's packages and the Python wheels; node --rehearse: a
CPU-only build from the unpacked prefix alone, with the system's libgfortran and Python packages
hidden, ldd checks, the self-test) are run by hand and recorded in bench/RESULTS.md; the GPU run
itself happens on a GPU node. Here: the script parses, says what it does, plans a node run without
running it, refuses a node run without a kit, names a missing Python.h or an old CMake, installs
from a wheel folder only what the Python lacks, writes its report when killed mid-way, the
self-test does too, every smoke-list line names one collected test, and the kit folder stays out of
git (the copy to a node carries it as an ignored path)."""
import os
import signal
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from tests.support import paths

ROOT = paths.ROOT
KIT = ROOT / "tools" / "gpu-node-kit.sh"
BASH = shutil.which("bash")


def run(*args, **kw):
    return subprocess.run([BASH, str(KIT), *args], capture_output=True, text=True, timeout=60, **kw)


def test_bash_syntax():
    r = subprocess.run([BASH, "-n", str(KIT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_help_names_the_steps_and_the_budget():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    for word in ("gather", "node", "plan", "check", "--rehearse", "--no-build-isolation", "540 s", "gpu-selftest.sbatch",
                 "--pythons", "--build-limit", "pybind11>=2.12", "libgfortran", "SIGTERM"):
        assert word in r.stdout, word
    assert run().returncode == 2
    bad = run("frobnicate")
    assert bad.returncode == 2 and "unknown command" in bad.stderr


def test_plan_for_a_gpu_node(tmp_path):
    r = run("plan", "--kit", str(tmp_path / "kit"), "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "missing: run 'gather'" in out
    # This node's GPU only (nvidia-smi's compute capability, or `native`), NCCL from the wheel, no MPI.
    assert "HPCNN_CUDA=ON HPCNN_NCCL=ON HPCNN_MPI=OFF HPCNN_CUDA_ARCHS=" in out
    assert "--no-build-isolation --no-deps --no-index" in out
    assert f"HDF5_ROOT={tmp_path}/work/prefix/usr/lib/x86_64-linux-gnu/hdf5/serial" in out
    assert "--disable-new-dtags" in out and "CMAKE_INSTALL_RPATH_USE_LINK_PATH=ON" in out
    # GNU ld finds OpenBLAS' libgfortran (linked into the prefix from the fallback) only through
    # -rpath-link, for FindBLAS' test program (an executable) as for the module.
    libdir = f"{tmp_path}/work/prefix/usr/lib/x86_64-linux-gnu"
    for kind in ("EXE", "SHARED", "MODULE"):
        flags = next(line for line in out.splitlines() if f"CMAKE_{kind}_LINKER_FLAGS=" in line)
        assert f"-Wl,-rpath-link,{libdir}:{libdir}/openblas-pthread:{libdir}/hdf5/serial" in flags, flags
    # Python.h and CMake first; only the missing Python packages, from the kit's wheels, offline.
    assert "Python.h" in out and "CMake >= 3.24" in out
    assert f"--no-index --find-links {tmp_path}/kit/wheels/cp{sys.version_info[0]}{sys.version_info[1]}" in out
    assert "CMAKE_IGNORE_PATH" not in out
    for step in ("prerequisites", "python", "unpack", "fill gaps", "build", "check", "self-test", "report"):
        assert step in out, step
    assert not (tmp_path / "work").exists(), "plan must not do anything"


def test_plan_for_a_rehearsal_hides_the_system_libraries(tmp_path):
    r = run("plan", "--rehearse", "--work", str(tmp_path / "work"))
    assert r.returncode == 0, r.stderr
    assert "HPCNN_CUDA=OFF" in r.stdout
    ignored = next(line for line in r.stdout.splitlines() if "CMAKE_IGNORE_PATH=" in line)
    for d in ("/usr/include/hdf5/serial", "/usr/lib/x86_64-linux-gnu/openblas-pthread", "/usr/include"):
        assert d in ignored.split("=", 1)[1].split(";"), d
    # libgfortran and the Python packages are hidden too (issue 41)
    assert "libgfortran hidden" in r.stdout and "a fresh venv" in r.stdout


def test_node_without_a_kit_says_how_to_get_one(tmp_path):
    r = run("node", "--kit", str(tmp_path / "kit"), "--work", str(tmp_path / "work"), "--out", str(tmp_path))
    assert r.returncode == 2
    assert "gather" in r.stderr and "no kit" in r.stderr
    assert not (tmp_path / "work").exists()


def test_the_kit_folder_is_ignored_by_git():
    git = shutil.which("git")
    if not git or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    r = subprocess.run([git, "check-ignore", "-q", "gpu-node-kit/hpcnn-node-prefix.tar.xz"], cwd=ROOT)
    assert r.returncode == 0, "gpu-node-kit/ must be ignored: it travels to the node as an ignored path"
    r = subprocess.run([git, "check-ignore", "-q", "hpcnn-gpu-node-kit-node1-20260101-000000.txt"], cwd=ROOT)
    assert r.returncode == 0, "the kit's reports are not committed"


def shared_library(path, *needs):
    """A tiny shared library with the given SONAME (its file name), linked against `needs`."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or not shutil.which("ldd"):
        pytest.skip("no C compiler or ldd")
    src = path.with_suffix(".c")
    src.write_text("int hpcnn_kit_probe(void) { return 1; }\n")
    cmd = [cc, "-shared", "-fPIC", "-o", str(path), f"-Wl,-soname,{path.name}", str(src), "-Wl,--no-as-needed", *needs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    src.unlink()
    if r.returncode != 0:
        pytest.skip(f"cannot link a test library: {r.stderr[-500:]}")


def test_libs_links_in_only_what_the_node_lacks(tmp_path):
    # The prefix's library needs libkitmissing.so.1 (on no machine) and libz.so.1 (on this one);
    # the fallback has copies of both. Only the missing one may be linked in: a library the node
    # has is never shadowed by the kit's older copy.
    work = tmp_path / "work"
    libdir = work / "prefix" / "usr" / "lib" / "x86_64-linux-gnu"
    fallback = work / "fallback"
    libdir.mkdir(parents=True)
    fallback.mkdir()
    shared_library(fallback / "libkitmissing.so.1")
    shared_library(fallback / "libz.so.1")
    shared_library(libdir / "libkitprefix.so.1", str(fallback / "libkitmissing.so.1"), "-lz")
    r = run("libs", "--work", str(work))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["from fallback: libkitmissing.so.1"]
    assert (libdir / "libkitmissing.so.1").is_symlink()
    assert not (libdir / "libz.so.1").exists(), "the node's own libz must not be shadowed"
    again = run("libs", "--work", str(work))
    assert again.returncode == 0 and again.stdout == "", "nothing left to fill"
    # A need that neither the node nor the kit can satisfy fails, naming it.
    (libdir / "libkitmissing.so.1").unlink()
    (fallback / "libkitmissing.so.1").unlink()
    r = run("libs", "--work", str(work))
    assert r.returncode != 0 and "NOT FOUND" in r.stdout and "libkitmissing.so.1" in r.stdout


# ---------------------------------------------------------------------- issue 41: Python, CMake
def fake_python(tmp_path, include_dir):
    """A python3 that is the real one, except that its headers are looked for in `include_dir` and it
    has no cmake module."""
    path = tmp_path / "fakepy" / "python3"
    path.parent.mkdir()
    path.write_text(f"""#!/bin/bash
case "$*" in
  *sysconfig*) echo "{include_dir}"; exit 0 ;;
  *"import cmake"*) exit 1 ;;
esac
exec "{sys.executable}" "$@"
""")
    path.chmod(0o755)
    return path


def test_check_names_a_missing_python_h_and_an_old_cmake(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text("#!/bin/sh\necho 'cmake version 3.22.1'\n")
    (bin_dir / "cmake").chmod(0o755)
    py = fake_python(tmp_path, tmp_path / "no-headers")
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    r = run("check", "--python", str(py), "--kit", str(tmp_path / "kit"), env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    missing = next(line for line in r.stdout.splitlines() if line.startswith("MISSING: "))
    assert f"Python.h for {py} (not in '{tmp_path / 'no-headers'}'" in missing
    assert "CMake >= 3.24 (found: 3.22.1" in missing
    assert "cmake: " in r.stdout and "is 3.22.1, older than 3.24" in r.stdout


def test_check_passes_where_python_h_and_cmake_are_there(tmp_path):
    include = tmp_path / "include"
    include.mkdir()
    (include / "Python.h").write_text("")
    cmake = shutil.which("cmake")
    if not cmake or not (shutil.which("c++") or shutil.which("g++")):
        pytest.skip("no cmake or C++ compiler on PATH")
    r = run("check", "--python", str(fake_python(tmp_path, include)), "--kit", str(tmp_path / "kit"))
    version = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout.split()[2]
    if tuple(int(x) for x in version.split(".")[:2]) < (3, 24):
        pytest.skip(f"this machine's cmake is {version}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MISSING" not in r.stdout and f"Python.h: {include / 'Python.h'}" in r.stdout


def wheel(folder, name, version):
    """A minimal pure-Python wheel of distribution `name` (a module of the same name)."""
    info = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", f"VERSION = {version!r}\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hpcnn-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"{name}/__init__.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return path


def test_python_installs_from_the_kit_only_what_this_python_lacks(tmp_path):
    # The kit's folder for this Python holds a package it lacks and one it has (pytest, here a fake
    # 0.1): only the first is installed, offline, into the work folder; the node's pytest is never
    # shadowed by the kit's copy.
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    folder = tmp_path / "kit" / "wheels" / tag
    folder.mkdir(parents=True)
    wheel(folder, "hpcnnkitprobe", "1.0")
    wheel(folder, "pytest", "0.1")
    work = tmp_path / "work"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull)
    r = run("python", "--python", sys.executable, "--kit", str(tmp_path / "kit"), "--work", str(work), env=env)
    out = r.stdout + r.stderr
    assert "missing: hpcnnkitprobe" in out and "present: pytest" in out, out
    assert "installing 1: hpcnnkitprobe" in out, out
    assert (work / "pydeps" / "hpcnnkitprobe" / "__init__.py").is_file(), out
    assert not (work / "pydeps" / "pytest").exists(), "the node's own pytest must not be shadowed"
    # Then every package the build and the tests need is imported, each named with its version.
    for module in ("scikit_build_core", "pybind11", "numpy", "h5py", "pytest"):
        assert f"import {module}: " in out or f"MISSING: " in out, out
    assert r.returncode == (1 if "MISSING: " in out else 0), out


def test_python_without_wheels_for_this_python_says_which_to_gather(tmp_path):
    (tmp_path / "kit" / "wheels").mkdir(parents=True)
    r = run("python", "--python", sys.executable, "--kit", str(tmp_path / "kit"), "--work", str(tmp_path / "w"))
    want = f"gather with --pythons {sys.version_info[0]}.{sys.version_info[1]}"
    assert want in r.stdout, r.stdout + r.stderr


def test_bad_options_are_named(tmp_path):
    for args, word in ((("plan", "--pythons", "3.x"), "--pythons"), (("plan", "--budget", "9m"), "--budget"),
                       (("plan", "--build-limit", "-1"), "--build-limit")):
        r = run(*args)
        assert r.returncode == 2 and word in r.stderr, (args, r.stderr)


# -------------------------------------------------------- issue 41: the report when the run is killed
def wait_for(predicate, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_node_killed_mid_build_leaves_a_report_with_the_phases_that_ran(tmp_path):
    """A node run whose build hangs, killed with SIGTERM (as Slurm's time limit or the lease does):
    the report on disk has the phases that ended, the build marked as interrupted, and the result."""
    if not shutil.which("tar") or not shutil.which("xz") or not shutil.which("pgrep"):
        pytest.skip("needs tar, xz and pgrep")
    for mod in ("numpy", "h5py", "pytest", "pybind11", "scikit_build_core"):
        try:
            __import__(mod)
        except ImportError:
            pytest.skip(f"this Python lacks {mod}: the run would stop before the build")
    kit = tmp_path / "kit"
    stage = tmp_path / "stage"
    (stage / "prefix" / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
    (stage / "fallback").mkdir()
    (stage / "MANIFEST.txt").write_text("a test kit\n")
    kit.mkdir()
    subprocess.run(["tar", "-C", str(stage), "-cJf", str(kit / "hpcnn-node-prefix.tar.xz"),
                    "prefix", "fallback", "MANIFEST.txt"], check=True)
    (kit / "wheels" / f"cp{sys.version_info[0]}{sys.version_info[1]}").mkdir(parents=True)
    # This Python, except that the build (pip install -v ...) hangs.
    py = tmp_path / "py" / "python3"
    py.parent.mkdir()
    py.write_text(f"""#!/bin/bash
case "$*" in *"pip install -v"*) echo "building..."; exec sleep 120 ;; esac
exec "{sys.executable}" "$@"
""")
    py.chmod(0o755)
    out = tmp_path / "out"
    proc = subprocess.Popen([BASH, str(KIT), "node", "--kit", str(kit), "--work", str(tmp_path / "work"),
                             "--out", str(out), "--python", str(py), "--budget", "600"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def building():
            reports = list(out.glob("hpcnn-gpu-node-kit-*.txt"))
            return bool(reports) and "RUNNING (now: build" in reports[0].read_text()
        if not wait_for(building, 60):
            proc.kill()
            stdout, stderr = proc.communicate()
            reports = list(out.glob("*.txt"))
            pytest.fail("the build phase never started: " + stdout[-2000:] + stderr[-2000:]
                        + (reports[0].read_text()[:3000] if reports else ""))
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stdout + stderr
    report = next(out.glob("hpcnn-gpu-node-kit-*.txt")).read_text()
    assert "result: FAILED at: interrupted" in report, report[:2000]
    phases = report.split("===== phases", 1)[1].split("=====", 2)[1]
    for ended in ("prerequisites (Python.h, CMake)", "Python packages (kit wheels)", "unpack the kit",
                  "fill library gaps (ldd)"):
        assert ended in phases, phases
    assert "build (pip, CUDA)" in phases and "INTERRUPTED by SIGTERM" in phases, phases
    assert "building..." in report  # the build log so far
    assert "report (what ran)" in stderr
    assert not subprocess.run(["pgrep", "-f", "exec sleep 120"], capture_output=True).stdout, "the build was left running"


def fake_host_selftest(tmp_path, backend_tests):
    """A source folder in tmp_path whose host self-test files are stand-ins: backend_tests as
    tests/gpu/test_cuda_backend.py, one passing test as test_conv_algo_choice.py. Skips where hpcnn
    is not importable (the self-test checks that python3 imports it first)."""
    try:
        import hpcnn  # noqa: F401
    except ImportError:
        pytest.skip("hpcnn is not importable here")
    (tmp_path / "tests" / "gpu").mkdir(parents=True)
    (tmp_path / "tests" / "gpu" / "test_cuda_backend.py").write_text(backend_tests)
    (tmp_path / "tests" / "gpu" / "test_conv_algo_choice.py").write_text("def test_nothing():\n    pass\n")


def test_selftest_killed_mid_section_completes_its_report(tmp_path):
    """slurm/gpu-selftest.sbatch killed with SIGTERM while a pytest run is in its host self-test: the
    pytest run ends as at Ctrl-C (its interrupted test and summary in the report) and the report ends
    with the summary, the section named as interrupted."""
    fake_host_selftest(tmp_path, "import time\n\ndef test_quick():\n    pass\n\ndef test_slow_one():\n    time.sleep(60)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CONDA"))}
    env.update(PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}", QUICK="1")
    proc = subprocess.Popen([BASH, str(ROOT / "slurm" / "gpu-selftest.sbatch")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    report = tmp_path / "hpcnn-gpu-selftest-local.txt"
    try:
        started = wait_for(lambda: report.exists() and "test_slow_one" in report.read_text(), 60)
        assert started, report.read_text() if report.exists() else "no report"
        # Twice, as where Slurm signals every process of the step and `timeout` forwards its own:
        # the second must not cut the first one's report short.
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stdout + stderr
    text = report.read_text()
    assert "SIGTERM" in text and "KeyboardInterrupt" in text, text[-3000:]
    assert "test_slow_one" in text and "1 passed" in text, text[-3000:]  # pytest's own summary of what ran
    summary = text.split("===== summary =====", 1)[1]
    assert "host self-test:" in summary and "failed (interrupted by SIGTERM" in summary, summary
    assert "failed (interrupted by SIGTERM" in stdout  # the summary on the terminal too


# ----------------------------------------------------------------------- issue 41: the smoke list
SMOKE = ROOT / "tests" / "gpu_smoke.txt"


def smoke_lines():
    return [line.strip() for line in SMOKE.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_every_smoke_line_names_one_collected_test():
    """The self-test finds each smoke test's file by its name under tests/ (so test files may move
    into folders); each line must name exactly one file and one test that pytest collects. After a
    rename, this fails naming the line."""
    lines = smoke_lines()
    assert 30 <= len(lines) <= 60, len(lines)
    ids = []
    for line in lines:
        name = line.split("::", 1)[0]
        files = [p for p in (ROOT / "tests").rglob(name) if p.is_file()]
        assert len(files) == 1, f"{line}: {len(files)} files named {name} under tests/"
        ids.append(f"{files[0].relative_to(ROOT)}::{line.split('::', 1)[1]}")
    assert len(set(ids)) == len(ids), "a test listed twice"
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *ids],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    collected = {line for line in r.stdout.splitlines() if "::" in line}
    assert collected == set(ids), sorted(set(ids) - collected)
    # Every one is a GPU test (the rest of the suite deselects them).
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "gpu", *ids],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    gpu = {line for line in r.stdout.splitlines() if "::" in line}
    assert gpu == set(ids), sorted(set(ids) - gpu)


def selftest_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CONDA", "HPCNN_SELFTEST", "HPCNN_DIST"))}
    env.update(PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}", **extra)
    return env


def test_selftest_quick_with_a_gpu_runs_the_smoke_list_first_then_the_rest_by_name(tmp_path):
    """QUICK=1 where a GPU is usable, checked with a python3 that reports one and logs each pytest
    run: the smoke list runs first (each test named), then the rest of the gpu suite with names,
    --maxfail, --durations and the smoke tests left out; no sanitizer runs; HPCNN_DIST_TIMEOUT=60."""
    log = tmp_path / "calls.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f"""#!/bin/bash
case "$*" in
  *cuda_unavailable_reason*) echo ""; exit 0 ;;
  *"print(len(_core.cuda_devices"*) echo 1; exit 0 ;;
  *"-m pytest"*) echo "pytest DIST=${{HPCNN_DIST_TIMEOUT:-}} LIMIT=${{HPCNN_SELFTEST_TEST_TIMEOUT:-}} DESELECT=${{HPCNN_SELFTEST_DESELECT:-}} $*" >> "{log}"; exit 0 ;;
  -) cat > /dev/null; exit 0 ;;
esac
exec "{sys.executable}" "$@"
""")
    (bin_dir / "python3").chmod(0o755)
    (bin_dir / "compute-sanitizer").write_text(f"#!/bin/bash\necho sanitizer >> '{log}'\n")
    (bin_dir / "compute-sanitizer").chmod(0o755)
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    env = selftest_env(QUICK="1")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    r = subprocess.run([BASH, str(ROOT / "slurm" / "gpu-selftest.sbatch")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    report = (tmp_path / "hpcnn-gpu-selftest-local.txt").read_text()
    assert r.returncode == 0, report[-3000:]
    calls = log.read_text().splitlines()
    assert "sanitizer" not in calls
    summary = report.split("===== summary =====", 1)[1]
    for section in ("compute-sanitizer memcheck", "compute-sanitizer racecheck"):
        assert f"{section}:" in summary and "skipped (QUICK=1: run without QUICK for the sanitizers)" in summary, summary
    pytest_runs = [c for c in calls if "test_cuda_backend" not in c]
    smoke, rest = pytest_runs[0], pytest_runs[1]
    assert " -v " in smoke and "tests/gpu/test_gpu_ops.py::test_adam_step" in smoke and "-m gpu" not in smoke, smoke
    assert len([w for w in smoke.split() if "::" in w]) == len(smoke_lines())
    assert " -v " in rest and "--maxfail=10" in rest and "--durations=20" in rest and rest.endswith("-m gpu tests"), rest
    deselect = Path(rest.split("DESELECT=", 1)[1].split()[0])
    assert deselect.name == "smoke-ids.txt"
    for c in pytest_runs:
        assert "DIST=60 LIMIT=120" in c and "-p hpcnn_selftest_plugin" in c, c
    assert "GPU smoke list:                    passed" in report


def test_selftest_per_test_limit_fails_a_slow_test_naming_the_limit(tmp_path):
    fake_host_selftest(tmp_path, "import time\n\ndef test_slow():\n    time.sleep(20)\n\ndef test_after_it():\n    pass\n")
    start = time.monotonic()
    r = subprocess.run([BASH, str(ROOT / "slurm" / "gpu-selftest.sbatch")], cwd=tmp_path, timeout=120,
                       env=selftest_env(QUICK="1", HPCNN_SELFTEST_TEST_TIMEOUT="1"), capture_output=True, text=True)
    text = (tmp_path / "hpcnn-gpu-selftest-local.txt").read_text()
    assert "over the self-test's per-test limit of 1 s" in text, text[-3000:]
    assert "1 failed, 2 passed" in text, text[-3000:]  # the run went on after the slow test
    assert time.monotonic() - start < 60
    assert r.returncode == 1
