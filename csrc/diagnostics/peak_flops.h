// The machine's FP32 peak, measured: a loop of independent fused multiply-adds (512-bit where the
// CPU has AVX-512, else 256-bit) on `threads` of hpcnn's threads. Benchmarks report their GFLOP/s
// as a fraction of this figure.
#pragma once

namespace hpcnn::diagnostics {

// GFLOP/s (2 flops per FMA lane) sustained over about `seconds` of wall time on
// min(threads, get_num_threads()) threads. ValueError for threads < 1 or seconds <= 0.
double measure_peak_gflops(int threads, double seconds);

}  // namespace hpcnn::diagnostics
