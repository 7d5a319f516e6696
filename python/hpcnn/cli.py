"""hpcnn from the command line.

    hpcnn info                     build and device information (paste it into bug reports)
    hpcnn devices                  the CPUs and GPUs this process can use (and why no GPU, if none)
    hpcnn bench [--peers]          tutorial CNN: time per step, images/s, +/-, jitter, % of FP32 peak
                                   (--peers: PyTorch and TensorFlow in the same run, when importable)
    hpcnn collect OUT IN...        merge benchmark CSVs from many jobs (and plot them)
    hpcnn tutorial [...]           the CIFAR-10 CPU-vs-GPU tutorial end to end
    hpcnn dist-train [...]         the tutorial CNN data-parallel (srun/mpirun ranks, several GPUs), timed
    hpcnn convert ...              datasets to the tutorial's HDF5 layout (--download: fetch them)
    hpcnn export MODEL OUT         a saved model (hpcnn's or Keras' .keras, .h5) as an ONNX file
                                   (OUT.onnx) or OpenVINO IR (OUT.xml), for ONNX Runtime and OpenVINO
    hpcnn notebook run 01 [...]    a notebook executed headless (sbatch), with parameters; also
                                   `hpcnn notebook list`, `hpcnn notebook copy 01 [DIR]`

`hpcnn COMMAND --help` describes each command.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List, Optional


def _cmd_info(a) -> int:
    import hpcnn
    info = hpcnn.build_info()
    info["threads"] = hpcnn.threads.describe()
    info["gpus"] = [d.details | {"name": d.name} for d in hpcnn.list_physical_devices("GPU")]
    info["gpu_unavailable_reason"] = hpcnn.gpu_unavailable_reason()
    print(json.dumps(info, indent=2, default=str))
    return 0


def _cmd_devices(a) -> int:
    import hpcnn
    for d in hpcnn.list_physical_devices():
        details = d.details
        if d.device_type == "GPU":  # asked for here: a context on each GPU is fine for this command
            details = details | {"memory_free": hpcnn.devices.gpu_memory_free(d)}
        print(d.name, d.device_type, json.dumps(details, default=str))
    why = hpcnn.gpu_unavailable_reason()
    if why:
        print(f"no GPU: {why}")
    return 0


def _cmd_bench(a) -> int:
    import hpcnn
    from hpcnn import bench
    if a.threads:
        hpcnn.set_num_threads(a.threads)
    dev = hpcnn.devices.normalize(a.device)
    if a.peers and dev != "cpu":
        raise ValueError("--peers compares CPU runs; leave out --device (or use --device cpu)")
    threads = hpcnn.get_num_threads()
    peak = bench.peak_gflops() if dev == "cpu" else None
    print(f"# {bench.machine_description()}; device {dev}; {hpcnn.threads.describe()}; batch {a.batch}")
    if dev == "cpu":
        print(f"# FP32 peak of {threads} threads, measured now (FMA loop): "
              + (f"{peak:.1f} GFLOP/s" if peak else "not measured (this build lacks the probe)"))
    if a.peers:
        return _bench_peers(a, threads, peak)
    strategy, replicas, chief = None, 1, True
    if a.strategy == "mirrored":  # every GPU of this process (or the CPU)
        strategy = hpcnn.distribute.MirroredStrategy()
    elif a.strategy == "multiworker":  # one rank per GPU (or CPU rank), started by srun / mpirun
        strategy = hpcnn.distribute.MultiWorkerMirroredStrategy(device="cpu" if dev == "cpu" else None)
    if strategy is not None:
        replicas, chief = strategy.num_replicas_in_sync, strategy.is_chief
        dev = ",".join(strategy.local_devices)
        if chief:
            print(f"# {strategy!r}: global batch {a.batch}, {a.batch // replicas} per replica")
    train, infer = bench.tutorial_cnn_step_times(dev, a.batch, a.steps, a.warmup, strategy)
    if not chief:
        return 0  # the chief reports
    for mode, times, mflop in (("train", train, bench.TUTORIAL_TRAIN_MFLOP), ("infer", infer, bench.TUTORIAL_FWD_MFLOP)):
        s = bench.step_stats(times, a.batch)
        gf = s["mean_speed"] * mflop / 1e3
        pct = f", {100 * gf / peak:.0f} % of FP32 peak" if peak else ""
        print(f"{mode}: {s['mean_speed']:.0f} img/s +/- {s['speed_uncertainty']:.0f} (jitter {s['speed_jitter']:.0f}), "
              f"{1e3 * s['mean_time_per_step']:.1f} ms/step, {gf:.1f} GFLOP/s{pct}")
        if a.csv:
            bench.append_csv(a.csv, {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": bench.machine_description(),
                                     "device": dev, "mode": mode, "threads": threads,
                                     "label": a.label or "", **s, "gflops": gf, "peak_gflops": peak or "",
                                     "percent_of_peak": 100 * gf / peak if peak else "",
                                     "replicas": replicas})  # last: older CSVs keep their columns
    if peak:
        print(f"# {bench.PEAK_NOTE}")
    return 0


def _bench_peers(a, threads: int, peak: Optional[float]) -> int:
    """hpcnn, PyTorch and TensorFlow on the same model in the same run (bench.compare)."""
    from hpcnn import bench
    present = ["hpcnn"]
    for f in ("torch", "tensorflow"):
        if bench.importable(sys.executable, f):
            present.append(f)
        else:
            print(f"# {bench.FRAMEWORK_LABEL[f]}: not importable by {sys.executable}; skipped "
                  f"(install it in this environment to compare)")
    print(f"# {a.rounds} interleaved rounds x {a.steps} steps (+{a.warmup} warm-up), each framework in its own "
          "process, random data in memory")
    rows = bench.comparison_rows(bench.compare(present, a.batch, a.steps, a.warmup, threads, a.rounds), peak)
    print(bench.format_comparison(rows))
    print(f"# {bench.PEAK_NOTE}")
    if a.csv:
        for r in rows:
            bench.append_csv(a.csv, {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": bench.machine_description(),
                                     "device": "cpu", "threads": threads, "label": a.label or "",
                                     "peak_gflops": peak or "", **r})
    return 0


def _cmd_collect(a) -> int:
    from hpcnn import bench
    n = bench.collect_csv(a.inputs, a.output)
    print(f"{n} rows -> {a.output}")
    if a.plot:
        from hpcnn import plot
        plot.benchmark(a.output, a.plot)
        print(f"plot -> {a.plot}")
    return 0


def _cmd_tutorial(a) -> int:
    from hpcnn import tutorial
    return tutorial.main(a)


def _cmd_convert(rest: List[str]) -> int:
    from hpcnn import convert
    return int(convert.main(rest) or 0)


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "convert":
        return _cmd_convert(argv[1:])
    from hpcnn import bench
    p = argparse.ArgumentParser(prog="hpcnn", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="build and device information").set_defaults(fn=_cmd_info)
    sub.add_parser("devices", help="list devices").set_defaults(fn=_cmd_devices)
    b = sub.add_parser("bench", help="tutorial CNN speed on this node",
                       description="The tutorial CNN's training and inference steps on random data in memory: "
                                   "images/s, +/- (standard error), jitter (robust spread), ms/step, GFLOP/s and "
                                   "% of this machine's FP32 peak measured in the same run. " + bench.PEAK_NOTE)
    b.add_argument("--device", default="cpu", help="cpu (default), gpu or gpu:N")
    b.add_argument("--batch", type=int, default=250)
    b.add_argument("--steps", type=int, default=20, help="timed steps (per round with --peers)")
    b.add_argument("--warmup", type=int, default=3)
    b.add_argument("--threads", type=int, default=None, help="CPU threads (default: see `hpcnn info`)")
    b.add_argument("--peers", action="store_true",
                   help="also time PyTorch and TensorFlow (those importable here) on the same model, "
                        "interleaved in the same run")
    b.add_argument("--rounds", type=int, default=2, help="with --peers: interleaved rounds (default 2)")
    b.add_argument("--csv", default=None, help="append the results to this CSV file")
    b.add_argument("--label", default=None, help="a free-form label for the CSV rows (partition, staging dir, ...)")
    b.add_argument("--strategy", choices=("none", "mirrored", "multiworker"), default="none",
                   help="data parallelism: mirrored (this process's GPUs), multiworker (one rank per GPU or CPU "
                        "rank, under srun/mpirun); --batch is then the global batch")
    b.set_defaults(fn=_cmd_bench)
    c = sub.add_parser("collect", help="merge benchmark CSVs")
    c.add_argument("output")
    c.add_argument("inputs", nargs="+")
    c.add_argument("--plot", default=None, help="also draw images/s per row into this PNG")
    c.set_defaults(fn=_cmd_collect)
    t = sub.add_parser("tutorial", help="the CIFAR-10 CPU-vs-GPU tutorial end to end")
    from hpcnn.tutorial import add_arguments
    add_arguments(t)
    t.set_defaults(fn=_cmd_tutorial)
    d = sub.add_parser("dist-train", help="the tutorial CNN trained data-parallel (srun / mpirun / several GPUs), "
                                          "timed into a CSV row")
    from hpcnn import dist_train
    dist_train.add_arguments(d)
    d.set_defaults(fn=dist_train.main)
    sub.add_parser("convert", help="convert datasets to HDF5 (see `hpcnn convert --help`)")
    e = sub.add_parser("export", help="a saved model as an ONNX file or OpenVINO IR")
    from hpcnn import export_command
    export_command.add_arguments(e)
    e.set_defaults(fn=export_command.main)
    n = sub.add_parser("notebook", help="run a notebook headless with parameters (sbatch), list or copy the "
                                        "shipped notebooks")
    from hpcnn import notebook_run
    notebook_run.add_arguments(n)
    n.set_defaults(fn=notebook_run.main)
    a = p.parse_args(argv)
    try:
        return int(a.fn(a) or 0)
    except (RuntimeError, ValueError, MemoryError, OSError, ImportError) as e:
        # A clear one-line error for job logs rather than a traceback (ImportError: an optional
        # package a command needs, the message says which and how to install it).
        print(f"hpcnn {a.cmd}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
