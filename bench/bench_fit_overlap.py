#!/usr/bin/env python3
"""Does loading show in a training step? The tutorial CNN trained with model.fit for one epoch
(batch 250) from: (1) NumPy arrays already in memory, (2) the tutorial's own HDF5 file (h5py
`chunks=True`, gzip) streamed with cache='none', (3) a file written by hpcnn.data.write_hdf5,
streamed, (4) the tutorial's file cached in memory; with --augment also (5) the arrays and (6) the
tutorial's file streamed into the same CNN led by the CIFAR augmentation (RandomFlip("horizontal"),
ZeroPadding2D(4), RandomCrop(32, 32): run by the batch stager, fused into the gather and decode).
Prints img/s and the step-time ratio to (1) and, for (6), to (2): what augmentation adds to a step.
Modes are interleaved over --rounds to spread machine noise.

    python bench/bench_fit_overlap.py --rows 10000 --rounds 2 [--augment]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import hpcnn
from bench_loader import make_images  # beside this script: the same compressible images as the loader bench


def augmentation_op_ms(x8: np.ndarray, reps: int = 100) -> dict:
    """The staged augmentation's passes timed alone (hpcnn._core.ops.augment, the op the batch
    stager runs): flip fused with the gather of 250 shuffled rows (float32, and uint8 decoded on the
    way), the padded crop of a gathered batch, RandomRotation(0.1) and RandomZoom(0.1) (Keras'
    defaults: reflect, bilinear) fused with the gather and decode and on a gathered batch, and the
    TensorFlow CNN tutorials' block (RandomFlip("horizontal"), RandomRotation(0.1), RandomZoom(0.1):
    three passes, the first fused with the gather and decode); NumPy's gather of the same rows for
    scale."""
    from hpcnn._core import ops
    rng = np.random.default_rng(1)
    xf = x8.astype(np.float32) / 255.0
    rows = rng.permutation(len(x8))[:250].astype(np.int64)
    flip = dict(class_name="RandomFlip", mode="horizontal")
    crop = dict(class_name="RandomCrop", height=32, width=32)
    rotation = dict(class_name="RandomRotation", factor_lo=-0.1, factor_hi=0.1, fill_mode="reflect",
                    fill_value=0.0, interpolation="bilinear")
    zoom = dict(class_name="RandomZoom", height_lo=-0.1, height_hi=0.1, fill_mode="reflect", fill_value=0.0,
                interpolation="bilinear")
    decode = dict(scale=[1 / 255] * 3, shift=[0.0] * 3)
    batch = xf[rows]

    def tutorial_block() -> None:
        for _ in range(reps):
            y = ops.augment(x8, flip, rows=rows, **decode)
            ops.augment(ops.augment(y, rotation, stream=1), zoom, stream=2)

    def ms(call) -> float:
        call()  # warm
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) / reps * 1e3)
        return statistics.median(times)

    return {
        "flip + gather (float32)": ms(lambda: ops.augment(xf, flip, rows=rows, repeat=reps)),
        "flip + gather + decode (uint8)": ms(lambda: ops.augment(x8, flip, rows=rows, scale=[1 / 255] * 3,
                                                                 shift=[0.0] * 3, repeat=reps)),
        "padded crop (pad 4)": ms(lambda: ops.augment(batch, crop, padding=[4, 4, 4, 4], repeat=reps)),
        "rotation 0.1 + gather + decode (uint8)": ms(lambda: ops.augment(x8, rotation, rows=rows, **decode,
                                                                         repeat=reps)),
        "rotation 0.1 of a gathered batch": ms(lambda: ops.augment(batch, rotation, repeat=reps)),
        "zoom 0.1 of a gathered batch": ms(lambda: ops.augment(batch, zoom, repeat=reps)),
        "flip + rotation + zoom (uint8 rows; + NumPy's copies out)": ms(tutorial_block),
        "NumPy x[rows] (float32)": ms(lambda: [xf[rows] for _ in range(reps)]),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--dir", default=tempfile.gettempdir())
    p.add_argument("--augment", action="store_true", help="also the CNN led by flip + padded crop")
    p.add_argument("--op-reps", type=int, default=100, help="--augment: calls per timing of the op alone")
    a = p.parse_args(argv)
    import h5py  # only to write the tutorial's file exactly as the tutorial does
    rng = np.random.default_rng(0)
    x = make_images(a.rows, "smooth", rng)
    y = rng.integers(0, 10, (a.rows, 1)).astype(np.uint8)
    tut = os.path.join(a.dir, "overlap_tutorial.hdf5")
    mine = os.path.join(a.dir, "overlap_hpcnn.hdf5")
    with h5py.File(tut, "w") as hf:
        hf.create_dataset("x_train", data=x, shape=x.shape, compression="gzip", chunks=True)
        hf.create_dataset("y_train", data=y, shape=y.shape, compression="gzip", chunks=True)
    hpcnn.data.write_hdf5(mine, {"x_train": x, "y_train": y})
    xf = x.astype(np.float32) / 255.0
    yi = y.ravel().astype(np.int32)

    def model(augment: bool) -> hpcnn.Sequential:
        if not augment:
            return hpcnn.models.tutorial_cnn(seed=0)
        from hpcnn.layers import InputLayer, RandomCrop, RandomFlip, ZeroPadding2D
        m = hpcnn.Sequential([InputLayer(input_shape=[32, 32, 3]), RandomFlip("horizontal"), ZeroPadding2D(4),
                              RandomCrop(32, 32)], name="tutorial_cnn_augmented", seed=0)
        for layer in hpcnn.models.tutorial_cnn(seed=0).layers:
            m.add(type(layer).from_config(layer.get_config()))
        return m

    def run(mode: str) -> float:
        m = model("augmented" in mode)
        m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
        m.train_on_batch(xf[:250], yi[:250])  # warm the buffers
        if mode.startswith("memory arrays"):
            h = m.fit(xf, yi, batch_size=250, epochs=1, verbose=0)
        else:
            path = tut if "tutorial" in mode else mine
            cache = "memory" if "cache" in mode else "none"
            with hpcnn.data.HDF5Dataset(path, batch_size=250, seed=0, cache=cache) as ds:
                h = m.fit(ds, epochs=1, verbose=0)
        return h.images_per_second[0]

    modes = ["memory arrays", "tutorial file, streamed", "write_hdf5 file, streamed", "tutorial file, memory cache"]
    if a.augment:
        modes += ["memory arrays, augmented", "tutorial file, streamed, augmented"]
    res = {m: [] for m in modes}
    for _ in range(a.rounds):
        for m in modes:
            res[m].append(run(m))
    base = statistics.median(res[modes[0]])
    print(f"# tutorial CNN, model.fit, batch 250, {a.rows} rows, {hpcnn.get_num_threads()} threads, "
          f"{a.rounds} interleaved rounds (median)")
    print(f"{'input':<36}{'img/s':>9}{'step time vs arrays':>22}")
    for m in modes:
        v = statistics.median(res[m])
        print(f"{m:<36}{v:>9.0f}{base / v:>21.3f}x")
    if a.augment:
        op_ms = augmentation_op_ms(x, a.op_reps)
        print(f"the augmentation op alone, per batch of 250 (median of 5 x {a.op_reps} calls): "
              + ", ".join(f"{k} {v:.2f} ms" for k, v in op_ms.items()))
        for plain in ("memory arrays", "tutorial file, streamed"):
            ratio = statistics.median(res[plain]) / statistics.median(res[plain + ", augmented"])
            print(f"augmentation's cost, {plain}: step time x{ratio:.3f}")
    for f in (tut, mine):
        os.remove(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
