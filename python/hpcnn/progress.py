"""Progress display for fit/evaluate/predict.

verbose=1: a Keras-style bar per epoch with ETA, loss and accuracy, redrawn in place with '\\r'
(works in terminals and in Jupyter output cells), at most ~10 redraws a second.
verbose=2: one line per epoch, for sbatch logs. verbose='auto': 1 on a terminal or in Jupyter,
2 otherwise (a batch job's stdout is a file).
"""
from __future__ import annotations

import sys
import time
from typing import Dict, Optional, TextIO


def resolve_verbose(verbose) -> int:
    if verbose == "auto" or verbose is None:
        if "ipykernel" in sys.modules:
            return 1
        try:
            return 1 if sys.stdout.isatty() else 2
        except (AttributeError, ValueError):
            return 2
    v = int(verbose)
    if v not in (0, 1, 2):
        raise ValueError(f"verbose must be 0, 1, 2 or 'auto', got {verbose!r}")
    return v


def _fmt_time(s: float) -> str:
    if s >= 3600:
        return f"{int(s // 3600)}:{int(s % 3600 // 60):02d}:{int(s % 60):02d}"
    if s >= 60:
        return f"{int(s // 60)}:{int(s % 60):02d}"
    return f"{s:.0f}s" if s >= 1 else f"{s * 1000:.0f}ms"


def format_logs(logs: Dict[str, float]) -> str:
    parts = []
    for k, v in logs.items():
        if k == "seconds":
            continue
        if k == "images_per_second":
            parts.append(f"{v:,.0f} img/s")
        else:
            parts.append(f"{k}: {v:.4f}")
    return " - ".join(parts)


class ProgressBar:
    """One epoch's bar: ``update(done, logs)`` after each batch, ``finish(logs)`` at the end."""

    def __init__(self, total: int, verbose: int, width: int = 30, stream: Optional[TextIO] = None) -> None:
        self.total, self.verbose, self.width = total, verbose, width
        self.stream = stream or sys.stdout
        self.start = time.perf_counter()
        self._last_draw = 0.0

    def update(self, done: int, logs: Dict[str, float]) -> None:
        if self.verbose != 1:
            return
        now = time.perf_counter()
        if done < self.total and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        elapsed = now - self.start
        frac = done / self.total if self.total else 1.0
        filled = int(self.width * frac)
        bar = "=" * max(filled - 1, 0) + (">" if 0 < filled < self.width else "=" if filled else "")
        bar = bar.ljust(self.width, ".")
        digits = len(str(self.total))
        if done < self.total:
            eta = elapsed / max(done, 1) * (self.total - done)
            timing = f"ETA: {_fmt_time(eta)}"
        else:
            timing = f"{_fmt_time(elapsed)} {_fmt_time(elapsed / max(done, 1))}/step"
        line = f"{done:>{digits}}/{self.total} [{bar}] - {timing}"
        if logs:
            line += " - " + format_logs(logs)
        self.stream.write("\r" + line + " " * 4)
        self.stream.flush()

    def finish(self, logs: Dict[str, float]) -> None:
        if self.verbose == 1:
            self._last_draw = 0.0
            self.update(self.total, logs)
            self.stream.write("\n")
        elif self.verbose == 2:
            elapsed = time.perf_counter() - self.start
            self.stream.write(f"{self.total}/{self.total} - {_fmt_time(elapsed)} - {format_logs(logs)}\n")
        self.stream.flush()
