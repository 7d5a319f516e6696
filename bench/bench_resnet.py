#!/usr/bin/env python3
"""Training and inference speed of ResNet-20 (CIFAR, He et al. 2016) at batch 128 on the CPU:
hpcnn vs PyTorch vs TensorFlow/Keras in one interleaved run, each framework in its own process.
bench/bench_train.py with --model resnet20 and batch 128 as defaults (one implementation,
hpcnn.bench.compare); every option of bench_train.py applies.

The model, the same in all three (trainable parameters printed and checked equal, 272,474): a 3x3
convolution with 16 filters, three stages of three basic blocks (3x3 Conv-BN-ReLU, 3x3 Conv-BN,
shortcut, Add, ReLU) with 16, 32 and 64 filters, global average pooling, Dense 10 + softmax;
convolutions without bias; where a stage halves the size, the shortcut is option B of the paper
(a 1x1 convolution of stride 2 with BN: the projection costs the same in every framework, where
option A's zero-padded subsampling would be done three different ways); BN epsilon 1e-3, momentum
0.99 (Keras' defaults). SGD 0.1, momentum 0.9, weight decay 1e-4. Random data in memory.

    python bench/bench_resnet.py --python /path/to/bench-venv/bin/python --rounds 3   # peers in a bench venv
    python bench/bench_resnet.py --frameworks hpcnn --rounds 1 --steps 2 --warmup 1 --batch 8   # smoke run
"""
from __future__ import annotations

import sys

if __package__:  # python -m bench.bench_resnet
    from bench import bench_train
else:  # python bench/bench_resnet.py: its folder is first on sys.path
    import bench_train

if __name__ == "__main__":
    sys.exit(bench_train.main(doc=__doc__, model="resnet20", batch=128))
