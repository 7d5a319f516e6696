#!/usr/bin/env python3
"""Transfer learning's speed on the CPU: ImageNet backbones (ResNet50, MobileNetV2) at 224x224,
batch 32, in hpcnn vs PyTorch + torchvision vs TensorFlow + Keras, in one interleaved run (each
framework a served worker process of hpcnn.bench, the frameworks taking turns step by step:
hpcnn.bench.ServedWorker with the sessions of bench/backbone_sessions.py). Per model and way:

    train   full training (fine-tuning every layer): SGD momentum, forward + backward + update
    infer   a forward pass (evaluation mode)
    frozen  the guide's first phase: the base frozen in inference mode, a new head trained

img/s, ms/step, GFLOP/s (the direct-convolution count of the network, 2 x multiply-adds, counted
on hpcnn's model; train = 3 x forward less the first convolution's backward-data, frozen and infer =
forward), % of the FMA peak measured now, hpcnn's speed-up (mean and paired per turn), and each
worker's peak resident memory (its training step's peak: process RSS, the framework's own
libraries included). With --profile, hpcnn's per-layer profile of one training step: every
convolution shape timed alone (forward, and backward with dx) by the core's op timer
(_core.bench_conv2d), summed per kind of layer.

    python -m bench.bench_backbones --python PEERS/bin/python   # all, 2 threads (PEERS: a venv with torch, torchvision, tensorflow-cpu)
    python -m bench.bench_backbones --models resnet50 --frameworks hpcnn --steps 1 --rounds 1 --batch 2   # smoke
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time

import numpy as np

import hpcnn
from hpcnn import _core, bench
from hpcnn.keras import applications

SESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "backbone_sessions.py")
BUILDERS = {"resnet50": "ResNet50", "mobilenetv2": "MobileNetV2"}
WAYS = ("train", "infer", "frozen")


def conv_layers(model):
    """(layer, input shape, output shape, kernel shape, stride, padding, depthwise) of every
    convolution and Dense layer of the model, per sample."""
    out = []
    for layer in model.layers:
        kind = type(layer).__name__
        if kind not in ("Conv2D", "DepthwiseConv2D", "Dense"):
            continue
        kernel = layer.get_weights()[0].shape
        ins = tuple(layer.inbound_tensors[0].shape)[1:]
        outs = tuple(layer.output_tensor.shape)[1:]
        stride = layer.get_config().get("strides", (1, 1))
        out.append((layer, ins, outs, kernel, stride[0] if isinstance(stride, (list, tuple)) else stride,
                    layer.get_config().get("padding", "valid"), kind == "DepthwiseConv2D"))
    return out


def forward_gflop(model) -> float:
    """Forward GFLOP per image: 2 x multiply-adds of the convolutions and Dense layers."""
    total = 0.0
    for layer, ins, outs, kernel, *_ in conv_layers(model):
        spatial = outs[0] * outs[1] if len(outs) == 3 else 1
        total += 2.0 * spatial * float(np.prod(kernel))
    return total / 1e9


def train_gflop(model, fwd: float) -> float:
    """3 x forward less the first convolution's backward-data (nothing needs the input's gradient)."""
    layer, ins, outs, kernel, *_ = conv_layers(model)[0]
    return 3 * fwd - 2.0 * outs[0] * outs[1] * float(np.prod(kernel)) / 1e9


def run(models, frameworks, pythons, batch, steps, warmup, rounds, threads):
    """{model: {label: {way: [seconds], 'params': n, 'versions': {...}, 'memory': bytes}}} and the
    paired ratios {model: {label: {way: [its time / hpcnn's in the same turn]}}}."""
    results, paired = {}, {}
    for model in models:
        workers = {}
        try:
            for f in frameworks:
                workers[f] = bench.ServedWorker(pythons[f], f, batch, threads, model, sessions=SESSIONS)
            times = {f: {w: [] for w in WAYS} for f in workers}
            pairs = {f: {w: [] for w in WAYS} for f in workers}
            labels = list(workers)
            for r in range(rounds):
                for way in WAYS:
                    for k in range(steps):
                        order = labels if (r + k) % 2 == 0 else labels[::-1]
                        turn = {}
                        for f in order:
                            time.sleep(bench.SETTLE_SECONDS)
                            turn[f] = workers[f].run(way, 1, (warmup if r == 0 else 1) if k == 0 else 0)[0]
                            times[f][way].append(turn[f])
                        if "hpcnn" in turn:
                            for f, t in turn.items():
                                pairs[f][way].append(t / turn["hpcnn"])
                    print(f"# {model}: round {r + 1} {way} done", file=sys.stderr, flush=True)
            results[model] = {f: {**times[f], "params": w.params, "versions": w.versions,
                                  "memory": w.run("memory", 1, 0)[0]} for f, w in workers.items()}
            paired[model] = pairs
        finally:
            for w in workers.values():
                w.close()
    return results, paired


def report(results, paired, batch, peak, flops):
    lines = [f"{'model':<12}{'framework':<11}{'way':<7}{'img/s':>8}{'+/-':>6}{'ms/step':>9}{'GFLOP/s':>9}"
             f"{'% peak':>8}{'hpcnn/it':>9}{'paired':>8}"]
    for model, per in results.items():
        fwd, train = flops[model]
        for way in WAYS:
            gf_img = train if way == "train" else fwd
            base = bench.step_stats(per["hpcnn"][way], batch) if "hpcnn" in per else None
            for f, r in per.items():
                s = bench.step_stats(r[way], batch)
                gflops = s["mean_speed"] * gf_img
                ratio = base["mean_speed"] / s["mean_speed"] if base else float("nan")
                pr = statistics.median(paired[model][f][way]) if paired[model][f][way] else float("nan")
                pct = 100 * gflops / peak if peak else float("nan")
                lines.append(f"{model:<12}{bench.FRAMEWORK_LABEL.get(f, f):<11}{way:<7}{s['mean_speed']:>8.1f}"
                             f"{s['speed_uncertainty']:>6.1f}{1e3 * s['mean_time_per_step']:>9.0f}{gflops:>9.1f}"
                             f"{pct:>8.1f}{ratio:>8.2f}x{pr:>7.2f}x")
    lines.append("")
    lines.append(f"{'model':<12}{'framework':<11}{'peak RSS':>10}{'vs PyTorch':>12}  trainable params, versions")
    for model, per in results.items():
        torch_mem = per.get("torch", {}).get("memory")
        for f, r in per.items():
            rel = f"{r['memory'] / torch_mem:.2f}x" if torch_mem else "-"
            versions = "; ".join(f"{k} {v}" for k, v in r["versions"].items())
            lines.append(f"{model:<12}{bench.FRAMEWORK_LABEL.get(f, f):<11}{r['memory'] / 2**30:>8.2f} GiB"
                         f"{rel:>12}  {r['params']:,}, {versions}")
    return "\n".join(lines)


def depthwise_timing(batch, ins, kernel, stride, padding, repeat):
    """A depthwise convolution's forward and backward (with dx) ms per call, through the ops'
    bindings: `repeat` calls inside C++ against one, so the NumPy conversions cancel out."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, *ins), dtype=np.float32)
    w = rng.standard_normal(kernel, dtype=np.float32)
    y = _core.ops.depthwise_conv2d_forward(x, w, None, stride, padding, 1, "cpu", 1)
    dy = np.ones_like(y)

    def per_call(call):
        t0 = time.perf_counter()
        call(1)
        t1 = time.perf_counter()
        call(repeat + 1)
        t2 = time.perf_counter()
        return 1e3 * max((t2 - t1) - (t1 - t0), 0.0) / repeat

    return {"forward_ms": per_call(lambda r: _core.ops.depthwise_conv2d_forward(x, w, None, stride, padding, 1,
                                                                                 "cpu", r)),
            "backward_ms": per_call(lambda r: _core.ops.depthwise_conv2d_backward(x, w, dy, stride, padding, 1, True,
                                                                                   False, "cpu", r))}


def profile(model_name, batch, repeat):
    """hpcnn's convolutions of one training step, each shape timed alone: ms per kind."""
    model = getattr(applications, BUILDERS[model_name])(weights=None, input_shape=(224, 224, 3))
    per_kind = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    cache = {}
    for layer, ins, outs, kernel, stride, padding, depthwise in conv_layers(model):
        if type(layer).__name__ == "Dense":
            kind, key = "dense", None
        elif depthwise:
            kind = f"depthwise {kernel[0]}x{kernel[1]}" + (f" stride {stride}" if stride != 1 else "")
            key = ("depthwise", ins, kernel, stride, padding)
        else:
            kind = f"conv {kernel[0]}x{kernel[1]}" + (f" stride {stride}" if stride != 1 else "")
            key = (ins, kernel, stride, padding)
        if key is not None:
            if key not in cache:
                cache[key] = (depthwise_timing(batch, ins, kernel, stride, padding, repeat) if depthwise else
                              _core.bench_conv2d([batch, *ins], list(kernel), stride, padding, False, repeat, "cpu"))
            t = cache[key]
            row = per_kind[kind]
            row[0] += 1
            row[1] += t["forward_ms"]
            row[2] += t["backward_ms"]
            row[3] += 2.0 * batch * outs[0] * outs[1] * float(np.prod(kernel)) / 1e9
        else:
            per_kind[kind][0] += 1
    total = sum(r[1] + r[2] for r in per_kind.values())
    lines = [f"== hpcnn {model_name}: its convolutions one at a time, batch {batch}, {hpcnn.get_num_threads()} "
             "threads (forward; backward = backward-data + backward-filter)",
             f"{'layer kind':<26}{'count':>6}{'fwd ms':>9}{'bwd ms':>9}{'fwd GFLOP/s':>13}{'% of convs':>11}"]
    for kind, (n, f, b, gf) in sorted(per_kind.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
        rate = f"{gf / (f / 1e3):>13.1f}" if f else f"{'(not timed)':>13}"
        lines.append(f"{kind:<26}{n:>6}{f:>9.1f}{b:>9.1f}{rate}{100 * (f + b) / total if total else 0:>10.1f}%")
    lines.append(f"{'sum':<26}{'':>6}{sum(r[1] for r in per_kind.values()):>9.1f}"
                 f"{sum(r[2] for r in per_kind.values()):>9.1f}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="mobilenetv2,resnet50")
    p.add_argument("--frameworks", default="hpcnn,torch,tensorflow")
    p.add_argument("--python", default=sys.executable, help="interpreter for the peers' workers (a bench venv)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=3, help="timed steps per way and round")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--profile", action="store_true", help="also hpcnn's per-layer profile of a training step")
    p.add_argument("--profile-repeat", type=int, default=3)
    a = p.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    unknown = [m for m in models if m not in BUILDERS]
    if unknown:
        p.error(f"unknown models {unknown}; known: {sorted(BUILDERS)}")
    fws = [f for f in a.frameworks.split(",") if f]
    pythons = {f: sys.executable if f == "hpcnn" else a.python for f in fws}
    present = [f for f in fws if bench.importable(pythons[f], f)]
    for f in fws:
        if f not in present:
            print(f"# {f}: not importable by {pythons[f]}; skipped")
    hpcnn.set_num_threads(a.threads)
    peak = bench.peak_gflops(a.threads, 1.0)
    flops = {}
    for m in models:
        net = getattr(applications, BUILDERS[m])(weights=None, input_shape=(224, 224, 3))
        fwd = forward_gflop(net)
        flops[m] = (fwd, train_gflop(net, fwd))
    print(f"# machine: {bench.machine_description()}")
    print(f"# threads: {a.threads}; batch {a.batch}; 224x224x3; {a.rounds} rounds x {a.steps} steps per way "
          f"(+{a.warmup} warm-up), frameworks taking turns step by step")
    print(f"# FP32 peak (FMA loop, {a.threads} threads): " + (f"{peak:.1f} GFLOP/s" if peak else "not measured"))
    for m, (fwd, train) in flops.items():
        print(f"# {m}: {fwd:.3f} GFLOP forward, {train:.3f} GFLOP training per image (direct-convolution count)")
    results, paired = run(models, present, pythons, a.batch, a.steps, a.warmup, a.rounds, a.threads)
    print()
    print(report(results, paired, a.batch, peak, flops))
    if a.profile:
        for m in models:
            print()
            print(profile(m, a.batch, a.profile_repeat))
    print(f"# hpcnn build: {hpcnn.build_info()['blas_config']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
