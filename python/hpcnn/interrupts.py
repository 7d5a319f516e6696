"""Stop requests during ``fit``: SIGTERM, SIGUSR1 and SIGINT end training at the next batch boundary.

Cluster jobs end before training does: Slurm sends SIGTERM at the time limit, on preemption and
on ``scancel`` (SIGKILL follows after a grace period), ``#SBATCH --signal=B:USR1@120`` sends SIGUSR1
two minutes before the limit, and Ctrl-C in a terminal or a notebook's "interrupt" is SIGINT. While
``fit`` runs, hpcnn's handlers only record the signal; ``fit`` looks at the record at each batch
boundary (the core trains a batch without the GIL, and Python handlers run when that call
returns: the boundary), writes a final checkpoint when BackupAndRestore or ModelCheckpoint is
among its callbacks, and returns a History with ``interrupted`` True.

The handlers are installed only for the duration of ``fit`` (in the main thread: Python lets only
it install handlers; elsewhere nothing is installed) and the previous ones, a user's own or
Python's default KeyboardInterrupt handler, are put back afterwards. A signal that is ignored when
``fit`` starts (SIG_IGN: a background job's SIGINT, ``nohup``) stays ignored. Signals that arrive while a
checkpoint is being written are only recorded, so a second SIGTERM (Slurm's and the batch
script's) cannot interrupt the write. A second Ctrl-C outside a write raises KeyboardInterrupt at
once, as Ctrl-C did before: the way out of a step that does not return (a stalled file system).
"""
from __future__ import annotations

import signal
import threading
from typing import Any, Dict, List, Optional

# The signals fit turns into a stop at the next batch boundary (SIGUSR1 does not exist on Windows).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1", "SIGINT") if hasattr(signal, name))

_active: List["StopRequests"] = []  # the innermost fit's record last (fit inside a callback's fit)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


ELSEWHERE = -1  # in StopRequests.received: a signal another rank received (note_elsewhere)


class StopRequests:
    """The stop signals received while a ``fit`` runs: ``with StopRequests() as stop:`` installs
    the handlers, ``stop.requested`` is the first signal's name (None when none came),
    ``with stop.writing():`` marks a checkpoint write (signals are then only recorded)."""

    def __init__(self) -> None:
        self.received: List[int] = []
        self._previous: Dict[int, Any] = {}
        self._writing = 0
        self._outer: Optional["StopRequests"] = None
        self._inherited = 0

    # ------------------------------------------------------------------ installing
    def __enter__(self) -> "StopRequests":
        # Inside another StopRequests (a script that guards its whole run, as `hpcnn tutorial`
        # does, around fit's own): what the outer one received before counts here too, and what
        # this one receives is handed back to it at the end.
        self._outer = _active[-1] if _active else None
        if self._outer is not None:
            self.received = list(self._outer.received)
        self._inherited = len(self.received)
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                previous = signal.getsignal(signum)
                if previous is None or previous == signal.SIG_IGN:
                    # None: a handler installed outside Python, which could not be put back; SIG_IGN:
                    # someone chose to ignore it (a background job's SIGINT, nohup): both stay.
                    continue
                try:
                    signal.signal(signum, self._handle)
                except (OSError, ValueError, RuntimeError):
                    continue
                self._previous[signum] = previous
        _active.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in _active:
            _active.remove(self)
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
        if self._outer is not None:
            self._outer.received.extend(self.received[self._inherited:])

    @property
    def installed(self) -> bool:
        return bool(self._previous)

    # ------------------------------------------------------------------ receiving
    def _handle(self, signum: int, frame: Any) -> None:
        # Runs in the main thread between two Python bytecodes: record only (no printing: the
        # interrupted code may be in the middle of a print).
        self.received.append(signum)
        if (signum == getattr(signal, "SIGINT", None) and not self._writing
                and self.received.count(signum) >= 2):
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, as Ctrl-C always did

    def note_elsewhere(self) -> None:
        """Another rank of a data-parallel run received a stop signal: this one stops at the same
        batch boundary (hpcnn.distribute), as if it had received one."""
        if not self.received:
            self.received.append(ELSEWHERE)

    @property
    def requested(self) -> Optional[str]:
        """The name of the first stop signal received ('SIGTERM', 'SIGUSR1', 'SIGINT'), or None."""
        if not self.received:
            return None
        return "a stop signal to another rank" if self.received[0] == ELSEWHERE else signal_name(self.received[0])

    def writing(self) -> "_Writing":
        """``with stop.writing():`` around a checkpoint write: signals are only recorded meanwhile."""
        return _Writing(self)


class _Writing:
    def __init__(self, stop: StopRequests) -> None:
        self.stop = stop

    def __enter__(self) -> None:
        self.stop._writing += 1

    def __exit__(self, *exc: Any) -> None:
        self.stop._writing -= 1


def stop_requested() -> Optional[str]:
    """During ``fit``: the name of the stop signal it received ('SIGTERM', 'SIGUSR1', 'SIGINT'),
    or None. A callback doing long work (its own evaluation, a long wait) can look at it and
    return early; fit itself stops at the next batch boundary either way. None outside fit."""
    return _active[-1].requested if _active else None




class _NoGuard:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def writing_guard() -> Any:
    """``with writing_guard():`` around a checkpoint write made during fit (ModelCheckpoint,
    BackupAndRestore): stop signals are only recorded until it is complete. Outside fit: nothing."""
    return _active[-1].writing() if _active else _NoGuard()


__all__ = ["STOP_SIGNALS", "StopRequests", "stop_requested", "writing_guard"]
