// The depthwise forward pass with AVX-512 (depthwise_conv2d_avx512_cpu.cpp), chosen at run time by
// depthwise_conv2d_cpu.cpp where small_gemm_isa() says "avx512" (HPCNN_AVX512=0 keeps AVX2). Not
// for other callers.
#pragma once

#include "ops/depthwise_conv2d.h"

namespace hpcnn::cpu {

// Output row (n, oy) of the forward pass (xn: image n, yrow: the row's ow * c outputs) for depth
// multiplier 1: the same bits as the AVX2 kernel (each output the bias, then one fused multiply-add
// per tap in (ky, kx) order). False, and nothing written, where this build has no AVX-512 kernel.
bool depthwise_forward_row_avx512(const DepthwiseGeometry& g, const float* xn, const float* w, const float* b,
                                  float* yrow, int oy);

}  // namespace hpcnn::cpu
