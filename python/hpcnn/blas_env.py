"""OpenBLAS's kernels for this CPU, chosen before hpcnn's core (and the OpenBLAS it links) loads.

An OpenBLAS built with DYNAMIC_ARCH (Debian's, conda-forge's) picks its kernels by the CPU's model
number, and gives a CPU it does not know its generic x86-64 kernels ("Prescott", SSE3): measured
with OpenBLAS 0.3.21 on a Xeon with AVX-512 under a hypervisor, where its sgemm (hpcnn's im2col
convolutions, Dense layers at larger batches, the backward passes) then ran several times below
the CPU's vector width. ``hpcnn.build_info()["blas_config"]`` names the kernels in use.

``choose()`` runs when hpcnn is imported, before the core loads. Unless the user set
``OPENBLAS_CORETYPE`` (OpenBLAS' own variable: theirs wins), it sets it to the kernel family the
CPU's features carry, as /proc/cpuinfo lists them: ``SkylakeX`` with AVX-512 F, BW, DQ and VL,
``Haswell`` with AVX2 and FMA (what OpenBLAS gives such CPUs when it knows them, Zen included);
otherwise nothing, and OpenBLAS chooses as before. Linux only. An OpenBLAS already loaded in the
process (NumPy's own is a separate library) keeps its choice.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional

VARIABLE = "OPENBLAS_CORETYPE"
_set_here = False  # whether choose() set the variable (not the user)


def core_type_for(flags: Iterable[str]) -> Optional[str]:
    """The OpenBLAS kernel family for a CPU with these feature flags, or None (leave it to OpenBLAS)."""
    have = set(flags)
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= have:
        return "SkylakeX"
    if {"avx2", "fma"} <= have:
        return "Haswell"
    return None


def cpu_flags(path: str = "/proc/cpuinfo") -> Iterable[str]:
    """The first CPU's feature flags (empty where the file is missing or unreadable)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return line.split(":", 1)[1].split()
    except OSError:
        pass
    return ()


def choose(environ=os.environ, path: str = "/proc/cpuinfo") -> Optional[str]:
    """Sets OPENBLAS_CORETYPE for this CPU unless it is set; returns the value in effect (None: unset)."""
    global _set_here
    if environ.get(VARIABLE):
        return environ[VARIABLE]
    core = core_type_for(cpu_flags(path))
    if core:
        environ[VARIABLE] = core
        _set_here = _set_here or environ is os.environ
    return core


def environ_for_children() -> dict:
    """This process's environment without the OPENBLAS_CORETYPE choose() set (one the user set
    stays): for a child running another build of hpcnn (bench --baseline-python), which then
    chooses as that build does."""
    env = dict(os.environ)
    if _set_here:
        env.pop(VARIABLE, None)
    return env
