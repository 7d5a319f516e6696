#!/usr/bin/env python3
"""Where the time of one inference call goes, layer by layer: ONNX Runtime's own profile of
hpcnn's exported file (``SessionOptions.enable_profiling``: each node's kernel time) beside
hpcnn's operators timed at the same layers' shapes (hpcnn._core.bench_conv2d / bench_maxpool2d /
bench_dense: each op repeated inside C++ on its own buffers, so its weights stay in the caches)
and hpcnn's whole ``model(x)``; the same thread count for both. The companion of
bench/bench_engines.py, which measures the ratio; this says where it comes from.

    python -m bench.engine_layers [--models tutorial,resnet20] [--batch 1] [--threads 2] [--calls 300]
    python -m bench.engine_layers --models resnet50,mobilenetv2 --batch 1 --calls 50 --trials 3

The ImageNet backbones at 224x224 (resnet50, mobilenetv2: bench/engine_workers.py's) are summed
per kind of convolution too (1x1, k x k, depthwise: a DepthwiseConv2D timed as a model of that
layer alone, ONNX Runtime's grouped Conv nodes), since their calls are made of hundreds of nodes.

Per model: one line per ONNX Runtime node (median microseconds over the calls, its op type) and
one per hpcnn layer (the least over --trials of the op's mean over 50 calls: on a shared machine
a trial that lost a thread to another process for a while says nothing of the op), then the sums per kind of layer
(convolutions, pooling, dense, the rest) and the whole call. A convolution followed by
BatchNormalization and ReLU is timed as hpcnn's inference runs it (nn/step_plan.h): one
convolution with a bias and the ReLU fused. hpcnn's "rest" is the whole call minus its layers'
ops: what the call does besides them (the Python call, the weights coming from the outer caches
when every layer's weights do not fit in the inner ones, the transformed-kernel cache's check,
the element-wise layers and the residual adds). Not interleaved (one engine after the other):
read the whole-call figures of bench_engines.py for the comparison itself.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Tuple

import numpy as np

import hpcnn
from hpcnn import _core, bench_workers
from hpcnn.layers import Conv2D, Dense, DepthwiseConv2D, MaxPooling2D

from bench import engine_workers

KINDS = {"Conv": "conv", "FusedConv": "conv", "MaxPool": "pool", "GlobalAveragePool": "pool", "Gemm": "dense",
         "FusedGemm": "dense", "MatMul": "dense"}
# The columns of the per-kind sums: the convolutions split by kernel for the backbones.
COLUMNS = ("conv 1x1", "conv kxk", "depthwise", "pool", "dense", "rest")


def conv_kind(kernel_hw, grouped: bool) -> str:
    """The column of a convolution: depthwise (grouped), conv 1x1 or conv kxk."""
    if grouped:
        return "depthwise"
    return "conv 1x1" if tuple(kernel_hw) == (1, 1) else "conv kxk"


def ort_kind(op: str, input_shapes) -> str:
    """The column of a profiled ONNX Runtime node: a Conv's by its weight's shape (O, I/group, kh,
    kw) as the profile gives it (the optimized graph's nodes, fused and renamed: Conv+Clip)."""
    kind = KINDS.get(op, "rest")
    if kind == "conv":
        shapes = [next(iter(t.values())) for t in input_shapes or []]
        if len(shapes) >= 2 and len(shapes[1]) == 4:
            out_c, in_per_group, kh, kw = shapes[1]
            return conv_kind((kh, kw), in_per_group == 1 and out_c > 1 and shapes[0][1] > 1)
        return "conv kxk"
    return kind


def ort_profile(path: str, x: np.ndarray, threads: int, calls: int) -> Tuple[List[Tuple[str, str, str, float]], float]:
    """([(node, op type, its column (ort_kind), median us)], median us of a whole run) from ONNX
    Runtime's profile."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(os.path.dirname(path), "ort_profile")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}
    for _ in range(calls):
        sess.run(None, feed)
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    nodes: Dict[str, Tuple[str, List[float]]] = {}
    runs = []
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"].get("op_name", "?")
            kind = ort_kind(op, e["args"].get("input_type_shape"))
            nodes.setdefault(e["name"][:-len("_kernel_time")], (op, kind, []))[2].append(e["dur"])
        elif e.get("name") == "model_run":
            runs.append(e["dur"])
    skip = calls // 5  # the first calls (warm-up) are left out
    return ([(n, op, kind, statistics.median(d[skip:] or d)) for n, (op, kind, d) in nodes.items()],
            statistics.median(runs[skip:] or runs))


def hpcnn_layers(m, batch: int, trials: int) -> List[Tuple[str, str, float]]:
    """[(layer, kind, us)]: each Conv2D / MaxPooling2D / Dense layer's forward op at its shapes, the
    least of `trials` means of 50 calls."""
    out = []
    for layer in m.layers:
        shape = [batch] + list(layer.inbound_tensors[0].shape[1:]) if getattr(layer, "inbound_tensors", None) else None
        if isinstance(layer, Conv2D):
            k = list(layer.kernel_size) + [shape[-1], layer.filters]
            def op(shape=shape, k=k, layer=layer):
                return _core.bench_conv2d(shape, k, layer.strides[0], layer.padding, True, 50, "cpu")
            kind = conv_kind(layer.kernel_size, False)
        elif isinstance(layer, DepthwiseConv2D):
            alone = hpcnn.Sequential([hpcnn.Input(tuple(shape[1:])), DepthwiseConv2D.from_config(layer.get_config())])
            xs = np.random.default_rng(0).random(tuple(shape), dtype=np.float32)
            def op(alone=alone, xs=xs):
                alone.core.predict_step((xs,))
                t = time.perf_counter()
                for _ in range(10):
                    alone.core.predict_step((xs,))
                return {"forward_ms": (time.perf_counter() - t) * 100}
            kind = "depthwise"
        elif isinstance(layer, MaxPooling2D):
            def op(shape=shape, layer=layer):
                return _core.bench_maxpool2d(shape, layer.pool_size[0], 50, "cpu")
            kind = "pool"
        elif isinstance(layer, Dense):
            def op(shape=shape, layer=layer):
                return _core.bench_dense(shape, [shape[-1], layer.units], True, 50, "cpu")
            kind = "dense"
        else:
            continue
        out.append((layer.name, kind, 1e3 * min(op()["forward_ms"] for _ in range(trials))))
    return out


def call_median_us(m, x: np.ndarray, calls: int) -> float:
    for _ in range(20):
        m(x)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        m(x)
        times.append(time.perf_counter() - t)
    return 1e6 * statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="tutorial,resnet20")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--calls", type=int, default=300, help="profiled ONNX Runtime runs and timed model(x) calls")
    p.add_argument("--trials", type=int, default=9, help="trials per hpcnn op (each the mean of 50 calls; the least counts)")
    a = p.parse_args(argv)
    import onnxruntime as ort
    hpcnn.set_num_threads(a.threads)
    print(f"# batch {a.batch}, {a.threads} threads; onnxruntime {ort.__version__}; hpcnn {hpcnn.__version__} "
          f"({hpcnn.build_info().get('cpu_kernels', '?')} kernels)")
    for model in a.models.split(","):
        m = engine_workers.hpcnn_model(bench_workers, model)
        x = np.random.default_rng(0).random((a.batch,) + engine_workers.input_shape(bench_workers, model),
                                            dtype=np.float32)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, f"{model}.onnx")
            m.export(path, verbose=False)
            nodes, ort_run = ort_profile(path, x, a.threads, a.calls)
        layers = hpcnn_layers(m, a.batch, a.trials)
        whole = call_median_us(m, x, a.calls)
        print(f"\n## {model}, batch {a.batch}")
        print(f"{'ONNX Runtime node':<48}{'op':<18}{'kind':<12}{'us':>8}")
        for name, op, kind, us in nodes:
            print(f"{name[:47]:<48}{op:<18}{kind:<12}{us:>8.1f}")
        print(f"{'hpcnn layer (its op alone)':<48}{'kind':<14}{'us':>8}")
        for name, kind, us in layers:
            print(f"{name[:47]:<48}{kind:<14}{us:>8.1f}")
        sums = {"ort": {}, "hpcnn": {}}
        for _, _, k, us in nodes:
            sums["ort"][k] = sums["ort"].get(k, 0.0) + us
        for _, k, us in layers:
            sums["hpcnn"][k] = sums["hpcnn"].get(k, 0.0) + us
        sums["ort"]["rest"] = sums["ort"].get("rest", 0.0) + ort_run - sum(us for _, _, _, us in nodes)
        sums["hpcnn"]["rest"] = whole - sum(us for _, _, us in layers)
        print(f"{'sum per kind (us)':<24}" + "".join(f"{k:>11}" for k in COLUMNS) + f"{'whole call':>12}")
        for eng, total in (("ort", ort_run), ("hpcnn", whole)):
            s = sums[eng]
            print(f"{'ONNX Runtime' if eng == 'ort' else 'hpcnn model(x)':<24}" + "".join(
                f"{s.get(k, 0.0):>11.1f}" for k in COLUMNS) + f"{total:>12.1f}")
    print("\n# ONNX Runtime's rest: the run minus its nodes (input/output copies, the profiler itself); hpcnn's: the "
          "call minus its ops timed alone (see the docstring)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
