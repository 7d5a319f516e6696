#!/usr/bin/env python3
"""What folding BatchNormalization into the convolution before it saves in inference (issue 27),
measured in one process, call by call: ResNet-20 (shortcut B, as bench/bench_resnet.py) as the
core runs it now (every Conv2D + BN of the predict step folded, nn/step_plan.h), against the same
model with a Dropout(0) after every Conv2D, which passes every value unchanged and keeps the plan
from folding: the convolution and the normalization apart, as predict ran before. Same weights,
same build; the two alternate step by step, so a busy machine's slow moments fall on both alike.
Prints per batch size the median and the minimum step time of each and the median of the paired
ratios (apart / folded: above 1, the fold is faster).

    python bench/bench_fold.py [--batch 128 1] [--pairs 40] [--threads N]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import hpcnn
from hpcnn import applications
from hpcnn.layers import Conv2D, Dropout


class _ConvThenIdentity:
    """Conv2D(...)(x) followed by Dropout(0.0): an identity at inference that the fold cannot see through."""

    def __init__(self, *args, **kwargs):
        self.conv = Conv2D(*args, **kwargs)

    def __call__(self, x):
        return Dropout(0.0)(self.conv(x))


def resnet20(apart: bool):
    if not apart:
        return applications.resnet20_cifar(shortcut="B", seed=0)
    applications.Conv2D = _ConvThenIdentity  # the builder's own name for the layer, for this one model
    try:
        return applications.resnet20_cifar(shortcut="B", seed=0)
    finally:
        applications.Conv2D = Conv2D


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, nargs="+", default=[128, 1])
    p.add_argument("--pairs", type=int, default=40, help="alternating pairs of predict steps per batch size")
    p.add_argument("--threads", type=int, default=None)
    a = p.parse_args()
    if a.threads:
        hpcnn.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    folded, apart = resnet20(False), resnet20(True)
    x = rng.random((64, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, 64).astype(np.int32)
    folded.compile(hpcnn.optimizers.SGD(0.1, momentum=0.9), "sparse_categorical_crossentropy")
    folded.fit(x, y, batch_size=32, epochs=1, verbose=0)  # moving statistics away from 0 / 1
    apart.compile(hpcnn.optimizers.SGD(0.1, momentum=0.9), "sparse_categorical_crossentropy")
    apart.set_weights(folded.get_weights())
    print(f"# ResNet-20 (shortcut B) predict step, folded vs apart, {hpcnn.get_num_threads()} threads, "
          f"{a.pairs} alternating pairs per batch size")
    for n in a.batch:
        xb = rng.random((n, 32, 32, 3), dtype=np.float32)
        np.testing.assert_allclose(folded.core.predict_step((xb,)), apart.core.predict_step((xb,)), rtol=1e-4,
                                   atol=1e-6)
        times = {"folded": [], "apart": []}
        for _ in range(3):  # warm-up
            folded.core.predict_step((xb,)), apart.core.predict_step((xb,))
        for i in range(a.pairs):
            order = ("folded", "apart") if i % 2 == 0 else ("apart", "folded")
            for name in order:
                core = (folded if name == "folded" else apart).core
                t = time.perf_counter()
                core.predict_step((xb,))
                times[name].append(time.perf_counter() - t)
        ratios = [ta / tf for ta, tf in zip(times["apart"], times["folded"])]
        for name, ts in times.items():
            print(f"batch {n:4d} {name:7s} median {1e3 * statistics.median(ts):9.2f} ms  min {1e3 * min(ts):9.2f} ms"
                  f"  ({n / statistics.median(ts):.0f} img/s)")
        print(f"batch {n:4d} apart / folded: median of the paired ratios {statistics.median(ratios):.3f}x, "
              f"of the minimums {min(times['apart']) / min(times['folded']):.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
