// The cuDNN convolution calls of hpcnn (legacy convolution API of cuDNN 9: deprecated but present, in
// libcudnn_cnn; link -lcudnn). Pooling and the activations are our own kernels (maxpool2d_cuda.cu,
// activation_cuda.cu): see "Not used" below.
//
// The documented contracts each call relies on (cuDNN API reference, legacy API, v8/v9; checked
// against the cuDNN 9.19 headers here -- cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h -- and the
// archived API reference pages; the layouts and call glue are also exercised on the host by
// diagnostics/cuda_kernel_selftest_library_calls.cpp against a reference written from these contracts):
//
// cudnnCreate / cudnnSetStream (core/cuda_context.cu)
//   The handle is tied to the device current at creation; every later call is made with that
//   device current (ContextLock does cudaSetDevice). cudnnSetStream makes all calls on the handle
//   run on our compute stream. cuDNN may return CUDNN_STATUS_NOT_INITIALIZED without a driver: we
//   never get there, require_device() explains first. cudnnGetVersion() is compared with
//   CUDNN_VERSION at first use (runtime major == compiled major, runtime >= compiled).
//
// cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, w)
//   Dimensions are always passed in the order n, c, h, w whatever the format; the format says
//   the memory order is NHWC (strides c*h*w... computed by cuDNN: C innermost). Fully packed.
//
// cudnnSetFilter4dDescriptor(desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, k, c, h, w)
//   Arguments in the order k (output channels), c, h, w; with CUDNN_TENSOR_NHWC the filter memory
//   is K x R x S x C ("KRSC"), C innermost. That is the CUDA backend's kernel layout OHWI
//   (out, kh, kw, in) (ops/conv2d_layout.h): a model on a GPU holds its kernels, their gradients
//   and the optimizer's moments that way (nn/param_layout.h), so w and dW are passed as they are.
//   Keras' (kh, kw, in, out) = RSCK is converted only where weights cross the model's boundary.
//
// cudnnSetConvolution2dDescriptor(conv, pad_h, pad_w, u, v, dilation_h, dilation_w,
//                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)
//   Padding is symmetric (pad_h rows on top and bottom). CROSS_CORRELATION: the kernel is not
//   flipped, which is Keras' (and our CPU path's) definition. computeType FLOAT for float data.
//   Dilation 1 for conv2d; a depthwise convolution's dilation_rate otherwise.
// cudnnSetConvolutionGroupCount(conv, groups)
//   Splits the c input channels into `groups` groups of c / groups and the k filters likewise;
//   output channel k reads group k / (k / groups), and the filter descriptor's c is c / groups.
//   A depthwise convolution is groups = c with k = c * m: output channel c*m + j reads channel c,
//   Keras' DepthwiseConv2D order. conv2d: 1.
//   cudnnGetConvolution2dForwardOutputDim gives 1 + (in + 2*pad - k) / stride per axis; we
//   check it equals our Keras geometry (a mismatch is an internal error, never a silent one).
//
// cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH | CUDNN_TENSOR_OP_MATH | perf.mathType)
//   CUDNN_FMA_MATH restricts to FMA kernels: no TF32 (our "TF32 off"). CUDNN_TENSOR_OP_MATH
//   permits tensor-core kernels, which for float data on compute capability >= 8.0 means TF32
//   ("TF32 on"). CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (down-conversion to FP16) is never used.
//   The perf results of the algorithm query carry the math type the algorithm was
//   considered with; it is set back on the descriptor before the call (as the cudnn*AlgoPerf_t
//   documentation asks), except that with TF32 off only FMA results are accepted.
//
// cudnnGetConvolution{Forward,BackwardData,BackwardFilter}Algorithm_v7
//   Heuristic query, no device work, no workspace: returns up to requestedAlgoCount results
//   (cudnnGet...AlgorithmMaxCount) sorted by expected time, each with status, algo, memory,
//   determinism, mathType. Each result with status CUDNN_STATUS_SUCCESS whose math type the TF32
//   setting allows becomes an offer, its workspace re-queried (cudnnGet...WorkspaceSize) for the
//   math type it will run with. ops/conv_algo_choice.h then orders the offers that fit within
//   ctx.workspace_limit() under the determinism setting (hpcnn.config.set_deterministic:
//   deterministic only by default, as the CPU path is reproducible) or refuses, naming why.
//   The plan (descriptors, offers, order) is cached per geometry, TF32 and determinism setting
//   (ConvAlgoCache). A plan that had to skip a preferred algorithm for its workspace is chosen
//   again once the limit has grown enough for it.
//   At run time an algorithm that returns a status of the CUDNN_STATUS_NOT_SUPPORTED or
//   CUDNN_STATUS_EXECUTION_FAILED categories (cuDNN 9 sub-codes included), or
//   CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER (conv_algo::try_next_algorithm), is marked failed
//   for the plan and the next in the order runs, from then on for every call; when none can run,
//   the error names every algorithm tried and what cuDNN said. Any other status is raised at
//   once (another bad parameter is a bug of ours, not of the algorithm).
//
// cudnnConvolutionForward(h, &alpha, xDesc, x, wDesc, w, conv, algo, ws, wsSize, &beta, yDesc, y)
//   alpha/beta are host pointers to float for float data; beta = 0 means y is not read (may hold
//   garbage). The workspace must be at least cudnnGetConvolutionForwardWorkspaceSize(algo) bytes.
//
// cudnnConvolutionBiasActivationForward(h, &alpha1, xDesc, x, wDesc, w, conv, algo, ws, wsSize,
//                                       &alpha2, zDesc, z, biasDesc, bias, actDesc, yDesc, y)
//   y = act(alpha1 * conv(x, w) + alpha2 * z + bias). We pass alpha2 = 0 with z = y and
//   zDesc = yDesc (z and y may be the same buffer), y zeroed first: whether z is read when
//   alpha2 == 0 is not documented, and garbage NaN * 0 would be NaN. biasDesc is (1, K, 1, 1). The activation
//   descriptor is CUDNN_ACTIVATION_RELU (NaN not propagated, as our ew::relu; coef unused).
//   The cuDNN API reference ties the fused call to CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
//   (cudnnActivationMode_t, v7.6.5: for CUDNN_ACTIVATION_IDENTITY; our brief states it for ReLU):
//   we make the fused call only when the chosen forward algorithm IS IMPLICIT_PRECOMP_GEMM, which
//   satisfies either reading; should the library still answer "not supported" (or "execution
//   failed") for a geometry, that geometry is marked and runs the plain convolution, and the
//   caller adds bias and ReLU with its own kernel (a correct result either way). Its header comment: y = Act(alpha1 * conv(x) + alpha2 * z + bias).
//
// cudnnConvolutionBackwardData(h, &alpha, wDesc, w, dyDesc, dy, conv, algo, ws, wsSize, &beta,
//                              dxDesc, dx)
//   dx = alpha * conv^T(dy, w) + beta * dx; beta = 0 overwrites.
//
// cudnnConvolutionBackwardFilter(h, &alpha, xDesc, x, dyDesc, dy, conv, algo, ws, wsSize, &beta,
//                                dwDesc, dw)
//   dw = alpha * sum_n x (*) dy + beta * dw; beta = 0 overwrites. dw has the filter layout
//   (KRSC here).
//
// Batch normalization's calls and their contracts: cudnn_batchnorm.cu. The plan types shared with
// the plans' report (cudnn_conv_plans.cu) and the descriptor self-test (cudnn_selftest.cu):
// cudnn_conv_plan.h.
//
// Not used, and why:
//   cudnnPoolingForward/Backward (CUDNN_POOLING_MAX_DETERMINISTIC): its descriptor has symmetric
//   padding (Keras 'same' may pad one more at the bottom/right) and the documentation does not
//   say which position of a window with tied maxima gets the gradient, while our contract (both
//   backends) is "the first in row-major order" -- ties are common after a ReLU (all-zero
//   windows). Our own kernels implement the contract exactly and deterministically.
//   cudnnConvolutionBackwardBias: a column sum of dy; our kernel is deterministic and fuses the
//   ReLU mask. cudnnActivation*: our element-wise kernels share ew:: math with the CPU.
#include "ops/cudnn_ops.h"

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include "core/cuda_async.h"
#include "core/cuda_check.h"
#include "core/errors.h"
#include "core/warnings.h"
#include "ops/conv_algo_choice.h"
#include "ops/cudnn_conv_plan.h"

namespace hpcnn::cuda {

// cuDNN 9 reports "not supported" with a sub-code saying why (CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
// _LAYOUT, ... = 3001..), all in the category of CUDNN_STATUS_NOT_SUPPORTED (3000), and likewise
// "execution failed" (5000..): ops/conv_algo_choice.h classifies those numbers (plain C++, so that
// the host self-test checks it without a GPU); here they are checked against cuDNN's header.
// cuDNN 8 has the one code of each and no misalignment status.
#ifdef CUDNN_STATUS_CATEGORY
static_assert(static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED) == conv_algo::kCudnnNotSupported &&
                  static_cast<int>(CUDNN_STATUS_EXECUTION_FAILED) == conv_algo::kCudnnExecutionFailed &&
                  static_cast<int>(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER) ==
                      conv_algo::kCudnnBadParamMisalignedPointer,
              "cuDNN's status codes differ from the ones ops/conv_algo_choice.h classifies");
static_assert(CUDNN_STATUS_CATEGORY(static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)) ==
                  conv_algo::cudnn_status_category(static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)),
              "cuDNN's status categories differ from conv_algo::cudnn_status_category");

bool is_not_supported(cudnnStatus_t st) { return conv_algo::is_not_supported(static_cast<int>(st)); }

// A run-time failure of one algorithm that another algorithm may not have: the plan moves on.
bool try_next_algorithm(cudnnStatus_t st) { return conv_algo::try_next_algorithm(static_cast<int>(st)); }
#else
bool is_not_supported(cudnnStatus_t st) { return st == CUDNN_STATUS_NOT_SUPPORTED; }

bool try_next_algorithm(cudnnStatus_t st) { return is_not_supported(st) || st == CUDNN_STATUS_EXECUTION_FAILED; }
#endif

const char* pass_key(Pass p) {
  return p == Pass::Forward ? "forward" : p == Pass::BackwardData ? "backward_data" : "backward_filter";
}

std::string algo_name(Pass p, int a) {
  static const char* fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
                              "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* bwd_data[] = {"ALGO_0", "ALGO_1", "ALGO_FFT", "ALGO_FFT_TILING", "ALGO_WINOGRAD",
                                   "ALGO_WINOGRAD_NONFUSED"};
  static const char* bwd_filter[] = {"ALGO_0", "ALGO_1", "ALGO_FFT", "ALGO_3", "ALGO_WINOGRAD",
                                     "ALGO_WINOGRAD_NONFUSED", "ALGO_FFT_TILING"};
  const char* prefix = p == Pass::Forward        ? "CUDNN_CONVOLUTION_FWD_ALGO_"
                       : p == Pass::BackwardData ? "CUDNN_CONVOLUTION_BWD_DATA_"
                                                 : "CUDNN_CONVOLUTION_BWD_FILTER_";
  const char* const* names = p == Pass::Forward ? fwd : p == Pass::BackwardData ? bwd_data : bwd_filter;
  const int count = p == Pass::Forward ? 8 : p == Pass::BackwardData ? 6 : 7;
  if (a >= 0 && a < count) return cat(prefix, names[a]);
  return cat(prefix, "ALGO(", a, ")");
}

namespace {

PlanKey key_of(const cudnn::ConvShape& s, Pass p, bool tf32, Determinism d) {
  return {static_cast<int>(p), s.n, s.h, s.w, s.c, s.f, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, s.groups, s.dh, s.dw, tf32,
          static_cast<int>(d)};
}

std::string status_text(cudnnStatus_t st) { return cat(cudnnGetErrorString(st), " (", static_cast<int>(st), ")"); }

const char* pass_name(Pass p) {
  return p == Pass::Forward ? "conv2d forward" : p == Pass::BackwardData ? "conv2d backward (data)"
                                                                          : "conv2d backward (filter)";
}

std::string describe(Pass p, const cudnn::ConvShape& s) {
  return cat(pass_name(p), " of input ", s.n, "x", s.h, "x", s.w, "x", s.c, ", kernel ", s.kh, "x", s.kw, "x",
             s.c / s.groups, "x", s.f, ", strides ", s.sh, "x", s.sw, ", padding ", s.ph, "x", s.pw,
             s.groups > 1 ? cat(", ", s.groups, " groups") : std::string(),
             s.dh > 1 || s.dw > 1 ? cat(", dilation ", s.dh, "x", s.dw) : std::string());
}

std::string math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "CUDNN_DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH: return "CUDNN_TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "CUDNN_FMA_MATH";
  }
  return cat("cudnnMathType_t(", static_cast<int>(m), ")");
}

}  // namespace

std::shared_ptr<ConvAlgoCache> make_conv_algo_cache() { return std::make_shared<ConvAlgoCache>(); }

namespace {

// The three perf-result structs share the fields we read; one template turns them into offers.
template <typename Perf>
std::vector<Offer> offers_of(Context& ctx, ConvPlan& p, const std::vector<Perf>& perf, int count) {
  std::vector<Offer> out;
  for (int i = 0; i < count; ++i) {
    const Perf& r = perf[i];
    Offer o;
    o.algo = static_cast<int>(r.algo);
    o.name = algo_name(p.pass, o.algo);
    o.deterministic = r.determinism == CUDNN_DETERMINISTIC;
    // With TF32 off, only FMA (or DEFAULT, run as FMA: the strict subset) results are accepted;
    // ALLOW_CONVERSION permits down-conversion of float data to FP16: never for a float32 model.
    const bool math_allowed = r.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
                              (p.tf32 || r.mathType == CUDNN_FMA_MATH || r.mathType == CUDNN_DEFAULT_MATH);
    const cudnnMathType_t math = p.tf32 ? r.mathType : CUDNN_FMA_MATH;
    o.math = static_cast<int>(math);
    o.math_name = math_name(math);
    bool duplicate = false;
    for (const Offer& e : out) duplicate = duplicate || (e.algo == o.algo && e.math == o.math);
    if (duplicate) continue;
    if (r.status != CUDNN_STATUS_SUCCESS) o.status = status_text(r.status);
    else if (!math_allowed)
      o.status = cat("its math type ", math_name(r.mathType),
                     r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? " (down-conversion to FP16) is never used"
                                                                         : " is not allowed with TF32 off");
    if (r.status == CUDNN_STATUS_SUCCESS && math_allowed) {
      // Re-query with the math type set: the size may depend on it. An algorithm the library
      // cannot size for this math type is not usable.
      HPCNN_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.d, math));
      cudnnStatus_t st;
      size_t bytes = 0;
      switch (p.pass) {
        case Pass::Forward:
          st = cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn.h, p.x.d, p.w.d, p.conv.d, p.y.d,
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(o.algo), &bytes);
          break;
        case Pass::BackwardData:
          st = cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn.h, p.w.d, p.y.d, p.conv.d, p.x.d,
                                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(o.algo), &bytes);
          break;
        default:
          st = cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.cudnn.h, p.x.d, p.y.d, p.conv.d, p.w.d,
                                                              static_cast<cudnnConvolutionBwdFilterAlgo_t>(o.algo),
                                                              &bytes);
          break;
      }
      o.usable = st == CUDNN_STATUS_SUCCESS;
      o.workspace = bytes;
      if (!o.usable) o.status = cat("its workspace size query answered ", status_text(st));
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

// The descriptors of one geometry (no device work: these calls need no GPU, which lets the host
// self-test check them against cuDNN itself), and cuDNN's output size checked against ours.
void set_descriptors(ConvPlan& p, const cudnn::ConvShape& s) {
  p.shape = s;
  p.x.nhwc(s.n, s.c, s.h, s.w);
  p.y.nhwc(s.n, s.f, s.oh, s.ow);
  p.bias.nhwc(1, s.f, 1, 1);
  // A grouped convolution's filter holds c / groups input channels per output channel.
  HPCNN_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(p.w.d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, s.f, s.c / s.groups, s.kh, s.kw));
  HPCNN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p.conv.d, s.ph, s.pw, s.sh, s.sw, s.dh, s.dw,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  HPCNN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p.conv.d, s.groups));
  HPCNN_CUDNN_CHECK(cudnnSetActivationDescriptor(p.relu.d, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  int on, oc, ohh, oww;
  HPCNN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv.d, p.x.d, p.w.d, &on, &oc, &ohh, &oww));
  HPCNN_CHECK_BACKEND(on == s.n && oc == s.f && ohh == s.oh && oww == s.ow, "cuDNN computes a ", on, "x", ohh, "x",
                      oww, "x", oc, " output for conv2d where hpcnn expects ", s.n, "x", s.oh, "x", s.ow, "x", s.f);
}

namespace {

// (Re)chooses what the plan runs under the workspace limit `limit`; throws when nothing may.
void choose_for(ConvPlan& p, size_t limit) {
  std::vector<size_t> failed;
  for (const conv_algo::Failure& f : p.failures) failed.push_back(f.offer);
  conv_algo::Choice c = conv_algo::choose(p.offers, p.policy, limit, failed);
  if (c.order.empty()) {
    // The layer (when one runs it), the pass and shapes, why, and every offer (conv_algo::choose).
    const std::string msg = conv_algo::message(describe(p.pass, p.shape), c.refusal);
    if (c.refusal_is_memory) throw OutOfMemory(msg);
    throw BackendError(msg);
  }
  p.choice = std::move(c);
  p.pos = 0;
  p.limit = limit;
}

void query_offers(Context& ctx, ConvPlan& p) {
  HPCNN_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.d, p.tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int count = 0, max = 0;
  if (p.pass == Pass::Forward) {
    HPCNN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx.cudnn.h, &max));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(max, 1));
    HPCNN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn.h, p.x.d, p.w.d, p.conv.d, p.y.d,
                                                             static_cast<int>(perf.size()), &count, perf.data()));
    p.offers = offers_of(ctx, p, perf, count);
  } else if (p.pass == Pass::BackwardData) {
    HPCNN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx.cudnn.h, &max));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(std::max(max, 1));
    HPCNN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn.h, p.w.d, p.y.d, p.conv.d, p.x.d,
                                                                  static_cast<int>(perf.size()), &count, perf.data()));
    p.offers = offers_of(ctx, p, perf, count);
  } else {
    HPCNN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx.cudnn.h, &max));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(std::max(max, 1));
    HPCNN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn.h, p.x.d, p.y.d, p.conv.d, p.w.d,
                                                                    static_cast<int>(perf.size()), &count,
                                                                    perf.data()));
    p.offers = offers_of(ctx, p, perf, count);
  }
}

ConvPlan& plan_for(Context& ctx, const cudnn::ConvShape& s, Pass pass) {
  ConvAlgoCache& cache = *ctx.conv_algos;
  if (cache.generation != g_plan_generation.load()) {
    cache.plans.clear();
    cache.generation = g_plan_generation.load();
  }
  const bool tf32 = ctx.use_tf32();
  const Determinism policy = determinism();
  PlanKey key = key_of(s, pass, tf32, policy);
  auto it = cache.plans.find(key);
  if (it != cache.plans.end()) {
    ConvPlan& p = *it->second;
    // Chosen under memory pressure: once a preferred algorithm fits, choose again. Only such
    // plans ask for the free memory (a driver call) on every use.
    if (p.choice.replan_at != conv_algo::kNever) {
      const size_t limit = ctx.workspace_limit();
      if (conv_algo::should_replan(p.choice, limit)) {
        choose_for(p, limit);
        p.warned = false;
      }
    }
    return p;
  }
  auto plan = std::make_unique<ConvPlan>();
  ConvPlan& p = *plan;
  p.pass = pass;
  p.tf32 = tf32;
  p.policy = policy;
  set_descriptors(p, s);
  query_offers(ctx, p);
  choose_for(p, ctx.workspace_limit());  // nothing cached when it throws: the next call asks again
  return *cache.plans.emplace(key, std::move(plan)).first->second;
}

// Runs `call` with the plan's algorithm, falling back along the plan's order when cuDNN says it
// cannot run it (conv_algo::run_with_fallback). call(offer, workspace, &api) returns cuDNN's
// status and names the API it called.
template <typename Call>
void run_plan(Context& ctx, ConvPlan& p, Call call) {
  const std::string what = describe(p.pass, p.shape);
  conv_algo::run_with_fallback(p.offers, p.choice.order, &p.pos, &p.failures,
                               [&](const Offer& o, std::string* why) {
    if (forced_failure(o.name)) {
      *why = "CUDNN_STATUS_NOT_SUPPORTED (3000), forced by a test";
      return false;
    }
    HPCNN_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.d, static_cast<cudnnMathType_t>(o.math)));
    void* ws = o.workspace ? ctx.workspace.reserve(o.workspace, ctx.device, ctx.compute.s, pass_name(p.pass)) : nullptr;
    const char* api = "";
    const cudnnStatus_t st = call(o, ws, &api);
    if (st == CUDNN_STATUS_SUCCESS) return true;
    const std::string detail = cudnn_detail();
    (void)cudaGetLastError();  // a failed launch inside cuDNN must not be blamed on our next kernel
    if (try_next_algorithm(st)) {
      *why = status_text(st) + detail;
      return false;
    }
    throw BackendError(conv_algo::message(what, cat(api, " with ", o.name, " failed: ", status_text(st), detail, " [",
                                                    __FILE__, ":", __LINE__, "]")));
  }, what);
  const Offer* o = p.current();
  if (p.policy == Determinism::Warn && o && !o->deterministic && !p.warned) {
    queue_warning(conv_algo::message(what, cat("no deterministic cuDNN algorithm fits (or runs), so the "
                      "non-deterministic ", o->name, " is used: results may differ from run to run in the last bits. "
                      "Free GPU memory or use a smaller batch_size to get a deterministic one; "
                      "hpcnn.config.set_deterministic(False) accepts this without a warning")));
    p.warned = true;
  }
}

}  // namespace

namespace cudnn {

bool conv_forward(Context& ctx, const ConvShape& s, const float* x, const float* w_krsc, const float* bias, bool relu,
                  float* y) {
  ConvPlan& p = plan_for(ctx, s, Pass::Forward);
  const bool want_fused = bias && relu;
  bool fused_ran = false;
  const float one = 1.f, zero = 0.f;
  run_plan(ctx, p, [&](const Offer& o, void* ws, const char** api) {
    fused_ran = false;
    const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(o.algo);
    if (want_fused && algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM && p.fused != Fused::NotSupported) {
      // z = y with alpha2 = 0: the documentation does not promise that z is then left unread, and
      // 0 * (NaN left in a reused buffer) would be NaN, so y is zeroed first (one write pass).
      HPCNN_CUDA_CHECK(cudaMemsetAsync(y, 0, sizeof(float) * (size_t)s.n * s.oh * s.ow * s.f, ctx.compute.s));
      *api = "cudnnConvolutionBiasActivationForward";
      const cudnnStatus_t st =
          forced_fused_failure()
              ? CUDNN_STATUS_NOT_SUPPORTED
              : cudnnConvolutionBiasActivationForward(ctx.cudnn.h, &one, p.x.d, x, p.w.d, w_krsc, p.conv.d, algo, ws,
                                                      o.workspace, &zero, p.y.d, y, p.bias.d, bias, p.relu.d, p.y.d, y);
      if (st == CUDNN_STATUS_SUCCESS) {
        p.fused = Fused::Used;
        fused_ran = true;
        return st;
      }
      if (!try_next_algorithm(st)) return st;
      p.fused_status = forced_fused_failure() ? std::string("CUDNN_STATUS_NOT_SUPPORTED (3000), forced by a test")
                                              : status_text(st) + cudnn_detail();
      (void)cudaGetLastError();
      p.fused = Fused::NotSupported;  // not for this geometry: the plain convolution, then our kernel
    }
    *api = "cudnnConvolutionForward";
    return cudnnConvolutionForward(ctx.cudnn.h, &one, p.x.d, x, p.w.d, w_krsc, p.conv.d, algo, ws, o.workspace, &zero,
                                   p.y.d, y);
  });
  return fused_ran;
}

void conv_backward_data(Context& ctx, const ConvShape& s, const float* dy, const float* w_krsc, float* dx) {
  ConvPlan& p = plan_for(ctx, s, Pass::BackwardData);
  const float one = 1.f, zero = 0.f;
  run_plan(ctx, p, [&](const Offer& o, void* ws, const char** api) {
    *api = "cudnnConvolutionBackwardData";
    return cudnnConvolutionBackwardData(ctx.cudnn.h, &one, p.w.d, w_krsc, p.y.d, dy, p.conv.d,
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(o.algo), ws, o.workspace, &zero,
                                        p.x.d, dx);
  });
}

void conv_backward_filter(Context& ctx, const ConvShape& s, const float* x, const float* dy, float* dw_krsc) {
  ConvPlan& p = plan_for(ctx, s, Pass::BackwardFilter);
  const float one = 1.f, zero = 0.f;
  run_plan(ctx, p, [&](const Offer& o, void* ws, const char** api) {
    *api = "cudnnConvolutionBackwardFilter";
    return cudnnConvolutionBackwardFilter(ctx.cudnn.h, &one, p.x.d, x, p.y.d, dy, p.conv.d,
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(o.algo), ws, o.workspace,
                                          &zero, p.w.d, dw_krsc);
  });
}

}  // namespace cudnn

}  // namespace hpcnn::cuda
