"""hpcnn's CPU thread count, and one line that says why when it is not the CPUs this process may use.

The default (decided in C++, csrc/core/thread_pool.cpp), first match wins:

1. ``HPCNN_NUM_THREADS``   hpcnn's own variable;
2. ``SLURM_CPUS_PER_TASK`` what the Slurm job asked for;
3. the CPUs in this process's affinity mask (what a Slurm cgroup or ``taskset`` allows),
   never the node's total core count.

``OMP_NUM_THREADS`` is not read: hpcnn does not use OpenMP, and job scripts set
``OMP_NUM_THREADS=1`` to keep a BLAS single-threaded, which must not slow hpcnn down.
hpcnn pins its own BLAS to one thread inside its threads (no oversubscription).
"""
from __future__ import annotations

import os
from typing import Optional

from . import _core, validation

__all__ = ["get_num_threads", "set_num_threads", "affinity_cpus", "describe"]

# The count last given to set_num_threads, to name it as the reason (None: never called).
_explicit: Optional[int] = None


def get_num_threads() -> int:
    """Number of CPU threads hpcnn uses (its own pool; the BLAS is kept at one thread inside it)."""
    return _core.get_num_threads()


def set_num_threads(n: int) -> None:
    """Set hpcnn's CPU thread count. Default: HPCNN_NUM_THREADS, else SLURM_CPUS_PER_TASK, else
    the CPUs in this process's affinity mask (OMP_NUM_THREADS is not read).

    Safe at any moment, from any thread: work already running (another thread's training step, an
    ``HDF5Dataset`` loading in the background) finishes first, on the threads it started with.
    If the system refuses a new thread, RuntimeError says so and the count stays as it was."""
    global _explicit
    n = validation.integer(n, "n", "set_num_threads", maximum=_core.max_num_threads())
    _core.set_num_threads(n)
    _explicit = n


def affinity_cpus() -> int:
    """CPUs this process may run on (its affinity mask)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def describe() -> str:
    """'2 CPU threads', or, when hpcnn uses fewer (or more) threads than the affinity mask allows,
    the count, the CPUs and why, e.g. '1 of 8 CPU threads (SLURM_CPUS_PER_TASK=1; ...)'."""
    n, cpus = get_num_threads(), affinity_cpus()
    if _explicit == n:
        source = f"hpcnn.set_num_threads({n})"
    elif n == _core.default_num_threads():
        source = _core.default_num_threads_source()
    else:
        source = f"set_num_threads({n})"
    notes = []
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if omp and omp != str(n):
        notes.append(f"OMP_NUM_THREADS={omp} is not read by hpcnn")
    if n < cpus:
        text = f"{n} of {cpus} CPU threads ({source}; raise it with HPCNN_NUM_THREADS or hpcnn.set_num_threads"
        return text + "".join("; " + s for s in notes) + ")"
    if n > cpus:
        notes.insert(0, f"{source}: more threads than the {cpus} CPUs of the affinity mask, expect slowdowns")
    return f"{n} CPU threads" + (f" ({'; '.join(notes)})" if notes else "")
