"""Benchmark statistics as HPC benchmark reports give them (mean time per step, images/s, its
uncertainty and jitter), and CSV collection. Used by bench/ scripts and the CLI.

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
import time
from typing import Callable, Dict, Iterable, List, Optional


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


def time_steps(step: Callable[[], object], steps: int, warmup: int = 2) -> List[float]:
    """Wall-clock seconds of each of `steps` calls of `step`, after `warmup` untimed calls."""
    for _ in range(warmup):
        step()
    out = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        out.append(time.perf_counter() - t)
    return out


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
    """Append one row (writing the header for a new file): many jobs' results collect in one CSV."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)


def collect_csv(paths: Iterable[str], out: str) -> int:
    """Merge CSV files (e.g. one per Slurm job) into one; returns the number of rows written."""
    rows: List[Dict[str, str]] = []
    fields: List[str] = []
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                rows.append(r)
                fields += [k for k in r if k not in fields]
    tmp = out + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, out)
    return len(rows)


def peak_gflops(threads: Optional[int] = None, seconds: float = 0.5) -> Optional[float]:
    """The machine's FP32 FMA peak measured by the core (None if this build lacks the probe)."""
    from . import _core
    probe = getattr(_core.ops, "measure_peak_gflops", None)
    if probe is None:
        return None
    return float(probe(threads or _core.get_num_threads(), seconds))


TUTORIAL_FWD_MFLOP = 30.9     # tutorial CNN, forward, per image
TUTORIAL_TRAIN_MFLOP = 92.6   # forward + backward-data + backward-filter, per image


def tutorial_cnn_step_times(device: str = "cpu", batch_size: int = 250, steps: int = 20, warmup: int = 3):
    """Per-step seconds of training and of inference for the tutorial CNN on `device`, on random
    data already in memory (the model's own step, exactly as fit calls it per batch)."""
    import numpy as np
    from . import applications
    rng = np.random.default_rng(0)
    x = rng.random((batch_size, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, batch_size).astype(np.int32)
    m = applications.tutorial_cnn(seed=0)
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"], device=device)
    core = m._model()
    train = time_steps(lambda: core.train_step((x, y)), steps, warmup)
    infer = time_steps(lambda: core.predict_step((x,)), steps, warmup)
    return train, infer
