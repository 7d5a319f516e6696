"""Data-parallel scaling: measured on this machine's CPUs, modelled for GPUs and nodes (issue 10).

    python bench/bench_distribute.py                  # the CPU comparison + the model, one table
    python bench/bench_distribute.py --model-only     # just the predicted GPU/node speedups
    python bench/bench_distribute.py --csv results/dist.csv --label mynode
    python bench/bench_distribute.py --bytes          # bytes read per rank per epoch, N = 1, 2, 4

Measured (the tutorial CNN, global batch 256, synthetic data, same run):
    1 rank  x 1 thread      the baseline
    1 rank  x 2 threads     the same cores used by threads
    2 ranks x 1 thread      MultiWorkerMirroredStrategy under `mpirun -np 2` (each rank 128 rows)
targets: 2x1 / 1x1 >= 1.8 and 2x1 vs 1x2 >= 0.95. The configurations run interleaved, --rounds
times in turn (1x1, 1x2, 2x1, 1x1, ...), so that a noisy neighbour slows all of them alike; each
reports the median time per step over its rounds' steps, the interquartile range (its
uncertainty) and max/median (jitter). --heartbeat-ab adds 2 ranks with the heartbeat off
(HPCNN_DIST_HEARTBEAT=0): what the lost-rank detection costs a step. 2 ranks are skipped, with the
reason, where mpirun or an MPI build is missing.

Bytes (--bytes, issue 25): an HDF5 file it writes itself (--bytes-rows synthetic 32x32x3 uint8
images, gzip, chunks of --bytes-chunk-rows rows), streamed under --bytes-budget (the file does not
fit), read for two epochs by N = 1, 2, 4 ranks (`mpirun -np N --oversubscribe`, each rank its share
of every global batch of --batch rows, as fit reads it) with each shuffle ('chunk_groups', 'rows'):
per rank, the bytes read from the file (compressed chunks) and inflated in the second epoch (its
counters after it, minus those after the first; each epoch's end warms up the next one's first
windows, so this is one steady epoch), against the file's size. The issue's target: at most
1.2/N of the file per rank for chunk groups.

Modelled (a ring allreduce over all GPUs at the slowest link's bandwidth; NCCL's hierarchical
rings over NVLink inside a node do better, so node figures are pessimistic): the bytes a step allreduces (every trainable gradient, float32) for the tutorial CNN and
DeepMNIST, a ring allreduce's time 2 (N-1)/N * bytes / bandwidth + latency per collective over
NVLink, PCIe and InfiniBand, against a GPU step time (measured with --gpu-step-ms, else an
estimate): the predicted speedup at 1/2/4/8 GPUs and 2/4 nodes, and the batch per GPU below which
communication outweighs compute (the efficiency drops under 80 %).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------- one measured configuration
def worker(args: argparse.Namespace) -> None:
    import hpcnn
    hpcnn.set_num_threads(args.threads)
    multi = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1"))) > 1
    strategy = hpcnn.distribute.MultiWorkerMirroredStrategy(device="cpu") if multi else None
    rng = np.random.default_rng(0)
    x = rng.random((args.batch, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, args.batch).astype(np.int32)
    if strategy is not None:
        with strategy.scope():
            model = hpcnn.applications.tutorial_cnn(seed=1)
            model.compile("adam", "sparse_categorical_crossentropy")
    else:
        model = hpcnn.applications.tutorial_cnn(seed=1)
        model.compile("adam", "sparse_categorical_crossentropy")
    times = []
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        model.train_on_batch(x, y)
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    if strategy is None or strategy.is_chief:
        t = np.array(times)
        q1, med, q3 = np.percentile(t, [25, 50, 75])
        collectives = model.core.step_collectives
        print(json.dumps({"times": times, "median_s": med, "iqr_s": q3 - q1, "jitter": float(t.max() / med),
                          "ranks": strategy.num_replicas_in_sync if strategy else 1, "threads": args.threads,
                          "collectives": collectives[0], "bytes": collectives[1]}))


def bytes_worker(args: argparse.Namespace) -> None:
    """One rank's reads of two epochs of --bytes-file; prints its counters (every rank)."""
    import hpcnn
    hpcnn.set_num_threads(args.threads)
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
    ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
    ds = hpcnn.data.HDF5Dataset(args.bytes_file, batch_size=args.batch, shuffle=args.bytes_shuffle, seed=0,
                                memory_budget=args.bytes_budget)
    after = []
    for epoch in range(2):
        for _ in ds.model_batches(epoch, "cpu", shard=(rank, ranks) if ranks > 1 else None):
            pass
        ds.settle()  # the next epoch's warm-up (started by the last batch) finishes
        after.append(dict(ds.stats))
    print(json.dumps({"rank": rank, "ranks": ranks, "shuffle": ds.shuffle_mode, "in_memory": ds.in_memory,
                      "lanes": after[1]["lanes"], "window_blocks": after[1]["window_blocks"],
                      "num_blocks": after[1]["num_blocks"],
                      "blocks": after[1]["blocks_read"] - after[0]["blocks_read"],
                      "read": after[1]["bytes_read"] - after[0]["bytes_read"],
                      "inflated": after[1]["bytes_inflated"] - after[0]["bytes_inflated"],
                      "first_epoch_read": after[0]["bytes_read"], "peak_cached": after[1]["peak_cached_bytes"]}))


def bytes_table(args: argparse.Namespace) -> None:
    import hpcnn
    if not hpcnn.build_info().get("mpi") or shutil.which("mpirun") is None:
        raise SystemExit("--bytes needs an MPI build and mpirun on PATH")
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bytes.h5")
        rng = np.random.default_rng(0)
        # Smooth gradients plus 2 bits of noise (gzip keeps ~93 %; the figures are ratios to the file).
        base = (np.arange(32)[:, None] * 4 + np.arange(32)[None, :] * 3).astype(np.int32)
        x = np.empty((args.bytes_rows, 32, 32, 3), np.uint8)
        for i in range(0, args.bytes_rows, 1000):
            n = min(1000, args.bytes_rows - i)
            noise = rng.integers(0, 4, (n, 32, 32, 3))
            x[i:i + n] = ((base[None, :, :, None] + rng.integers(0, 128, (n, 1, 1, 3)) + noise) % 256).astype(np.uint8)
        y = rng.integers(0, 10, args.bytes_rows).astype(np.uint8)
        hpcnn.data.write_hdf5(path, {"x_train": x, "y_train": y}, chunk_rows=args.bytes_chunk_rows)
        size = os.path.getsize(path)
        raw = x.nbytes
        print(f"Bytes read per rank per epoch (issue 25): {args.bytes_rows} rows of 32x32x3 uint8, chunks of "
              f"{args.bytes_chunk_rows} rows, file {size / 2**20:.1f} MiB ({raw / 2**20:.1f} MiB of rows inflated), "
              f"memory_budget {args.bytes_budget / 2**20:.0f} MiB (streamed), global batch {args.batch}, "
              f"second of two epochs, {os.cpu_count()} CPUs visible")
        print(f"{'shuffle':<14}{'N':>3}{'lanes':>7}{'window':>8}{'read MiB/rank (max)':>22}{'read / file':>13}"
              f"{'x N':>7}{'inflated MiB/rank':>19}{'blocks/rank':>13}")
        for shuffle in ("chunk_groups", "rows"):
            for ranks in (1, 2, 4):
                cmd = [sys.executable, os.path.abspath(__file__), "--bytes-worker", "--threads", str(args.threads),
                       "--batch", str(args.batch), "--bytes-file", path, "--bytes-shuffle", shuffle,
                       "--bytes-budget", str(args.bytes_budget)]
                env = dict(os.environ)
                if ranks > 1:
                    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,tcp",
                               OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo")
                    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none"] + cmd
                p = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if p.returncode != 0:
                    raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
                rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
                assert len(rows) == ranks and not any(r["in_memory"] for r in rows), rows
                read = max(r["read"] for r in rows)
                print(f"{shuffle:<14}{ranks:>3}{rows[0]['lanes']:>7}{rows[0]['window_blocks']:>8}"
                      f"{read / 2**20:>22.2f}{read / size:>13.3f}{read * ranks / size:>7.2f}"
                      f"{max(r['inflated'] for r in rows) / 2**20:>19.2f}"
                      f"{max(r['blocks'] for r in rows):>8} of {rows[0]['num_blocks']}", flush=True)


def run_config(ranks: int, threads: int, args: argparse.Namespace, heartbeat: bool = True) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--threads", str(threads), "--batch",
           str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    env = dict(os.environ)
    if not heartbeat:
        env["HPCNN_DIST_HEARTBEAT"] = "0"
    if ranks > 1:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------- the model for GPUs and nodes
LINKS = {  # (bandwidth in GB/s per direction, latency per collective in microseconds)
    "NVLink (A100, 1 node)": (200.0, 15.0),
    "PCIe 4.0 x16 (1 node)": (20.0, 25.0),
    "InfiniBand HDR 200 Gb/s (nodes)": (22.0, 40.0),
    "InfiniBand EDR 100 Gb/s (nodes)": (11.0, 40.0),
}


def allreduce_ms(nbytes: float, gpus: int, link: tuple, collectives: int) -> float:
    bw, lat_us = link
    if gpus <= 1:
        return 0.0
    return 2.0 * (gpus - 1) / gpus * nbytes / (bw * 1e9) * 1e3 + collectives * lat_us / 1e3


def model_rows(step_ms_per_image: dict, batch_per_gpu: int) -> list:
    import hpcnn
    rows = []
    for name, build in (("tutorial_cnn", hpcnn.applications.tutorial_cnn), ("deep_mnist", hpcnn.applications.deep_mnist)):
        m = build(seed=1)
        nbytes = 4 * m.count_params()
        collectives = max(1, -(-nbytes // (2 << 20)))  # the default 2 MiB buckets
        compute = step_ms_per_image[name] * batch_per_gpu
        for link_name, link in LINKS.items():
            nodes = "nodes" in link_name
            for gpus in ((2, 4) if nodes else (1, 2, 4, 8)):
                total = gpus * 4 if nodes else gpus  # nodes of 4 GPUs
                comm = allreduce_ms(nbytes, total, link, collectives)
                # Buckets overlap the backward pass (about 2/3 of a step); what does not fit is exposed.
                exposed = max(0.0, comm - 0.66 * compute) if collectives > 1 else comm
                speedup = total * compute / (compute + exposed)
                # The batch per GPU below which efficiency drops under 80 %: exposed <= compute / 4,
                # i.e. compute >= comm / 0.91 with overlap (buckets), >= 4 x comm without (one bucket).
                need = comm / 0.91 if collectives > 1 else 4 * comm
                b80 = int(np.ceil(need / step_ms_per_image[name])) if total > 1 else 0
                rows.append({"model": name, "MB_per_step": round(nbytes / 1e6, 2), "link": link_name,
                             "gpus": total, "step_ms": round(compute + exposed, 3),
                             "allreduce_ms": round(comm, 3), "speedup": round(speedup, 2),
                             "efficiency": round(speedup / total, 3), "batch_per_gpu_for_80pct": b80})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=256, help="the global batch (default 256)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1, help="runs of each configuration, interleaved (default 1)")
    ap.add_argument("--heartbeat-ab", action="store_true", help="also 2 ranks with the heartbeat off")
    ap.add_argument("--model-only", action="store_true", help="only the predicted GPU/node speedups")
    ap.add_argument("--gpu-step-ms", type=float, default=None,
                    help="measured GPU step time of the tutorial CNN at --gpu-batch images (else an estimate)")
    ap.add_argument("--gpu-batch", type=int, default=256)
    ap.add_argument("--csv", default=None, help="append the measured rows here")
    ap.add_argument("--label", default=os.environ.get("SLURM_JOB_PARTITION", "local"))
    ap.add_argument("--bytes", action="store_true", help="bytes read per rank per epoch, N = 1, 2, 4 (issue 25)")
    ap.add_argument("--bytes-rows", type=int, default=20000)
    ap.add_argument("--bytes-chunk-rows", type=int, default=32, help="rows per chunk (32: 96 KiB)")
    ap.add_argument("--bytes-budget", type=int, default=24 << 20, help="memory_budget: below the file's size")
    ap.add_argument("--bytes-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bytes-file", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--bytes-shuffle", default="chunk_groups", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.bytes_worker:
        return bytes_worker(args)
    if args.bytes:
        return bytes_table(args)

    if not args.model_only:
        import hpcnn
        why = ""
        if not hpcnn.build_info().get("mpi"):
            why = "this build has no MPI"
        elif shutil.which("mpirun") is None:
            why = "no mpirun on PATH"
        configs = [(1, 1, True), (1, 2, True)] + ([(2, 1, True)] if not why else [])
        if args.heartbeat_ab and not why:
            configs.append((2, 1, False))
        res = {}
        print(f"CPU, tutorial CNN, global batch {args.batch}, {args.steps} steps after {args.warmup} warm-up, "
              f"{args.rounds} interleaved round(s), {os.cpu_count()} CPUs visible")
        runs: dict = {c: [] for c in configs}
        for _ in range(args.rounds):
            for c in configs:
                runs[c].append(run_config(c[0], c[1], args, c[2]))
        print(f"{'config':<24}{'ms/step':>10}{'IQR ms':>10}{'jitter':>8}{'img/s':>10}{'collectives':>13}")
        for ranks, threads, heartbeat in configs:
            t = np.concatenate([r["times"] for r in runs[(ranks, threads, heartbeat)]])
            q1, med, q3 = np.percentile(t, [25, 50, 75])
            r = res[(ranks, threads) if heartbeat else "no heartbeat"] = dict(
                runs[(ranks, threads, heartbeat)][-1], median_s=med, iqr_s=q3 - q1, jitter=float(t.max() / med))
            name = f"{ranks} rank x {threads} thr" + ("" if heartbeat else ", no hb")
            print(name.ljust(24) + f"{r['median_s'] * 1e3:>10.1f}{r['iqr_s'] * 1e3:>10.1f}"
                  f"{r['jitter']:>8.2f}{args.batch / r['median_s']:>10.0f}{r['collectives']:>13}")
            if args.csv:
                new = not os.path.exists(args.csv)
                os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
                with open(args.csv, "a", newline="") as f:
                    w = csv.writer(f)
                    if new:
                        w.writerow(["label", "kind", "replicas", "threads", "batch", "ms_per_step", "iqr_ms",
                                    "jitter", "images_per_second"])
                    w.writerow([args.label if heartbeat else f"{args.label}-no-heartbeat", "cpu-dist", ranks, threads, args.batch, r["median_s"] * 1e3,
                                r["iqr_s"] * 1e3, r["jitter"], args.batch / r["median_s"]])
        if why:
            print(f"2 ranks x 1 thread: skipped ({why})")
        else:
            base, thr, dist = res[(1, 1)]["median_s"], res[(1, 2)]["median_s"], res[(2, 1)]["median_s"]
            print(f"2 ranks x 1 thread vs 1 x 1: {base / dist:.2f}x (target >= 1.8); "
                  f"vs 1 rank x 2 threads: {thr / dist:.2f}x (target >= 0.95)")
            if "no heartbeat" in res:
                print(f"2 ranks, heartbeat on vs off: {res['no heartbeat']['median_s'] / dist:.3f}x the speed")
        print()

    # The GPU model. Per-image step times: --gpu-step-ms, else an estimate for a V100-class GPU
    # (tutorial CNN ~ 2.0 us/image of forward+backward at batch 256; DeepMNIST ~ 1.2 us/image).
    per_image = {"tutorial_cnn": (args.gpu_step_ms / args.gpu_batch) if args.gpu_step_ms else 0.0020,
                 "deep_mnist": 0.0012}
    print(f"Modelled data-parallel GPU scaling (batch {args.gpu_batch} per GPU; step ms per image "
          f"{per_image}; {'measured' if args.gpu_step_ms else 'estimated'})")
    print(f"{'model':<14}{'MB':>6}  {'link':<34}{'GPUs':>5}{'step ms':>9}{'allred ms':>10}{'speedup':>9}"
          f"{'eff':>6}{'b/GPU@80%':>10}")
    for r in model_rows(per_image, args.gpu_batch):
        print(f"{r['model']:<14}{r['MB_per_step']:>6}  {r['link']:<34}{r['gpus']:>5}{r['step_ms']:>9}"
              f"{r['allreduce_ms']:>10}{r['speedup']:>9}{r['efficiency']:>6}{r['batch_per_gpu_for_80pct']:>10}")


if __name__ == "__main__":
    main()
