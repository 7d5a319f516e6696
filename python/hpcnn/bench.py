"""Benchmark statistics as HPC benchmark reports give them (mean time per step, images/s, its
uncertainty and jitter), CSV collection, and a model timed in hpcnn and, side by side, the same
model in PyTorch and TensorFlow (the peers): the tutorial CNN (``model='tutorial'``) or the CIFAR
ResNet-20 (``model='resnet20'``). Used by bench/ scripts and the ``hpcnn bench`` command.

    mean_speed        = batch_size / mean step time
    speed_uncertainty = std(per-step speeds) / sqrt(steps)           (standard error)
    speed_jitter      = 1.4826 * median(|speeds - median(speeds)|)   (robust spread, MAD)

This module imports only the standard library at module level: a peer worker process loads it
as a plain file, without the hpcnn package, so the framework it times runs alone (hpcnn's
extension pins OpenBLAS to one thread when it loads, which would slow a PyTorch that uses the
same OpenBLAS).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple


def step_stats(step_seconds: Iterable[float], batch_size: int) -> Dict[str, float]:
    """Summary of per-step times for one configuration."""
    times = [float(t) for t in step_seconds]
    if not times:
        raise ValueError("step_stats: no steps")
    speeds = [batch_size / t for t in times]
    med = statistics.median(speeds)
    mean_time = statistics.fmean(times)
    return {
        "steps": len(times),
        "batch_size": batch_size,
        "mean_time_per_step": mean_time,
        "median_time_per_step": statistics.median(times),
        "mean_speed": batch_size / mean_time,
        "median_speed": med,
        "speed_uncertainty": (statistics.stdev(speeds) / math.sqrt(len(speeds))) if len(speeds) > 1 else 0.0,
        "speed_jitter": 1.4826 * statistics.median([abs(s - med) for s in speeds]),
    }


def time_steps(step: Callable[[], object], steps: int, warmup: int = 2) -> List[float]:
    """Wall-clock seconds of each of `steps` calls of `step`, after `warmup` untimed calls."""
    for _ in range(warmup):
        step()
    out = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        out.append(time.perf_counter() - t)
    return out


def latency_stats(seconds: Iterable[float]) -> Dict[str, float]:
    """Single-call latency (what a notebook's predict of one image waits): the median and the 90th
    percentile (nearest rank) in milliseconds of the calls' wall-clock seconds."""
    times = sorted(float(t) for t in seconds)
    if not times:
        raise ValueError("latency_stats: no calls")
    return {"calls": len(times), "median_ms": 1e3 * statistics.median(times),
            "p90_ms": 1e3 * times[max(0, int(math.ceil(0.9 * len(times))) - 1)]}


LATENCY_WARMUP = 20  # untimed single-image calls before the timed ones
#: What each worker's single-image ways of calling are (bench tables name them).
LATENCY_CALLS = {("hpcnn", "call"): "model(x)", ("hpcnn", "predict"): "model.predict(x)",
                 ("torch", "call"): "net(x), eval, no_grad (eager)",
                 ("tensorflow", "call"): "model(x, training=False)", ("tensorflow", "predict"): "model.predict(x)"}


def machine_description() -> str:
    cpu = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{platform.node()}: {cpu}, {ncpu} CPUs in affinity mask"


def append_csv(path: str, row: Dict[str, object]) -> None:
    """Append one row (writing the header for a new file): many jobs' results collect in one CSV."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)


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
    from hpcnn import _core
    probe = getattr(_core.ops, "measure_peak_gflops", None)
    if probe is None:
        return None
    return float(probe(threads or _core.get_num_threads(), seconds))


TUTORIAL_FWD_MFLOP = 30.9     # tutorial CNN, forward, per image
TUTORIAL_TRAIN_MFLOP = 92.6   # forward + backward-data + backward-filter, per image (the first
                              # conv's backward-data is not needed)


def resnet_cifar_mflop(depth: int = 20, shortcut: str = "B", size: int = 32) -> Tuple[float, float]:
    """(training, inference) MFLOP per image of the CIFAR ResNet (hpcnn.applications.resnet_cifar)
    by the direct-convolution count, 2 FLOP per multiply-add: forward; training adds the backward
    data pass of every convolution but the first and the backward filter pass of all."""
    n = (depth - 2) // 6
    convs = [(size, 3, 16, 3)]  # (output size, input channels, filters, kernel)
    c, h = 16, size
    for stage, f in enumerate((16, 32, 64)):
        for block in range(n):
            stride = 2 if stage and not block else 1
            h = -(-h // stride)
            convs += [(h, c, f, 3), (h, f, f, 3)]
            if shortcut == "B" and stride != 1:
                convs.append((h, c, f, 1))
            c = f
    macs = [o * o * f * k * k * ci for o, ci, f, k in convs]
    fwd = 2 * (sum(macs) + 64 * 10) / 1e6
    train = fwd + 2 * (sum(macs[1:]) + sum(macs) + 2 * 64 * 10) / 1e6
    return train, fwd


RESNET20_TRAIN_MFLOP, RESNET20_FWD_MFLOP = resnet_cifar_mflop(20, "B")

#: per model: (training MFLOP, inference MFLOP) per image, the input shape, and what it is.
MODELS = {
    "tutorial": (TUTORIAL_TRAIN_MFLOP, TUTORIAL_FWD_MFLOP, (32, 32, 3),
                 "the tutorial CNN (4x Conv-ReLU-MaxPool, Dense 256/512/10, dropout; Adam 1e-3)"),
    "resnet20": (RESNET20_TRAIN_MFLOP, RESNET20_FWD_MFLOP, (32, 32, 3),
                 "ResNet-20 for CIFAR (He et al. 2016; option B: 1x1 stride-2 projection shortcuts with BN; "
                 "convolutions without bias; SGD 0.1, momentum 0.9, weight decay 1e-4)"),
}

#: Why "% of peak" can pass 100 %: one line, printed under every table that shows it.
PEAK_NOTE = ("% of peak = GFLOP/s by the direct-convolution count (92.6 MFLOP per training image, 30.9 per "
             "inference image) / the FMA peak measured now; Winograd F(4x4,3x3) does the 3x3 convolutions with "
             "fewer multiplications, so hpcnn (and TensorFlow) can pass 100 %")


def peak_note(model: str = "tutorial") -> str:
    """PEAK_NOTE with `model`'s FLOP counts."""
    train, fwd = MODELS[model][:2]
    return PEAK_NOTE.replace("92.6 MFLOP per training image, 30.9", f"{train:.1f} MFLOP per training image, {fwd:.1f}")


def _hpcnn_model(model: str):
    """(the compiled-ready hpcnn model, its optimizer) for `model`, fresh weights from seed 0."""
    if model == "resnet20":
        import hpcnn
        from hpcnn.applications import resnet20_cifar
        return resnet20_cifar(weight_decay=1e-4, shortcut="B", seed=0), hpcnn.optimizers.SGD(0.1, momentum=0.9)
    try:  # absolute: this file may run without its package (see top)
        from hpcnn.applications import tutorial_cnn
    except ImportError:  # an older hpcnn timed as the baseline (bench_train.py --baseline-python)
        from hpcnn.models import tutorial_cnn
    return tutorial_cnn(seed=0), "adam"


def trainable_params_hpcnn(m) -> int:
    """Trainable parameters of an hpcnn model (the BN moving statistics are not), as its summary
    counts them."""
    lines: List[str] = []
    m.summary(print_fn=lines.append)
    for line in lines:
        if line.startswith("Trainable params:"):
            return int(line.split(":", 1)[1].split("(")[0].replace(",", "").strip())
    return int(m.count_params())  # an older hpcnn's summary: every weight is trainable


def tutorial_cnn_step_times(device: str = "cpu", batch_size: int = 250, steps: int = 20, warmup: int = 3,
                            strategy=None):
    """Per-step seconds of training and of inference for the tutorial CNN on `device`, on random
    data already in memory (the model's own step, exactly as fit calls it per batch). `strategy`
    (hpcnn.distribute): the model trains on its replicas instead, batch_size the global batch."""
    train, infer, _ = model_step_times("tutorial", device, batch_size, steps, warmup, strategy=strategy)
    return train, infer


def model_step_times(model: str = "tutorial", device: str = "cpu", batch_size: int = 250, steps: int = 20,
                     warmup: int = 3, strategy=None):
    """(training seconds per step, inference seconds per step, trainable parameters) of `model`
    (a key of MODELS) on `device`, on random data already in memory (the model's own step,
    exactly as fit calls it per batch). `strategy` (hpcnn.distribute): compiled in its scope, the
    model trains on its replicas instead, batch_size the global batch."""
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.random((batch_size,) + MODELS[model][2], dtype=np.float32)
    y = rng.integers(0, 10, batch_size).astype(np.int32)
    m, opt = _hpcnn_model(model)
    if strategy is not None:
        with strategy.scope():
            m.compile(opt, "sparse_categorical_crossentropy", ["accuracy"])
    else:
        m.compile(opt, "sparse_categorical_crossentropy", ["accuracy"], device=device)
    core = m.core if hasattr(m, "core") else m._model()  # _model(): an older hpcnn timed as the baseline
    if hasattr(core, "train_step"):
        train = time_steps(lambda: core.train_step((x, y)), steps, warmup)
        infer = time_steps(lambda: core.predict_step((x,)), steps, warmup)
    else:  # the step API before train_step (hpcnn 0.1 as first released): the same work per call
        train = time_steps(lambda: core.train_batch(x, y), steps, warmup)
        infer = time_steps(lambda: core.predict_batch(x), steps, warmup)
    return train, infer, trainable_params_hpcnn(m)


# ---------------------------------------------------------------------- peers: PyTorch, TensorFlow
# The same model in each framework, random data in memory, batch `batch`, each framework in its own
# process with `threads` threads. Each worker returns (training step seconds, inference step
# seconds, trainable parameters): the parameter counts are printed and must agree.
#   tutorial: Conv 32/64/128/256 3x3 'same' + ReLU + 2x2 max-pool each, Flatten, Dense 256,
#             Dropout 0.2, Dense 512, Dropout 0.2, Dense 10; Adam 1e-3.
#   resnet20: see resnet_cifar_mflop / hpcnn.applications.resnet_cifar (shortcut 'B'); SGD 0.1,
#             momentum 0.9, weight decay 1e-4 on the kernels (Keras: l2(5e-5), its gradient 1e-4 w;
#             PyTorch: SGD's weight_decay, which also decays BN's gamma/beta: the same work).
def worker_hpcnn(batch: int, steps: int, warmup: int, threads: int, model: str = "tutorial", latency_calls: int = 0):
    import hpcnn
    hpcnn.set_num_threads(threads)
    train, infer, params = model_step_times(model, "cpu", batch, steps, warmup)
    info = hpcnn.build_info() if hasattr(hpcnn, "build_info") else {}
    versions = {"hpcnn": getattr(hpcnn, "__version__", "?"), "blas": info.get("blas_config", "?")}
    latency = {}
    if latency_calls:
        import numpy as np
        m, opt = _hpcnn_model(model)
        m.compile(opt, "sparse_categorical_crossentropy", ["accuracy"], device="cpu")
        x1 = np.random.default_rng(1).random((1,) + MODELS[model][2], dtype=np.float32)
        latency = {"predict": time_steps(lambda: m.predict(x1, verbose=0), latency_calls, LATENCY_WARMUP),
                   "call": time_steps(lambda: m(x1), latency_calls, LATENCY_WARMUP)}
    return train, infer, params, versions, latency


def _torch_model(model: str):
    import torch
    from torch import nn
    if model == "tutorial":
        layers, c = [], 3
        for f in (32, 64, 128, 256):
            layers += [nn.Conv2d(c, f, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2)]
            c = f
        net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(1024, 256), nn.ReLU(), nn.Dropout(0.2),
                            nn.Linear(256, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
        return net, torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7)

    def bn(f):  # Keras' BatchNormalization defaults: epsilon 1e-3, momentum 0.99 (PyTorch counts 1 - it)
        return nn.BatchNorm2d(f, eps=1e-3, momentum=0.01)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), bn(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), bn(cout)
            self.proj = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), bn(cout))
                         if stride != 1 or cin != cout else None)

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.proj is None else self.proj(x)))

    n = 3  # ResNet-20
    layers, c = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), bn(16), nn.ReLU()], 16
    for stage, f in enumerate((16, 32, 64)):
        for block in range(n):
            layers.append(Block(c, f, 2 if stage and not block else 1))
            c = f
    net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    return net, torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)


def torch_versions() -> Dict[str, str]:
    """torch's version and the oneDNN (MKL-DNN) and BLAS it was built with, as it reports them."""
    import torch
    v = {"torch": torch.__version__, "onednn": "not available"}
    if torch.backends.mkldnn.is_available():
        v["onednn"] = "available"
        for line in torch.__config__.show().splitlines():
            line = line.strip(" -")
            if line.startswith(("Intel(R) MKL-DNN", "oneDNN")):
                v["onednn"] = line
            elif "Math Kernel Library" in line or line.startswith("OpenBLAS"):
                v["blas"] = line
    return v


def worker_torch(batch: int, steps: int, warmup: int, threads: int, model: str = "tutorial", latency_calls: int = 0):
    import torch
    from torch import nn
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net, opt = _torch_model(model)
    net = net.to(memory_format=torch.channels_last)
    lossf = nn.CrossEntropyLoss()
    h, w, c = MODELS[model][2]
    x = torch.rand(batch, c, h, w).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,))

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    def infer_step():
        with torch.no_grad():
            return torch.softmax(net(x), 1)

    net.train()
    train = time_steps(train_step, steps, warmup)
    net.eval()
    infer = time_steps(infer_step, steps, warmup)
    latency = {}
    if latency_calls:  # eager, as a notebook calls it: one image, no_grad, the model in eval mode
        x1 = torch.rand(1, c, h, w).to(memory_format=torch.channels_last)

        def call():
            with torch.no_grad():
                return torch.softmax(net(x1), 1).numpy()

        latency = {"call": time_steps(call, latency_calls, LATENCY_WARMUP)}
    return (train, infer, int(sum(p.numel() for p in net.parameters() if p.requires_grad)), torch_versions(),
            latency)


def _keras_model(model: str):
    import tensorflow as tf
    L = tf.keras.layers
    if model == "tutorial":
        m = tf.keras.Sequential([tf.keras.Input(shape=(32, 32, 3))])
        for f in (32, 64, 128, 256):
            m.add(L.Conv2D(f, 3, padding="same", activation="relu"))
            m.add(L.MaxPooling2D(2, 2, padding="same"))
        for layer in (L.Flatten(), L.Dense(256, activation="relu"), L.Dropout(0.2), L.Dense(512, activation="relu"),
                      L.Dropout(0.2), L.Dense(10, activation="softmax")):
            m.add(layer)
        return m, tf.keras.optimizers.Adam(1e-3)
    reg = tf.keras.regularizers.l2(5e-5)

    def conv(f, k, stride=1):
        return L.Conv2D(f, k, strides=stride, padding="same", use_bias=False, kernel_regularizer=reg)

    x = inp = tf.keras.Input(shape=(32, 32, 3))
    x = L.ReLU()(L.BatchNormalization()(conv(16, 3)(x)))
    for stage, f in enumerate((16, 32, 64)):
        for block in range(3):
            stride = 2 if stage and not block else 1
            y = L.ReLU()(L.BatchNormalization()(conv(f, 3, stride)(x)))
            y = L.BatchNormalization()(conv(f, 3)(y))
            if stride != 1 or x.shape[-1] != f:
                x = L.BatchNormalization()(conv(f, 1, stride)(x))
            x = L.ReLU()(L.Add()([y, x]))
    out = L.Dense(10, activation="softmax", kernel_regularizer=reg)(L.GlobalAveragePooling2D()(x))
    return tf.keras.Model(inp, out), tf.keras.optimizers.SGD(0.1, momentum=0.9)


def tensorflow_versions() -> Dict[str, str]:
    """TensorFlow's and Keras' versions, and whether TensorFlow's oneDNN ops are on (its default on
    x86 Linux unless TF_ENABLE_ONEDNN_OPTS=0)."""
    import tensorflow as tf
    v = {"tensorflow": tf.__version__, "keras": getattr(tf.keras, "__version__", None) or "?"}
    try:
        import keras
        v["keras"] = keras.__version__
    except ImportError:
        pass
    v["onednn"] = "off (TF_ENABLE_ONEDNN_OPTS=0)" if os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0" else "on (default)"
    return v


def worker_tensorflow(batch: int, steps: int, warmup: int, threads: int, model: str = "tutorial",
                      latency_calls: int = 0):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)
    net, opt = _keras_model(model)
    net.compile(optimizer=opt, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(0)
    n = batch * (steps + warmup)
    x = rng.random((n,) + MODELS[model][2], dtype=np.float32)
    y = rng.integers(0, 10, n)

    class Timer(tf.keras.callbacks.Callback):  # Keras' own fit, timed per batch
        def __init__(self):
            super().__init__()
            self.t, self.times = 0.0, []

        def on_train_batch_begin(self, b, logs=None):
            self.t = time.perf_counter()

        def on_train_batch_end(self, b, logs=None):
            self.times.append(time.perf_counter() - self.t)

        on_predict_batch_begin = on_train_batch_begin
        on_predict_batch_end = on_train_batch_end

    tt = Timer()
    net.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False, callbacks=[tt])
    ti = Timer()
    net.predict(x, batch_size=batch, verbose=0, callbacks=[ti])
    params = int(sum(int(np.prod(w.shape)) for w in net.trainable_weights))
    latency = {}
    if latency_calls:
        x1 = rng.random((1,) + MODELS[model][2], dtype=np.float32)
        latency = {"predict": time_steps(lambda: net.predict(x1, verbose=0), latency_calls, LATENCY_WARMUP),
                   "call": time_steps(lambda: net(x1, training=False).numpy(), latency_calls, LATENCY_WARMUP)}
    return tt.times[warmup:], ti.times[warmup:], params, tensorflow_versions(), latency


WORKERS = {"hpcnn": worker_hpcnn, "torch": worker_torch, "tensorflow": worker_tensorflow}
IMPORT_NAME = {"hpcnn": "hpcnn", "torch": "torch", "tensorflow": "tensorflow"}
FRAMEWORK_LABEL = {"hpcnn": "hpcnn", "torch": "PyTorch", "tensorflow": "TensorFlow"}

# Runs this file's worker_main without importing the hpcnn package (see the module docstring).
_WORKER_LAUNCHER = ("import importlib.util, sys; "
                    "spec = importlib.util.spec_from_file_location('hpcnn_bench_worker', sys.argv[1]); "
                    "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
                    "sys.exit(m.worker_main(sys.argv[2:]))")


def worker_main(argv: Sequence[str]) -> int:
    """A worker process: times one framework and prints {"train": [...], "infer": [...], "params": n}
    as JSON."""
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True, choices=sorted(WORKERS))
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--model", default="tutorial", choices=sorted(MODELS))
    p.add_argument("--latency", type=int, default=0, help="also time this many single-image predictions")
    a = p.parse_args(list(argv))
    if a.latency:
        res = WORKERS[a.worker](a.batch, a.steps, a.warmup, a.threads, a.model, a.latency)
    elif a.model == "tutorial":  # the call an older bench.py's hpcnn worker understands too
        res = WORKERS[a.worker](a.batch, a.steps, a.warmup, a.threads)
    else:
        res = WORKERS[a.worker](a.batch, a.steps, a.warmup, a.threads, a.model)
    train, infer = res[0], res[1]
    print(json.dumps({"train": list(train), "infer": list(infer), "params": res[2] if len(res) > 2 else None,
                      "versions": res[3] if len(res) > 3 else {}, "latency": res[4] if len(res) > 4 else {}}))
    return 0


def importable(python: str, framework: str) -> bool:
    """Whether `python` can import the framework (checked in a child: importing it here would
    load its runtime into this process)."""
    r = subprocess.run([python, "-c", f"import {IMPORT_NAME[framework]}"], capture_output=True)
    return r.returncode == 0


def run_worker(python: str, framework: str, batch: int, steps: int, warmup: int, threads: int,
               model: str = "tutorial", latency_calls: int = 0) -> Dict[str, object]:
    """One worker process's result: {"train": [s...], "infer": [s...], "params": n, "versions":
    {name: version}, "latency": {"call"|"predict": [s...]}} (single-image calls; the last two
    empty from an older hpcnn)."""
    cmd = [python, "-c", _WORKER_LAUNCHER, os.path.abspath(__file__), "--worker", framework, "--batch", str(batch),
           "--steps", str(steps), "--warmup", str(warmup), "--threads", str(threads)]
    if model != "tutorial":
        cmd += ["--model", model]
    if latency_calls:
        cmd += ["--latency", str(latency_calls)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"the {framework} benchmark worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(frameworks: Sequence[str], batch: int, steps: int, warmup: int, threads: int, rounds: int,
            python: Optional[str] = None, baselines: Optional[Dict[str, str]] = None,
            model: str = "tutorial", hpcnn_python: Optional[str] = None,
            latency_calls: int = 0) -> Dict[Tuple[str, str], Dict[str, object]]:
    """step_stats per (framework, 'train'|'infer'), with the framework's trainable parameter count
    under 'params' and the versions it ran (framework, its oneDNN and BLAS, as it reports them)
    under 'versions': every framework in its own process, `rounds` rounds interleaved (hpcnn,
    torch, tensorflow, hpcnn, ...) so slow drifts hit all alike. `baselines` maps a label to another
    interpreter whose hpcnn (an older build) is timed as one more framework under that label: old
    and new side by side in one run. `model`: a key of MODELS. `hpcnn_python`: the interpreter for
    hpcnn's worker when it is not `python` (peers in a bench venv, hpcnn in its own venv).
    `latency_calls` > 0: each worker also times that many single-image predictions per round, and
    (framework, 'latency') holds latency_stats per way of calling ('call': model(x) / torch's
    net(x) under no_grad; 'predict': model.predict(x)), with 'versions'."""
    python = python or sys.executable
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; known: {sorted(MODELS)}")
    hpcnn_python = hpcnn_python or python
    runs = ([(f, hpcnn_python if f == "hpcnn" else python, f) for f in frameworks]
            + [(label, py, "hpcnn") for label, py in (baselines or {}).items()])
    times = {label: {"train": [], "infer": []} for label, _, _ in runs}
    lat: Dict[str, Dict[str, List[float]]] = {label: {} for label, _, _ in runs}
    params: Dict[str, object] = {}
    versions: Dict[str, Dict[str, str]] = {}
    for _ in range(rounds):
        for f, py, worker in runs:
            res = run_worker(py, worker, batch, steps, warmup, threads, model, latency_calls)
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
    """The comparison table, one line per framework and mode."""
    lines = [f"{'framework':<11}{'mode':<7}{'img/s':>9}{'+/-':>7}{'jitter':>8}{'ms/step':>9}{'GFLOP/s':>9}"
             f"{'% peak':>8}{'hpcnn/it':>10}"]
    for r in rows:
        lines.append(f"{FRAMEWORK_LABEL.get(r['framework'], r['framework']):<11}{r['mode']:<7}"
                     f"{r['mean_speed']:>9.0f}{r['speed_uncertainty']:>7.0f}{r['speed_jitter']:>8.0f}"
                     f"{1e3 * r['mean_time_per_step']:>9.1f}{r['gflops']:>9.1f}{r['percent_of_peak']:>8.1f}"
                     f"{r['hpcnn_speedup']:>9.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
