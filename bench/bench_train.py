#!/usr/bin/env python3
"""Training and inference speed of the tutorial CNN on the CPU: hpcnn vs PyTorch vs
TensorFlow/Keras, measured side by side in one run (frameworks interleaved round by round, each
in its own process so their thread pools and OpenMP runtimes never meet).

    python bench/bench_train.py                      # hpcnn only, or whatever is importable
    python bench/bench_train.py --python /path/to/bench-venv/bin/python --rounds 3

Prints per framework: img/s (mean, uncertainty, jitter), ms/step, GFLOP/s, % of the measured FP32
peak, and the ratios to hpcnn. Random data (speed does not depend on pixel values).
Tutorial CNN: 30.9 MFLOP forward per image, 92.6 MFLOP per training image (fwd + bwd-data +
bwd-filter; the first conv's bwd-data is not needed).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

FWD_MFLOP = 30.9    # = hpcnn.bench.TUTORIAL_FWD_MFLOP (repeated: workers import no hpcnn)
TRAIN_MFLOP = 92.6  # = hpcnn.bench.TUTORIAL_TRAIN_MFLOP


# ------------------------------------------------------------------ workers (one framework each)
def worker_hpcnn(a):
    import hpcnn
    from hpcnn.bench import tutorial_cnn_step_times
    hpcnn.set_num_threads(a.threads)
    return tutorial_cnn_step_times("cpu", a.batch, a.steps, a.warmup)


def worker_torch(a):
    import torch
    from torch import nn
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    layers, c = [], 3
    for f in (32, 64, 128, 256):
        layers += [nn.Conv2d(c, f, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2)]
        c = f
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(1024, 256), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(256, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    lossf = nn.CrossEntropyLoss()
    x = torch.rand(a.batch, 3, 32, 32).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (a.batch,))

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    def infer_step():
        with torch.no_grad():
            return torch.softmax(model(x), 1)

    from hpcnn.bench import time_steps
    model.train()
    train = time_steps(train_step, a.steps, a.warmup)
    model.eval()
    infer = time_steps(infer_step, a.steps, a.warmup)
    return train, infer


def worker_tf(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    L = tf.keras.layers
    model = tf.keras.Sequential([tf.keras.Input(shape=(32, 32, 3))])
    for f in (32, 64, 128, 256):
        model.add(L.Conv2D(f, 3, padding="same", activation="relu"))
        model.add(L.MaxPooling2D(2, 2, padding="same"))
    for layer in (L.Flatten(), L.Dense(256, activation="relu"), L.Dropout(0.2), L.Dense(512, activation="relu"),
                  L.Dropout(0.2), L.Dense(10, activation="softmax")):
        model.add(layer)
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    rng = np.random.default_rng(0)
    n = a.batch * (a.steps + a.warmup)
    x = rng.random((n, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, n)

    class Timer(tf.keras.callbacks.Callback):
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
    model.fit(x, y, batch_size=a.batch, epochs=1, verbose=0, shuffle=False, callbacks=[tt])
    ti = Timer()
    model.predict(x, batch_size=a.batch, verbose=0, callbacks=[ti])
    return tt.times[a.warmup:], ti.times[a.warmup:]


WORKERS = {"hpcnn": worker_hpcnn, "torch": worker_torch, "tensorflow": worker_tf}
IMPORT_NAME = {"hpcnn": "hpcnn", "torch": "torch", "tensorflow": "tensorflow"}


# ------------------------------------------------------------------ driver
def available(python: str, module: str) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def run_worker(python: str, fw: str, a) -> dict:
    cmd = [python, os.path.abspath(__file__), "--worker", fw, "--batch", str(a.batch), "--steps", str(a.steps),
           "--warmup", str(a.warmup), "--threads", str(a.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{fw} worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=250)
    p.add_argument("--steps", type=int, default=12, help="timed steps per round")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds over the frameworks")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: hpcnn's default)")
    p.add_argument("--frameworks", default="hpcnn,torch,tensorflow")
    p.add_argument("--python", default=sys.executable, help="interpreter for the workers (a bench venv)")
    p.add_argument("--csv", default=None, help="append one row per framework and mode to this CSV")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.threads is None:
        import hpcnn
        a.threads = hpcnn.get_num_threads()
    if a.worker:
        train, infer = WORKERS[a.worker](a)
        print(json.dumps({"train": train, "infer": infer}))
        return 0

    import hpcnn
    from hpcnn.bench import append_csv, machine_description, peak_gflops, step_stats
    fws = [f for f in a.frameworks.split(",") if f]
    present = [f for f in fws if available(a.python, IMPORT_NAME[f])]
    for f in fws:
        if f not in present:
            print(f"# {f}: not importable by {a.python}; skipped")
    peak = peak_gflops(a.threads, 1.0)
    print(f"# machine: {machine_description()}")
    print(f"# threads: {a.threads}; batch {a.batch}; {a.rounds} rounds x {a.steps} steps (+{a.warmup} warm-up)")
    print(f"# FP32 peak (FMA loop, {a.threads} threads): " + (f"{peak:.1f} GFLOP/s" if peak else "not measured"))
    times = {f: {"train": [], "infer": []} for f in present}
    for r in range(a.rounds):
        for f in present:
            res = run_worker(a.python, f, a)
            times[f]["train"] += res["train"]
            times[f]["infer"] += res["infer"]
    results = {}
    print(f"\n{'framework':<11}{'mode':<7}{'img/s':>9}{'+/-':>7}{'jitter':>8}{'ms/step':>9}{'GFLOP/s':>9}"
          f"{'% peak':>8}{'x hpcnn':>9}")
    for mode, mflop in (("train", TRAIN_MFLOP), ("infer", FWD_MFLOP)):
        for f in present:
            s = step_stats(times[f][mode], a.batch)
            results[(f, mode)] = s
        base = results.get(("hpcnn", mode))
        for f in present:
            s = results[(f, mode)]
            gf = s["mean_speed"] * mflop / 1e3
            pct = 100 * gf / peak if peak else float("nan")
            ratio = s["mean_speed"] / base["mean_speed"] if base else float("nan")
            print(f"{f:<11}{mode:<7}{s['mean_speed']:>9.0f}{s['speed_uncertainty']:>7.0f}{s['speed_jitter']:>8.0f}"
                  f"{1e3 * s['mean_time_per_step']:>9.1f}{gf:>9.1f}{pct:>8.1f}{ratio:>9.2f}")
            if a.csv:
                append_csv(a.csv, {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine_description(),
                                   "framework": f, "mode": mode, "threads": a.threads, **s, "gflops": gf,
                                   "peak_gflops": peak or "", "percent_of_peak": pct})
    if "hpcnn" in present:
        for f in present:
            if f != "hpcnn":
                for mode in ("train", "infer"):
                    r = results[("hpcnn", mode)]["mean_speed"] / results[(f, mode)]["mean_speed"]
                    print(f"# hpcnn / {f} ({mode}): {r:.2f}x")
    print(f"# hpcnn build: {hpcnn.build_info()['blas_config']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
