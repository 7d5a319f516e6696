#!/usr/bin/env python3
"""Per-operator forward/backward times of the tutorial CNN's layers at batch 250 on the CPU (or,
--model photos, of TensorFlow's Image classification model at 180x180, batch 32).

Every op is called through hpcnn._core.ops with repeat=R, so it runs R times inside C++ on the
same buffers (the NumPy conversions happen once per call, not per run); the figure is the median
of --trials calls divided by R. GFLOP/s use conv fwd = 2*N*OH*OW*F*KH*KW*C and the same for each
of bwd-data and bwd-filter (dense: 2*N*in*out per GEMM). The "training step estimate" is the sum
of all forward and backward times (what one step costs with no framework overhead), the
"inference estimate" the sum of the forward times (dropout and loss excluded).

    python -m bench.bench_ops [--model tutorial|photos] [--batch 250] [--threads N] [--trials 5] [--min-time 0.15]
                              [--clock wall|cpu]

With --depthwise: MobileNetV2's (224x224) depthwise convolutions instead (the op_cases rows
MOBILENETV2_DEPTHWISE, 3x3 'same', depth multiplier 1), then EfficientNetB0's others (its 5x5 ones,
EFFICIENTNETB0_DEPTHWISE) at --batch (give 32 for the issue's
figures), forward and backward (input and kernel gradients). A 3x3 depthwise layer does 2*9 FLOP per
output value and moves at least 4 bytes in and 4 out, so it is memory-bound: each row prints the
bandwidth it reaches counting one read of every input and one write of every output, against a
streaming kernel measured in the same run on the same threads (ops.multiply_forward of 256 MiB by
a per-row value: one read, one write per value), and its share of the FMA peak.

    python -m bench.bench_ops --depthwise --batch 32 [--threads N] [--peer PYTHON]

--peer PYTHON: also time PyTorch's depthwise convolution (channels_last, groups = channels) on the
same shapes, in a Python that has torch (a separate process per row, run right after hpcnn's row
so the two share the machine's state), with as many threads.

From the repository root, as a module: the layers' shapes are the rows of tests/support/op_cases.py,
which the op tests check against the float64 references (tests/core/ops/test_ops.py).
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

import hpcnn
from hpcnn import _core

try:
    from tests.support import op_cases
except ModuleNotFoundError as e:  # run as a file: the tests package is found from the root, by python -m
    raise SystemExit("run from the repository root: python -m bench.bench_ops [options]") from e

ops = _core.ops


CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
clock = time.perf_counter  # main() sets it from --clock


def timed(fn, min_time, trials):
    """Seconds per run of fn(repeat) (median over trials), repeat sized so one call takes ~min_time."""
    fn(1)  # warm-up: scratch buffers grow, pages fault in
    t0 = clock()
    fn(1)
    once = max(clock() - t0, 1e-6)
    repeat = max(1, int(min_time / once))
    samples = []
    for _ in range(trials):
        t0 = clock()
        fn(repeat)
        samples.append((clock() - t0) / repeat)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("tutorial", "photos"), default="tutorial",
                    help="tutorial: the CIFAR-10 tutorial CNN (32x32, 'same' pools); photos: TF's Image "
                         "classification model (180x180, 'valid' pools, Dense 30976->128)")
    ap.add_argument("--batch", type=int, default=None, help="default 250 (tutorial) or 32 (photos)")
    ap.add_argument("--threads", type=int, default=0, help="hpcnn threads (default: hpcnn's default)")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.15, help="seconds per timed call")
    ap.add_argument("--peak-seconds", type=float, default=1.0)
    ap.add_argument("--depthwise", action="store_true", help="time MobileNetV2's depthwise convolutions instead")
    ap.add_argument("--clock", choices=sorted(CLOCK), default="wall",
                    help="wall (default), or cpu: the process's CPU time (all threads), which other work "
                         "sharing the machine disturbs less; use it with --threads 1")
    ap.add_argument("--peer", default="", help="--depthwise: a Python with torch to time PyTorch on the same rows")
    args = ap.parse_args()
    global clock
    clock = CLOCK[args.clock]
    if args.threads:
        hpcnn.set_num_threads(args.threads)
    nt = hpcnn.get_num_threads()
    photos = args.model == "photos"
    n = args.batch or (op_cases.PHOTOS_BATCH if photos else 250)
    convs = op_cases.PHOTOS_CONVS if photos else op_cases.TUTORIAL_CNN_CONVS
    denses = op_cases.PHOTOS_DENSE if photos else op_cases.TUTORIAL_CNN_DENSE
    pool_padding = "valid" if photos else "same"  # Keras' MaxPooling2D() default vs the tutorial's 'same'
    classes = denses[-1][1]
    rng = np.random.default_rng(0)
    T, P = args.min_time, args.trials

    peak1 = ops.measure_peak_gflops(1, args.peak_seconds)
    peak = ops.measure_peak_gflops(nt, args.peak_seconds) if nt > 1 else peak1
    info = hpcnn.build_info()
    print(f"hpcnn {info['version']}  {info['compiler']}  BLAS {info['blas_vendor']} ({info['blas_config']})")
    print(f"machine: {platform.processor() or platform.machine()}, threads {nt}, batch {n}, {args.clock} clock")
    print(f"FP32 peak (FMA loop): {peak1:.1f} GFLOP/s on 1 thread, {peak:.1f} GFLOP/s on {nt} threads\n")

    if args.depthwise:
        return depthwise(n, rng, peak, T, P, args.peer, nt)

    rows = []  # (name, fwd_s, fwd_flops, bwd_s, bwd_flops)

    def glorot(*shape):
        fan_in = np.prod(shape[:-1])
        fan_out = shape[-1] * (np.prod(shape[:-2]) if len(shape) == 4 else 1)
        lim = np.sqrt(6 / (fan_in + fan_out))
        return rng.uniform(-lim, lim, shape).astype(np.float32)

    x = rng.random((n, convs[0].h, convs[0].h, convs[0].c), dtype=np.float32)
    for i, row in enumerate(convs):
        c, f, hw = row.c, row.f, row.h
        w, b = glorot(3, 3, c, f), np.zeros(f, np.float32)
        y = ops.conv2d_forward(x, w, b, padding="same", relu=True)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        need_dx = i > 0  # the first layer's input gradient is never needed
        ff = 2.0 * n * hw * hw * f * 9 * c
        tf = timed(lambda r: ops.conv2d_forward(x, w, b, padding="same", relu=True, repeat=r), T, P)
        tb = timed(lambda r: ops.conv2d_backward(x, w, y, dy, padding="same", relu=True, need_dx=need_dx,
                                                 repeat=r), T, P)
        rows.append((f"conv{i + 1} {c}->{f} @{hw}x{hw}", tf, ff, tb, ff * (2 if need_dx else 1)))
        p = ops.maxpool2d_forward(y, 2, 2, pool_padding)
        dp = rng.standard_normal(p.shape).astype(np.float32)
        tf = timed(lambda r: ops.maxpool2d_forward(y, 2, 2, pool_padding, repeat=r), T, P)
        tb = timed(lambda r: ops.maxpool2d_backward(y, p, dp, 2, 2, pool_padding, repeat=r), T, P)
        rows.append((f"pool{i + 1} 2x2 @{hw}x{hw}x{f}", tf, 0.0, tb, 0.0))
        x = p
    x = x.reshape(n, -1)
    for j, (i_, o, relu) in enumerate(denses):
        w, b = glorot(i_, o), np.zeros(o, np.float32)
        y = ops.dense_forward(x, w, b, relu=relu)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        ff = 2.0 * n * i_ * o
        tf = timed(lambda r: ops.dense_forward(x, w, b, relu=relu, repeat=r), T, P)
        tb = timed(lambda r: ops.dense_backward(x, w, y, dy, relu=relu, repeat=r), T, P)
        rows.append((f"dense{j + 1} {i_}->{o}", tf, ff, tb, 2 * ff))
        if relu and not photos:  # the tutorial CNN's dropouts follow its hidden dense layers
            tf = timed(lambda r: ops.dropout_forward(y, 0.2, seed=1, stream=2, repeat=r), T, P)
            tb = timed(lambda r: ops.dropout_backward(dy, 0.2, seed=1, stream=2, repeat=r), T, P)
            rows.append((f"dropout 0.2 ({o})", tf, None, tb, 0.0))
        x = y
    labels = rng.integers(0, classes, n).astype(np.int32)
    tl = timed(lambda r: ops.softmax_cross_entropy(x, labels, 1.0 / n, repeat=r), T, P)
    rows.append((f"softmax-xent ({classes})", None, None, tl, 0.0))  # fwd+bwd fused: counted once
    count = sum(9 * row.c * row.f + row.f for row in convs) + sum(i_ * o + o for i_, o, _ in denses)  # 787,530
    prm = rng.standard_normal(count).astype(np.float32) * 0.01
    g = rng.standard_normal(count).astype(np.float32) * 0.01
    m1, v1 = np.zeros(count, np.float32), np.zeros(count, np.float32)
    ta = timed(lambda r: ops.adam_step(prm, g, m1, v1, repeat=r), T, P)
    rows.append((f"adam ({count:,} params)", None, None, ta, 0.0))

    print(f"{'operator':28s} {'fwd ms':>8s} {'GFLOP/s':>8s} {'bwd ms':>8s} {'GFLOP/s':>8s}")
    tot_f = tot_b = fl_f = fl_b = 0.0
    infer = 0.0
    for name, tf, ff, tb, fb in rows:
        cols = [f"{name:28s}"]
        if tf is None:
            cols += [f"{'':>8s}", f"{'':>8s}"]
        else:
            tot_f += tf
            if ff is not None:
                infer += tf  # dropout is an identity at inference
            fl_f += ff or 0.0
            cols += [f"{tf * 1e3:8.2f}", f"{ff / tf * 1e-9:8.1f}" if ff else f"{'':>8s}"]
        tot_b += tb
        fl_b += fb
        cols += [f"{tb * 1e3:8.2f}", f"{fb / tb * 1e-9:8.1f}" if fb else f"{'':>8s}"]
        print(" ".join(cols))
    step = tot_f + tot_b
    print(f"\n{'total':28s} {tot_f * 1e3:8.2f} {fl_f / tot_f * 1e-9:8.1f} {tot_b * 1e3:8.2f} {fl_b / tot_b * 1e-9:8.1f}")
    gf = (fl_f + fl_b) / step * 1e-9
    print(f"training step estimate: {step * 1e3:.1f} ms/step = {n / step:.0f} img/s, {gf:.1f} GFLOP/s "
          f"({gf / peak * 100:.0f}% of the {peak:.0f} GFLOP/s peak)")
    print(f"inference estimate:     {infer * 1e3:.1f} ms/batch = {n / infer:.0f} img/s")


# PyTorch's depthwise convolution on one row, run by --peer's Python: prints "fwd_s bwd_s".
_TORCH_ROW = """
import sys, time, torch
n, h, c, k, s, threads, min_time = map(float, sys.argv[1:])
n, h, c, k, s, threads = int(n), int(h), int(c), int(k), int(s), int(threads)
torch.set_num_threads(threads)
conv = torch.nn.Conv2d(c, c, k, stride=s, padding=k // 2, groups=c, bias=False).to(memory_format=torch.channels_last)
x = torch.randn(n, c, h, h).to(memory_format=torch.channels_last).requires_grad_(True)
y = conv(x)
dy = torch.randn_like(y)
def timed(fn):
    fn(); t0 = time.perf_counter(); fn(); once = max(time.perf_counter() - t0, 1e-6)
    r = max(1, int(min_time / once)); best = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(r): fn()
        best.append((time.perf_counter() - t0) / r)
    return sorted(best)[1]
with torch.no_grad():
    tf = timed(lambda: conv(x))
def bwd():
    x.grad = None; conv.weight.grad = None
    torch.autograd.backward(conv(x), dy)
tb = timed(bwd) - tf  # the backward alone: its forward subtracted
print(tf, tb)
"""


def torch_row(peer, n, h, c, k, s, threads, min_time):
    """(fwd_s, bwd_s) of PyTorch on one row, or None when the peer fails (its message printed)."""
    import subprocess
    r = subprocess.run([peer, "-c", _TORCH_ROW, str(n), str(h), str(c), str(k), str(s), str(threads), str(min_time)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"  (PyTorch failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode})")
        return None
    tf, tb = map(float, r.stdout.split())
    return tf, tb


def depthwise(n, rng, peak, T, P, peer="", threads=1):
    """MobileNetV2's depthwise convolutions at batch n: times, GB/s against a measured stream, % of peak."""
    big = rng.random((4096, 16384), dtype=np.float32)  # 256 MiB: far beyond the caches
    scale = np.ones((4096, 1), np.float32)  # one value per row: a read and a write per element
    ts = timed(lambda r: ops.multiply_forward(big, scale, repeat=r), T, P)
    stream = 2 * big.nbytes / ts / 1e9
    print(f"streaming reference (multiply over 256 MiB, 1 read + 1 write): {stream:.1f} GB/s\n")
    print(f"{'depthwise (batch %d)' % n:30s} {'fwd ms':>8s} {'GB/s':>6s} {'%bw':>5s} {'%peak':>6s} "
          f"{'bwd ms':>8s} {'GB/s':>6s} {'%bw':>5s}" + (f" {'torch fwd':>9s} {'torch bwd':>9s}" if peer else ""))
    tot_tf = tot_tb = 0.0
    tot_f = tot_b = 0.0
    for row in op_cases.MOBILENETV2_DEPTHWISE + op_cases.EFFICIENTNETB0_DEPTHWISE:
        _, h, w, c, m, k, st, padding = row.case(n)
        x = rng.standard_normal((n, h, w, c)).astype(np.float32)
        kern = (rng.standard_normal((k, k, c, m)) * 0.3).astype(np.float32)
        y = ops.depthwise_conv2d_forward(x, kern, None, st, padding)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        tf = timed(lambda r: ops.depthwise_conv2d_forward(x, kern, None, st, padding, repeat=r), T, P)
        tb = timed(lambda r: ops.depthwise_conv2d_backward(x, kern, dy, st, padding, bias=False, repeat=r), T, P)
        flops = 2.0 * y.size * k * k
        bytes_f = x.nbytes + y.nbytes
        bytes_b = dy.nbytes + x.nbytes + x.nbytes  # reads dy and x, writes dx (dw is small)
        gf, gb = bytes_f / tf / 1e9, bytes_b / tb / 1e9
        tot_f, tot_b = tot_f + tf, tot_b + tb
        line = (f"{row.label():30s} {tf * 1e3:8.2f} {gf:6.1f} {gf / stream * 100:5.0f} "
                f"{flops / tf * 1e-9 / peak * 100:6.1f} {tb * 1e3:8.2f} {gb:6.1f} {gb / stream * 100:5.0f}")
        if peer:
            t = torch_row(peer, n, h, c, k, st, threads, T)
            if t:
                tot_tf, tot_tb = tot_tf + t[0], tot_tb + t[1]
                line += f" {t[0] * 1e3:9.2f} {t[1] * 1e3:9.2f}"
        print(line)
    print(f"\n{'sum of the rows':30s} {tot_f * 1e3:8.2f} {'':>6s} {'':>5s} {'':>6s} {tot_b * 1e3:8.2f}"
          + (f" {'':>6s} {'':>5s} {tot_tf * 1e3:9.2f} {tot_tb * 1e3:9.2f}" if peer else ""))


if __name__ == "__main__":
    main()
