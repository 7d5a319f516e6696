#!/usr/bin/env python3
"""The chunk-group shuffle beside the row shuffle (issue 25): how mixed a batch is, and what that
does to a small model's accuracy, on Fashion-MNIST written to HDF5 with realistic chunks.

    python bench/bench_shuffle_quality.py                     # 3 epochs, both file orders
    python bench/bench_shuffle_quality.py --epochs 1 --rows 6000   # smoke run

Two files hold the 60,000 training images in chunks of --chunk-rows rows: as distributed, and
sorted by label (a file written class by class: the worst case for any chunk-wise shuffle, since a
chunk then holds one or two classes). Each is read three ways, the same seed:

    rows (cached)          shuffle='rows', the file in memory: an exact uniform permutation
    rows (streamed)        shuffle='rows' under --budget: windows of chunks, two in memory
    chunk_groups (streamed) shuffle='chunk_groups' under --budget: 64 lanes (fewer if the budget
                           says so) each drawing from its own group of chunks, windows per lane

Batch mixing over the first --epochs epochs' plans (the loader's own plan function, with the
lanes and windows the dataset chose): per batch, the largest fraction of its rows from one chunk
(mean and max over batches), the distinct chunks, and the distinct classes (of 10); and skew16,
the total variation distance between the classes of 16 consecutive batches and the file's (mean
over such stretches; the exact shuffle gives ~0.03 at batch 128). Accuracy: a
small MLP (Flatten, Dense 256 + ReLU, Dense 10; Adam 1e-3, batch 128, seed 0) trained --epochs
epochs from each file and order, evaluated on the 10,000 test images.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import hpcnn
from hpcnn._core import data as core_data

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def mixing(ds: "hpcnn.data.HDF5Dataset", labels: np.ndarray, epochs: int) -> dict:
    """Batch mixing of `ds`'s order over `epochs` epochs (the plan the loader makes)."""
    st = ds.stats
    rows, block_rows, batch = ds.num_rows, st["block_rows"], ds.batch_size
    top, chunks, classes, drift = [], [], [], []
    prior = np.bincount(labels, minlength=10) / len(labels)
    for e in range(epochs):
        order = core_data.epoch_plan(rows, block_rows, st["window_blocks"], ds.shuffle_mode, ds.seed, e, batch,
                                     max(1, st["lanes"]))[0]
        for b0 in range(0, rows, batch):
            idx = order[b0:b0 + batch]
            _, counts = np.unique(idx // block_rows, return_counts=True)
            top.append(counts.max() / len(idx))
            chunks.append(len(counts))
            classes.append(len(np.unique(labels[idx])))
        # Class skew over stretches of 16 batches: how far the classes a model sees for a while
        # are from the file's (total variation distance): a chunk-wise order keeps its windows'
        # chunks for many batches, and in a file sorted by label their classes.
        stretch = 16 * batch
        for s0 in range(0, rows - stretch + 1, stretch):
            seen = np.bincount(labels[order[s0:s0 + stretch]], minlength=10) / stretch
            drift.append(0.5 * np.abs(seen - prior).sum())
    return {"top_mean": float(np.mean(top)), "top_max": float(np.max(top)), "chunks": float(np.mean(chunks)),
            "classes": float(np.mean(classes)), "classes_min": int(np.min(classes)),
            "skew16": float(np.mean(drift)) if drift else float("nan")}


def train(ds: "hpcnn.data.HDF5Dataset", xt: np.ndarray, yt: np.ndarray, epochs: int) -> tuple:
    from hpcnn.layers import Dense, Flatten, InputLayer
    m = hpcnn.Sequential([InputLayer(input_shape=(28, 28, 1)), Flatten(), Dense(256, activation="relu"),
                          Dense(10, activation="softmax")], seed=0)
    m.compile(hpcnn.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", ["accuracy"])
    accs = []
    t0 = time.perf_counter()
    for e in range(epochs):
        m.fit(ds, epochs=e + 1, initial_epoch=e, verbose=0)
        accs.append(float(m.evaluate(xt, yt, batch_size=500, verbose=0)[1]))
    return accs, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=DEFAULT_DIR, help="Fashion-MNIST's IDX files (gzip)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rows", type=int, default=0, help="only the first ROWS training rows (0: all)")
    ap.add_argument("--chunk-rows", type=int, default=128, help="rows per chunk (128: 100 KiB chunks)")
    ap.add_argument("--budget", type=int, default=24 << 20, help="memory_budget of the streamed reads (bytes)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-train", action="store_true", help="only the mixing figures")
    ap.add_argument("--files", default="as given,by label", help="which file orders (comma-separated)")
    ap.add_argument("--orders", default="rows (cached),rows (streamed),chunk_groups (streamed)",
                    help="which orders (comma-separated)")
    a = ap.parse_args()

    (x, y), (xt, yt) = hpcnn.datasets.fashion_mnist.load_data(a.data)
    if a.rows:
        x, y = x[:a.rows], y[:a.rows]
    xt = xt[..., None].astype(np.float32) / 255
    print(f"Fashion-MNIST: {len(x)} training rows in chunks of {a.chunk_rows} rows "
          f"({a.chunk_rows * 784 / 1024:.0f} KiB), batch {a.batch}, streamed budget {a.budget / 2**20:.0f} MiB, "
          f"{a.epochs} epochs, seed {a.seed}")
    print(f"{'file':<10}{'order':<26}{'lanes':>6}{'window':>7}{'top chunk mean/max':>20}{'chunks':>8}"
          f"{'classes (min)':>15}{'skew16':>8}   test accuracy per epoch")
    with tempfile.TemporaryDirectory() as tmp:
        files = {"as given": np.arange(len(x)), "by label": np.argsort(y, kind="stable")}
        for name in a.files.split(","):
            perm = files[name]
            path = os.path.join(tmp, f"{name.replace(' ', '_')}.h5")
            hpcnn.data.write_hdf5(path, {"x_train": x[perm], "y_train": y[perm]}, chunk_rows=a.chunk_rows)
            labels = y[perm].astype(np.int64)
            orders = {"rows (cached)": ("rows", 1 << 30), "rows (streamed)": ("rows", a.budget),
                      "chunk_groups (streamed)": ("chunk_groups", a.budget)}
            for label in a.orders.split(","):
                shuffle, budget = orders[label]
                with hpcnn.data.HDF5Dataset(path, batch_size=a.batch, shuffle=shuffle, seed=a.seed,
                                            memory_budget=budget) as ds:
                    mx = mixing(ds, labels, a.epochs)
                    st = ds.stats
                    acc = "" if a.no_train else "  ".join(f"{100 * v:.2f}" for v in train(ds, xt, yt, a.epochs)[0])
                    print(f"{name:<10}{label:<26}{st['lanes']:>6}{st['window_blocks']:>7}"
                          f"{mx['top_mean']:>12.3f} / {mx['top_max']:.3f}{mx['chunks']:>8.1f}"
                          f"{mx['classes']:>9.2f} ({mx['classes_min']}){mx['skew16']:>8.3f}   {acc}", flush=True)


if __name__ == "__main__":
    main()
