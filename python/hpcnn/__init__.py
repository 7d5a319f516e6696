"""hpcnn: convolutional networks on a C++/CUDA core, with a Keras-like API.

Import works on any node, with or without a GPU driver; everything runs on the CPU unless a
model is explicitly placed on a GPU.
"""
from __future__ import annotations

from . import _core

__version__: str = _core.build_info()["version"]


def build_info() -> dict:
    """What this build was compiled with: version, compiler, BLAS, HDF5, CUDA/cuDNN/cuBLAS, archs."""
    return dict(_core.build_info())


def get_num_threads() -> int:
    """Number of CPU threads hpcnn uses (its own pool; the BLAS is kept at one thread inside it)."""
    return _core.get_num_threads()


def set_num_threads(n: int) -> None:
    """Set hpcnn's CPU thread count (default: SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, else the
    CPUs in this process's affinity mask)."""
    _core.set_num_threads(int(n))
