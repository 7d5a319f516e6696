"""The "Deep learning CPU vs GPU" CIFAR-10 tutorial, end to end on hpcnn (``hpcnn tutorial``).

Steps, as in the lesson: load CIFAR-10, write it to HDF5, define the Sequential CNN, train it on
the CPU from the HDF5 file, clone it and train the clone on the GPU, compare the timings, plot
the curves and some predictions, evaluate, and save the model. Results land in --out:

    curves.png   predictions.png   timings.csv   model_cpu.h5   summary.json

The HDF5 file is a dataset, not a result: it is kept in the data directory (--data-dir, else
$HPCNN_DATA_DIR, else ~/.hpcnn/datasets), named by what it holds (see hdf5_path), and reused by
later runs and by notebook 01. --data FILE.hdf5 is used as it is; an archive given with --data
is converted into --out.

Where CIFAR-10 is not available (no local copy, no internet: compute nodes), ``--synthetic``
generates CIFAR-shaped images with a learnable class signal so the whole pipeline still runs.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any, Dict, Optional, Tuple

import numpy as np

import hpcnn

from . import applications, callbacks, data, interrupts, models, optimizers, plot, run_records, suggestions
# The data functions are hpcnn.tutorial's names too (notebooks 01 and 03 import them from here).
from .tutorial_data import (CLASS_NAMES, cifar10_unavailable, hdf5_path, prepare_data,  # noqa: F401
                            synthetic_cifar10, synthetic_split_sizes, write_tutorial_hdf5)

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default=None,
                   help="CIFAR-10: the official python tarball/folder, or an HDF5 file in the tutorial layout "
                        "(default: the data dir's copy, downloaded there on nodes with internet; see "
                        f"`{suggestions.convert_download()}`)")
    p.add_argument("--data-dir", default=None,
                   help="where datasets are kept and reused (default: $HPCNN_DATA_DIR, else ~/.hpcnn/datasets)")
    p.add_argument("--synthetic", action="store_true",
                   help="use generated CIFAR-shaped data (for nodes without the dataset)")
    p.add_argument("--train-rows", type=int, default=None, help="use only this many training images")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=250)
    p.add_argument("--device", default="both", choices=["cpu", "gpu", "both"],
                   help="both (default): CPU, then GPU when one is usable (the reason is printed when not)")
    p.add_argument("--out", default="hpcnn_tutorial")
    p.add_argument("--backup", default=None, metavar="DIR",
                   help="back up training in DIR/cpu and DIR/gpu (BackupAndRestore) and continue from there when run "
                        "again: what lets a requeued Slurm job go on (slurm/*-train.sbatch pass $OUT/backup)")
    p.add_argument("--backup-every", type=int, default=None, metavar="N",
                   help="with --backup: a backup every N batches (default: after every epoch); a stop signal "
                        "(SIGTERM, SIGUSR1, Ctrl-C) always writes one at the next batch boundary")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", default="auto", choices=["auto", 0, 1, 2],
                   type=lambda v: v if v == "auto" else int(v))  # fit takes 0/1/2 as numbers


def train_on(device: str, model, train_ds, valid_ds, epochs: int, verbose, backup_dir: Optional[str] = None,
             backup_every: Optional[int] = None) -> Tuple[Any, float]:
    """Compile and fit on `device`; with `backup_dir`, through BackupAndRestore (kept when training
    completes, so a run started again skips what is done). Returns (History, seconds of training:
    the sum of the History's epoch timings when it continued an earlier run)."""
    model.compile(optimizer=optimizers.Adam(learning_rate=0.001), loss="categorical_crossentropy",
                  metrics=["accuracy"], device=device)
    cbs = []
    if backup_dir:
        cbs.append(callbacks.BackupAndRestore(backup_dir, save_freq=backup_every or "epoch", delete_checkpoint=False))
    t = time.perf_counter()
    history = model.fit(train_ds, epochs=epochs, verbose=verbose, validation_data=valid_ds, callbacks=cbs)
    seconds = time.perf_counter() - t
    if cbs and cbs[0].resumed_from is not None:
        seconds = float(sum(history.seconds))  # the epochs of the interrupted run too
    return history, seconds


def stopped(signal_name: str, backup: Optional[str]) -> int:
    """The tutorial's exit after a stop signal: what to do next, and 128 + the signal's number."""
    import signal as signals
    where = (f"the backup in {backup} continues it: run the same command again" if backup
             else "without --backup it starts from the beginning when run again")
    print(f"hpcnn tutorial: stopped by {signal_name}; {where}", flush=True)
    return 128 + int(getattr(signals, signal_name, 15))


def main(a) -> int:
    # SIGTERM, SIGUSR1 and Ctrl-C are recorded for the whole run (not only during fit, whose own
    # handlers take over while it trains): a signal during data preparation stops the tutorial before
    # it trains, instead of killing it (SIGUSR1's default) or being missed.
    with interrupts.StopRequests() as stop:
        return run(a, stop)


def run(a, stop) -> int:
    import shutil


    # Devices first: a GPU run that cannot happen must fail before minutes of data preparation.
    print(f"CPUs: {hpcnn.list_physical_devices('CPU')}")
    gpus = hpcnn.list_physical_devices("GPU")
    gpu_reason = hpcnn.gpu_unavailable_reason()
    want_cpu = a.device in ("cpu", "both")
    want_gpu = a.device in ("gpu", "both")
    # The reason there is no GPU is said once: in the error (--device gpu), on the line that says
    # the GPU run is skipped (--device both), or beside the empty list (--device cpu).
    if want_gpu and gpu_reason:
        print(f"GPUs: {gpus}")
        if a.device == "gpu":
            raise SystemExit(f"hpcnn tutorial: --device gpu, but no GPU is usable: {gpu_reason}")
        print(f"No GPU run: {gpu_reason}")
        want_gpu = False
    else:
        print(f"GPUs: {gpus}" + (f" ({gpu_reason})" if gpu_reason else ""))

    os.makedirs(a.out, exist_ok=True)
    hpcnn.utils.set_random_seed(a.seed)
    h5, xv, yv, source = prepare_data(a)

    def datasets_for():
        tr = data.HDF5Dataset(h5, x="x_train", y="y_train", batch_size=a.batch_size, shuffle=True, seed=a.seed,
                              one_hot=10)
        va = data.HDF5Dataset(h5, x="x_valid", y="y_valid", batch_size=a.batch_size, shuffle=False, one_hot=10)
        return tr, va

    model = applications.tutorial_cnn()
    model.summary()
    runs: Dict[str, Dict[str, Any]] = {}

    def backup_for(device: str) -> Optional[str]:
        return os.path.join(a.backup, device) if a.backup else None

    if want_cpu:
        print("\n=== Training on the CPU ===", flush=True)
        if stop.requested:
            return stopped(stop.requested, a.backup)
        tr, va = datasets_for()
        hist, secs = train_on("cpu", model, tr, va, a.epochs, a.verbose, backup_for("cpu"), a.backup_every)
        if hist.interrupted:
            return stopped(hist.interrupted_by, a.backup)
        runs["cpu"] = {"history": hist, "seconds": secs, "model": model}
    if want_gpu:
        print("\n=== Training a clone on the GPU ===", flush=True)
        if stop.requested:
            return stopped(stop.requested, a.backup)
        new_model = models.clone_model(model)
        tr, va = datasets_for()
        hist, secs = train_on("gpu", new_model, tr, va, a.epochs, a.verbose, backup_for("gpu"), a.backup_every)
        if hist.interrupted:
            return stopped(hist.interrupted_by, a.backup)
        runs["gpu"] = {"history": hist, "seconds": secs, "model": new_model}

    # Timings: per-epoch seconds and images/s, one CSV row per device and epoch.
    csv_path = os.path.join(a.out, "timings.csv")
    if os.path.exists(csv_path):
        os.remove(csv_path)
    for dev, r in runs.items():
        hist = r["history"]
        h = hist.history
        for e in range(len(h["loss"])):
            run_records.append_csv(csv_path, {"device": dev, "epoch": e + 1, "seconds": hist.seconds[e],
                                        "images_per_second": hist.images_per_second[e], "loss": h["loss"][e],
                                        "accuracy": h["accuracy"][e], "val_loss": h.get("val_loss", [None] * 99)[e],
                                        "val_accuracy": h.get("val_accuracy", [None] * 99)[e]})
    print("\n=== Timings ===")
    for dev, r in runs.items():
        ips = r["history"].images_per_second
        per = "median epoch" if len(ips) > 1 else "the epoch"
        print(f"{dev}: {r['seconds']:.1f} s for {len(ips)} epoch{'s' if len(ips) != 1 else ''}; "
              f"{np.median(ips):,.0f} img/s ({per})")
    if "cpu" in runs and "gpu" in runs:
        print(f"GPU speed-up: {runs['cpu']['seconds'] / runs['gpu']['seconds']:.1f}x")

    # Evaluate and predict with the last trained model, as the tutorial does.
    last = runs.get("gpu", runs.get("cpu"))
    summary: Dict[str, Any] = {"data": source, "hdf5": h5, "epochs": a.epochs, "batch_size": a.batch_size,
                               "runs": {d: {"seconds": r["seconds"], "history": r["history"].history,
                                            "epoch_seconds": r["history"].seconds,
                                            "images_per_second": r["history"].images_per_second}
                                        for d, r in runs.items()}}
    if last:
        m = last["model"]
        xf = xv.astype("float32") / 255.0
        yc = hpcnn.utils.to_categorical(yv, 10)
        score = m.evaluate(xf, yc, verbose=0, batch_size=a.batch_size)
        print("Test cross-entropy loss: %0.5f" % score[0])
        print("Test accuracy: %0.2f" % score[1])
        chance = hpcnn.metrics.chance_note(score[1], 10, len(xv))
        if chance:
            print(f"  {chance} (more epochs, the default is 10, or more data: --train-rows)")
        y_pred = m.predict_classes(xf, batch_size=a.batch_size)
        summary["test_loss"], summary["test_accuracy"] = score
        try:
            last_device = [d.upper() for d, r in runs.items() if r is last][0]
            data_name = "synthetic CIFAR-shaped images" if a.synthetic else source
            described = f"{data_name}, {len(xv):,} validation images"
            plot.history(last["history"], os.path.join(a.out, "curves.png"), label=last_device,
                         compare={d.upper(): r["history"] for d, r in runs.items() if r is not last} or None,
                         device=" and ".join(d.upper() for d in runs), data=data_name, synthetic=a.synthetic,
                         num_classes=10)
            plot.predictions(xv, np.asarray(yv).ravel(), y_pred, CLASS_NAMES, os.path.join(a.out, "predictions.png"),
                             device=last_device, data=described, synthetic=a.synthetic)
            print(f"Plots: {a.out}/curves.png, {a.out}/predictions.png")
        except ImportError as e:
            print(f"(no plots: {e})")
        if hasattr(m, "save"):
            m.to("cpu")
            m.save(os.path.join(a.out, "model_cpu.h5"))
            print(f"Model: {a.out}/model_cpu.h5")
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=float)
    print(f"Timings: {csv_path}; summary: {a.out}/summary.json; data: {h5}")
    if a.backup and os.path.isdir(a.backup):
        shutil.rmtree(a.backup)  # everything is written: a later run starts afresh
        print(f"Backups: removed {a.backup} (the run is complete)")
    return 0
