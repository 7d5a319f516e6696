#!/usr/bin/env python3
"""Per-operator times of the layers a ResNet-20 (CIFAR) adds to the tutorial CNN: batch norm
(training forward/backward, with and without the fused ReLU, inference), the downsampling
convolutions (3x3 and 1x1, stride 2, no bias), global average pooling and the element-wise
activations, at ResNet-20's shapes, batch 128 by default.

Timing as bench/bench_ops.py: each op runs `repeat` times inside C++ on the same buffers and the
figure is the median over --trials calls, per run. Alongside each memory-bound op, the bandwidth it
reaches counting one read of every input and one write of every output (GB/s), and for the
convolutions GFLOP/s. On a GPU (--device gpu:0) the times include the host's wait for the device.

    python -m bench.bench_layer_ops [--batch 128] [--threads N] [--device cpu] [--trials 5]

From the repository root, as a module: the shapes are the rows of tests/support/op_cases.py, which
the op tests check against the float64 references (tests/core/ops/test_layer_ops.py).

With --step: where the time of one ResNet-20 training step goes instead. Every layer of
hpcnn.applications.resnet20_cifar (shortcut 'B' as bench/bench_resnet.py, or --shortcut A) is
timed at its own shapes, forward and backward, with the ops the core's step calls (BN+ReLU fused
where the model fuses it, no input gradient for the first convolution), plus the loss and the
SGD update; the times are summed per op type and set against the model's measured step (the
remainder: what the step does besides the ops, e.g. gradient accumulation where a tensor has two
readers, the regularizer, memory traffic between ops).

    python -m bench.bench_layer_ops --step [--batch 128] [--threads N]

--step also breaks down one inference step (evaluate, predict) the same way, in two columns: each
convolution and its BatchNormalization as two ops (conv2d, then the normalization with the moving
statistics), the way inference ran before issue 27, and as the core now runs them, the
normalization folded into the convolution's kernel and bias and its ReLU fused
(ops.conv_bn_fold, nn/step_plan.h): one convolution with bias and ReLU, plus the fold itself.
"""
from __future__ import annotations

import argparse

import numpy as np

import hpcnn
from hpcnn import _core

try:
    from bench.bench_ops import timed
    from tests.support import op_cases
except ModuleNotFoundError as e:  # run as a file: the packages are found from the root, by python -m
    raise SystemExit("run from the repository root: python -m bench.bench_layer_ops [options]") from e

ops = _core.ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0, help="hpcnn threads (default: hpcnn's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.15, help="seconds per timed call")
    ap.add_argument("--step", action="store_true", help="the per-op-type breakdown of one ResNet-20 step")
    ap.add_argument("--shortcut", default="B", choices=["A", "B"], help="ResNet-20's shortcut for --step")
    ap.add_argument("--steps", type=int, default=10, help="--step: model steps timed for the comparison")
    args = ap.parse_args()
    if args.threads:
        hpcnn.set_num_threads(args.threads)
    if args.step:
        resnet_step(args)
        return
    n, dev, T, P = args.batch, args.device, args.min_time, args.trials
    rng = np.random.default_rng(0)
    print(f"hpcnn {hpcnn.__version__}, device {dev}, {hpcnn.get_num_threads()} threads, batch {n}")
    print(f"{'op':44s} {'ms':>8s}  {'rate':>14s}")

    def row(name: str, seconds: float, rate: str) -> None:
        print(f"{name:44s} {seconds * 1e3:8.3f}  {rate:>14s}")

    for h, c in op_cases.RESNET20_BATCHNORM:
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

    for conv in op_cases.RESNET20_DOWNSAMPLE_CONVS:
        h, c, f, k = conv.h, conv.c, conv.f, conv.k
        x = rng.standard_normal((n, h, h, c)).astype(np.float32)
        w = (rng.standard_normal((k, k, c, f)) * 0.1).astype(np.float32)
        y = ops.conv2d_forward(x, w, None, conv.s, "same", device=dev)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        flops = 2.0 * y.size * k * k * c
        shape = conv.label()
        t = timed(lambda r: ops.conv2d_forward(x, w, None, conv.s, "same", device=dev, repeat=r), T, P)
        row(f"conv2d forward {shape}", t, f"{flops / t / 1e9:.1f} GFLOP/s")
        t = timed(lambda r: ops.conv2d_backward(x, w, y, dy, conv.s, "same", False, True, device=dev, repeat=r,
                                                bias=False), T, P)
        row(f"conv2d backward (dx, dw) {shape}", t, f"{2 * flops / t / 1e9:.1f} GFLOP/s")

    x = rng.standard_normal((n, 8, 8, 64)).astype(np.float32)
    t = timed(lambda r: [ops.global_pool2d_forward(x, "avg", device=dev) for _ in range(r)], T, P)
    row("global average pool 8x8x64 (incl. conversions)", t, "")

    x = rng.standard_normal((n, 32, 32, 16)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    alpha = op_cases.ACTIVATION_ALPHA
    for name in op_cases.ACTIVATIONS_TIMED:
        y = ops.activation_forward(x, name, alpha, device=dev)
        t = timed(lambda r: ops.activation_forward(x, name, alpha, device=dev, repeat=r), T, P)
        row(f"{name} forward 32x32x16", t, f"{x.size / t / 1e9:.2f} Gelem/s")
        t = timed(lambda r: ops.activation_backward(x, y, dy, name, alpha, device=dev, repeat=r), T, P)
        row(f"{name} backward 32x32x16", t, f"{x.size / t / 1e9:.2f} Gelem/s")


def _repeat(fn):
    """An op without `repeat`: called r times from Python (its conversions included)."""
    return lambda r: [fn() for _ in range(r)]


def resnet_step(args) -> None:
    """Per-op-type forward/backward times of one ResNet-20 training step (see the docstring)."""
    from collections import defaultdict

    from hpcnn import bench, layers as L
    from hpcnn.applications import resnet20_cifar
    n, dev, T, P = args.batch, args.device, args.min_time, args.trials
    rng = np.random.default_rng(0)
    model = resnet20_cifar(shortcut=args.shortcut, seed=0)
    nodes = model.graph_nodes()
    fused = [core == ["BatchNormalization+relu"] for core in model.core.core_layers]  # the core's lowering
    fused_relu = {id(nodes[i + 0][0].output_tensor) for i, f in enumerate(fused) if f}
    fwd, bwd, count = defaultdict(float), defaultdict(float), defaultdict(int)
    # inference: per op type, the ops apart (conv, then BN) and folded (conv with bias and ReLU, and the fold)
    apart, folded = defaultdict(float), defaultdict(float)
    bn_after = {}  # id of a convolution's output tensor -> the BatchNormalization that alone reads it
    for layer, _ in nodes:
        if isinstance(layer, L.BatchNormalization):
            bn_after[id(layer.inbound_tensors[0])] = layer
    can_fold = hasattr(ops, "conv_bn_fold")  # an older build: the apart column only
    # A tensor read by several layers gathers its gradient: the reader whose backward runs first
    # (the last in node order) writes it, every other one adds to it. A Conv2D adds in its own
    # backward-data (add_to, issue 27) where the build has that; otherwise, and for a pass-through
    # Add, a separate accumulate pass does.
    can_add = "add_to" in (ops.conv2d_backward.__doc__ or "")
    last_reader = {}
    for i, (layer, _) in enumerate(nodes):
        for t in layer.inbound_tensors:
            last_reader[id(t)] = i
    acc_key = "accumulate* (a tensor read twice: its second gradient)"
    # A training step's residual block tails (issue 27, nn/step_plan.h): an Add read only by a ReLU
    # is computed, with that ReLU, by its later BatchNormalization input, where the build can
    # (batchnorm_forward_training's residual): one pass; the Add and the ReLU are then no ops.
    can_tail = "residual" in (ops.batchnorm_forward_training.__doc__ or "")
    producer = {id(layer.output_tensor): i for i, (layer, _) in enumerate(nodes)}
    readers = defaultdict(list)
    for i, (layer, _) in enumerate(nodes):
        for t in layer.inbound_tensors:
            readers[id(t)].append(i)
    tail_bn, tail_nodes = set(), set()  # the BN nodes computing a tail; the Add and ReLU nodes they compute
    for i, (layer, _) in enumerate(nodes):
        r = readers[id(layer.output_tensor)]
        if not (can_tail and isinstance(layer, L.Add) and len(layer.inbound_tensors) == 2 and len(r) == 1
                and isinstance(nodes[r[0]][0], L.ReLU)):
            continue
        bns = [producer[id(t)] for t in layer.inbound_tensors
               if id(t) in producer and isinstance(nodes[producer[id(t)]][0], L.BatchNormalization)
               and len(readers[id(t)]) == 1 and id(t) not in fused_relu]
        if bns:
            tail_bn.add(max(bns))
            tail_nodes.update((i, r[0]))
    tail_key = "batch_norm + add + relu (block tail, fused)"
    tail_noop = "add + relu (in the tail's batch norm: no op)"

    def arr(shape):
        return rng.standard_normal((n,) + tuple(shape)).astype(np.float32)

    first_conv = True
    for node, (layer, _) in enumerate(nodes):
        ins = [t.sample_shape for t in layer.inbound_tensors]
        out = layer.output_tensor.sample_shape
        x, dy = arr(ins[0]), arr(out)
        adds = [last_reader[id(t)] != node for t in layer.inbound_tensors]  # per input: adds to its gradient
        conv_adds = isinstance(layer, L.Conv2D) and adds[0] and can_add
        for a in adds:
            if a and not conv_adds:
                bwd[acc_key] += timed(_repeat(lambda: ops.accumulate(x, x, device=dev)), T, P)
                count[acc_key] += 1
        if isinstance(layer, L.Conv2D):
            k, s = layer.kernel_size[0], layer.strides[0]
            w = (rng.standard_normal((k, k, ins[0][-1], layer.filters)) * 0.1).astype(np.float32)
            y = ops.conv2d_forward(x, w, None, s, layer.padding, device=dev)
            key = f"conv2d {k}x{k} stride {s}"
            fwd[key] += timed(lambda r: ops.conv2d_forward(x, w, None, s, layer.padding, device=dev, repeat=r), T, P)
            t_apart = timed(lambda r: ops.conv2d_forward(x, w, None, s, layer.padding, device=dev, repeat=r), T, P)
            apart[key] += t_apart
            bn = bn_after.get(id(layer.output_tensor))
            if bn is not None and can_fold:
                c = layer.filters
                ones, zeros = np.ones(c, np.float32), np.zeros(c, np.float32)
                relu_after = id(bn.output_tensor) in fused_relu
                folded[key + " + batch_norm (folded)"] += timed(
                    lambda r: ops.conv2d_forward(x, w, zeros, s, layer.padding, relu_after, device=dev, repeat=r), T, P)
                folded["conv_bn_fold* (the kernel, per call)"] += timed(
                    _repeat(lambda: ops.conv_bn_fold(w, None, ones, zeros, zeros, ones, bn.epsilon, device=dev)), T, P)
            else:
                folded[key] += t_apart
            need_dx = not first_conv
            extra = {"add_to": arr(ins[0])} if conv_adds else {}
            bwd[key] += timed(lambda r: ops.conv2d_backward(x, w, y, dy, s, layer.padding, False, need_dx, device=dev,
                                                            repeat=r, bias=False, **extra), T, P)
            first_conv = False
        elif isinstance(layer, L.BatchNormalization):
            c = ins[0][-1]
            g, b = np.ones(c, np.float32), np.zeros(c, np.float32)
            relu = id(layer.output_tensor) in fused_relu
            y, m, v, i = ops.batchnorm_forward_training(x, g, b, layer.epsilon, relu, device=dev)
            key = "batch_norm + relu (fused)" if relu else "batch_norm"
            if node in tail_bn:  # training: the Add and ReLU in its pass, its backward masks dy in place
                res = arr(out)
                y, m, v, i = ops.batchnorm_forward_training(x, g, b, layer.epsilon, True, device=dev, residual=res)
                fwd[tail_key] += timed(lambda r: ops.batchnorm_forward_training(
                    x, g, b, layer.epsilon, True, device=dev, repeat=r, residual=res), T, P)
                bwd[tail_key] += timed(lambda r: ops.batchnorm_backward_training(x, y, dy, g, m, i, layer.epsilon, True,
                                                                                 device=dev, repeat=r), T, P)
                count[tail_key] += 1
                apart[key + " (inference)"] += timed(
                    lambda r: ops.batchnorm_forward_inference(x, g, b, g * 0, g, layer.epsilon, relu, device=dev,
                                                              repeat=r), T, P)
                if not can_fold:
                    folded[key + " (inference)"] = apart[key + " (inference)"]
                continue
            fwd[key] += timed(lambda r: ops.batchnorm_forward_training(x, g, b, layer.epsilon, relu, device=dev,
                                                                       repeat=r), T, P)
            apart[key + " (inference)"] += timed(
                lambda r: ops.batchnorm_forward_inference(x, g, b, g * 0, g, layer.epsilon, relu, device=dev,
                                                          repeat=r), T, P)
            if not can_fold:
                folded[key + " (inference)"] = apart[key + " (inference)"]
            bwd[key] += timed(lambda r: ops.batchnorm_backward_training(x, y, dy, g, m, i, layer.epsilon, relu,
                                                                        device=dev, repeat=r), T, P)
        elif isinstance(layer, (L.ReLU, L.Activation)):
            key = "relu"
            if any(id(t) in fused_relu for t in layer.inbound_tensors):
                count["relu (fused into batch_norm: no op)"] += 1
                continue
            y = ops.activation_forward(x, "relu", device=dev)
            t_relu = timed(lambda r: ops.activation_forward(x, "relu", device=dev, repeat=r), T, P)
            apart[key] += t_relu  # the ReLUs not fused into a batch norm (after the Adds), in inference
            folded[key] += t_relu
            if node in tail_nodes:
                count[tail_noop] += 1
                continue
            fwd[key] += t_relu
            bwd[key] += timed(lambda r: ops.activation_backward(x, y, dy, "relu", device=dev, repeat=r), T, P)
        elif isinstance(layer, L.Add):
            key = "add* (backward: the gradient passes through)"
            xs = [arr(sh) for sh in ins]
            t_add = timed(_repeat(lambda: ops.add(xs, device=dev)), T, P)
            apart["add*"] += t_add
            folded["add*"] += t_add
            if node in tail_nodes:
                continue  # counted with the ReLU, as one no op
            fwd[key] += t_add
        elif isinstance(layer, L.GlobalAveragePooling2D):
            key = "global average pool*"
            y = ops.global_pool2d_forward(x, "avg", device=dev)
            fwd[key] += timed(_repeat(lambda: ops.global_pool2d_forward(x, "avg", device=dev)), T, P)
            apart[key] = folded[key] = fwd[key]
            bwd[key] += timed(_repeat(lambda: ops.global_pool2d_backward(x, y, dy, "avg", device=dev)), T, P)
        elif isinstance(layer, L.Dense):
            key = "dense"
            kw = (rng.standard_normal((ins[0][-1], layer.units)) * 0.1).astype(np.float32)
            bias = np.zeros(layer.units, np.float32)
            y = ops.dense_forward(x, kw, bias, device=dev)
            fwd[key] += timed(lambda r: ops.dense_forward(x, kw, bias, device=dev, repeat=r), T, P)
            apart[key] = folded[key] = fwd[key]
            bwd[key] += timed(lambda r: ops.dense_backward(x, kw, y, dy, device=dev, repeat=r), T, P)
            labels = rng.integers(0, layer.units, n).astype(np.int32)
            fwd["softmax + cross-entropy (forward and gradient)"] += timed(
                lambda r: ops.softmax_cross_entropy(y, labels, device=dev, repeat=r), T, P)
        elif isinstance(layer, L.MaxPooling2D):
            key = "shortcut A: subsample (1x1 max-pool, stride 2)"
            y = ops.maxpool2d_forward(x, layer.pool_size, layer.strides, device=dev)
            fwd[key] += timed(lambda r: ops.maxpool2d_forward(x, layer.pool_size, layer.strides, device=dev,
                                                              repeat=r), T, P)
            bwd[key] += timed(lambda r: ops.maxpool2d_backward(x, y, dy, layer.pool_size, layer.strides, device=dev,
                                                               repeat=r), T, P)
        elif isinstance(layer, L.Rescaling):
            key = "shortcut A: zero channels (Rescaling(0))*"
            sc, off = np.zeros(ins[0][-1], np.float32), np.zeros(ins[0][-1], np.float32)
            fwd[key] += timed(_repeat(lambda: ops.scale_shift_forward(x, sc, off, device=dev)), T, P)
            bwd[key] += timed(_repeat(lambda: ops.scale_shift_backward(dy, sc, device=dev)), T, P)
        elif isinstance(layer, L.Concatenate):
            key = "shortcut A: concatenate*"
            xs = [arr(sh) for sh in ins]
            fwd[key] += timed(_repeat(lambda: ops.concatenate(xs, device=dev)), T, P)
            sizes = [sh[-1] for sh in ins]
            bwd[key] += timed(_repeat(lambda: ops.split(dy, sizes, device=dev)), T, P)
        else:
            raise RuntimeError(f"bench_layer_ops --step: no timing for {type(layer).__name__}")
        count[key] += 1
    params = model.count_params()
    pw, pg, pv = (rng.standard_normal(params).astype(np.float32) for _ in range(3))
    fwd["SGD update* (momentum 0.9), all weights"] += timed(
        _repeat(lambda: ops.sgd_step(pw, pg, pv, 0.1, 0.9, device=dev)), T, P)
    count["SGD update* (momentum 0.9), all weights"] = 1
    count["softmax + cross-entropy (forward and gradient)"] = 1

    # The whole step of the same model, as fit calls it per batch (SGD 0.1, momentum 0.9, weight decay 1e-4).
    m = resnet20_cifar(shortcut=args.shortcut, weight_decay=1e-4, seed=0)
    m.compile(hpcnn.optimizers.SGD(0.1, momentum=0.9), "sparse_categorical_crossentropy", ["accuracy"], device=dev)
    core = m.core
    xb = rng.random((n, 32, 32, 3), dtype=np.float32)
    yb = rng.integers(0, 10, n).astype(np.int32)
    step = float(np.median(bench.time_steps(lambda: core.train_step((xb, yb)), args.steps, 2)))
    pred = float(np.median(bench.time_steps(lambda: core.predict_step((xb,)), args.steps, 2)))
    total = sum(fwd.values()) + sum(bwd.values())
    print(f"== one ResNet-20 training step (shortcut {args.shortcut}), batch {n}, {dev}, "
          f"{hpcnn.get_num_threads()} threads")
    print(f"{'op type':52s} {'count':>5s} {'fwd ms':>8s} {'bwd ms':>8s} {'% of ops':>9s}")
    for key in sorted(set(fwd) | set(bwd) | set(count), key=lambda k: -(fwd[k] + bwd[k])):
        t = fwd[key] + bwd[key]
        print(f"{key:52s} {count[key]:>5d} {fwd[key] * 1e3:8.2f} {bwd[key] * 1e3:8.2f} {100 * t / total:8.1f} %")
    print(f"{'sum of the ops':52s} {'':>5s} {sum(fwd.values()) * 1e3:8.2f} {sum(bwd.values()) * 1e3:8.2f}")
    print(f"measured training step (model.train_step, median of {args.steps}): {step * 1e3:.2f} ms "
          f"({n / step:.0f} img/s); the ops' sum is {100 * total / step:.0f} % of it")
    print(f"measured inference step (predict, median of {args.steps}): {pred * 1e3:.2f} ms ({n / pred:.0f} img/s)")
    print()
    print(f"== one ResNet-20 inference step (predict), batch {n}, {dev}: the convolutions and their batch norms "
          "apart (before issue 27) and folded (now)")
    print(f"{'op type':52s} {'apart ms':>9s} {'folded ms':>10s}")
    for key in sorted(set(apart) | set(folded), key=lambda k: -max(apart[k], folded[k])):
        print(f"{key:52s} {apart[key] * 1e3:9.2f} {folded[key] * 1e3:10.2f}")
    ta, tf_ = sum(apart.values()), sum(folded.values())
    print(f"{'sum of the ops':52s} {ta * 1e3:9.2f} {tf_ * 1e3:10.2f}   (apart / folded: {ta / tf_:.2f}x)")
    print("*: an op without a `repeat` argument, called from Python: its NumPy conversions are included (an "
          "upper bound)")
    print("(the ops run one at a time here, each on warm buffers; in the step they share the caches less)")


if __name__ == "__main__":
    main()
