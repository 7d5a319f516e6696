#!/usr/bin/env python3
"""Per-operator times of the layers a ResNet-20 (CIFAR) adds to the tutorial CNN: batch norm
(training forward/backward, with and without the fused ReLU, inference), the downsampling
convolutions (3x3 and 1x1, stride 2, no bias), global average pooling and the element-wise
activations, at ResNet-20's shapes, batch 128 by default.

Timing as bench/bench_ops.py: each op runs `repeat` times inside C++ on the same buffers and the
figure is the median over --trials calls, per run. Alongside each memory-bound op, the bandwidth it
reaches counting one read of every input and one write of every output (GB/s), and for the
convolutions GFLOP/s. On a GPU (--device gpu:0) the times include the host's wait for the device.

    python bench/bench_layer_ops.py [--batch 128] [--threads N] [--device cpu] [--trials 5]
"""
from __future__ import annotations

import argparse

import numpy as np

import hpcnn
from bench_ops import timed
from hpcnn import _core

ops = _core.ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0, help="hpcnn threads (default: hpcnn's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.15, help="seconds per timed call")
    args = ap.parse_args()
    if args.threads:
        hpcnn.set_num_threads(args.threads)
    n, dev, T, P = args.batch, args.device, args.min_time, args.trials
    rng = np.random.default_rng(0)
    print(f"hpcnn {hpcnn.__version__}, device {dev}, {hpcnn.get_num_threads()} threads, batch {n}")
    print(f"{'op':44s} {'ms':>8s}  {'rate':>14s}")

    def row(name: str, seconds: float, rate: str) -> None:
        print(f"{name:44s} {seconds * 1e3:8.3f}  {rate:>14s}")

    for h, c in ((32, 16), (16, 32), (8, 64)):
        x = rng.standard_normal((n, h, h, c)).astype(np.float32)
        g, b = np.ones(c, np.float32), np.zeros(c, np.float32)
        y, m, v, i = ops.batchnorm_forward_training(x, g, b, device=dev)
        dy = rng.standard_normal(x.shape).astype(np.float32)
        mb = x.nbytes / 1e9
        shape = f"{h}x{h}x{c}"
        t = timed(lambda r: ops.batchnorm_forward_training(x, g, b, device=dev, repeat=r), T, P)
        row(f"batch_norm forward (training) {shape}", t, f"{2 * mb / t:.1f} GB/s")
        t = timed(lambda r: ops.batchnorm_forward_training(x, g, b, 1e-3, True, device=dev, repeat=r), T, P)
        row(f"batch_norm+relu forward (training) {shape}", t, f"{2 * mb / t:.1f} GB/s")
        t = timed(lambda r: ops.batchnorm_backward_training(x, y, dy, g, m, i, device=dev, repeat=r), T, P)
        row(f"batch_norm backward {shape}", t, f"{3 * mb / t:.1f} GB/s")
        t = timed(lambda r: ops.batchnorm_backward_training(x, y, dy, g, m, i, 1e-3, True, device=dev, repeat=r),
                  T, P)
        row(f"batch_norm+relu backward {shape}", t, f"{4 * mb / t:.1f} GB/s")
        t = timed(lambda r: ops.batchnorm_forward_inference(x, g, b, m, v, device=dev, repeat=r), T, P)
        row(f"batch_norm forward (inference) {shape}", t, f"{2 * mb / t:.1f} GB/s")
        t = timed(lambda r: ops.activation_forward(x, "relu", device=dev, repeat=r), T, P)
        row(f"relu forward (a separate layer) {shape}", t, f"{2 * mb / t:.1f} GB/s")

    for (h, c, f, k) in ((32, 16, 32, 3), (16, 32, 64, 3), (32, 16, 32, 1), (16, 32, 64, 1)):
        x = rng.standard_normal((n, h, h, c)).astype(np.float32)
        w = (rng.standard_normal((k, k, c, f)) * 0.1).astype(np.float32)
        y = ops.conv2d_forward(x, w, None, 2, "same", device=dev)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        flops = 2.0 * y.size * k * k * c
        shape = f"{k}x{k} s2 {h}x{h}x{c}->{f}"
        t = timed(lambda r: ops.conv2d_forward(x, w, None, 2, "same", device=dev, repeat=r), T, P)
        row(f"conv2d forward {shape}", t, f"{flops / t / 1e9:.1f} GFLOP/s")
        t = timed(lambda r: ops.conv2d_backward(x, w, y, dy, 2, "same", False, True, device=dev, repeat=r,
                                                bias=False), T, P)
        row(f"conv2d backward (dx, dw) {shape}", t, f"{2 * flops / t / 1e9:.1f} GFLOP/s")

    x = rng.standard_normal((n, 8, 8, 64)).astype(np.float32)
    t = timed(lambda r: [ops.global_pool2d_forward(x, "avg", device=dev) for _ in range(r)], T, P)
    row("global average pool 8x8x64 (incl. conversions)", t, "")

    x = rng.standard_normal((n, 32, 32, 16)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    for name in ("gelu", "swish", "tanh", "sigmoid", "leaky_relu", "elu", "mish"):
        y = ops.activation_forward(x, name, 0.2, device=dev)
        t = timed(lambda r: ops.activation_forward(x, name, 0.2, device=dev, repeat=r), T, P)
        row(f"{name} forward 32x32x16", t, f"{x.size / t / 1e9:.2f} Gelem/s")
        t = timed(lambda r: ops.activation_backward(x, y, dy, name, 0.2, device=dev, repeat=r), T, P)
        row(f"{name} backward 32x32x16", t, f"{x.size / t / 1e9:.2f} Gelem/s")


if __name__ == "__main__":
    main()
