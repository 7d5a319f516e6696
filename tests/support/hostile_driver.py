"""The driver of the hostile-file corpora (tests/hostile/test_hostile_hdf5.py, test_hostile_models.py,
test_hostile_model_h5.py): their cases run in worker subprocesses, `batch` cases per worker,
`workers` at a time, so that a case that crashes (a segfault, an abort from a sanitizer) or hangs
takes down only its worker. The driver then names the case with its seed, re-runs it alone to
confirm, and carries on with the rest of that worker's cases in a new one.

A worker script prints "START i" before case i and "RESULT {json}" after it. With reference=True
(the HDF5 corpus) it also prints "H5PY ..." once h5py has read the case's reference: a crash
before that line is h5py's, not hpcnn's, and the case runs again with --no-reference.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import tempfile
import time
import traceback

from tests.support import paths


def parse_cases(spec):
    """A worker's --cases: '0:100' (a range), '5,9,12', or both joined by commas."""
    out = []
    for part in spec.split(","):
        if ":" in part:
            a, b = part.split(":")
            out += list(range(int(a), int(b)))
        elif part:
            out.append(int(part))
    return out


def keep_or_remove(path, keep):
    """After a case: its file moved into the folder `keep` (--keep, for a look), else removed."""
    if keep:
        os.makedirs(keep, exist_ok=True)
        os.replace(path, os.path.join(keep, os.path.basename(path)))
    elif os.path.exists(path):
        os.remove(path)


def serve(cases, inject, run_case, verbose_line=None, reference=False):
    """A worker's side of the protocol: for each case i of the --cases spec `cases`, "START i", then
    run_case(i) -> {field: value} (its "fails" a list; an exception is a harness error: a bug in
    the generator fails the case too), then "RESULT {json}" with "case" and "s" (seconds) added.
    `inject` ('crash:I', 'hang:I') tests the driver itself: the worker aborts or sleeps at case I;
    with reference=True the crash comes after "H5PY I" (hpcnn's, not the reference reader's).
    verbose_line(i, result): a line to print after each case (--verbose)."""
    kind, at = inject.split(":") if inject else (None, None)
    for i in parse_cases(cases):
        print(f"START {i}", flush=True)
        if at is not None and int(at) == i:
            if kind == "crash":
                if reference:
                    print(f"H5PY {i}", flush=True)
                os.abort()
            if kind == "hang":
                time.sleep(3600)
        t0 = time.time()
        try:
            result = run_case(i)
        except Exception:  # noqa: BLE001  (a bug in the generator itself is a failure too)
            result = {"desc": "?", "did": "?", "fails": ["harness error: " + traceback.format_exc()]}
        print("RESULT " + json.dumps(dict(result, case=i, s=round(time.time() - t0, 3))), flush=True)
        if verbose_line is not None:
            print(verbose_line(i, result), flush=True)


class Worker:
    """One worker subprocess running `python -m tests.support.<script> --seed S --cases i,j,...` (in the
    repository root), read line by line."""

    def __init__(self, script, seed, cases, inject=None, no_reference=()):
        self.cases = list(cases)
        cmd = paths.module_command(script, "--seed", seed, "--cases", ",".join(map(str, self.cases)))
        if inject:
            cmd += ["--inject", inject]
        if no_reference:
            cmd += ["--no-reference", ",".join(map(str, sorted(no_reference)))]
        # stderr to a file: a chatty crash report must not fill a pipe and stall the worker.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr, cwd=paths.ROOT)
        # Read with os.read, not readline: a buffered reader can swallow a second line from the
        # pipe, which the selector would then never report (a hang would go unnoticed).
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.pending = b""
        self.current = None       # the case started and not finished
        self.in_reference = False  # h5py (not hpcnn) is reading the current case
        self.last = time.monotonic()
        self.done = set()
        self.err_tail = ""


def run_cases(script, seed, cases, workers, batch, timeout, inject=None, reference=False):
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
            w = Worker(script, seed, pending.pop(0), inject, no_reference)
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
                    w.in_reference = reference
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
        alone = subprocess.run(paths.module_command(script, "--seed", seed, "--cases", case, "--verbose")
                               + (["--inject", inject] if inject else [])
                               + (["--no-reference", str(case)] if case in no_reference else []),
                               capture_output=True, text=True, timeout=timeout + 30, cwd=paths.ROOT) if "hang" not in why else None
        confirmed = "" if alone is None else (
            f"; alone: exit status {alone.returncode}" + (f", {alone.stdout.strip().splitlines()[-1]}"
                                                          if alone.stdout.strip() else ""))
        problems.append(f"case {case} (seed {seed}): {why}{confirmed}; stderr: {err[-600:]}\n"
                        f"  reproduce: python -m tests.support.{script} --seed {seed} --cases {case} --verbose")
    return results, problems, no_reference
