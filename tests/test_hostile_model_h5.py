"""Hostile `.h5` model and weights files: hundreds of damaged files, each refused with a clear
exception or loaded with exactly the right weights, and none of them making hpcnn open another file.

The cases come from tests/hostile_model_h5.py (a seeded generator: see its docstring for the
damage and the judging). They run in worker subprocesses, many cases per worker, two workers at a
time: a case that crashes or hangs takes down only its worker. The driver then names the case,
re-runs it alone to confirm, and carries on with the rest of that worker's cases in a new one.

    HPCNN_HOSTILE_H5_CASES=2000 HPCNN_HOSTILE_H5_SEED=7 python -m pytest -q tests/test_hostile_model_h5.py

runs more cases or another seed (CI runs the default: DEFAULT_CASES cases of seed 26).
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
import hostile_model_h5  # noqa: E402

DEFAULT_CASES = 240
SCRIPT = os.path.join(os.path.dirname(__file__), "hostile_model_h5.py")
# A case that makes no progress for this long is a hang (a case takes well under a second; sanitizer
# builds are a few times slower).
CASE_TIMEOUT = float(os.environ.get("HPCNN_HOSTILE_TIMEOUT", 60))
BATCH = 75
WORKERS = 2


class Worker:
    def __init__(self, seed, cases, inject=None):
        self.cases = list(cases)
        cmd = [sys.executable, SCRIPT, "--seed", str(seed), "--cases", ",".join(map(str, self.cases))]
        if inject:
            cmd += ["--inject", inject]
        # stderr to a file: a chatty crash report must not fill a pipe and stall the worker.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr)
        # os.read, not readline: a buffered reader can swallow a line the selector never reports.
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.pending = b""
        self.current = None  # the case started and not finished
        self.last = time.monotonic()
        self.done = set()
        self.err_tail = ""


def run_cases(seed, cases, workers=WORKERS, batch=BATCH, timeout=CASE_TIMEOUT, inject=None):
    """Runs `cases`; returns ({case: result dict}, [problem descriptions]): a problem is a case whose
    worker crashed or hung (confirmed by running it alone) or a worker that failed outside any case."""
    pending = [cases[i:i + batch] for i in range(0, len(cases), batch)]
    running, results, problems, suspects = [], {}, [], []
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
        if why or w.proc.returncode != 0:
            if w.current is not None:
                suspects.append((w.current, why or f"worker died (exit status {w.proc.returncode})", w.err_tail))
            else:
                problems.append(f"a worker failed outside any case (exit {w.proc.returncode}): {w.err_tail}")
        if rest:
            pending.insert(0, rest)

    while pending or running:
        while pending and len(running) < workers:
            w = Worker(seed, pending.pop(0), inject)
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
        alone = None if "hang" in why else subprocess.run(
            [sys.executable, SCRIPT, "--seed", str(seed), "--cases", str(case), "--verbose"]
            + (["--inject", inject] if inject else []), capture_output=True, text=True, timeout=timeout + 30)
        confirmed = "" if alone is None else (
            f"; alone: exit status {alone.returncode}" + (f", {alone.stdout.strip().splitlines()[-1]}"
                                                          if alone.stdout.strip() else ""))
        problems.append(f"case {case} (seed {seed}): {why}{confirmed}; stderr: {err[-600:]}\n"
                        f"  reproduce: python {SCRIPT} --seed {seed} --cases {case} --verbose")
    return results, problems


def test_hostile_model_h5_files():
    n = int(os.environ.get("HPCNN_HOSTILE_H5_CASES", DEFAULT_CASES))
    seed = int(os.environ.get("HPCNN_HOSTILE_H5_SEED", hostile_model_h5.DEFAULT_SEED))
    results, problems = run_cases(seed, list(range(n)))
    fails = [f"case {c} ({r['desc']}):\n    " + "\n    ".join(r["fails"]) for c, r in sorted(results.items())
             if r["fails"]]
    assert not problems, "crashes or hangs:\n" + "\n".join(problems)
    assert len(results) == n, f"{n - len(results)} cases gave no result"
    assert not fails, f"{len(fails)} of {n} cases failed (seed {seed}):\n" + "\n".join(fails[:30])
    # The generator must really test both answers, and every kind of damage.
    refused = sum(1 for r in results.values() if r["did"] == "refused")
    loaded = sum(1 for r in results.values() if r["did"] == "loaded")
    kinds = {k: sum(1 for r in results.values() if f"{k}: " in r["desc"]) for k in hostile_model_h5.DAMAGES}
    print(f"\nhostile .h5 models: {n} cases (seed {seed}): {refused} refused, {loaded} loaded; damages: "
          + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    assert refused > n // 2 and loaded > n // 20, (refused, loaded)
    assert n < 100 or min(kinds.values()) >= 5, kinds


def test_the_driver_names_a_crashing_case():
    results, problems = run_cases(hostile_model_h5.DEFAULT_SEED, list(range(5)), workers=1, batch=5,
                                  inject="crash:2")
    assert len(problems) == 1 and problems[0].startswith("case 2 ") and "died" in problems[0], problems
    assert "alone: exit status" in problems[0] and "--cases 2" in problems[0]
    assert sorted(results) == [0, 1, 3, 4]  # the cases after the crash ran in a new worker


def test_the_driver_names_a_hanging_case():
    results, problems = run_cases(hostile_model_h5.DEFAULT_SEED, list(range(3)), workers=1, batch=3,
                                  inject="hang:1", timeout=5)
    assert len(problems) == 1 and problems[0].startswith("case 1 ") and "hang" in problems[0], problems
    assert sorted(results) == [0, 2]
