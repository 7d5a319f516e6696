#!/usr/bin/env python3
"""The memory of a training step's activations and gradients: the planned arena (csrc/nn/
step_plan.h: a buffer is reused once nothing later in the step reads it) against keeping every
buffer of the step for the whole step ("keep all": what `memory_reuse = False` allocates) and
against one buffer per activation plus two gradient buffers of the largest activation (how the
model allocated before plans), for the tutorial CNN and a CIFAR ResNet (He et al. 2016, depth
6n+2: 3x3 convolutions, 16/32/64 filters, 1x1 projections where the shape changes).

    python bench/bench_memory.py                 # batch 128, ResNet-20
    python bench/bench_memory.py --batch 250 --depth 56

No timing: the numbers are exact for the build (planned bytes; parameters, optimizer state and
the staged batch not included). The ResNet uses BatchNormalization after each convolution and
GlobalAveragePooling2D before its Dense output when this hpcnn has them; otherwise conv (+ fused
ReLU) and Flatten, and says so.
"""
from __future__ import annotations

import argparse


def resnet_cifar(depth: int = 20, classes: int = 10):
    """A CIFAR ResNet of the layers this hpcnn has (see the module docstring)."""
    import hpcnn
    from hpcnn import layers as L
    if (depth - 2) % 6:
        raise SystemExit(f"depth must be 6n+2 (20, 32, 56, ...), got {depth}")
    bn = getattr(L, "BatchNormalization", None)
    gap = getattr(L, "GlobalAveragePooling2D", None)

    def conv(x, filters, strides=1, relu=True, kernel=3):
        if bn is None:
            return L.Conv2D(filters, kernel, strides=strides, padding="same", activation="relu" if relu else None)(x)
        y = bn()(L.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False)(x))
        return L.Activation("relu")(y) if relu else y

    x = hpcnn.Input(shape=(32, 32, 3))
    y = conv(x, 16)
    for stage, filters in enumerate((16, 32, 64)):
        for block in range((depth - 2) // 6):
            strides = 2 if stage > 0 and block == 0 else 1
            h = conv(conv(y, filters, strides), filters, relu=False)
            shortcut = y if strides == 1 else conv(y, filters, strides, relu=False, kernel=1)
            y = L.Activation("relu")(L.Add()([h, shortcut]))
    y = gap()(y) if gap is not None else L.Flatten()(y)
    model = hpcnn.Model(x, L.Dense(classes, activation="softmax")(y), name=f"resnet{depth}")
    variant = ("BatchNormalization" if bn else "no BatchNormalization (conv + fused ReLU)") + ", " + \
              ("GlobalAveragePooling2D" if gap else "Flatten") + " head"
    return model, variant


def main(argv=None):
    import hpcnn
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--depth", type=int, default=20)
    a = p.parse_args(argv)
    resnet, variant = resnet_cifar(a.depth)
    models = [(hpcnn.models.tutorial_cnn(seed=0), "the tutorial CNN"), (resnet, variant)]
    mib = 1024.0 ** 2
    print(f"# batch {a.batch}; MiB of a step's activations and gradients (hpcnn {hpcnn.__version__})")
    print(f"{'model':<14}{'params':>10}{'keep all':>10}{'one buffer/act':>16}{'train':>10}{'test':>10}"
          f"{'predict':>10}{'train saves':>13}")
    for model, what in models:
        model.compile("adam", "categorical_crossentropy")
        r = model.core.memory_report(a.batch)
        print(f"{model.name:<14}{model.count_params():>10,}{r['train_keep_all'] / mib:>10.1f}"
              f"{r['one_buffer_per_activation'] / mib:>16.1f}{r['train'] / mib:>10.1f}{r['test'] / mib:>10.1f}"
              f"{r['predict'] / mib:>10.1f}{1 - r['train'] / r['train_keep_all']:>12.0%}  ({what})")


if __name__ == "__main__":
    main()
