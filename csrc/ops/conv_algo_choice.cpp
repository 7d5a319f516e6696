// See conv_algo_choice.h. Plain C++: built with and without the CUDA backend.
#include "ops/conv_algo_choice.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/errors.h"

namespace hpcnn::conv_algo {

namespace {

std::string mib(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f", bytes / 1048576.0);
  return cat(bytes, " bytes (", buf, " MiB)");
}

const char* kAllowNondeterministic =
    "allow non-deterministic algorithms with hpcnn.config.set_deterministic('warn') (or False)";

std::string offers_text(const std::vector<Offer>& offers) {
  if (offers.empty()) return "cuDNN offered no algorithm at all";
  std::string s = cat("cuDNN offered ", offers.size(), ": ");
  for (size_t i = 0; i < offers.size(); ++i) s += (i ? "; " : "") + offer_text(offers[i]);
  return s;
}

thread_local std::string t_layer_label;

}  // namespace

std::string offer_text(const Offer& o) {
  const std::string math = o.math_name.empty() ? "" : o.math_name + ", ";
  const char* det = o.deterministic ? "deterministic" : "non-deterministic";
  if (!o.usable) return cat(o.name, " (", math, det, ", not usable: ", o.status.empty() ? "unknown" : o.status, ")");
  return cat(o.name, " (", math, det, ", ", o.workspace, " bytes of workspace)");
}

LayerLabel::LayerLabel(std::string label) : previous_(std::move(t_layer_label)) { t_layer_label = std::move(label); }

LayerLabel::~LayerLabel() { t_layer_label = std::move(previous_); }

const std::string& LayerLabel::current() { return t_layer_label; }

std::string message(const std::string& what, const std::string& why) {
  const std::string& layer = LayerLabel::current();
  return layer.empty() ? cat(what, ": ", why) : cat(layer, ": ", what, ": ", why);
}

bool is_not_supported(int cudnn_status) { return cudnn_status_category(cudnn_status) == kCudnnNotSupported; }

bool try_next_algorithm(int cudnn_status) {
  return is_not_supported(cudnn_status) || cudnn_status_category(cudnn_status) == kCudnnExecutionFailed ||
         cudnn_status == kCudnnBadParamMisalignedPointer;
}

Choice choose(const std::vector<Offer>& offers, cuda::Determinism policy, size_t limit,
              const std::vector<size_t>& failed) {
  using cuda::Determinism;
  auto has_failed = [&](size_t i) { return std::find(failed.begin(), failed.end(), i) != failed.end(); };
  // Offers this setting may ever run: cuDNN can run them here and they did not fail before.
  auto eligible = [&](size_t i) {
    const Offer& o = offers[i];
    return o.usable && !has_failed(i) && (policy != Determinism::Required || o.deterministic);
  };
  // Lower is preferred: deterministic first (unless Any), then cuDNN's order.
  auto rank = [&](size_t i) {
    const int tier = policy == Determinism::Any || offers[i].deterministic ? 0 : 1;
    return std::make_pair(tier, i);
  };

  Choice c;
  for (size_t i = 0; i < offers.size(); ++i)
    if (eligible(i) && offers[i].workspace <= limit) c.order.push_back(i);
  std::stable_sort(c.order.begin(), c.order.end(), [&](size_t a, size_t b) { return rank(a) < rank(b); });

  if (!c.order.empty()) {
    const auto head = rank(c.order.front());
    for (size_t i = 0; i < offers.size(); ++i)
      if (eligible(i) && offers[i].workspace > limit && rank(i) < head)
        c.replan_at = std::min(c.replan_at, offers[i].workspace);
    return c;
  }

  // Nothing may run: say why.
  std::string failures;
  for (size_t i : failed)
    if (i < offers.size()) failures += (failures.empty() ? "" : ", ") + offers[i].name;
  const std::string after_failures =
      failures.empty() ? "" : cat(" (failed at run time and not tried again: ", failures, ")");
  size_t smallest_any = kNever, smallest_det = kNever;
  bool nondet_fits = false;
  for (size_t i = 0; i < offers.size(); ++i) {
    const Offer& o = offers[i];
    if (!o.usable || has_failed(i)) continue;
    smallest_any = std::min(smallest_any, o.workspace);
    if (o.deterministic) smallest_det = std::min(smallest_det, o.workspace);
    else if (o.workspace <= limit) nondet_fits = true;
  }
  if (smallest_any == kNever) {
    c.refusal = cat("cuDNN offers no algorithm that can run it", after_failures);
  } else if (policy == Determinism::Required && smallest_det == kNever) {
    c.refusal = cat("cuDNN offers no deterministic algorithm for it", after_failures, "; ", kAllowNondeterministic);
  } else if (policy == Determinism::Required && nondet_fits) {
    c.refusal = cat("its deterministic algorithms need at least ", mib(smallest_det), " of workspace but ",
                    mib(limit), " may be used (a quarter of the free GPU memory, at most 1 GiB, plus the "
                    "workspace held); only non-deterministic ones would fit", after_failures,
                    ": free GPU memory or use a smaller batch_size, or ", kAllowNondeterministic);
    c.refusal_is_memory = true;
  } else {
    const size_t need = policy == Determinism::Required ? smallest_det : smallest_any;
    c.refusal = cat("every algorithm needs more workspace than the ", mib(limit), " that may be used (a quarter "
                    "of the free GPU memory, at most 1 GiB, plus the workspace held; the smallest needs ",
                    mib(need), ")", after_failures, ": free GPU memory or use a smaller batch_size");
    c.refusal_is_memory = true;
  }
  c.refusal += cat(". ", offers_text(offers));
  return c;
}

void run_with_fallback(const std::vector<Offer>& offers, const std::vector<size_t>& order, size_t* pos,
                       std::vector<Failure>* failures, const std::function<bool(const Offer&, std::string*)>& run,
                       const std::string& what) {
  for (; *pos < order.size(); ++*pos) {
    std::string status;
    if (run(offers[order[*pos]], &status)) return;
    failures->push_back({order[*pos], status.empty() ? std::string("failed") : status});
  }
  std::string tried;
  for (const Failure& f : *failures) tried += cat(tried.empty() ? "" : ", ", offers[f.offer].name, " (", f.status, ")");
  throw BackendError(message(what, cat("no cuDNN algorithm could run: ", tried.empty() ? std::string("none chosen") : tried)));
}

#ifndef HPCNN_WITH_CUDA
std::vector<PlanInfo> conv_plans(int) { return {}; }
void clear_conv_plans() {}
void set_forced_failures(const std::vector<std::string>&, bool) {}
#endif

}  // namespace hpcnn::conv_algo
