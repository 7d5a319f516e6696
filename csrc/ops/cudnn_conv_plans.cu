// The cuDNN convolution plans for reports and tests (ops/conv_algo_choice.h): every plan of a
// device described, all plans forgotten, and the test hook that forces algorithms (or the fused
// call) to fail. The plans themselves are made and run by cudnn_ops.cu.
#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/errors.h"
#include "ops/conv_algo_choice.h"
#include "ops/cudnn_conv_plan.h"

namespace hpcnn::cuda {

namespace {

// ---- test hook (conv_algo::set_forced_failures)
std::mutex g_forced_mutex;
std::set<std::string> g_forced_algorithms;
bool g_forced_fused = false;

}  // namespace

bool forced_failure(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_forced_mutex);
  return g_forced_algorithms.count(name) > 0;
}

bool forced_fused_failure() {
  std::lock_guard<std::mutex> lock(g_forced_mutex);
  return g_forced_fused;
}

// Bumped by clear_conv_plans(); a context whose cache is older forgets its plans.
std::atomic<unsigned> g_plan_generation{0};

}  // namespace hpcnn::cuda

namespace hpcnn::conv_algo {

std::vector<PlanInfo> conv_plans(int device) {
  std::vector<PlanInfo> out;
  if (!cuda::context_exists(device)) return out;  // asking must not create a context
  cuda::ContextLock ctx(device);
  if (ctx->conv_algos->generation != cuda::g_plan_generation.load()) return out;
  for (const auto& [key, plan] : ctx->conv_algos->plans) {
    const cuda::ConvPlan& p = *plan;
    const auto& s = p.shape;
    PlanInfo i;
    i.device = device;
    i.pass = cuda::pass_key(p.pass);
    i.input = {s.n, s.h, s.w, s.c};
    i.kernel = {s.kh, s.kw, s.c, s.f};
    i.strides = {s.sh, s.sw};
    i.padding = {s.ph, s.pw};
    i.output = {s.n, s.oh, s.ow, s.f};
    i.tf32 = p.tf32;
    i.determinism = cuda::determinism_name(p.policy);
    if (const Offer* o = p.current()) {
      i.algorithm = o->name;
      i.math = o->math_name;
      i.deterministic = o->deterministic;
      i.workspace = o->workspace;
    }
    i.workspace_limit = p.limit;
    i.replan_at = p.choice.replan_at == kNever ? 0 : p.choice.replan_at;
    if (p.pass == cuda::Pass::Forward) {
      const Offer* o = p.current();
      const bool precomp = o && o->algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
      i.fused = p.fused == cuda::Fused::Used           ? "used"
                : p.fused == cuda::Fused::NotSupported ? "not supported"
                : precomp                              ? "not tried"
                                                       : "n/a";
      i.fused_status = p.fused_status;
    }
    for (size_t k : p.choice.order) {
      i.candidates.push_back(p.offers[k].name);
      i.candidates_deterministic.push_back(p.offers[k].deterministic);
      i.candidates_math.push_back(p.offers[k].math_name);
    }
    for (const Offer& o : p.offers)
      i.offers.push_back(cat(o.name, " ", o.math_name, o.deterministic ? " deterministic" : " non-deterministic",
                             o.usable ? "" : cat(" unusable (", o.status, ")")));
    for (const Failure& f : p.failures) i.failed.push_back(cat(p.offers[f.offer].name, ": ", f.status));
    out.push_back(std::move(i));
  }
  return out;
}

void clear_conv_plans() { ++cuda::g_plan_generation; }

void set_forced_failures(const std::vector<std::string>& algorithms, bool fused) {
  std::lock_guard<std::mutex> lock(cuda::g_forced_mutex);
  cuda::g_forced_algorithms = std::set<std::string>(algorithms.begin(), algorithms.end());
  cuda::g_forced_fused = fused;
}

}  // namespace hpcnn::conv_algo
