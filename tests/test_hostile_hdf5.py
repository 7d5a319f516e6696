"""Hostile HDF5 files: hundreds of damaged files, each a clean exception or the right data.

The cases come from tests/hostile_hdf5.py (a seeded generator: see its docstring for the damage
and the judging). They run in worker subprocesses, many cases per worker for speed, two workers
at a time: a case that crashes (a segfault, an abort from heap corruption) or hangs takes down
only its worker. The driver then names the case, re-runs it alone to confirm, and carries on
with the rest of that worker's cases in a new one.

    HPCNN_HOSTILE_CASES=5000 HPCNN_HOSTILE_SEED=7 python -m pytest -q tests/test_hostile_hdf5.py

runs more cases or another seed (CI runs the default: DEFAULT_CASES cases of seed 12).
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time

import pytest

pytest.importorskip("h5py")
sys.path.insert(0, os.path.dirname(__file__))
import hostile_hdf5  # noqa: E402

DEFAULT_CASES = 600
SCRIPT = os.path.join(os.path.dirname(__file__), "hostile_hdf5.py")
# A case that makes no progress for this long is a hang (a slow case takes well under a second;
# sanitizer builds are a few times slower).
CASE_TIMEOUT = float(os.environ.get("HPCNN_HOSTILE_TIMEOUT", 60))
BATCH = 50
WORKERS = 2


class Worker:
    def __init__(self, seed, cases, inject=None, no_reference=()):
        self.cases = list(cases)
        cmd = [sys.executable, SCRIPT, "--seed", str(seed), "--cases", ",".join(map(str, self.cases))]
        if inject:
            cmd += ["--inject", inject]
        if no_reference:
            cmd += ["--no-reference", ",".join(map(str, sorted(no_reference)))]
        # stderr to a file: a chatty crash report must not fill a pipe and stall the worker.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr)
        # Read with os.read, not readline: a buffered reader can swallow a second line from the
        # pipe, which the selector would then never report (a hang would go unnoticed).
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.pending = b""
        self.current = None       # the case started and not finished
        self.in_reference = False  # h5py (not hpcnn) is reading the current case
        self.last = time.monotonic()
        self.done = set()
        self.err_tail = ""


def run_cases(seed, cases, workers=WORKERS, batch=BATCH, timeout=CASE_TIMEOUT, inject=None):
    """Runs `cases`; returns ({case: result dict}, [problem descriptions], {cases h5py crashed on}).

    A problem is a case whose worker crashed or hung while hpcnn ran it (confirmed by running the
    case alone) or a worker that failed outside any case. A crash while h5py reads the reference
    is h5py's: that case runs again without the reference.
    """
    pending = [cases[i:i + batch] for i in range(0, len(cases), batch)]
    running, results, problems, suspects = [], {}, [], []
    no_reference = set()
    sel = selectors.DefaultSelector()

    def finish(w, why=None):
        sel.unregister(w.proc.stdout)
        if w.proc.poll() is None:
            w.proc.kill()
        w.proc.wait()
        w.proc.stdout.close()
        w.stderr.seek(0)
        w.err_tail = w.stderr.read()[-2000:]
        w.stderr.close()
        running.remove(w)
        rest = [c for c in w.cases if c not in w.done and c != w.current]
        if w.current is not None and w.in_reference and not why and w.current not in no_reference:
            no_reference.add(w.current)  # h5py crashed: run the case again without it
            rest.insert(0, w.current)
        elif why or w.proc.returncode != 0:
            if w.current is not None:
                suspects.append((w.current, why or f"worker died (exit status {w.proc.returncode})", w.err_tail))
            else:
                problems.append(f"a worker failed outside any case (exit {w.proc.returncode}): {w.err_tail}")
        if rest:
            pending.insert(0, rest)

    while pending or running:
        while pending and len(running) < workers:
            w = Worker(seed, pending.pop(0), inject, no_reference)
            running.append(w)
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        for key, _ in sel.select(timeout=1.0):
            w = key.data
            try:
                chunk = os.read(w.proc.stdout.fileno(), 1 << 16)
            except BlockingIOError:
                continue
            w.pending += chunk
            *lines, w.pending = w.pending.split(b"\n")
            if lines:
                w.last = time.monotonic()
            for line in (x.decode(errors="replace") for x in lines):
                if line.startswith("START "):
                    w.current = int(line.split()[1])
                    w.in_reference = True
                elif line.startswith("H5PY "):
                    w.in_reference = False
                elif line.startswith("RESULT "):
                    r = json.loads(line[len("RESULT "):])
                    results[r["case"]] = r
                    w.done.add(r["case"])
                    w.current = None
            if not chunk:  # end of output: the worker exited
                finish(w)
        for w in list(running):
            if w.current is not None and time.monotonic() - w.last > timeout:
                finish(w, why=f"no progress for {timeout:.0f} s (a hang)")

    for case, why, err in suspects:
        alone = subprocess.run([sys.executable, SCRIPT, "--seed", str(seed), "--cases", str(case), "--verbose"]
                               + (["--inject", inject] if inject else [])
                               + (["--no-reference", str(case)] if case in no_reference else []),
                               capture_output=True, text=True, timeout=timeout + 30) if "hang" not in why else None
        confirmed = "" if alone is None else (
            f"; alone: exit status {alone.returncode}" + (f", {alone.stdout.strip().splitlines()[-1]}"
                                                          if alone.stdout.strip() else ""))
        problems.append(f"case {case} (seed {seed}): {why}{confirmed}; stderr: {err[-600:]}\n"
                        f"  reproduce: python {SCRIPT} --seed {seed} --cases {case} --verbose")
    return results, problems, no_reference


def test_hostile_hdf5_files():
    n = int(os.environ.get("HPCNN_HOSTILE_CASES", DEFAULT_CASES))
    seed = int(os.environ.get("HPCNN_HOSTILE_SEED", hostile_hdf5.DEFAULT_SEED))
    results, problems, h5py_crashed = run_cases(seed, list(range(n)))
    fails = [f"case {c} ({r['desc']}):\n    " + "\n    ".join(r["fails"]) for c, r in sorted(results.items())
             if r["fails"]]
    assert not problems, "crashes or hangs:\n" + "\n".join(problems)
    assert len(results) == n, f"{n - len(results)} cases gave no result"
    assert not fails, f"{len(fails)} of {n} cases failed (seed {seed}):\n" + "\n".join(fails[:30])
    # The generator must really test both answers: files hpcnn refuses and files it reads.
    raised = sum(1 for r in results.values() if "raised" in r["did"].values())
    read = sum(1 for r in results.values() if "data" in r["did"].values())
    h5py_read = sum(1 for r in results.values() if r["h5py_read"])
    print(f"\nhostile HDF5: {n} cases (seed {seed}): hpcnn refused a reading in {raised}, returned data in {read}; "
          f"h5py read {h5py_read} of the files and crashed on {len(h5py_crashed)}")
    assert raised > n // 5 and read > n // 5 and h5py_read > n // 5, (raised, read, h5py_read)


def test_the_driver_names_a_crashing_case():
    results, problems, _ = run_cases(hostile_hdf5.DEFAULT_SEED, list(range(6)), workers=1, batch=6, inject="crash:3")
    assert len(problems) == 1 and problems[0].startswith("case 3 ") and "died" in problems[0], problems
    assert "alone: exit status" in problems[0] and "--cases 3" in problems[0]
    assert sorted(results) == [0, 1, 2, 4, 5]  # the cases after the crash ran in a new worker


def test_the_driver_names_a_hanging_case():
    results, problems, _ = run_cases(hostile_hdf5.DEFAULT_SEED, list(range(4)), workers=1, batch=4, inject="hang:1",
                                     timeout=5)
    assert len(problems) == 1 and problems[0].startswith("case 1 ") and "hang" in problems[0], problems
    assert sorted(results) == [0, 2, 3]


def test_the_driver_reruns_a_case_h5py_crashed_on_without_it():
    results, problems, crashed = run_cases(hostile_hdf5.DEFAULT_SEED, list(range(4)), workers=1, batch=4,
                                           inject="h5py-crash:2")
    assert not problems and crashed == {2} and sorted(results) == [0, 1, 2, 3], (problems, crashed)
    assert not results[2]["h5py_read"]
