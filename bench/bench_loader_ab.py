#!/usr/bin/env python3
"""The single-process streaming loader, this tree against another build, interleaved (issue 25:
the chunk-group shuffle must not slow the unsharded path).

    python bench/bench_loader_ab.py --baseline-pythonpath /path/to/main/python [--rounds 6]

Writes a --rows image file with write_hdf5 (default ~1 MiB chunks), then per round and per
--budgets value runs, each in a fresh process: the baseline's HDF5Dataset(shuffle=True), this
tree's shuffle=True (streamed: chunk groups) and this tree's shuffle='rows'; each times
construction + --epochs shuffled epochs of epoch_batches at cache='none' and prints img/s. Prints
the median and range per variant.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

from hpcnn import data

HERE = os.path.dirname(os.path.abspath(__file__))
OWN = os.path.join(HERE, "..", "python")

WORKER = """
import sys, time
from hpcnn import data
path, shuffle, budget, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
kw = {} if shuffle == "True" else {"shuffle": shuffle}
t0 = time.perf_counter()
ds = data.HDF5Dataset(path, batch_size=250, seed=1, one_hot=10, cache="none", memory_budget=budget, **kw)
n = 0
for e in range(epochs):
    for xb, yb in ds.epoch_batches(e):
        n += xb.shape[0]
print(n / (time.perf_counter() - t0))
"""


def run(pythonpath: str, path: str, shuffle: str, budget: int, epochs: int) -> float:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    p = subprocess.run([sys.executable, "-c", WORKER, path, shuffle, str(budget), str(epochs)], env=env,
                       capture_output=True, text=True, check=True)
    return float(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline-pythonpath", required=True, help="the other build's python/ (with its _core)")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--budgets", default=f"{1 << 30},{8 << 20}", help="memory_budget values (bytes, comma-separated)")
    a = ap.parse_args()
    variants = (("baseline True", a.baseline_pythonpath, "True"), ("this True", OWN, "True"),
                ("this 'rows'", OWN, "rows"))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ab.h5")
        rng = np.random.default_rng(0)
        x = (rng.integers(0, 16, (a.rows, 32, 32, 3)) * 8).astype(np.uint8)
        data.write_hdf5(path, {"x_train": x, "y_train": rng.integers(0, 10, a.rows).astype(np.uint8)})
        for budget in (int(b) for b in a.budgets.split(",")):
            got = {v[0]: [] for v in variants}
            for r in range(a.rounds):
                for name, pp, shuffle in variants:
                    got[name].append(run(pp, path, shuffle, budget, a.epochs))
                print(f"budget {budget}: round {r + 1}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in got.items()),
                      flush=True)
            for k, v in got.items():
                print(f"budget {budget}: {k:14s} median {statistics.median(v):9.0f} img/s (range {min(v):.0f}-"
                      f"{max(v):.0f})")


if __name__ == "__main__":
    main()
