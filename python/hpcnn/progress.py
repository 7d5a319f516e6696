"""Progress display for fit/evaluate/predict and downloads, as Keras does it.

Where the output goes decides how a bar is drawn (``output_kind``):

- a terminal: the bar is redrawn in place with '\\r', at most ~10 times a second;
- Jupyter (an IPython kernel): one display per bar, updated in place (``IPython.display``
  display handles), so a cell keeps one output per bar whatever the number of batches;
- anything else (a file, a pipe: sbatch logs): nothing while the bar runs, one line when it ends.

verbose=1: a bar per epoch with ETA, loss and accuracy (one line per epoch in a file).
verbose=2: one line per epoch everywhere. verbose='auto' (fit's and evaluate's default): 1, as in Keras
(in a file that is one line per epoch too). The last batch's bar is drawn once, by ``finish`` (with
the epoch's final logs), not by the last ``update`` and again by ``finish``.
"""
from __future__ import annotations

import sys
import time
from typing import Dict, Optional, TextIO

TERMINAL, JUPYTER, FILE = "terminal", "jupyter", "file"


def _in_jupyter_kernel() -> bool:
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def output_kind(stream: Optional[TextIO] = None) -> str:
    """TERMINAL, JUPYTER or FILE for `stream` (default: sys.stdout)."""
    stream = sys.stdout if stream is None else stream
    if stream in (sys.stdout, sys.stderr) and _in_jupyter_kernel():
        return JUPYTER
    try:
        return TERMINAL if stream.isatty() else FILE
    except (AttributeError, ValueError):
        return FILE


def resolve_verbose(verbose) -> int:
    if verbose == "auto" or verbose is None:
        return 1  # Keras: 'auto' is 1 (a file gets one line per epoch from a verbose=1 bar)
    v = int(verbose)
    if v not in (0, 1, 2):
        raise ValueError(f"verbose must be 0, 1, 2 or 'auto', got {verbose!r}")
    return v


class LiveText:
    """Text that changes in place while work runs (``show``) and is final at the end (``close``):
    '\\r' redraws on a terminal, one updated display in Jupyter, and in a file only the final
    text, written once."""

    def __init__(self, stream: Optional[TextIO] = None) -> None:
        self.stream = sys.stdout if stream is None else stream
        self.kind = output_kind(self.stream)
        self._handle = None   # Jupyter display handle
        self._width = 0       # terminal: length of the longest line drawn (to blank it out)

    def show(self, text: str) -> None:
        if self.kind == TERMINAL:
            self._width = max(self._width, len(text))
            self.stream.write("\r" + text.ljust(self._width))
            self.stream.flush()
        elif self.kind == JUPYTER:
            self._display(text)

    def close(self, text: str) -> None:
        if self.kind == TERMINAL:
            self.show(text)
            self.stream.write("\n")
        elif self.kind == JUPYTER:
            self._display(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _display(self, text: str) -> None:
        from IPython.display import Pretty, display
        if self._handle is None:
            self.stream.flush()  # text printed before the bar stays above it
            self._handle = display(Pretty(text), display_id=True)
        else:
            self._handle.update(Pretty(text))


def _fmt_time(s: float) -> str:
    if s >= 3600:
        return f"{int(s // 3600)}:{int(s % 3600 // 60):02d}:{int(s % 60):02d}"
    if s >= 60:
        return f"{int(s // 60)}:{int(s % 60):02d}"
    return f"{s:.0f}s" if s >= 1 else f"{s * 1000:.0f}ms"


def format_logs(logs: Dict[str, float], images_per_second: Optional[float] = None) -> str:
    """'loss: 0.1234 - accuracy: 0.5000', then the training speed when given ('12,345 img/s')."""
    parts = [f"{k}: {v:.4f}" for k, v in logs.items()]
    if images_per_second is not None:
        parts.append(f"{images_per_second:,.0f} img/s")
    return " - ".join(parts)


class ProgressBar:
    """One epoch's bar: ``update(done, logs)`` after each batch, ``finish(logs)`` at the end.

    ``title`` (e.g. 'Epoch 3/10') is printed above the bar; in Jupyter it is part of the bar's
    display, so an epoch is one output. With verbose=1 the bar is live on a terminal or in Jupyter
    and a single line at the end in a file; verbose=2 always gives the single line.
    """

    #: Seconds between two redraws (the tests set 0 to see every batch).
    min_interval = 0.1

    def __init__(self, total: int, verbose: int, width: int = 30, stream: Optional[TextIO] = None,
                 title: Optional[str] = None) -> None:
        self.total, self.verbose, self.width, self.title = total, verbose, width, title
        self.live = LiveText(stream)
        self.stream = self.live.stream
        self.start = time.perf_counter()
        self._last_draw = 0.0
        if verbose and title and not self._titled_display():
            self.stream.write(title + "\n")
            self.stream.flush()

    def _titled_display(self) -> bool:
        return self.verbose == 1 and self.live.kind == JUPYTER

    def _text(self, line: str) -> str:
        return f"{self.title}\n{line}" if self.title and self._titled_display() else line

    def _bar_line(self, done: int, logs: Dict[str, float], images_per_second: Optional[float] = None) -> str:
        elapsed = time.perf_counter() - self.start
        frac = done / self.total if self.total else 1.0
        filled = int(self.width * frac)
        bar = "=" * max(filled - 1, 0) + (">" if 0 < filled < self.width else "=" if filled else "")
        bar = bar.ljust(self.width, ".")
        digits = len(str(self.total))
        if done < self.total:
            timing = f"ETA: {_fmt_time(elapsed / max(done, 1) * (self.total - done))}"
        else:
            timing = f"{_fmt_time(elapsed)} {_fmt_time(elapsed / max(done, 1))}/step"
        line = f"{done:>{digits}}/{self.total} [{bar}] - {timing}"
        text = format_logs(logs, images_per_second)
        return line + (" - " + text if text else "")

    def update(self, done: int, logs: Dict[str, float]) -> None:
        if self.verbose != 1 or self.live.kind == FILE:
            return
        if done >= self.total:
            return  # the complete bar is drawn once, by finish(), with the final logs
        now = time.perf_counter()
        if now - self._last_draw < self.min_interval:
            return
        self._last_draw = now
        self.live.show(self._text(self._bar_line(done, logs)))

    def finish(self, logs: Dict[str, float], images_per_second: Optional[float] = None, note: str = "") -> None:
        """The complete bar with the epoch's logs (and fit's training speed, which is not a log),
        then `note` when given (evaluate: 'chance level: ...')."""
        tail = f" - {note}" if note else ""
        if self.verbose == 1 and self.live.kind != FILE:
            self.live.close(self._text(self._bar_line(self.total, logs, images_per_second) + tail))
        elif self.verbose:
            elapsed = time.perf_counter() - self.start
            self.stream.write(f"{self.total}/{self.total} - {_fmt_time(elapsed)} - "
                              f"{format_logs(logs, images_per_second)}{tail}\n")
            self.stream.flush()
