// The host self-test's checks of the cuDNN algorithm choice (ops/conv_algo_choice.h): the order
// under each determinism setting and workspace limit, re-planning, the run-time fallback and
// which cuDNN statuses move a plan on, on made-up offers (plain C++, no cuDNN).
#include "diagnostics/cuda_kernel_selftest_parts.h"

#include "core/errors.h"
#include "ops/conv_algo_choice.h"

namespace hpcnn::cuda::selftest {

// The decisions of the cuDNN path (ops/conv_algo_choice.h) on made-up offers: no cuDNN needed.
void check_conv_algo_choice(std::vector<SelftestResult>& out) {
  using conv_algo::Offer;
  using D = Determinism;
  auto offer = [](const char* name, bool det, size_t ws) {
    Offer o;
    o.name = name;
    o.usable = true;
    o.deterministic = det;
    o.workspace = ws;
    return o;
  };
  // cuDNN's order: a fast non-deterministic one, a deterministic one with a big workspace, a
  // small deterministic one, one cuDNN cannot run here.
  std::vector<Offer> offers = {offer("NONDET_FAST", false, 100), offer("DET_BIG", true, 5000),
                               offer("DET_SMALL", true, 10), offer("UNUSABLE", true, 0)};
  offers[3].usable = false;
  using Order = std::vector<size_t>;
  double bad = 0;
  auto expect = [&](D d, size_t limit, Order order, size_t replan_at, std::vector<size_t> failed = {}) {
    conv_algo::Choice c = conv_algo::choose(offers, d, limit, failed);
    bad += (c.order == order && c.replan_at == replan_at && c.refusal.empty() == !order.empty()) ? 0 : 1;
  };
  const size_t never = conv_algo::kNever;
  expect(D::Required, 5000, {1, 2}, never);  // deterministic only, cuDNN's order among them
  expect(D::Required, 100, {2}, 5000);       // DET_BIG skipped for its size: re-plan once it fits
  expect(D::Warn, 100, {2, 0}, 5000);        // deterministic first, then the rest
  expect(D::Warn, 5000, {1, 2, 0}, never);
  expect(D::Any, 100, {0, 2}, never);        // cuDNN's order
  expect(D::Any, 10, {2}, 100);
  expect(D::Required, 5000, {2}, never, {1});  // failed at run time: never again, not even on re-plan
  expect(D::Required, 5, {}, never);           // nothing fits
  // Only a non-deterministic algorithm fits: refused under Required (for want of memory), taken under Warn.
  std::vector<Offer> pressure = {offer("NONDET", false, 10), offer("DET", true, 1000)};
  conv_algo::Choice r = conv_algo::choose(pressure, D::Required, 100, {});
  bad += (r.order.empty() && r.refusal_is_memory && r.refusal.find("set_deterministic") != std::string::npos) ? 0 : 1;
  conv_algo::Choice w = conv_algo::choose(pressure, D::Warn, 100, {});
  bad += (w.order == Order{0} && w.replan_at == 1000) ? 0 : 1;
  // No deterministic algorithm at all: a policy refusal (RuntimeError), not a memory one.
  conv_algo::Choice none = conv_algo::choose({offer("NONDET", false, 0)}, D::Required, 100, {});
  bad += (none.order.empty() && !none.refusal_is_memory && none.refusal.find("no deterministic") != std::string::npos)
             ? 0 : 1;
  out.push_back({"cuDNN algorithm choice: determinism setting, workspace limit, order, refusals (mismatches)", bad, 0});

  // Re-plan: exactly when the limit reaches the smallest skipped preferred workspace.
  conv_algo::Choice c = conv_algo::choose(offers, D::Required, 100, {});
  double replan_bad = 0;
  replan_bad += conv_algo::should_replan(c, 4999) ? 1 : 0;
  replan_bad += conv_algo::should_replan(c, 5000) ? 0 : 1;
  replan_bad += conv_algo::should_replan(conv_algo::choose(offers, D::Required, 5000, {}), size_t(1) << 40) ? 1 : 0;
  out.push_back({"cuDNN re-plan when the workspace limit grows (mismatches)", replan_bad, 0});

  // Run-time fallback: the first two fail, the third runs; the next call starts at the third; when
  // every one fails, the error names them all.
  double run_bad = 0;
  std::vector<Offer> three = {offer("FIRST", true, 0), offer("SECOND", true, 0), offer("THIRD", true, 0)};
  Order order = {0, 1, 2};
  size_t pos = 0;
  std::vector<conv_algo::Failure> failures;
  int calls = 0;
  auto fail_two = [&](const Offer& o, std::string* why) {
    ++calls;
    *why = "NOT_SUPPORTED";
    return o.name == "THIRD";
  };
  conv_algo::run_with_fallback(three, order, &pos, &failures, fail_two, "test");
  run_bad += (pos == 2 && failures.size() == 2 && calls == 3) ? 0 : 1;
  conv_algo::run_with_fallback(three, order, &pos, &failures, fail_two, "test");
  run_bad += (pos == 2 && failures.size() == 2 && calls == 4) ? 0 : 1;
  std::string message;
  try {
    conv_algo::run_with_fallback(three, order, &pos, &failures, [](const Offer&, std::string* why) {
      *why = "EXECUTION_FAILED";
      return false;
    }, "conv2d test");
  } catch (const BackendError& e) {
    message = e.what();
  }
  for (const char* name : {"conv2d test", "FIRST (NOT_SUPPORTED)", "SECOND (NOT_SUPPORTED)", "THIRD (EXECUTION_FAILED)"})
    run_bad += message.find(name) != std::string::npos ? 0 : 1;
  out.push_back({"cuDNN run-time fallback along the candidates, error naming every one tried (mismatches)", run_bad, 0});

  // Which cuDNN 9 statuses move a plan to its next algorithm: "not supported" and "execution
  // failed" with their sub-codes, and a misaligned pointer; nothing else. The fused call gives
  // way to the plain convolution on "not supported".
  double status_bad = 0;
  for (int code : {2003, 3000, 3002, 3004, 3011, 5000, 5001, 5003})
    status_bad += conv_algo::try_next_algorithm(code) ? 0 : 1;
  for (int code : {0, 1001, 2000, 2002, 2004, 2005, 4000, 4004})
    status_bad += conv_algo::try_next_algorithm(code) ? 1 : 0;
  for (int code : {3000, 3002, 3004, 3011}) status_bad += conv_algo::is_not_supported(code) ? 0 : 1;
  for (int code : {0, 2000, 2003, 4000, 5000}) status_bad += conv_algo::is_not_supported(code) ? 1 : 0;
  out.push_back({"cuDNN statuses that move a plan to its next algorithm, misaligned pointers included (misread "
                 "statuses)", status_bad, 0});
}

}  // namespace hpcnn::cuda::selftest
