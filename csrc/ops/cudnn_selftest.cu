// The host-only check of the cuDNN descriptors against cuDNN itself (cudnn_selftest.h): beside the
// cuDNN calls, since it reads back what their descriptor types (cudnn_descriptors.h,
// cudnn_conv_plan.h) hold. No GPU needed.
#include "ops/cudnn_selftest.h"

#include <exception>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ops/conv2d_layout.h"
#include "ops/cudnn_conv_plan.h"
#include "ops/depthwise_conv2d_body.h"

namespace hpcnn::cuda {

// Host-only check of the descriptors against cuDNN itself (cudnn_selftest.h): for Keras
// geometries (including the explicit-padding ones) cuDNN must compute our output size, lay the
// NHWC tensors out packed with C innermost, and read the filter back as NHWC (k, c, h, w) =
// (filters, in, kh, kw), i.e. KRSC memory: the dims of the OHWI kernel buffer the CUDA backend
// holds (kernel_shape(OHWI, ...) = (k, h, w, c)), with as many elements.
std::vector<SelftestResult> cudnn_descriptor_selftest() {
  struct Case { int n, h, w, c, f, k, s; Padding pad; };
  const Case cases[] = {{250, 32, 32, 3, 32, 3, 1, Padding::Same}, {250, 16, 16, 32, 64, 3, 1, Padding::Same},
                        {4, 30, 30, 32, 32, 3, 1, Padding::Valid}, {3, 16, 16, 8, 16, 3, 2, Padding::Same},
                        {2, 15, 17, 5, 7, 2, 1, Padding::Same},    {2, 9, 9, 6, 4, 5, 2, Padding::Valid},
                        {50, 28, 28, 1, 32, 5, 1, Padding::Same}};
  double bad = 0;
  for (const Case& k : cases) {
    Conv2dGeometry g = Conv2dGeometry::make(k.n, k.h, k.w, k.c, k.f, k.k, k.k, k.s, k.s, k.pad);
    cudnn::ConvShape s = body::conv_geom(g);
    ConvPlan p;
    try {
      set_descriptors(p, s);  // throws when cuDNN's output size differs from ours
    } catch (const std::exception&) {
      bad += 1;
      continue;
    }
    auto packed_nhwc = [&](cudnnTensorDescriptor_t d, int n, int c, int h, int w) {
      cudnnDataType_t dt;
      int dn, dc, dh, dw, sn, sc, sh, sw;
      if (cudnnGetTensor4dDescriptor(d, &dt, &dn, &dc, &dh, &dw, &sn, &sc, &sh, &sw) != CUDNN_STATUS_SUCCESS)
        return false;
      return dt == CUDNN_DATA_FLOAT && dn == n && dc == c && dh == h && dw == w && sc == 1 && sw == c &&
             sh == w * c && sn == h * w * c;
    };
    if (!packed_nhwc(p.x.d, s.n, s.c, s.h, s.w)) bad += 1;
    if (!packed_nhwc(p.y.d, s.n, s.f, s.oh, s.ow)) bad += 1;
    cudnnDataType_t dt;
    cudnnTensorFormat_t fmt;
    int fk, fc, fh, fw;
    if (cudnnGetFilter4dDescriptor(p.w.d, &dt, &fmt, &fk, &fc, &fh, &fw) != CUDNN_STATUS_SUCCESS ||
        fmt != CUDNN_TENSOR_NHWC || fk != s.f || fc != s.c || fh != s.kh || fw != s.kw)
      bad += 1;
    // The descriptor describes the kernel buffer the CUDA backend holds, as it is: NHWC filter
    // memory is k x h x w x c, which must be the OHWI shape conv2d_layout.h gives that buffer, with
    // as many bytes as cuDNN says the filter has.
    const KernelDims kd{g.kh, g.kw, g.c, g.f};
    const Shape held = kernel_shape(kConv2dKernelLayout, kd);
    size_t filter_bytes = 0;
    if (held != Shape{fk, fh, fw, fc} || cudnnGetFilterSizeInBytes(p.w.d, &filter_bytes) != CUDNN_STATUS_SUCCESS ||
        filter_bytes != sizeof(float) * static_cast<size_t>(shape_numel(held)))
      bad += 1;
  }
  // Depthwise convolutions (depthwise_conv2d_cuda.cu): a grouped convolution of c groups, one input
  // channel per filter, the dilation as given; cuDNN must compute our output size (with dilation and
  // the explicit-padding path) and read the group count, dilation and filter dims back. And the
  // KRSC kernel's element i is Keras' element depthwise_keras_index(i): (k, ky, kx) <- (ky, kx, k).
  double dw_bad = 0;
  struct DwCase { int n, h, w, c, m, k, s, d; Padding pad; };
  const DwCase dw_cases[] = {{32, 112, 112, 96, 1, 3, 2, 1, Padding::Same}, {2, 14, 14, 576, 1, 3, 1, 1, Padding::Same},
                             {2, 8, 9, 3, 2, 3, 2, 1, Padding::Same},       {1, 11, 9, 4, 3, 2, 1, 2, Padding::Valid},
                             {2, 10, 10, 6, 1, 5, 1, 2, Padding::Same}};
  for (const DwCase& k : dw_cases) {
    const DepthwiseGeometry g = DepthwiseGeometry::make(k.n, k.h, k.w, k.c, k.m, k.k, k.k, k.s, k.s, k.d, k.d, k.pad);
    const cudnn::ConvShape s = body::depthwise_geom(g);
    ConvPlan p;
    try {
      set_descriptors(p, s);
    } catch (const std::exception&) {
      dw_bad += 1;
      continue;
    }
    int groups = 0, ph, pw, u, v, dh, dwd;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t dt;
    if (cudnnGetConvolutionGroupCount(p.conv.d, &groups) != CUDNN_STATUS_SUCCESS || groups != k.c) dw_bad += 1;
    if (cudnnGetConvolution2dDescriptor(p.conv.d, &ph, &pw, &u, &v, &dh, &dwd, &mode, &dt) != CUDNN_STATUS_SUCCESS ||
        dh != k.d || dwd != k.d || u != k.s || mode != CUDNN_CROSS_CORRELATION)
      dw_bad += 1;
    cudnnTensorFormat_t fmt;
    int fk, fc, fh, fw;
    if (cudnnGetFilter4dDescriptor(p.w.d, &dt, &fmt, &fk, &fc, &fh, &fw) != CUDNN_STATUS_SUCCESS ||
        fmt != CUDNN_TENSOR_NHWC || fk != k.c * k.m || fc != 1 || fh != k.k || fw != k.k)
      dw_bad += 1;
    const int taps = k.k * k.k, oc = k.c * k.m;
    for (int kk = 0; kk < oc; kk += 1 + oc / 7)
      for (int t = 0; t < taps; ++t)
        dw_bad += body::depthwise_keras_index((long long)kk * taps + t, taps, oc) == (long long)t * oc + kk ? 0 : 1;
  }
  // The fused call's fallback must take every "not supported" sub-code and nothing else.
  double misread = 0;
  for (int code : {3000, 3002, 3004, 3011})  // NOT_SUPPORTED, _SHAPE, _LAYOUT, _PADDING
    misread += is_not_supported(static_cast<cudnnStatus_t>(code)) ? 0 : 1;
  for (cudnnStatus_t st : {CUDNN_STATUS_SUCCESS, CUDNN_STATUS_BAD_PARAM, CUDNN_STATUS_EXECUTION_FAILED,
                           CUDNN_STATUS_INTERNAL_ERROR})
    misread += is_not_supported(st) ? 1 : 0;
  // Batch norm: the data (n, h, 1, c) packed NHWC, and the per-channel descriptor cuDNN derives
  // from it is 1 x C x 1 x 1 in both modes.
  double bn_bad = 0;
  for (const cudnn::BnShape s : {cudnn::BnShape{128, 1024, 16}, cudnn::BnShape{7, 1, 10}, cudnn::BnShape{2, 35, 3}}) {
    for (cudnnBatchNormMode_t mode : {cudnn::kBnTrainingMode, cudnn::kBnInferenceMode}) {
      try {
        cudnn::BnDescs d(s, mode);
        cudnnDataType_t dt;
        int dn, dc, dh, dw, sn, sc, sh, sw;
        if (cudnnGetTensor4dDescriptor(d.x.d, &dt, &dn, &dc, &dh, &dw, &sn, &sc, &sh, &sw) != CUDNN_STATUS_SUCCESS ||
            dn != s.n || dc != s.c || dh != s.h || dw != 1 || sc != 1 || sw != s.c || sh != s.c || sn != s.h * s.c)
          bn_bad += 1;
        if (cudnnGetTensor4dDescriptor(d.bn.d, &dt, &dn, &dc, &dh, &dw, &sn, &sc, &sh, &sw) != CUDNN_STATUS_SUCCESS ||
            dt != CUDNN_DATA_FLOAT || dn != 1 || dc != s.c || dh != 1 || dw != 1)
          bn_bad += 1;
      } catch (const std::exception&) {
        bn_bad += 1;
      }
    }
  }
  // A plan moves to its next algorithm on "not supported" and "execution failed" (with their
  // sub-codes) and a misaligned pointer, and raises on anything else (another bad parameter is
  // hpcnn's bug, not the algorithm's).
  double retry_misread = 0;
  for (int code : {2003, 3000, 3002, 3010, 3012, 5000, 5001, 5003})
    retry_misread += try_next_algorithm(static_cast<cudnnStatus_t>(code)) ? 0 : 1;
  for (int code : {0, 1001, 2000, 2002, 4000, 4004})
    retry_misread += try_next_algorithm(static_cast<cudnnStatus_t>(code)) ? 1 : 0;
  // Every algorithm of the three enums has its own name (the messages and the test hook use them).
  double unnamed = 0;
  const std::pair<Pass, int> counts[] = {{Pass::Forward, CUDNN_CONVOLUTION_FWD_ALGO_COUNT},
                                         {Pass::BackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT},
                                         {Pass::BackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT}};
  for (const auto& [pass, count] : counts) {
    std::set<std::string> names;
    for (int a = 0; a < count; ++a) names.insert(algo_name(pass, a));
    unnamed += count - static_cast<double>(names.size());
    for (const std::string& n : names) unnamed += n.find('(') != std::string::npos ? 1 : 0;
  }
  unnamed += algo_name(Pass::BackwardFilter, 1) == "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1" ? 0 : 1;
  unnamed += algo_name(Pass::Forward, 1) == "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM" ? 0 : 1;
  unnamed += algo_name(Pass::BackwardData, 3) == "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING" ? 0 : 1;
  return {{"cuDNN descriptors: output size, NHWC strides, KRSC filter = the OHWI kernel buffer (mismatches)", bad, 0},
          {"cuDNN batch-norm descriptors: NHWC rows, derived 1 x C x 1 x 1 (mismatches)", bn_bad, 0},
          {"cuDNN depthwise descriptors: c groups, dilation, output size, KRSC (c*m, kh, kw, 1) from Keras' kernel "
           "(mismatches)", dw_bad, 0},
          {"cuDNN 'not supported' sub-codes fall back from the fused call (misread statuses)", misread, 0},
          {"cuDNN statuses that move a plan to its next algorithm (misread statuses)", retry_misread, 0},
          {"cuDNN algorithm names, one per enum value (unnamed or duplicated)", unnamed, 0}};
}

}  // namespace hpcnn::cuda
