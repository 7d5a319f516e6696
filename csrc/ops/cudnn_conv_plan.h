// The plan of one cuDNN convolution (ops/cudnn_ops.cu): its descriptors, cuDNN's offers and what
// runs, and the per-context cache of plans; shared by the convolution calls (cudnn_ops.cu), the
// plans' report and test hook (cudnn_conv_plans.cu) and the descriptor self-test (cudnn_selftest.cu).
// Included by the cudnn_*.cu files only (CUDA backend).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda_context.h"
#include "ops/conv_algo_choice.h"
#include "ops/cudnn_descriptors.h"

namespace hpcnn::cuda {

using conv_algo::Offer;

enum class Pass { Forward = 0, BackwardData = 1, BackwardFilter = 2 };

// Whether the fused convolution+bias+ReLU call has worked for a forward plan.
enum class Fused { NotTried, Used, NotSupported };

// Descriptors, the offers of the heuristic query, and what runs, for one (geometry, pass, TF32,
// determinism setting) combination (ops/conv_algo_choice.h says how the choice is made).
struct ConvPlan {
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  ActivationDesc relu;
  cudnn::ConvShape shape{};
  Pass pass = Pass::Forward;
  bool tf32 = false;
  Determinism policy = Determinism::Required;
  std::vector<Offer> offers;               // cuDNN's order
  conv_algo::Choice choice;                // what may run, best first
  size_t pos = 0;                          // choice.order[pos] runs; earlier ones failed
  std::vector<conv_algo::Failure> failures;
  size_t limit = 0;                        // the workspace limit of the last choice
  Fused fused = Fused::NotTried;
  std::string fused_status;                // what cuDNN answered when it declined the fused call
  bool warned = false;                     // Determinism::Warn: the warning was queued

  const Offer* current() const { return pos < choice.order.size() ? &offers[choice.order[pos]] : nullptr; }
};

// (pass, n, h, w, c, f, kh, kw, sh, sw, ph, pw, groups, dh, dw, tf32, determinism)
using PlanKey = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, bool, int>;

class ConvAlgoCache {
 public:
  std::map<PlanKey, std::unique_ptr<ConvPlan>> plans;
  unsigned generation = 0;
};

// The descriptors of one geometry, cuDNN's output size checked against ours (cudnn_ops.cu).
void set_descriptors(ConvPlan& p, const cudnn::ConvShape& s);

// cuDNN's statuses as ops/conv_algo_choice.h classifies them, and the names of passes and
// algorithms in messages and reports (cudnn_ops.cu).
bool is_not_supported(cudnnStatus_t st);
bool try_next_algorithm(cudnnStatus_t st);
const char* pass_key(Pass p);
std::string algo_name(Pass p, int a);

// Bumped by clear_conv_plans(); a context whose cache is older forgets its plans (cudnn_conv_plans.cu).
extern std::atomic<unsigned> g_plan_generation;

// The test hook of conv_algo::set_forced_failures: whether a test forces the algorithm `name`, or
// the fused call, to fail (cudnn_conv_plans.cu).
bool forced_failure(const std::string& name);
bool forced_fused_failure();

}  // namespace hpcnn::cuda
