"""The op cases: tables of operator shapes read both by the op tests, which check each row against
the float64 references (tests/core/ops/test_ops.py, test_layer_ops.py), and by the op benchmarks,
which time the same rows (bench/bench_ops.py, bench/bench_layer_ops.py): as ggml's
tests/test-backend-ops.cpp serves one table of op cases as test and benchmark. A benchmark row is
an image shape with no batch: the benchmark runs it at its --batch, the tests at TEST_BATCH, so a
shape that is timed is also a shape whose result is checked.

Adding a layer shape to a benchmark: add its row here; the tests pick it up."""
from __future__ import annotations

import dataclasses

TEST_BATCH = 2  # the batch at which the tests check the benchmark rows


@dataclasses.dataclass(frozen=True)
class Conv:
    """A square convolution over an h x h x c image to f filters, k x k, stride s, padding 'same'."""

    h: int
    c: int
    f: int
    k: int = 3
    s: int = 1
    relu: bool = False
    bias: bool = True

    def case(self, n: int = TEST_BATCH) -> tuple:
        """(n, h, w, c, f, k, s, padding): the tests' conv case of this row at batch n."""
        return (n, self.h, self.h, self.c, self.f, self.k, self.s, "same")

    def label(self) -> str:
        return f"{self.k}x{self.k} s{self.s} {self.h}x{self.h}x{self.c}->{self.f}"


# ------------------------------------------------------------------ rows the benchmarks time
# The tutorial CNN's convolutions (3x3 'same' with ReLU, each followed by a 2x2 max-pool): bench_ops.py.
TUTORIAL_CNN_CONVS = [Conv(32, 3, 32, relu=True), Conv(16, 32, 64, relu=True), Conv(8, 64, 128, relu=True),
                      Conv(4, 128, 256, relu=True)]
# The tutorial CNN's dense layers: (inputs, outputs, relu): bench_ops.py.
TUTORIAL_CNN_DENSE = [(1024, 256, True), (256, 512, True), (512, 10, False)]
# TensorFlow's "Image classification" tutorial model at 180x180 (batch 32): its convolutions (3x3
# 'same' with ReLU, each followed by a 2x2 'valid' max-pool: 180 -> 90 -> 45 -> 22) and its dense
# layers after Flatten (22*22*64 = 30,976 inputs): bench_ops.py --model photos.
PHOTOS_CONVS = [Conv(180, 3, 16, relu=True), Conv(90, 16, 32, relu=True), Conv(45, 32, 64, relu=True)]
PHOTOS_DENSE = [(30976, 128, True), (128, 5, False)]
PHOTOS_BATCH = 32  # the tutorial's batch: the dense layer's wide-kernel path needs 16-64 rows
# ResNet-20's batch normalizations, per stage: (h, channels): bench_layer_ops.py.
RESNET20_BATCHNORM = [(32, 16), (16, 32), (8, 64)]
# ResNet-20's downsampling convolutions (stride 2, no bias; 3x3 in the block, 1x1 on the shortcut).
RESNET20_DOWNSAMPLE_CONVS = [Conv(32, 16, 32, 3, 2, bias=False), Conv(16, 32, 64, 3, 2, bias=False),
                             Conv(32, 16, 32, 1, 2, bias=False), Conv(16, 32, 64, 1, 2, bias=False)]
# The element-wise activations timed at ResNet-20's first stage (32x32x16), with their alpha.
ACTIVATIONS_TIMED = ("gelu", "swish", "tanh", "sigmoid", "leaky_relu", "elu", "mish")
ACTIVATION_ALPHA = 0.2


@dataclasses.dataclass(frozen=True)
class Depthwise:
    """A depthwise convolution over an h x h x c image, k x k, stride s, depth multiplier m,
    padding 'same' (as MobileNetV2's blocks: stride 2 after an explicit ZeroPadding2D there, which
    gives the same output size as 'same' at even sizes)."""

    h: int
    c: int
    k: int = 3
    s: int = 1
    m: int = 1

    def case(self, n: int = TEST_BATCH) -> tuple:
        """(n, h, w, c, m, k, s, padding): the tests' depthwise case of this row at batch n."""
        return (n, self.h, self.h, self.c, self.m, self.k, self.s, "same")

    def label(self) -> str:
        return f"dw{self.k}x{self.k} s{self.s} {self.h}x{self.h}x{self.c}"


# MobileNetV2's (alpha 1, 224x224) depthwise convolutions, one row per distinct shape: bench_ops.py.
MOBILENETV2_DEPTHWISE = [Depthwise(112, 32), Depthwise(112, 96, s=2), Depthwise(56, 144), Depthwise(56, 144, s=2),
                         Depthwise(28, 192), Depthwise(28, 192, s=2), Depthwise(14, 384), Depthwise(14, 576),
                         Depthwise(14, 576, s=2), Depthwise(7, 960)]
# EfficientNetB0's (224x224) depthwise convolutions that MobileNetV2 has not: its 5x5 ones and its wider
# stages (bench_ops.py --depthwise times them after MobileNetV2's).
EFFICIENTNETB0_DEPTHWISE = [Depthwise(56, 144, k=5, s=2), Depthwise(28, 240, k=5), Depthwise(28, 240, s=2),
                            Depthwise(14, 480), Depthwise(14, 480, k=5), Depthwise(14, 672, k=5),
                            Depthwise(14, 672, k=5, s=2), Depthwise(7, 1152, k=5), Depthwise(7, 1152)]
