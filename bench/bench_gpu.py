#!/usr/bin/env python3
"""GPU benchmark of the tutorial CNN (CIFAR-10, batch 250) on whatever GPU is found.

Prints, with the CPU figure of the same machine beside the GPU one:
  1. images/s for training (model.fit, the whole step) and inference (model.predict);
  2. per-layer forward/backward times (hpcnn._core.bench_*: CUDA events around repeated calls);
  3. the achieved FLOP rate as a % of the GPU's FP32 and TF32 peak.

Peak = SMs x peak SM clock (cudaDevAttrClockRate) x FLOP per SM per clock, from this table
(dense math, FMA = 2 FLOP; NVIDIA architecture whitepapers / datasheets):

  compute capability   FP32 FLOP/clk/SM   TF32 tensor FLOP/clk/SM   examples
  7.0                  128                -  (no TF32)             V100
  7.5                  128                -  (no TF32)             T4, RTX 20xx
  8.0                  128                1024                     A100, A30
  8.6 / 8.7            256                256                      A40, A10, RTX 30xx
  8.9                  256                256 (L40S: 512)          L4, L40, RTX 40xx
  9.0                  256                2048                     H100, H200, GH200
  10.x                 256                4096 (approximate)       B100, B200
  12.x                 256                256 (approximate)        RTX 50xx, RTX PRO Blackwell

Without a usable GPU it prints why and exits 0.
Usage: python bench/bench_gpu.py [--images 10000] [--batch 250] [--repeat 20] [--no-cpu]
"""
import argparse
import sys
import time

import numpy as np

import hpcnn
from hpcnn import _core

PEAK_PER_SM_CLK = {  # (FP32, TF32) FLOP per SM per clock; None = no TF32 tensor cores
    (7, 0): (128, None), (7, 2): (128, None), (7, 5): (128, None),
    (8, 0): (128, 1024), (8, 6): (256, 256), (8, 7): (256, 256), (8, 9): (256, 256),
    (9, 0): (256, 2048),
}

# The tutorial CNN (seeds/003): 4 x [Conv2D 3x3 same + ReLU, MaxPool 2x2 same], Flatten,
# Dense 256 ReLU, Dense 512 ReLU, Dense 10. Forward 30.9 MFLOP per image.
CONVS = [((32, 32, 3), 32), ((16, 16, 32), 64), ((8, 8, 64), 128), ((4, 4, 128), 256)]
DENSES = [(1024, 256, True), (256, 512, True), (512, 10, False)]
FWD_FLOP_PER_IMAGE = 30.9e6
TRAIN_FLOP_PER_IMAGE = 92.6e6  # forward + backward (data and filter gradients)


def peak_per_sm_clk(cc):
    if cc in PEAK_PER_SM_CLK:
        return PEAK_PER_SM_CLK[cc]
    major = cc[0]
    if major == 10:
        return (256, 4096)
    if major >= 11:
        return (256, 256)
    return (128, None)


def peaks(dev):
    clock_hz = _core.cuda_sm_clock_khz(dev.index) * 1e3
    fp32, tf32 = peak_per_sm_clk(tuple(dev.compute_capability))
    f = dev.multiprocessors * clock_hz
    return f * fp32, (f * tf32 if tf32 else None), clock_hz


def synthetic(n, seed=0):
    r = np.random.default_rng(seed)
    x = r.random((n, 32, 32, 3), dtype=np.float32)
    y = np.eye(10, dtype=np.float32)[r.integers(0, 10, n)]
    return x, y


def model_throughput(device, n_images, batch):
    """(training img/s, inference img/s) of the tutorial CNN through the public API."""
    if not hasattr(hpcnn, "models"):
        raise RuntimeError("hpcnn.models is not part of this build yet")
    x, y = synthetic(n_images)
    model = hpcnn.models.tutorial_cnn()
    model.compile(optimizer=hpcnn.optimizers.Adam(learning_rate=1e-3), loss="categorical_crossentropy",
                  metrics=["accuracy"], device=device)
    warm = min(n_images, 4 * batch)
    model.fit(x[:warm], y[:warm], batch_size=batch, epochs=1, shuffle=False, verbose=0)  # algorithms, buffers
    t0 = time.perf_counter()
    model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    train = n_images / (time.perf_counter() - t0)
    model.predict(x[:warm], batch_size=batch, verbose=0)
    t0 = time.perf_counter()
    model.predict(x, batch_size=batch, verbose=0)
    infer = n_images / (time.perf_counter() - t0)
    return train, infer


def layer_times(device, batch, repeat):
    rows = []
    for (h, w, c), f in CONVS:
        r = _core.bench_conv2d((batch, h, w, c), (3, 3, c, f), 1, "same", True, repeat, device)
        rows.append((f"conv2d {h}x{w}x{c} -> {f}", r))
        r = _core.bench_maxpool2d((batch, h, w, f), 2, repeat, device)
        rows.append((f"maxpool {h}x{w}x{f}", r))
    for i, o, relu in DENSES:
        r = _core.bench_dense((batch, i), (i, o), relu, repeat, device)
        rows.append((f"dense {i} -> {o}", r))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--cpu-images", type=int, default=2000)
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU figures")
    args = ap.parse_args()

    reason = _core.cuda_unavailable_reason()
    if reason:
        print(f"bench_gpu: no usable GPU, nothing to measure: {reason}")
        return 0
    info = _core.build_info()
    dev = _core.cuda_devices()[0]
    p32, ptf32, clock = peaks(dev)
    print(f"hpcnn {info['version']}, CUDA {info['cuda_version']} (runtime {info['cuda_runtime_version']}, "
          f"driver {info['cuda_driver_version']}), cuDNN {info['cudnn_version']}, cuBLAS {info['cublas_version']}")
    print(f"GPU 0: {dev.name}, compute capability {dev.compute_capability[0]}.{dev.compute_capability[1]}, "
          f"{dev.multiprocessors} SMs at {clock / 1e9:.2f} GHz, {dev.total_memory / 2**30:.1f} GiB, "
          f"{dev.memory_bandwidth_gbs:.0f} GB/s")
    print(f"peak: FP32 {p32 / 1e12:.1f} TFLOP/s" + (f", TF32 {ptf32 / 1e12:.1f} TFLOP/s" if ptf32 else ", no TF32")
          + f"; TF32 {'on' if _core.cuda_get_tf32() and ptf32 else 'off'}")
    print(f"CPU: {hpcnn.get_num_threads()} threads, BLAS {info['blas_vendor']}")
    print()

    print(f"== tutorial CNN, batch {args.batch} (model.fit / model.predict, in-memory data)")
    try:
        tr, inf = model_throughput("gpu", args.images, args.batch)
        eff = tr * TRAIN_FLOP_PER_IMAGE
        print(f"GPU  training  {tr:10.0f} img/s   ({eff / 1e12:.2f} TFLOP/s = {100 * eff / p32:.1f} % of FP32 peak"
              + (f", {100 * eff / ptf32:.1f} % of TF32 peak)" if ptf32 else ")"))
        print(f"GPU  inference {inf:10.0f} img/s")
        if not args.no_cpu:
            tr_c, inf_c = model_throughput("cpu", args.cpu_images, args.batch)
            print(f"CPU  training  {tr_c:10.0f} img/s   (GPU/CPU = {tr / tr_c:.1f}x)")
            print(f"CPU  inference {inf_c:10.0f} img/s   (GPU/CPU = {inf / inf_c:.1f}x)")
    except (AttributeError, RuntimeError, TypeError) as e:
        print(f"model throughput not measured: {e}")
    print()

    print(f"== per layer, batch {args.batch}, mean of {args.repeat} calls (GPU: CUDA events; CPU: host clock)")
    gpu_rows = layer_times("gpu:0", args.batch, args.repeat)
    cpu_rows = layer_times("cpu", args.batch, max(2, args.repeat // 10)) if not args.no_cpu else None
    print(f"{'layer':28s} {'fwd ms':>8s} {'bwd ms':>8s} {'fwd TFLOP/s':>12s} {'% FP32':>7s}"
          + (f" {'CPU fwd':>8s} {'CPU bwd':>8s}" if cpu_rows else ""))
    tot_f = tot_b = 0.0
    for i, (name, r) in enumerate(gpu_rows):
        f, b = r["forward_ms"], r["backward_ms"]
        tot_f += f
        tot_b += b
        rate = r["forward_flops"] / (f * 1e-3) if r["forward_flops"] else 0.0
        line = f"{name:28s} {f:8.3f} {b:8.3f} {rate / 1e12:12.2f} {100 * rate / p32:7.1f}"
        if cpu_rows:
            line += f" {cpu_rows[i][1]['forward_ms']:8.2f} {cpu_rows[i][1]['backward_ms']:8.2f}"
        print(line)
    print(f"{'sum of layers':28s} {tot_f:8.3f} {tot_b:8.3f}   -> at most {args.batch / ((tot_f + tot_b) * 1e-3):.0f} "
          f"img/s for the layers alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
