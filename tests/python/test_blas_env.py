"""hpcnn.blas_env: OPENBLAS_CORETYPE set from the CPU's features before the core loads OpenBLAS
(a DYNAMIC_ARCH OpenBLAS gives a CPU it does not know its generic SSE3 kernels), never over the
user's own setting, and taken out of the environment of a child that runs another hpcnn build."""
from __future__ import annotations

import os
import subprocess
import sys

import hpcnn
from hpcnn import blas_env


def test_core_type_follows_the_features():
    assert blas_env.core_type_for("fpu sse2 avx2 fma avx512f avx512bw avx512dq avx512vl".split()) == "SkylakeX"
    assert blas_env.core_type_for("fpu sse2 avx2 fma avx512f".split()) == "Haswell"  # not Skylake-X's set
    assert blas_env.core_type_for("fpu sse2 avx avx2 fma".split()) == "Haswell"
    assert blas_env.core_type_for("fpu sse2 avx".split()) is None
    assert blas_env.core_type_for([]) is None


def test_choose_sets_it_from_cpuinfo_and_keeps_the_users(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n")
    env = {}
    assert blas_env.choose(env, str(info)) == "Haswell" and env == {"OPENBLAS_CORETYPE": "Haswell"}
    env = {"OPENBLAS_CORETYPE": "Zen"}
    assert blas_env.choose(env, str(info)) == "Zen" and env == {"OPENBLAS_CORETYPE": "Zen"}
    env = {}
    assert blas_env.choose(env, str(tmp_path / "missing")) is None and env == {}


def test_the_core_loads_the_kernels_chosen():
    """In a fresh process: what import hpcnn chose is what OpenBLAS reports (where hpcnn links OpenBLAS)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    code = ("import os, hpcnn; print(os.environ.get('OPENBLAS_CORETYPE', '')); "
            "print(hpcnn.build_info()['blas_config'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    chosen, config = out.stdout.strip().splitlines()[-2:]
    assert chosen == (blas_env.core_type_for(blas_env.cpu_flags()) or "")
    if chosen and "DYNAMIC_ARCH" in config:
        assert chosen in config.split()


def test_a_child_gets_the_environment_without_hpcnns_choice(monkeypatch):
    monkeypatch.setattr(blas_env, "_set_here", True)
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert "OPENBLAS_CORETYPE" not in blas_env.environ_for_children()
    monkeypatch.setattr(blas_env, "_set_here", False)  # the user's own setting goes to the child
    assert blas_env.environ_for_children()["OPENBLAS_CORETYPE"] == "Haswell"
    assert hpcnn.build_info()["blas_config"]
