#!/usr/bin/env python3
"""Inference speed of hpcnn against the deployment engines running hpcnn's own exported file:
ONNX Runtime and OpenVINO on the ONNX file that ``model.export`` writes, and PyTorch eager (the
same architecture) for reference, on the CPU with the same thread count for every engine, in one
run whose workers take turns call by call (the ``--interleave steps`` harness of bench_train.py:
hpcnn.bench.ServedWorker, one process per engine and model kept for the whole run).

    python -m bench.bench_engines --torch-python /path/to/peers/bin/python
    python -m bench.bench_engines --baseline-python main=/path/to/old/bin/python   # an older hpcnn beside
    python -m bench.bench_engines --models tutorial --rounds 1 --calls 2 --large-calls 1 --batches tutorial=8,1

Per model and batch size (tutorial CNN: 250 and 1; ResNet-20: 128 and 1; --models resnet50 or
mobilenetv2, hpcnn.keras.applications' backbones at 224x224 with random weights: 32 and 1;
--batches), every
engine's calls (engine_workers.py says what each calls and with which settings): hpcnn's
``model.predict(x, batch_size=B)`` and, at batch 1, ``model(x)`` (what a serving loop calls); ONNX
Runtime's ``InferenceSession.run``; OpenVINO's synchronous ``infer`` (PERFORMANCE_HINT --hint,
LATENCY by default, INFERENCE_NUM_THREADS, f32); PyTorch's ``net(x)`` under no_grad. Each round
every configuration's engines run --calls calls each (--large-calls at the large batch), in an
order that alternates from turn to turn, SETTLE_SECONDS apart; the first round after more warm-up
calls. Printed: the median call (ms), its spread (10th-90th percentile of all calls), images/s at
the median, and the ratio hpcnn / fastest engine (the fastest of ONNX Runtime and OpenVINO's median
time over hpcnn's: above 1 hpcnn is faster), also paired (the median over the turns of that ratio
within one turn). The engines' versions, threads and settings are printed with the table.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

import hpcnn
from hpcnn import bench, bench_workers

WORKER_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engine_workers.py")
DEFAULT_BATCHES = {"tutorial": (250, 1), "resnet20": (128, 1), "resnet50": (32, 1), "mobilenetv2": (32, 1)}
ENGINES = ("hpcnn", "onnxruntime", "openvino", "torch")
DEPLOY_ENGINES = ("onnxruntime", "openvino")  # the target: hpcnn at least as fast as the faster of these
LABEL = {"hpcnn": "hpcnn", "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO", "torch": "PyTorch eager"}
CALL = {"predict": "model.predict(x)", "call": "model(x)", "run": "session run / infer"}
MODEL_NAME = {"tutorial": "tutorial CNN", "resnet20": "ResNet-20", "resnet50": "ResNet50 224",
              "mobilenetv2": "MobileNetV2 224"}


def ways_of(engine: str, batch: int) -> List[str]:
    """The ways an engine is timed at `batch` (engine_workers.py)."""
    if engine == "hpcnn":
        return [f"predict-{batch}"] + ([f"call-{batch}"] if batch == 1 else [])
    return [f"{'call' if engine == 'torch' else 'run'}-{batch}"]


def importable(python: str, module: str) -> bool:
    """Whether `python` imports `module` (checked in a child, so that no engine loads here)."""
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(round(q / 100 * (len(s) - 1)))))]


def engine_workers():
    """bench/engine_workers.py as a module (it is the workers' plain file; its models are built here too)."""
    spec = importlib.util.spec_from_file_location("bench_engine_workers", WORKER_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def export_models(models: Sequence[str], folder: str) -> Dict[str, str]:
    """{model: the ONNX file hpcnn exports of it}: the model the hpcnn worker builds (seed 0; the
    backbones: the same architecture, random weights)."""
    out = {}
    workers = engine_workers()
    for model in models:
        m = workers.hpcnn_model(bench_workers, model)
        out[model] = os.path.join(folder, f"{model}.onnx")
        m.export(out[model], format="onnx", verbose=False)
    return out


def run(models: Sequence[str], batches: Dict[str, Sequence[int]], engines: Dict[str, Tuple[str, str]],
        onnx: Dict[str, str], threads: int, rounds: int, calls: int, large_calls: int, hint: str,
        log=print) -> Tuple[Dict[Tuple[str, int, str, str], Dict[str, object]], Dict[str, Dict[str, str]]]:
    """The interleaved measurement. `engines`: {label: (python, engine)}. Returns ({(model, batch,
    label, way): {"seconds": [...], "turns": [per-turn median, ...]}}, {label: versions})."""
    workers: Dict[Tuple[str, str], bench.ServedWorker] = {}
    harness = os.path.abspath(bench_workers.__file__)
    versions: Dict[str, Dict[str, str]] = {}
    try:
        for model in models:
            bs = ",".join(str(b) for b in batches[model])
            for label, (py, engine) in engines.items():
                w = bench.ServedWorker(py, engine, max(batches[model]), threads, model, worker_file=WORKER_FILE,
                                       extra_args=["--harness", harness, "--onnx", onnx[model], "--batches", bs,
                                                   "--hint", hint])
                workers[(model, label)] = w
                versions[label] = w.versions
        res: Dict[Tuple[str, int, str, str], Dict[str, List[float]]] = {}
        configs = [(m, b) for m in models for b in batches[m]]
        for r in range(rounds):
            t0 = time.perf_counter()
            for k, (model, b) in enumerate(configs):
                entries = [(label, way) for label, (_, engine) in engines.items() for way in ways_of(engine, b)]
                if (r + k) % 2:
                    entries.reverse()  # each goes first as often
                count = calls if b == 1 else large_calls
                warm = (20 if b == 1 else 3) if r == 0 else (5 if b == 1 else 1)
                for label, way in entries:
                    time.sleep(bench.SETTLE_SECONDS)  # the previous engine's threads stop spinning
                    secs = workers[(model, label)].run(way, count, warm)
                    e = res.setdefault((model, b, label, way), {"seconds": [], "turns": []})
                    e["seconds"].extend(secs)
                    e["turns"].append(statistics.median(secs))
            log(f"# round {r + 1}/{rounds}: {time.perf_counter() - t0:.1f} s")
    finally:
        for w in workers.values():
            w.close()
    return res, versions


def rows_of(res, engines: Dict[str, Tuple[str, str]]) -> List[Dict[str, object]]:
    """One row per (model, batch, engine, way): median, p10, p90 (ms), img/s, and for hpcnn's rows
    the ratio to the fastest deployment engine (its median time over hpcnn's) and its paired form."""
    rows = []
    configs = sorted({(m, b) for m, b, _, _ in res}, key=lambda mb: (mb[0] != "tutorial", -mb[1]))
    for model, b in configs:
        here = {(label, way): e for (m, bb, label, way), e in res.items() if (m, bb) == (model, b)}
        deploy = [(label, way) for (label, way) in here if engines[label][1] in DEPLOY_ENGINES]
        fastest = min(deploy, key=lambda lw: statistics.median(here[lw]["seconds"])) if deploy else None
        order = list(engines)
        for (label, way), e in sorted(here.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1])):
            med = statistics.median(e["seconds"])
            row = {"model": model, "batch": b, "engine": label, "way": way.split("-")[0], "calls": len(e["seconds"]),
                   "median_ms": 1e3 * med, "p10_ms": 1e3 * percentile(e["seconds"], 10),
                   "p90_ms": 1e3 * percentile(e["seconds"], 90), "img_s": b / med,
                   "fastest_engine": fastest[0] if fastest else "", "vs_fastest": float("nan"),
                   "vs_fastest_paired": float("nan")}
            if fastest and engines[label][1] == "hpcnn":
                f = here[fastest]
                row["vs_fastest"] = statistics.median(f["seconds"]) / med
                row["vs_fastest_paired"] = statistics.median(ft / ht for ft, ht in zip(f["turns"], e["turns"]))
            rows.append(row)
    return rows


def format_rows(rows: List[Dict[str, object]]) -> str:
    """The table: one line per engine and way, grouped by model and batch."""
    lines = [f"{'model':<14}{'batch':>6}  {'engine':<16}{'call':<20}{'median ms':>10}{'p10-p90 ms':>16}"
             f"{'img/s':>9}{'fastest/it':>12}{'paired':>8}"]
    for r in rows:
        ratio = "" if r["vs_fastest"] != r["vs_fastest"] else f"{r['vs_fastest']:.2f}x"
        paired = "" if r["vs_fastest_paired"] != r["vs_fastest_paired"] else f"{r['vs_fastest_paired']:.2f}x"
        lines.append(f"{MODEL_NAME.get(r['model'], r['model']):<14}{r['batch']:>6}  {r['engine']:<16}"
                     f"{CALL.get(r['way'], r['way']):<20}{r['median_ms']:>10.3f}"
                     f"{r['p10_ms']:>8.3f}-{r['p90_ms']:<7.3f}{r['img_s']:>9.0f}{ratio:>12}{paired:>8}")
    return "\n".join(lines)


def parse_batches(specs: Sequence[str], models: Sequence[str]) -> Dict[str, Tuple[int, ...]]:
    out = {m: DEFAULT_BATCHES[m] for m in models}
    for spec in specs:
        model, _, sizes = spec.partition("=")
        if model not in DEFAULT_BATCHES or not sizes:
            raise ValueError(f"--batches {spec!r}: expected MODEL=B[,B...] with MODEL one of {sorted(DEFAULT_BATCHES)}")
        out[model] = tuple(int(s) for s in sizes.split(","))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="tutorial,resnet20")
    p.add_argument("--batches", action="append", default=[], metavar="MODEL=B[,B...]",
                   help="batch sizes of a model (default tutorial=250,1 and resnet20=128,1)")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--threads", type=int, default=2, help="threads of every engine (default 2)")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--calls", type=int, default=40, help="timed calls per engine and turn at batch 1")
    p.add_argument("--large-calls", type=int, default=3, help="timed calls per engine and turn at the larger batches")
    p.add_argument("--hint", default="LATENCY", choices=("LATENCY", "THROUGHPUT"), help="OpenVINO's PERFORMANCE_HINT")
    p.add_argument("--python", default=sys.executable, help="interpreter of hpcnn, ONNX Runtime and OpenVINO")
    p.add_argument("--torch-python", default=None, help="interpreter that has PyTorch (default --python)")
    p.add_argument("--baseline-python", action="append", default=[], metavar="[LABEL=]PYTHON",
                   help="also time the hpcnn of this interpreter (an older build) under LABEL; repeatable")
    p.add_argument("--csv", default=None, help="append one row per engine, way, model and batch to this CSV")
    a = p.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    unknown = [m for m in models if m not in DEFAULT_BATCHES] + [e for e in a.engines.split(",") if e not in ENGINES]
    if unknown:
        p.error(f"unknown models or engines {unknown}; models {sorted(DEFAULT_BATCHES)}, engines {list(ENGINES)}")
    batches = parse_batches(a.batches, models)
    engines: Dict[str, Tuple[str, str]] = {}
    for e in a.engines.split(","):
        py = (a.torch_python or a.python) if e == "torch" else a.python
        if importable(py, e):
            engines[LABEL[e]] = (py, e)
        else:
            print(f"# {e}: not importable by {py}; skipped")
    for i, spec in enumerate(a.baseline_python):
        label, _, py = spec.rpartition("=")
        engines[label or f"hpcnn-baseline{i + 1}"] = (py, "hpcnn")
    print(f"# machine: {bench.machine_description()}")
    print(f"# threads: {a.threads} for every engine; {a.rounds} rounds, {a.calls} calls per turn at batch 1, "
          f"{a.large_calls} at the larger batches; workers taking turns, {bench.SETTLE_SECONDS} s apart")
    with tempfile.TemporaryDirectory() as folder:
        onnx = export_models(models, folder)
        res, versions = run(models, batches, engines, onnx, a.threads, a.rounds, a.calls, a.large_calls, a.hint)
    print("# versions: " + "; ".join(f"{label}: " + ", ".join(f"{k} {v}" for k, v in v.items())
                                     for label, v in versions.items()))
    rows = rows_of(res, engines)
    print()
    print(format_rows(rows))
    print("# fastest/it: the faster deployment engine's (ONNX Runtime, OpenVINO) median time over hpcnn's (above 1: "
          "hpcnn is faster); paired: the median over the turns of that ratio within one turn")
    if a.csv:
        for r in rows:
            bench.append_csv(a.csv, {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": bench.machine_description(),
                                     "threads": a.threads, "hint": a.hint,
                                     "versions": "; ".join(f"{k} {v}" for k, v in versions[r["engine"]].items()), **r})
    print(f"# hpcnn build: {hpcnn.build_info()['blas_config']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
