"""What the command-line verbs record of a run, shared by them (``hpcnn bench``, ``tutorial``,
``dist-train``) and by bench/ scripts: per-step statistics as HPC benchmark reports give them, the
machine's one-line description, and one CSV row appended per run (many jobs' rows collect in one
file; ``hpcnn collect`` merges them).

    mean_speed        = batch_size / mean step time
    speed_uncertainty = std(per-step speeds) / sqrt(steps)           (standard error)
    speed_jitter      = 1.4826 * median(|speeds - median(speeds)|)   (robust spread, MAD)
"""
from __future__ import annotations

import csv
import math
import os
import platform
import statistics
from typing import Dict, Iterable

try:
    import fcntl  # POSIX: the lock of append_csv
except ImportError:  # Windows: no lock (one job at a time there)
    fcntl = None  # type: ignore[assignment]


def step_stats(step_seconds: Iterable[float], batch_size: int) -> Dict[str, float]:
    """Summary of per-step times for one configuration."""
    times = [float(t) for t in step_seconds]
    if not times:
        raise ValueError("step_stats: no steps")
    speeds = [batch_size / t for t in times]
    med = statistics.median(speeds)
    mean_time = statistics.fmean(times)
    return {
        "steps": len(times),
        "batch_size": batch_size,
        "mean_time_per_step": mean_time,
        "median_time_per_step": statistics.median(times),
        "mean_speed": batch_size / mean_time,
        "median_speed": med,
        "speed_uncertainty": (statistics.stdev(speeds) / math.sqrt(len(speeds))) if len(speeds) > 1 else 0.0,
        "speed_jitter": 1.4826 * statistics.median([abs(s - med) for s in speeds]),
    }


def machine_description() -> str:
    cpu = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{platform.node()}: {cpu}, {ncpu} CPUs in affinity mask"


def append_csv(path: str, row: Dict[str, object]) -> None:
    """Append one row (writing the header for a new file): many jobs' results collect in one CSV.
    Jobs of a sweep that end together append under an exclusive lock on the file, so that the header
    is written once and rows never interleave."""
    with open(path, "a", newline="") as f:
        if fcntl is not None:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed
        new = f.seek(0, os.SEEK_END) == 0
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)
