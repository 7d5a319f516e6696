"""tools/gpu-node-kit.sh (issue 22): the cheap checks of the kit for a GPU node without network.

The heavy steps (gather: download and unpack Debian's packages; node --rehearse: a CPU-only build
from the unpacked prefix alone, ldd checks, the self-test) are run by hand and recorded in
bench/RESULTS.md; the GPU run itself happens on a GPU node. Here: the script parses, says what it
does, plans a node run without running it, refuses a node run without a kit, and its kit folder
stays out of git (the copy to a node carries it as an ignored path)."""
import shutil
import subprocess
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
    for word in ("gather", "node", "plan", "--rehearse", "--no-build-isolation", "540 s", "gpu-selftest.sbatch"):
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
    assert "CMAKE_IGNORE_PATH" not in out
    for step in ("unpack", "fill gaps", "build", "check", "self-test", "report"):
        assert step in out, step
    assert not (tmp_path / "work").exists(), "plan must not do anything"


def test_plan_for_a_rehearsal_hides_the_system_libraries(tmp_path):
    r = run("plan", "--rehearse", "--work", str(tmp_path / "work"))
    assert r.returncode == 0, r.stderr
    assert "HPCNN_CUDA=OFF" in r.stdout
    ignored = next(line for line in r.stdout.splitlines() if "CMAKE_IGNORE_PATH=" in line)
    for d in ("/usr/include/hdf5/serial", "/usr/lib/x86_64-linux-gnu/openblas-pthread", "/usr/include"):
        assert d in ignored.split("=", 1)[1].split(";"), d


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
