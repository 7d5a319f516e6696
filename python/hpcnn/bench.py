"""Benchmark statistics as HPC benchmark reports give them (mean time per step, images/s, its
uncertainty and jitter: hpcnn.run_records, offered here too), CSV collection, and a model timed in hpcnn and, side by side, the same
model in PyTorch and TensorFlow (the peers): the tutorial CNN (``model='tutorial'``) or the CIFAR
ResNet-20 (``model='resnet20'``), or a bench script's own model from its sessions file
(``sessions=``: bench/photos_sessions.py's). Used by bench/ scripts and the ``hpcnn bench``
command. The models and the workers that time them, one process per framework, are
hpcnn.bench_workers'.

A worker process loads hpcnn/bench_workers.py as a plain file, without the hpcnn package, so the
framework it times runs alone (see there).
"""
from __future__ import annotations

import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from hpcnn import _core, bench_workers, blas_env
from hpcnn.run_records import append_csv, machine_description, step_stats  # noqa: F401 (bench's API)
from hpcnn.bench_workers import (IMPORT_NAME, LATENCY_WARMUP, MODELS, RESNET20_FWD_MFLOP,  # noqa: F401 (bench's API)
                                 RESNET20_TRAIN_MFLOP, add_sessions, TUTORIAL_FWD_MFLOP, TUTORIAL_TRAIN_MFLOP, WORKERS,
                                 model_step_times, resnet_cifar_mflop, time_steps, trainable_params_hpcnn,
                                 tutorial_cnn_step_times, worker_main)


def latency_stats(seconds: Iterable[float]) -> Dict[str, float]:
    """Single-call latency (what a notebook's predict of one image waits): the median and the 90th
    percentile (nearest rank) in milliseconds of the calls' wall-clock seconds."""
    times = sorted(float(t) for t in seconds)
    if not times:
        raise ValueError("latency_stats: no calls")
    return {"calls": len(times), "median_ms": 1e3 * statistics.median(times),
            "p90_ms": 1e3 * times[max(0, int(math.ceil(0.9 * len(times))) - 1)]}


#: What each worker's single-image ways of calling are (bench tables name them).
LATENCY_CALLS = {("hpcnn", "call"): "model(x)", ("hpcnn", "predict"): "model.predict(x)",
                 ("torch", "call"): "net(x), eval, no_grad (eager)",
                 ("tensorflow", "call"): "model(x, training=False)", ("tensorflow", "predict"): "model.predict(x)"}


def collect_csv(paths: Iterable[str], out: str) -> int:
    """Merge CSV files (e.g. one per Slurm job) into one; returns the number of rows written."""
    rows: List[Dict[str, str]] = []
    fields: List[str] = []
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                rows.append(r)
                fields += [k for k in r if k not in fields]
    tmp = out + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, out)
    return len(rows)


def peak_gflops(threads: Optional[int] = None, seconds: float = 0.5) -> Optional[float]:
    """The machine's FP32 FMA peak measured by the core (None if this build lacks the probe)."""
    probe = getattr(_core.ops, "measure_peak_gflops", None)
    if probe is None:
        return None
    return float(probe(threads or _core.get_num_threads(), seconds))


#: Why "% of peak" can pass 100 %: one line, printed under every table that shows it.
PEAK_NOTE = ("% of peak = GFLOP/s by the direct-convolution count (92.6 MFLOP per training image, 30.9 per "
             "inference image) / the FMA peak measured now; Winograd F(4x4,3x3) does the 3x3 convolutions with "
             "fewer multiplications, so hpcnn (and TensorFlow) can pass 100 %")


def peak_note(model: str = "tutorial") -> str:
    """PEAK_NOTE with `model`'s FLOP counts."""
    train, fwd = MODELS[model][:2]
    return PEAK_NOTE.replace("92.6 MFLOP per training image, 30.9", f"{train:.1f} MFLOP per training image, {fwd:.1f}")


FRAMEWORK_LABEL = {"hpcnn": "hpcnn", "torch": "PyTorch", "tensorflow": "TensorFlow"}

# Runs bench_workers.py's worker_main without importing the hpcnn package (see its docstring).
_WORKER_LAUNCHER = ("import importlib.util, sys; "
                    "spec = importlib.util.spec_from_file_location('hpcnn_bench_worker', sys.argv[1]); "
                    "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
                    "sys.exit(m.worker_main(sys.argv[2:]))")


def importable(python: str, framework: str) -> bool:
    """Whether `python` can import the framework (checked in a child: importing it here would
    load its runtime into this process)."""
    r = subprocess.run([python, "-c", f"import {IMPORT_NAME[framework]}"], capture_output=True)
    return r.returncode == 0


def run_worker(python: str, framework: str, batch: int, steps: int, warmup: int, threads: int,
               model: str = "tutorial", latency_calls: int = 0, sessions: Optional[str] = None) -> Dict[str, object]:
    """One worker process's result: {"train": [s...], "infer": [s...], "params": n, "versions":
    {name: version}, "latency": {"call"|"predict": [s...]}} (single-image calls; the last two
    empty from an older hpcnn). `sessions`: the file of `model` when it is a bench script's own
    (bench_workers.add_sessions)."""
    cmd = [python, "-c", _WORKER_LAUNCHER, os.path.abspath(bench_workers.__file__), "--worker", framework, "--batch", str(batch),
           "--steps", str(steps), "--warmup", str(warmup), "--threads", str(threads)]
    if sessions:
        cmd += ["--sessions", os.path.abspath(sessions)]
    if model != "tutorial":
        cmd += ["--model", model]
    if latency_calls:
        cmd += ["--latency", str(latency_calls)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=blas_env.environ_for_children())
    if out.returncode != 0:
        raise RuntimeError(f"the {framework} benchmark worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class ServedWorker:
    """A worker process that keeps its framework's model for a whole run (bench_workers.serve):
    run(way, count, warmup) asks it to time that many calls and returns their seconds.
    `worker_file`: another worker script with the same command line and protocol (its own
    `worker_main`; bench/engine_workers.py), given `extra_args` after the common ones."""

    def __init__(self, python: str, framework: str, batch: int, threads: int, model: str = "tutorial",
                 latency: bool = False, worker_file: Optional[str] = None, extra_args: Sequence[str] = (),
                 sessions: Optional[str] = None):
        self.framework = framework
        cmd = [python, "-c", _WORKER_LAUNCHER, os.path.abspath(worker_file or bench_workers.__file__), "--worker",
               framework, "--batch", str(batch), "--steps", "0", "--warmup", "0", "--threads", str(threads),
               "--model", model, "--serve", *extra_args]
        if sessions:  # a bench script's own models (bench_workers.add_sessions)
            cmd += ["--sessions", os.path.abspath(sessions)]
        if latency:
            cmd += ["--latency", "1"]
        self._stderr = tempfile.TemporaryFile(mode="w+")  # a pipe nobody reads could fill and block the worker
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      text=True, bufsize=1, env=blas_env.environ_for_children())
        hello = self._answer()
        self.params, self.versions, self.ways = hello["params"], hello["versions"], hello["ways"]

    def _answer(self):
        for line in self._proc.stdout:
            if line.startswith(bench_workers.ANSWER):
                return json.loads(line[len(bench_workers.ANSWER):])
        self._stderr.seek(0)
        why = self._stderr.read()[-3000:]
        self.close()
        raise RuntimeError(f"the {self.framework} benchmark worker failed:\n{why}")

    def run(self, way: str, count: int, warmup: int) -> List[float]:
        self._proc.stdin.write(f"run {way} {count} {warmup}\n")
        self._proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        """Ends the worker (asks it to quit; kills it after 60 s) and closes its pipes."""
        if self._proc.returncode is None:
            try:
                self._proc.stdin.write("quit\n")
                self._proc.stdin.flush()
            except OSError:  # it ended already
                pass
        for stream in (self._proc.stdin, self._proc.stdout, self._stderr):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


#: Seconds between one worker's turn and the next one's in interleave='steps': an idle framework's
#: threads stop polling (hpcnn's pool after 50 us, OpenMP's and TensorFlow's after their spin
#: counts) before another framework's timed step starts.
SETTLE_SECONDS = 0.2


def _compare_steps(runs, batch: int, steps: int, warmup: int, threads: int, rounds: int, model: str,
                   latency_calls: int, sessions: Optional[str]):
    """compare(interleave='steps'): every worker alive for the whole run, taking turns step by step."""
    workers: Dict[str, ServedWorker] = {}
    try:
        for label, py, worker in runs:
            workers[label] = ServedWorker(py, worker, batch, threads, model, latency_calls > 0, sessions=sessions)
        times = {label: {"train": [], "infer": []} for label in workers}
        pairs: Dict[str, Dict[str, List[float]]] = {label: {"train": [], "infer": []} for label in workers}
        lat: Dict[str, Dict[str, List[float]]] = {label: {} for label in workers}
        labels = list(workers)
        for r in range(rounds):
            for mode in ("train", "infer"):
                for k in range(steps):
                    order = labels if (r + k) % 2 == 0 else labels[::-1]  # each goes first as often
                    turn = {}
                    for label in order:
                        time.sleep(SETTLE_SECONDS)
                        # warm-up on a mode's first step of a round: the other frameworks ran since
                        turn[label] = workers[label].run(mode, 1, (warmup if r == 0 else 1) if k == 0 else 0)[0]
                        times[label][mode].append(turn[label])
                    if "hpcnn" in turn:
                        for label, t in turn.items():
                            pairs[label][mode].append(t / turn["hpcnn"])
            for label in labels:
                for way in workers[label].ways:
                    if way.startswith("latency-"):
                        time.sleep(SETTLE_SECONDS)
                        secs = workers[label].run(way, latency_calls, LATENCY_WARMUP if r == 0 else 2)
                        lat[label].setdefault(way.split("-", 1)[1], []).extend(secs)
        meta = {label: (w.params, w.versions) for label, w in workers.items()}
    finally:
        for w in workers.values():
            w.close()
    out: Dict[Tuple[str, str], Dict[str, object]] = {}
    for label in times:
        for mode in ("train", "infer"):
            row = {**step_stats(times[label][mode], batch), "params": meta[label][0], "versions": meta[label][1]}
            if pairs[label][mode]:
                row["paired_hpcnn_speedup"] = statistics.median(pairs[label][mode])
            out[(label, mode)] = row
    for label, ways in lat.items():
        if ways:
            out[(label, "latency")] = {**{way: latency_stats(s) for way, s in ways.items()}, "versions": meta[label][1]}
    return out


def compare(frameworks: Sequence[str], batch: int, steps: int, warmup: int, threads: int, rounds: int,
            python: Optional[str] = None, baselines: Optional[Dict[str, str]] = None,
            model: str = "tutorial", hpcnn_python: Optional[str] = None,
            latency_calls: int = 0, interleave: str = "processes",
            sessions: Optional[str] = None) -> Dict[Tuple[str, str], Dict[str, object]]:
    """step_stats per (framework, 'train'|'infer'), with the framework's trainable parameter count
    under 'params' and the versions it ran (framework, its oneDNN and BLAS, as it reports them)
    under 'versions': every framework in its own process, `rounds` rounds interleaved (hpcnn,
    torch, tensorflow, hpcnn, ...) so slow drifts hit all alike. `baselines` maps a label to another
    interpreter whose hpcnn (an older build) is timed as one more framework under that label: old
    and new side by side in one run. `model`: a key of MODELS. `hpcnn_python`: the interpreter for
    hpcnn's worker when it is not `python` (peers in a bench venv, hpcnn in its own venv).
    `latency_calls` > 0: each worker also times that many single-image predictions per round, and
    (framework, 'latency') holds latency_stats per way of calling ('call': model(x) / torch's
    net(x) under no_grad; 'predict': model.predict(x)), with 'versions'.

    `interleave`: 'processes' (each round a fresh process per framework, one after another: a
    framework's round is seconds long, and the machine's speed may drift between rounds) or
    'steps' (one process per framework kept for the whole run, the frameworks taking turns step by
    step, SETTLE_SECONDS apart, the order alternating: a drift of the machine's speed hits every
    framework alike; each row then also has 'paired_hpcnn_speedup', the median over the turns of
    the framework's step time over hpcnn's in the same turn).

    `sessions`: a plain Python file of a bench script's own models (bench/photos_sessions.py),
    loaded here (add_sessions: MODELS then has their rows) and by every worker."""
    python = python or sys.executable
    if sessions:
        add_sessions(sessions)
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; known: {sorted(MODELS)}")
    if interleave not in ("processes", "steps"):
        raise ValueError(f"interleave must be 'processes' or 'steps', got {interleave!r}")
    hpcnn_python = hpcnn_python or python
    runs = ([(f, hpcnn_python if f == "hpcnn" else python, f) for f in frameworks]
            + [(label, py, "hpcnn") for label, py in (baselines or {}).items()])
    if interleave == "steps":
        return _compare_steps(runs, batch, steps, warmup, threads, rounds, model, latency_calls, sessions)
    times = {label: {"train": [], "infer": []} for label, _, _ in runs}
    lat: Dict[str, Dict[str, List[float]]] = {label: {} for label, _, _ in runs}
    params: Dict[str, object] = {}
    versions: Dict[str, Dict[str, str]] = {}
    for _ in range(rounds):
        for f, py, worker in runs:
            res = run_worker(py, worker, batch, steps, warmup, threads, model, latency_calls, sessions)
            times[f]["train"] += res["train"]
            times[f]["infer"] += res["infer"]
            params[f] = res.get("params")
            versions[f] = res.get("versions") or {}
            for way, secs in (res.get("latency") or {}).items():
                lat[f].setdefault(way, []).extend(secs)
    out: Dict[Tuple[str, str], Dict[str, object]] = {
        (f, mode): {**step_stats(times[f][mode], batch), "params": params[f], "versions": versions[f]}
        for f in times for mode in ("train", "infer")}
    for f, ways in lat.items():
        if ways:
            out[(f, "latency")] = {**{way: latency_stats(s) for way, s in ways.items()}, "versions": versions[f]}
    return out


def versions_line(results: Dict[Tuple[str, str], Dict[str, object]]) -> str:
    """One line naming every measured framework's versions, e.g. 'hpcnn 0.9 (OpenBLAS ...);
    PyTorch: torch 2.15.0, onednn ...'."""
    seen: Dict[str, Dict[str, str]] = {}
    for (f, mode), r in results.items():
        if mode == "train":
            seen[f] = r.get("versions") or {}
    return "; ".join(f"{FRAMEWORK_LABEL.get(f, f)}: " + (", ".join(f"{k} {v}" for k, v in v.items()) or "versions not reported")
                     for f, v in seen.items())


def latency_rows(results: Dict[Tuple[str, str], Dict[str, object]]) -> List[Dict[str, object]]:
    """One row per framework and way of calling with one image: median and p90 ms, and the ratio
    of the framework's median to hpcnn's fastest way (above 1: hpcnn answers sooner)."""
    lat = {f: r for (f, mode), r in results.items() if mode == "latency"}
    best = min((s["median_ms"] for way, s in lat.get("hpcnn", {}).items() if way != "versions"), default=None)
    rows = []
    for f, ways in lat.items():
        for way, s in ways.items():
            if way == "versions":
                continue
            rows.append({"framework": f, "mode": f"latency-{way}", "calls": s["calls"], "median_ms": s["median_ms"],
                         "p90_ms": s["p90_ms"], "hpcnn_speedup": s["median_ms"] / best if best else float("nan")})
    return rows


def format_latency(rows: List[Dict[str, object]]) -> str:
    """The single-image latency table."""
    lines = [f"{'framework':<11}{'call (1 image)':<32}{'calls':>7}{'median ms':>11}{'p90 ms':>9}{'it/hpcnn':>10}"]
    for r in rows:
        way = r["mode"].split("-", 1)[1]
        how = LATENCY_CALLS.get((r["framework"], way), LATENCY_CALLS.get(("hpcnn", way), way))
        lines.append(f"{FRAMEWORK_LABEL.get(r['framework'], r['framework']):<11}{how:<32}{r['calls']:>7}"
                     f"{r['median_ms']:>11.2f}{r['p90_ms']:>9.2f}{r['hpcnn_speedup']:>9.2f}x")
    return "\n".join(lines)


def check_same_params(results: Dict[Tuple[str, str], Dict[str, float]]) -> Dict[str, int]:
    """{framework: trainable parameters}; ValueError when the frameworks' models differ in size
    (then they are not the same model and the comparison means nothing)."""
    counts = {f: r["params"] for (f, mode), r in results.items() if mode == "train" and r.get("params") is not None}
    if len(set(counts.values())) > 1:
        raise ValueError(f"the frameworks' models differ: trainable parameters {counts}")
    return counts


def comparison_rows(results: Dict[Tuple[str, str], Dict[str, float]], peak: Optional[float],
                    model: str = "tutorial") -> List[Dict[str, object]]:
    """One row per framework and mode: the stats plus GFLOP/s (of `model`'s FLOP count), % of
    `peak` and the speed relative to hpcnn (hpcnn / framework: above 1 means hpcnn is faster)."""
    rows = []
    train_mflop, fwd_mflop = MODELS[model][:2]
    for mode, mflop in (("train", train_mflop), ("infer", fwd_mflop)):
        base = results.get(("hpcnn", mode))
        for (f, m), s in results.items():
            if m != mode:
                continue
            gf = s["mean_speed"] * mflop / 1e3
            stats = {k: v for k, v in s.items() if k != "versions"}
            stats["versions"] = "; ".join(f"{k} {v}" for k, v in (s.get("versions") or {}).items())
            rows.append({"framework": f, "mode": mode, **stats, "gflops": gf,
                         "percent_of_peak": 100 * gf / peak if peak else float("nan"),
                         "hpcnn_speedup": base["mean_speed"] / s["mean_speed"] if base else float("nan")})
    return rows


def format_comparison(rows: List[Dict[str, object]]) -> str:
    """The comparison table, one line per framework and mode (with interleave='steps', also the
    paired ratio: the median over the turns of hpcnn's speed-up in the same turn)."""
    paired = any("paired_hpcnn_speedup" in r for r in rows)
    lines = [f"{'framework':<11}{'mode':<7}{'img/s':>9}{'+/-':>7}{'jitter':>8}{'ms/step':>9}{'GFLOP/s':>9}"
             f"{'% peak':>8}{'hpcnn/it':>10}" + (f"{'paired':>9}" if paired else "")]
    for r in rows:
        lines.append(f"{FRAMEWORK_LABEL.get(r['framework'], r['framework']):<11}{r['mode']:<7}"
                     f"{r['mean_speed']:>9.0f}{r['speed_uncertainty']:>7.0f}{r['speed_jitter']:>8.0f}"
                     f"{1e3 * r['mean_time_per_step']:>9.1f}{r['gflops']:>9.1f}{r['percent_of_peak']:>8.1f}"
                     f"{r['hpcnn_speedup']:>9.2f}x" + (f"{r.get('paired_hpcnn_speedup', float('nan')):>8.2f}x"
                                                       if paired else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
