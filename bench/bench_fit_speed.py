#!/usr/bin/env python3
"""model.fit end to end (the Python around the steps too: History, callbacks, checks at fit's
start) of the tutorial CNN, against older builds, alternated in one run. Each run is a process of
its own: random images (speed does not depend on pixel values), batch 250, Adam, one warm-up epoch
then the timed epochs (timed by a callback from on_epoch_begin to on_epoch_end).

    python bench/bench_fit_speed.py --baseline-python main=/path/to/old/bin/python --rounds 4
    python bench/bench_fit_speed.py --model tiny --baseline-python main=/path/to/old/bin/python

--model tiny times a model whose step is a few microseconds of C++ (Flatten, Dense(16), Dense(10)
on 8x8 images, batch 16, accuracy and mae): what it measures is the Python loop around the steps
(callbacks, sums, logs, the progress bar's bookkeeping), per step. --cpu-time (the default for
--model tiny) runs on one thread (HPCNN_NUM_THREADS=1) and times the process's CPU time
(time.process_time), not the wall clock, so that other work on a shared host, which takes the
CPU away, counts far less.

A baseline interpreter is anything that imports the older hpcnn (a venv's python, or a wrapper
script setting PYTHONPATH). Prints img/s per build (mean, median over every timed epoch of every
round) and the ratio of this build to each baseline.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

# What each process runs: the same code for every build (only public API, so older builds run it).
WORKER = """
import sys, time
import numpy as np
import hpcnn
from hpcnn.callbacks import Callback
from hpcnn.layers import Dense, Flatten, InputLayer
from hpcnn.models import tutorial_cnn
rows, epochs, kind, cpu_time = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "cpu"
clock = time.process_time if cpu_time else time.perf_counter

class EpochTimer(Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []
    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = clock()
    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(clock() - self.t0)

rng = np.random.default_rng(0)
shape = (32, 32, 3) if kind == "tutorial" else (8, 8, 1)
x = rng.random((rows,) + shape, dtype=np.float32)
y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, rows)]
if kind == "tutorial":
    model, batch, metrics = tutorial_cnn(), 250, ["accuracy"]
else:
    model = hpcnn.Sequential([InputLayer(input_shape=list(shape)), Flatten(), Dense(16, activation="relu"),
                              Dense(10, activation="softmax")])
    batch, metrics = 16, ["accuracy", "mae"]
model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=metrics)
timer = EpochTimer()
model.fit(x, y, batch_size=batch, epochs=epochs + 1, verbose=0, callbacks=[timer])
print(" ".join(f"{rows / s:.1f}" for s in timer.seconds[1:]))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=10000)
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per run (after one warm-up epoch)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--model", choices=["tutorial", "tiny"], default="tutorial",
                   help="tutorial: the tutorial CNN, batch 250; tiny: a step of microseconds, batch 16 (the "
                        "Python loop's cost per step)")
    p.add_argument("--cpu-time", action=argparse.BooleanOptionalAction, default=None,
                   help="one thread, timed by the process's CPU time (default: with --model tiny)")
    p.add_argument("--baseline-python", action="append", default=[], metavar="[LABEL=]PYTHON")
    a = p.parse_args()
    cpu_time = a.model == "tiny" if a.cpu_time is None else a.cpu_time
    builds = {"this build": sys.executable}
    for i, spec in enumerate(a.baseline_python):
        label, _, py = spec.rpartition("=")
        builds[label or f"baseline{i + 1}"] = py
    rates = {label: [] for label in builds}
    for r in range(a.rounds):
        for label, py in builds.items():
            env = dict(os.environ, **({"HPCNN_NUM_THREADS": "1"} if cpu_time else {}))
            out = subprocess.run([py, "-c", WORKER, str(a.rows), str(a.epochs), a.model, "cpu" if cpu_time else "wall"],
                                 capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            rates[label] += [float(v) for v in out.stdout.split()]
            print(f"# round {r + 1}: {label}: {out.stdout.strip()} img/s", flush=True)
    ours = rates["this build"]
    what = ("tutorial CNN, model.fit, batch 250" if a.model == "tutorial" else
            "tiny model (Flatten, Dense 16, Dense 10; accuracy, mae), model.fit, batch 16")
    what += ", 1 thread, CPU time" if cpu_time else ", wall clock"
    print(f"# {what}, {a.rows} rows, {a.epochs} timed epochs x {a.rounds} rounds")
    # best: the fastest epoch, the figure least touched by other work on a shared host.
    print(f"{'build':<24} {'mean img/s':>10} {'median':>8} {'best':>8} {'this build / it (mean, median, best)':>38}")
    for label, v in rates.items():
        ratio = (f"{statistics.mean(ours) / statistics.mean(v):.3f}x, {statistics.median(ours) / statistics.median(v):.3f}x, "
                 f"{max(ours) / max(v):.3f}x")
        print(f"{label:<24} {statistics.mean(v):>10.0f} {statistics.median(v):>8.0f} {max(v):>8.0f} {ratio:>38}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
