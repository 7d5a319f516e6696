#!/usr/bin/env python3
"""What do checkpoints cost? One epoch of the tutorial CNN (model.fit, batch 250, arrays in memory)
without checkpoints, with BackupAndRestore after the epoch (save_freq='epoch'), with
BackupAndRestore every --every batches (default 100), and with ModelCheckpoint after the epoch (a
model file with the optimizer state, gzip). Prints the epoch's wall time (median), the overhead
against no checkpoints (target: under 2 % at 'epoch'), the backups written per epoch, the seconds
per backup (median) and the file size. The modes are interleaved over --rounds, each from a fresh
model, so machine noise spreads over all of them alike.

    python bench/bench_checkpoint.py                          # 50,000 rows: CIFAR-10's epoch
    python bench/bench_checkpoint.py --dir /scratch/$USER     # backups on the file system you will use
    python bench/bench_checkpoint.py --rows 2500 --every 5 --rounds 1   # a quick check that it runs
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

import hpcnn
from hpcnn.callbacks import BackupAndRestore, ModelCheckpoint


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=50000, help="training images per epoch (default: CIFAR-10's 50,000)")
    p.add_argument("--batch", type=int, default=250)
    p.add_argument("--every", type=int, default=100, help="the batch interval of the frequent backups")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where backups and checkpoints are written")
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.random((a.rows, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, a.rows).astype(np.int32)
    work = tempfile.mkdtemp(prefix="hpcnn-bench-checkpoint-", dir=a.dir)
    batches = (a.rows + a.batch - 1) // a.batch

    def run(mode: str):
        """(wall seconds of the epoch, [seconds of each backup or checkpoint], bytes of one)."""
        target = os.path.join(work, "run")
        shutil.rmtree(target, ignore_errors=True)
        m = hpcnn.models.tutorial_cnn(seed=0)
        m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
        m.train_on_batch(x[:a.batch], y[:a.batch])  # buffers made and the optimizer state created
        cbs, sizes = [], [0]
        if mode == "BackupAndRestore 'epoch'":
            cbs = [BackupAndRestore(target, save_freq="epoch", delete_checkpoint=False)]
        elif mode.startswith("BackupAndRestore every"):
            cbs = [BackupAndRestore(target, save_freq=a.every, delete_checkpoint=False)]
        elif mode == "ModelCheckpoint 'epoch'":
            class Timed(ModelCheckpoint):
                times = []

                def _write(self, path):
                    t = time.perf_counter()
                    super()._write(path)
                    self.times.append(time.perf_counter() - t)
                    sizes[0] = os.path.getsize(path)
            cbs = [Timed(os.path.join(target, "model.h5"))]
        t0 = time.perf_counter()
        m.fit(x, y, batch_size=a.batch, epochs=1, verbose=0, callbacks=cbs)
        wall = time.perf_counter() - t0
        writes = []
        if cbs:
            cb = cbs[0]
            writes = list(cb.write_seconds) if isinstance(cb, BackupAndRestore) else list(cb.times)
            if isinstance(cb, BackupAndRestore) and os.path.exists(cb.path):
                sizes[0] = os.path.getsize(cb.path)
        shutil.rmtree(target, ignore_errors=True)
        return wall, writes, sizes[0]

    modes = ["no checkpoint", "BackupAndRestore 'epoch'", f"BackupAndRestore every {a.every} batches",
             "ModelCheckpoint 'epoch'"]
    res = {m: {"wall": [], "writes": [], "bytes": 0} for m in modes}
    try:
        for _ in range(a.rounds):
            for mode in modes:
                wall, writes, size = run(mode)
                res[mode]["wall"].append(wall)
                res[mode]["writes"] += writes
                res[mode]["per_epoch"] = len(writes)
                res[mode]["bytes"] = size
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(res[modes[0]]["wall"])
    print(f"# tutorial CNN (787,530 parameters), model.fit, 1 epoch of {a.rows} rows = {batches} batches of {a.batch}, "
          f"{hpcnn.get_num_threads()} threads, {a.rounds} interleaved rounds (median); files in {a.dir}")
    print(f"{'mode':<36}{'epoch s':>9}{'overhead':>10}{'writes/epoch':>14}{'s/write':>9}{'MB':>7}")
    for mode in modes:
        r = res[mode]
        wall = statistics.median(r["wall"])
        per = f"{statistics.median(r['writes']):.3f}" if r["writes"] else "-"
        size = f"{r['bytes'] / 1e6:.1f}" if r["bytes"] else "-"
        over = f"{100 * (wall - base) / base:+.1f} %" if mode != modes[0] else "-"
        print(f"{mode:<36}{wall:>9.2f}{over:>10}{r.get('per_epoch', 0):>14}{per:>9}{size:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
