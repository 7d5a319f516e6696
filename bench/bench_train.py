#!/usr/bin/env python3
"""Training and inference speed of the tutorial CNN (or, --model resnet20, ResNet-20: see
bench/bench_resnet.py) on the CPU: hpcnn vs PyTorch vs TensorFlow/Keras, measured side by side in
one run (each framework in its own process so their thread pools and OpenMP runtimes never meet,
the processes taking turns step by step: --interleave). Every framework's trainable parameter count is printed and must agree.

    python bench/bench_train.py                      # hpcnn only, or whatever is importable
    python bench/bench_train.py --python /path/to/bench-venv/bin/python --rounds 3
    python bench/bench_train.py --frameworks hpcnn --baseline-python old=/path/to/old-venv/bin/python
                                   # this build against an older one, interleaved in one run

The same measurement as `hpcnn bench --peers` (one implementation: hpcnn.bench.compare), with
more rounds by default and a CSV row per framework and mode. Prints per framework: img/s (mean,
uncertainty, jitter), ms/step, GFLOP/s, % of the measured FP32 peak, and hpcnn's speed-up over it.
Random data (speed does not depend on pixel values). Also the latency of predicting a single
image (--latency calls per round, after warm-up; 0: not measured): hpcnn's model.predict(x) and
model(x), PyTorch's eager net(x) under no_grad (eval mode, channels_last), TensorFlow's
model.predict(x) and model(x, training=False); median and p90. Every framework's version (and the
oneDNN/BLAS it reports) is printed and written to the CSV.
"""
from __future__ import annotations

import argparse
import sys
import time


def main(argv=None, doc=None, model="tutorial", batch=250, sessions=None):
    """The benchmark with `model` and `batch` as defaults; `sessions`: the file of a bench script's
    own models (bench_photos.py's photos_sessions.py), for the workers and the models' rows here."""
    import hpcnn
    from hpcnn import bench
    if sessions:
        bench.add_sessions(sessions)  # before the options: its models are --model's choices
    p = argparse.ArgumentParser(description=doc or __doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=model, choices=sorted(bench.MODELS), help=f"default {model}")
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--steps", type=int, default=12, help="timed steps per round")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds over the frameworks")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: hpcnn's default)")
    p.add_argument("--frameworks", default="hpcnn,torch,tensorflow")
    p.add_argument("--python", default=sys.executable, help="interpreter for the workers (a bench venv)")
    p.add_argument("--hpcnn-python", default=None,
                   help="interpreter for hpcnn's worker when hpcnn is not installed in --python's environment "
                        "(default: --python)")
    p.add_argument("--latency", type=int, default=100,
                   help="single-image predictions timed per framework and round (0: none)")
    p.add_argument("--interleave", choices=("steps", "processes"), default="steps",
                   help="steps (default): one process per framework for the whole run, the frameworks taking "
                        "turns step by step (a drift of the machine's speed hits all alike; the table adds the "
                        "paired ratio, the median over the turns); processes: a fresh process per framework "
                        "and round, one after another (as before)")
    p.add_argument("--csv", default=None, help="append one row per framework and mode to this CSV")
    p.add_argument("--baseline-python", action="append", default=[], metavar="[LABEL=]PYTHON",
                   help="also time the hpcnn importable by this interpreter (an older build in its own venv), "
                        "interleaved with the others, under LABEL (default hpcnn-baseline); repeatable")
    a = p.parse_args(argv)
    threads = a.threads or hpcnn.get_num_threads()
    fws = [f for f in a.frameworks.split(",") if f]
    unknown = [f for f in fws if f not in bench.WORKERS]
    if unknown:
        p.error(f"unknown frameworks {unknown}; known: {sorted(bench.WORKERS)}")
    py_of = {f: (a.hpcnn_python or a.python) if f == "hpcnn" else a.python for f in fws}
    present = [f for f in fws if bench.importable(py_of[f], f)]
    for f in fws:
        if f not in present:
            print(f"# {f}: not importable by {py_of[f]}; skipped")
    peak = bench.peak_gflops(threads, 1.0)
    print(f"# model: {a.model}: {bench.MODELS[a.model][3]}")
    print(f"# machine: {bench.machine_description()}")
    print(f"# threads: {threads}; batch {a.batch}; {a.rounds} rounds x {a.steps} steps (+{a.warmup} warm-up); "
          + ("frameworks taking turns step by step" if a.interleave == "steps" else "a process per framework and round"))
    print(f"# FP32 peak (FMA loop, {threads} threads): " + (f"{peak:.1f} GFLOP/s" if peak else "not measured"))
    baselines = {}
    for i, spec in enumerate(a.baseline_python):
        label, _, py = spec.rpartition("=")
        baselines[label or ("hpcnn-baseline" if i == 0 else f"hpcnn-baseline{i + 1}")] = py
    results = bench.compare(present, a.batch, a.steps, a.warmup, threads, a.rounds, a.python, baselines, a.model,
                            a.hpcnn_python, a.latency, a.interleave, sessions)
    counts = {f: r["params"] for (f, mode), r in results.items() if mode == "train"}
    print("# trainable parameters: " + ", ".join(f"{bench.FRAMEWORK_LABEL.get(f, f)} {c:,}" if c is not None else
                                                   f"{bench.FRAMEWORK_LABEL.get(f, f)} ?" for f, c in counts.items()))
    bench.check_same_params(results)  # a ValueError (exit 1) when the models differ
    print(f"# versions: {bench.versions_line(results)}")
    rows = bench.comparison_rows(results, peak, a.model)
    print()
    print(bench.format_comparison(rows))
    print(f"# {bench.peak_note(a.model)}")
    lat = bench.latency_rows(results)
    if lat:
        print()
        print(f"# single-image latency, {a.latency} calls per round after {bench.LATENCY_WARMUP} untimed, {threads} threads")
        print(bench.format_latency(lat))
    if a.csv:
        for r in rows:  # every row the same columns: the framework's single-image latency beside its speeds
            ways = results.get((r["framework"], "latency"), {})
            for way in ("call", "predict"):
                for q in ("median_ms", "p90_ms"):
                    r[f"latency_{way}_{q}"] = ways[way][q] if way in ways else ""
            bench.append_csv(a.csv, {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": bench.machine_description(),
                                     "model": a.model, "threads": threads, "peak_gflops": peak or "", **r})
    print(f"# hpcnn build: {hpcnn.build_info()['blas_config']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
