// Times one layer's operators on random data, for the per-layer benchmarks (bench/bench_gpu.py
// through hpcnn._core.bench_*): mean milliseconds per call of the forward and of the backward op,
// measured inside C++ (CUDA events on the device's compute stream, or the host clock on the CPU)
// after one untimed call (algorithm choice, workspace allocation). Random values are drawn with
// fixed seeds, so a run is reproducible.
#pragma once

#include "core/device.h"
#include "core/tensor.h"
#include "ops/conv2d.h"

namespace hpcnn::diagnostics {

struct OpTiming {
  double forward_ms = 0;
  double backward_ms = 0;
  double forward_flops = 0;  // multiply-adds x 2 of one forward call (0 where not meaningful)
};

// x (N, H, W, C), kernel_shape Keras' (KH, KW, C, F) whatever the device's layout; backward computes dx too.
OpTiming time_conv2d(const Shape& x_shape, const Shape& kernel_shape, int stride, Padding padding, bool relu,
                     int repeat, Device device);
// x (N, H, W, C), square window `pool` with stride `pool`, 'valid' padding.
OpTiming time_maxpool2d(const Shape& x_shape, int pool, int repeat, Device device);
// x (N, in), kernel (in, out); backward computes dx too.
OpTiming time_dense(const Shape& x_shape, const Shape& kernel_shape, bool relu, int repeat, Device device);

}  // namespace hpcnn::diagnostics
