"""``hpcnn dist-train``: the tutorial CNN trained data-parallel, timed, one CSV row per run.

    srun hpcnn dist-train --strategy multiworker --batch-size 1024 --csv results/dist.csv
    mpirun -np 2 hpcnn dist-train --strategy multiworker --device cpu --synthetic --train-rows 2000
    hpcnn dist-train --strategy mirrored            # every GPU of this process (a JupyterLab node too)
    hpcnn dist-train                                # no launcher, no GPU: one CPU replica

The data are the tutorial's HDF5 file (CIFAR-10 or --synthetic, made by the chief when missing),
read by HDF5Dataset: with MultiWorkerMirroredStrategy each rank reads only its share of every
batch. --batch-size is the global batch. The chief prints the progress and appends one row per run
to --csv: replicas, devices, global batch, time per step (mean, median), images/s with its
uncertainty and jitter (hpcnn.run_records.step_stats over the steps after the first epoch's first
--warmup ones), the staging label; ``hpcnn collect`` merges such files into a table and graph.
"""
from __future__ import annotations

import argparse
import os
import time

from . import applications, callbacks, data, devices, distribute, run_records, threads, tutorial_data


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategy", choices=("auto", "mirrored", "multiworker"), default="auto",
                   help="auto (default): multiworker when started by srun/mpirun with more than one rank, else "
                        "mirrored")
    p.add_argument("--device", default=None, choices=("cpu", "gpu"),
                   help="cpu: CPU replicas even where GPUs are visible (default: the GPUs when there are any)")
    p.add_argument("--data", default=None, help="an HDF5 file in the tutorial layout (e.g. staged to $TMPDIR)")
    p.add_argument("--data-dir", default=None, help="where the tutorial's file is kept (see hpcnn tutorial)")
    p.add_argument("--synthetic", action="store_true", help="generated CIFAR-shaped data")
    p.add_argument("--train-rows", type=int, default=None)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=256, help="the global batch (default 256)")
    p.add_argument("--warmup", type=int, default=3, help="steps of the first epoch not timed (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="hpcnn_dist", help="folder for the chief's CSV log and model (model.h5)")
    p.add_argument("--backup", default=None,
                   help="a folder for BackupAndRestore (an epoch's backup): a requeued or restarted job continues "
                        "from the last one, on any rank count that divides the global batch")
    p.add_argument("--csv", default=None, help="append the run's timing row to this CSV file")
    p.add_argument("--label", default=None, help="a free-form label for the CSV row (GPU type, staging, ...)")


def _launched_ranks() -> int:
    for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"):
        if os.environ.get(k, "").isdigit():
            return int(os.environ[k])
    return 1


def _cpu_list() -> str:
    """This process's affinity mask as Linux writes CPU lists ('0-3,8'); '?' where it cannot be read."""
    if not hasattr(os, "sched_getaffinity"):
        return "?"
    cpus, parts = sorted(os.sched_getaffinity(0)), []
    for c in cpus:
        if parts and parts[-1][1] == c - 1:
            parts[-1][1] = c
        else:
            parts.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


def make_strategy(a) -> distribute.Strategy:
    kind = a.strategy
    if kind == "auto":
        kind = "multiworker" if _launched_ranks() > 1 else "mirrored"
    if a.device == "gpu":
        why = devices.gpu_unavailable_reason()
        if why:
            raise RuntimeError(f"--device gpu: no usable GPU here ({why})")
    if kind == "multiworker":
        return distribute.MultiWorkerMirroredStrategy(device="cpu" if a.device == "cpu" else None)
    return distribute.MirroredStrategy(["cpu"] if a.device == "cpu" else None)


class _StepTimer(callbacks.Callback):
    def __init__(self, skip: int) -> None:
        super().__init__()
        self.skip, self.seen, self.times = skip, 0, []  # type: int, int, List[float]
        self._t0 = 0.0

    def on_train_batch_begin(self, batch, logs=None) -> None:
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None) -> None:
        self.seen += 1
        if self.seen > self.skip:
            self.times.append(time.perf_counter() - self._t0)


def main(a) -> int:
    strategy = make_strategy(a)
    chief = strategy.is_chief
    if strategy.multi_process:
        # One line per rank, for the job log: where it runs and on how many threads, so that a
        # binding that left ranks sharing cores (or a rank with fewer threads than CPUs) shows.
        print(f"rank {strategy.worker_index} of {strategy.num_workers} on {os.uname().nodename}: "
              f"{threads.describe()}, CPUs {_cpu_list()}", flush=True)
    if chief:
        print(f"{strategy!r}: global batch {a.batch_size}, {a.batch_size // strategy.num_replicas_in_sync} per replica")
        os.makedirs(a.out, exist_ok=True)
    if a.data:
        h5 = a.data
    else:
        h5 = tutorial_data.hdf5_path(a.synthetic, a.train_rows, a.seed, a.data_dir)
        if chief and not os.path.exists(h5):
            tutorial_data.prepare_data(a)  # writes the file the other ranks then read
    if strategy.multi_process:
        strategy.group.barrier()
    with strategy.scope():
        model = applications.tutorial_cnn(seed=a.seed)
        model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    timer = _StepTimer(a.warmup)
    cbs = [timer, callbacks.CSVLogger(os.path.join(a.out, "training_log.csv"))]
    if a.backup:
        cbs.append(callbacks.BackupAndRestore(a.backup))
    with data.HDF5Dataset(h5, x="x_train", y="y_train", batch_size=a.batch_size, shuffle=True, seed=a.seed) as ds:
        model.fit(ds, epochs=a.epochs, callbacks=cbs, verbose=2 if chief else 0)
    if chief:
        model.save(os.path.join(a.out, "model.h5"))
    if chief and timer.times:
        s = run_records.step_stats(timer.times, a.batch_size)
        print(f"{strategy.num_replicas_in_sync} replica(s): {s['mean_speed']:.0f} img/s +/- "
              f"{s['speed_uncertainty']:.0f} (jitter {s['speed_jitter']:.0f}), "
              f"{1e3 * s['mean_time_per_step']:.1f} ms/step")
        if a.csv:
            run_records.append_csv(a.csv, {"date": time.strftime("%Y-%m-%d %H:%M:%S"),
                                     "machine": run_records.machine_description(),
                                     "device": ",".join(strategy.local_devices), "mode": "dist-train",
                                     "threads": "", "label": a.label or "", **s, "gflops": "", "peak_gflops": "",
                                     "percent_of_peak": "", "replicas": strategy.num_replicas_in_sync})
    return 0
