"""`import hpcnn` on a node without a GPU driver, build_info(), and the thread-count defaults.

Imports that depend on the environment run in a subprocess (the thread pool reads its default
once, at first use).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import hpcnn
from hpcnn import _core

BUILD_INFO_KEYS = ("version", "compiler", "blas_vendor", "blas_library", "threading", "hdf5_version", "cuda",
                   "cuda_version", "cudnn_version", "cublas_version", "cuda_archs")

# Drop variables that would decide the thread count before the one a test sets.
_THREAD_VARS = ("HPCNN_NUM_THREADS", "SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS")


def run_python(code, env_extra=None, prefix=()):
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    env.update(env_extra or {})
    out = subprocess.run([*prefix, sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_and_build_info():
    info = hpcnn.build_info()
    for key in BUILD_INFO_KEYS:
        assert key in info, key
    assert info["version"] == hpcnn.__version__
    assert info["blas_vendor"] and info["blas_library"]
    assert "reference" not in info["blas_library"].lower() or "openblas" in info["blas_library"].lower()
    assert isinstance(info["cuda"], bool)
    if info["cuda"]:
        for key in ("cuda_version", "cudnn_version", "cublas_version", "cuda_archs"):
            assert info[key], key


def _nvcc():
    for p in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if p and os.path.exists(p):
            return p
    return None


@pytest.mark.skipif(not hpcnn.build_info()["cuda"], reason="built without the CUDA backend: no architectures")
def test_cuda_archs_name_the_built_architectures():
    """build_info()['cuda_archs'] lists real architectures ("75;80;90;..."), never the keyword the
    build was asked for ("all-major"); for a keyword, the list is what nvcc itself builds for it."""
    info = hpcnn.build_info()
    archs = info["cuda_archs"].split(";")
    assert all(re.fullmatch(r"\d+[a-z]?", a) for a in archs), info["cuda_archs"]
    assert info["cuda_archs_requested"]
    requested, nvcc = info["cuda_archs_requested"], _nvcc()
    if requested in ("all", "all-major") and nvcc:
        ver = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
        if f"release {'.'.join(info['cuda_version'].split('.')[:2])}," in ver:  # the nvcc it was built with
            dry = subprocess.run([nvcc, f"-arch={requested}", "--dryrun", "-c", "probe.cu"], capture_output=True,
                                 text=True)
            built = sorted(set(re.findall(r"kind=elf,sm=(\d+)", dry.stdout + dry.stderr)), key=int)
            assert archs == built, (archs, built)
            assert info["cuda_ptx"].split(";") == sorted(set(re.findall(r"kind=ptx,sm=(\d+)", dry.stdout + dry.stderr)),
                                                         key=int)
    elif requested not in ("all", "all-major", "native"):
        assert archs == [re.match(r"\d+[a-z]?", a).group(0) for a in requested.split(";") if not a.endswith("-virtual")]


@pytest.mark.skipif(os.environ.get("HPCNN_EXPECT_CUDA") != "1", reason="HPCNN_EXPECT_CUDA=1 not set (CI sets it)")
def test_cuda_backend_did_not_drop_out():
    assert hpcnn.build_info()["cuda"] is True, "CUDA backend expected (HPCNN_EXPECT_CUDA=1) but not compiled"


def _no_gpu_here():
    return not _core.cuda_devices()


@pytest.mark.skipif(not _no_gpu_here(), reason="a GPU is usable here")
def test_gpu_op_without_gpu_raises_with_reason():
    reason = _core.cuda_unavailable_reason()
    assert reason
    x = np.ones((2, 3), np.float32)
    with pytest.raises(RuntimeError) as e:
        _core.ops.relu_forward(x, device="gpu")
    assert reason[:40] in str(e.value), (reason, str(e.value))


@pytest.mark.parametrize("visible", ["", "NoDevFiles"])
def test_import_with_no_visible_devices(visible):
    code = ("import json, hpcnn; from hpcnn import _core; "
            "print(json.dumps([hpcnn.build_info()['cuda'], _core.cuda_unavailable_reason(), len(_core.cuda_devices())]))")
    cuda, reason, ndev = json.loads(run_python(code, {"CUDA_VISIBLE_DEVICES": visible}))
    assert ndev == 0
    assert reason
    if cuda:  # the CUDA backend is there: the reason must name the cause a Slurm user can act on
        assert "CUDA_VISIBLE_DEVICES" in reason or "NoDevFiles" in reason or "driver" in reason, reason
    else:
        assert "without the CUDA backend" in reason


def test_threads_from_slurm():
    assert run_python("import hpcnn; print(hpcnn.get_num_threads())", {"SLURM_CPUS_PER_TASK": "3"}) == "3"


def test_slurm_wins_over_omp():
    out = run_python("import hpcnn; print(hpcnn.get_num_threads())", {"SLURM_CPUS_PER_TASK": "3", "OMP_NUM_THREADS": "5"})
    assert out == "3"


def test_omp_num_threads_does_not_set_hpcnn_threads():
    """Job scripts set OMP_NUM_THREADS=1 to keep a BLAS single-threaded: hpcnn (which does not use
    OpenMP) must not train on one thread because of it. Its own variable is HPCNN_NUM_THREADS."""
    cpus = len(os.sched_getaffinity(0))
    assert run_python("import hpcnn; print(hpcnn.get_num_threads())", {"OMP_NUM_THREADS": "1"}) == str(cpus)
    assert run_python("import hpcnn; print(hpcnn.get_num_threads())", {"OMP_NUM_THREADS": "5"}) == str(cpus)
    assert run_python("import hpcnn; print(hpcnn.get_num_threads())", {"HPCNN_NUM_THREADS": "5"}) == "5"


def test_hpcnn_num_threads_wins_over_slurm():
    out = run_python("import hpcnn; print(hpcnn.get_num_threads(), hpcnn._core.default_num_threads_source())",
                     {"HPCNN_NUM_THREADS": "3", "SLURM_CPUS_PER_TASK": "5"})
    assert out == "3 HPCNN_NUM_THREADS=3"


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset not installed")
def test_threads_from_affinity():
    assert run_python("import hpcnn; print(hpcnn.get_num_threads())", prefix=("taskset", "-c", "0")) == "1"


def test_set_num_threads():
    before = hpcnn.get_num_threads()
    try:
        hpcnn.set_num_threads(3)
        assert hpcnn.get_num_threads() == 3
        with pytest.raises(ValueError, match="set_num_threads"):
            hpcnn.set_num_threads(0)
        assert hpcnn.get_num_threads() == 3
    finally:
        hpcnn.set_num_threads(before)




@pytest.mark.parametrize("first", ["hpcnn.models", "hpcnn.training", "hpcnn.saving", "hpcnn.applications"])
def test_python_modules_import_in_any_order_and_keep_public_names(first):
    """models.py, training.py, saving.py and applications.py use each other: each imports first in a
    fresh interpreter, and the names that used to live in models.py are still importable there."""
    out = run_python(f"import {first}\n"
                     "import hpcnn, hpcnn.models as m\n"
                     "from hpcnn import applications, saving, training\n"
                     "assert hpcnn.Sequential is m.Sequential and hpcnn.clone_model is m.clone_model\n"
                     "assert hpcnn.Model is m.Model and hpcnn.load_model is m.load_model\n"
                     "assert m.load_model is saving.load_model\n"
                     "assert m.tutorial_cnn is applications.tutorial_cnn and m.deep_mnist is applications.deep_mnist\n"
                     "assert sorted(m.__all__) == ['Model', 'Sequential', 'clone_model', 'deep_mnist', 'load_model', "
                     "'model_from_json', 'tutorial_cnn']\n"
                     "print(m.tutorial_cnn(seed=0).count_params())")
    assert out == "787530"
