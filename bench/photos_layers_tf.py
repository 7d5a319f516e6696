#!/usr/bin/env python3
"""TensorFlow's side of the per-layer profile of its "Image classification" model at 180x180
(bench_ops.py --model photos is hpcnn's): each Keras layer as a tf.function on its own input at
batch 32, forward, and forward + backward under a GradientTape (the weights' gradients, and the
input's for every layer but the first: the same work as hpcnn's ops); median of --steps calls after
3 warm-up calls. Run with an interpreter that has TensorFlow:

    python bench/photos_layers_tf.py [--threads 1] [--clock cpu] [--steps 6] [--batch 32]

Prints one row per layer: forward ms, backward ms (forward + backward less forward).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--clock", choices=("wall", "cpu"), default="cpu",
                   help="cpu (default): the process's CPU time, as bench_ops.py --clock cpu; wall: elapsed time")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=32)
    a = p.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    L = tf.keras.layers
    layers = [("conv1 3->16 @180x180", L.Conv2D(16, 3, padding="same", activation="relu")),
              ("pool1 2x2 @180x180x16", L.MaxPooling2D()),
              ("conv2 16->32 @90x90", L.Conv2D(32, 3, padding="same", activation="relu")),
              ("pool2 2x2 @90x90x32", L.MaxPooling2D()),
              ("conv3 32->64 @45x45", L.Conv2D(64, 3, padding="same", activation="relu")),
              ("pool3 2x2 @45x45x64", L.MaxPooling2D()), ("flatten", L.Flatten()),
              ("dense1 30976->128", L.Dense(128, activation="relu")), ("dense2 128->5", L.Dense(5))]
    x = tf.constant(np.random.default_rng(0).random((a.batch, 180, 180, 3), dtype=np.float32))
    print(f"tensorflow {tf.__version__}, {a.threads} intra-op threads, batch {a.batch}, {a.clock} clock, "
          f"median of {a.steps}")
    print(f"{'layer':28s} {'fwd ms':>8s} {'bwd ms':>8s}")
    for i, (name, layer) in enumerate(layers):
        y = layer(x)
        forward = tf.function(lambda t, layer=layer: layer(t))

        def both(t, layer=layer, first=i == 0):
            with tf.GradientTape() as tape:
                if not first:  # the first layer's input gradient is never needed
                    tape.watch(t)
                out = layer(t)
                loss = tf.reduce_sum(out * out)
            return [g for g in tape.gradient(loss, [t] + layer.trainable_weights) if g is not None]

        both = tf.function(both)
        for _ in range(3):
            forward(x)
            both(x)
        tf_, tb_ = [], []
        for _ in range(a.steps):
            t0 = clock()
            forward(x).numpy()
            tf_.append(clock() - t0)
            t0 = clock()
            [g.numpy() for g in both(x)]
            tb_.append(clock() - t0)
        fwd = statistics.median(tf_)
        print(f"{name:28s} {fwd * 1e3:8.2f} {(statistics.median(tb_) - fwd) * 1e3:8.2f}")
        x = y
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
