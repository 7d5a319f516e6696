// Which cuDNN convolution algorithms a convolution may use, in which order, when to choose again,
// and how a run falls back along the order: the decisions of ops/cudnn_ops.cu as plain C++ (no
// cuDNN types), so that the host self-test (diagnostics/cuda_kernel_selftest.cpp) and CPU tests
// (tests/gpu/test_conv_algo_choice.py, through hpcnn._core.cuda_choose_conv_algorithms) check them
// without a GPU.
//
//   offers   cudnnGetConvolution*Algorithm_v7's results for one geometry and pass, in cuDNN's
//            order (its expected fastest first), each with its workspace size for the math type
//            it would run with and whether it is deterministic;
//   choose   keeps those that fit the workspace limit and the determinism setting
//            (cuda::Determinism, core/cuda_async.h) and orders them: deterministic ones first
//            unless the setting is Any; or refuses, saying why and what the user can do;
//   replan   a plan remembers the smallest limit at which an offer it preferred, but had to skip
//            for its workspace, would fit: once the limit reaches it (memory was freed, the
//            workspace grew), the plan is chosen again, so that a plan made under memory
//            pressure is not kept for the life of the process;
//   run      tries the chosen offers in order; one that cannot run (cuDNN says "not supported",
//            its execution failed, or it finds a pointer misaligned for that algorithm:
//            try_next_algorithm) is remembered as failed and the next is tried, from then on for
//            every later call; when none can, the error names every algorithm tried.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/cuda_async.h"

namespace hpcnn::conv_algo {

// One result of the heuristic query.
struct Offer {
  int algo = 0;
  std::string name;          // "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1"
  int math = 0;              // the cudnnMathType_t it runs with
  std::string math_name;     // "CUDNN_FMA_MATH"
  bool usable = false;       // supported here, its math allowed by the TF32 setting, its workspace known
  bool deterministic = false;
  size_t workspace = 0;      // bytes
  // What cuDNN said of it: "" when usable, else why not ("CUDNN_STATUS_NOT_SUPPORTED (3000)", "its
  // math type is not allowed with TF32 off", the workspace size query's status)
  std::string status;
};

// "NAME (MATH, deterministic, 1024 bytes of workspace)" or "NAME (MATH, non-deterministic, not
// usable: STATUS)": one offer as a refusal lists it.
std::string offer_text(const Offer& o);

constexpr size_t kNever = std::numeric_limits<size_t>::max();

struct Choice {
  std::vector<size_t> order;   // indices into the offers: order[0] first, the next after a failure
  size_t replan_at = kNever;   // the limit from which a preferred offer skipped for its size fits
  std::string refusal;         // order empty: why, and what the user can do
  bool refusal_is_memory = false;  // the refusal is for want of memory (MemoryError), not policy
};

// The choice for a workspace `limit` (bytes); `failed`: offers that failed at run time before,
// never chosen again. A refusal ends with every offer (offer_text), so that it says what cuDNN
// offered: a convolution over 1 to 3 input channels may get no deterministic algorithm at all.
Choice choose(const std::vector<Offer>& offers, cuda::Determinism policy, size_t limit,
              const std::vector<size_t>& failed);

// The layer whose convolution runs on this thread, for the messages of refusals and failures: a
// layer sets it around its op calls (nn/layers.cpp, "layer 3 (Conv2D)", as nn/graph.h names a
// node); scopes nest, the innermost wins. Plain thread-local state: chunks of an inference step run
// layers on several threads at once, each with its own.
class LayerLabel {
 public:
  explicit LayerLabel(std::string label);
  ~LayerLabel();
  LayerLabel(const LayerLabel&) = delete;
  LayerLabel& operator=(const LayerLabel&) = delete;
  static const std::string& current();  // "" outside every scope

 private:
  std::string previous_;
};

// The error message of a refusal or failure: "<layer>: <what>: <why>" (no layer outside a scope).
// `what` names the pass and the shapes (ops/cudnn_ops.cu's describe).
std::string message(const std::string& what, const std::string& why);

// Whether a plan chosen as `c` is to be chosen again under the workspace limit `limit`.
inline bool should_replan(const Choice& c, size_t limit) { return c.replan_at != kNever && limit >= c.replan_at; }

// cuDNN 9's status codes as numbers (cudnnStatus_t; ops/cudnn_ops.cu checks them against cuDNN's
// header). A category is the code rounded down to a thousand (CUDNN_STATUS_CATEGORY); the codes
// above it say why (CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002, ...).
constexpr int kCudnnBadParamMisalignedPointer = 2003;
constexpr int kCudnnNotSupported = 3000;
constexpr int kCudnnExecutionFailed = 5000;
constexpr int cudnn_status_category(int status) { return status / 1000 * 1000; }

// Whether cuDNN said "not supported" (any sub-code): the fused convolution+bias+ReLU call then
// gives way to the plain convolution.
bool is_not_supported(int cudnn_status);
// Whether a status of one algorithm's run means that this algorithm cannot run here while another
// may: "not supported" and "execution failed" with their sub-codes, and
// CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER (an algorithm's vectorized loads want more alignment
// than a buffer has: hpcnn's parameters are 256-byte aligned, nn/param_layout.h, but an
// activation view need not be, and other algorithms take any float address). Any other status
// (another bad parameter: hpcnn's bug) is raised at once.
bool try_next_algorithm(int cudnn_status);

struct Failure {
  size_t offer;        // index into the offers
  std::string status;  // what cuDNN said
};

// Runs order[*pos], order[*pos + 1], ... with `run` until one runs. `run` returns true when it
// ran, false (with what cuDNN said in *status) when that algorithm cannot run here, and throws
// for any other error. Each failure is appended to *failures and *pos is left at the offer that
// ran, where later calls start. When none runs: BackendError "<what>: no cuDNN algorithm could
// run: NAME (status), ..." naming every failure so far.
void run_with_fallback(const std::vector<Offer>& offers, const std::vector<size_t>& order, size_t* pos,
                       std::vector<Failure>* failures, const std::function<bool(const Offer&, std::string*)>& run,
                       const std::string& what);

// ---- the plans of the CUDA backend, for reports and tests (defined in ops/cudnn_conv_plans.cu; without
// the CUDA backend: none)

// One cached plan: a convolution geometry and pass, the algorithm it runs and why.
struct PlanInfo {
  int device = 0;
  std::string pass;                        // "forward", "backward_data", "backward_filter"
  std::vector<long long> input;            // (n, h, w, c) as cuDNN sees it (explicitly padded)
  std::vector<long long> kernel;           // (kh, kw, c, f)
  std::vector<long long> strides, padding; // (sh, sw), (ph, pw): cuDNN's symmetric padding
  std::vector<long long> output;           // (n, oh, ow, f)
  bool tf32 = false;                       // planned with TF32 allowed on a GPU that has it
  std::string determinism;                 // the setting it was planned under
  std::string algorithm, math;             // what runs ("" when no algorithm could run)
  bool deterministic = false;
  size_t workspace = 0;                    // bytes the algorithm needs
  size_t workspace_limit = 0;              // the limit it was (last) chosen under
  size_t replan_at = 0;                    // chosen again once the limit reaches this (0: never)
  std::string fused;                       // forward: "used", "not supported", "not tried", "n/a"
  std::string fused_status;                // "not supported": what cuDNN answered the fused call
  std::vector<std::string> candidates;     // the order it may try, best first
  std::vector<bool> candidates_deterministic;  // aligned with candidates
  std::vector<std::string> candidates_math;    // aligned with candidates: the math type each runs with
  // cuDNN's heuristic answer, every result: "NAME MATH deterministic|non-deterministic[ unusable]"
  std::vector<std::string> offers;
  std::vector<std::string> failed;         // "NAME: status" of each algorithm that failed at run time
};

// The plans made so far on GPU `device` (none when nothing ran there).
std::vector<PlanInfo> conv_plans(int device);
// Forgets every plan on every GPU: the next convolution of each geometry chooses afresh.
void clear_conv_plans();
// For tests: algorithms (by name, e.g. "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM") that
// are to fail as if cuDNN answered CUDNN_STATUS_NOT_SUPPORTED when run, and whether the fused
// convolution+bias+ReLU call is to fail so. Replaces the previous marks; empty: none.
void set_forced_failures(const std::vector<std::string>& algorithms, bool fused);

}  // namespace hpcnn::conv_algo
