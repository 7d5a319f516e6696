#!/usr/bin/env python3
"""model.fit end to end (the Python around the steps too: History, callbacks, checks at fit's
start) of the tutorial CNN, against older builds, alternated in one run. Each run is a process of
its own: random images (speed does not depend on pixel values), batch 250, Adam, one warm-up epoch
then the timed epochs (timed by a callback from on_epoch_begin to on_epoch_end).

    python bench/bench_fit_speed.py --baseline-python main=/path/to/old/bin/python --rounds 4

A baseline interpreter is anything that imports the older hpcnn (a venv's python, or a wrapper
script setting PYTHONPATH). Prints img/s per build (mean, median over every timed epoch of every
round) and the ratio of this build to each baseline.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

# What each process runs: the same code for every build (only public API, so older builds run it).
WORKER = """
import sys, time
import numpy as np
from hpcnn.callbacks import Callback
from hpcnn.models import tutorial_cnn
rows, epochs = int(sys.argv[1]), int(sys.argv[2])

class EpochTimer(Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []
    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()
    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.t0)

rng = np.random.default_rng(0)
x = rng.random((rows, 32, 32, 3), dtype=np.float32)
y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, rows)]
model = tutorial_cnn()
model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
timer = EpochTimer()
model.fit(x, y, batch_size=250, epochs=epochs + 1, verbose=0, callbacks=[timer])
print(" ".join(f"{rows / s:.1f}" for s in timer.seconds[1:]))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=10000)
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per run (after one warm-up epoch)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--baseline-python", action="append", default=[], metavar="[LABEL=]PYTHON")
    a = p.parse_args()
    builds = {"this build": sys.executable}
    for i, spec in enumerate(a.baseline_python):
        label, _, py = spec.rpartition("=")
        builds[label or f"baseline{i + 1}"] = py
    rates = {label: [] for label in builds}
    for r in range(a.rounds):
        for label, py in builds.items():
            out = subprocess.run([py, "-c", WORKER, str(a.rows), str(a.epochs)], capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            rates[label] += [float(v) for v in out.stdout.split()]
            print(f"# round {r + 1}: {label}: {out.stdout.strip()} img/s", flush=True)
    ours = rates["this build"]
    print(f"# tutorial CNN, model.fit, batch 250, {a.rows} rows, {a.epochs} timed epochs x {a.rounds} rounds")
    print(f"{'build':<24} {'mean img/s':>10} {'median':>8} {'this build / it (mean, median)':>32}")
    for label, v in rates.items():
        ratio = f"{statistics.mean(ours) / statistics.mean(v):.3f}x, {statistics.median(ours) / statistics.median(v):.3f}x"
        print(f"{label:<24} {statistics.mean(v):>10.0f} {statistics.median(v):>8.0f} {ratio:>32}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
