#include "nn/step_plan.h"

#include <algorithm>

#include "nn/run_kinds.h"

namespace hpcnn::nn {

namespace {

// How many nodes of [0, end) read each node's output, and for one read once, which.
struct Readers {
  std::vector<int> count, only;
  Readers(const Graph& g, int end) : count(g.size(), 0), only(g.size(), -1) {
    for (int i = 0; i < end; ++i)
      for (int p : g.inputs(i))
        if (p != kModelInput) {
          ++count[p];
          only[p] = i;
        }
  }
};

// Per node: the BatchNormalization node folded into it in an inference step, or -1 (step_plan.h).
std::vector<int> inference_folds(const Graph& g, int end) {
  const int n = g.size();
  const Readers readers(g, end);
  std::vector<int> folds(n, -1);
  for (int j = 0; j < end; ++j) {
    const std::vector<int>& in = g.inputs(j);
    if (g.layer(j).is_merge() || in.size() != 1 || in[0] == kModelInput) continue;
    const int i = in[0];
    // The convolution's own output must be needed by nothing else (nor be the model's output),
    // and a ReLU inside it would come before the normalization.
    // A depthwise convolution has no ReLU of its own: only a normalization without one folds into it.
    const bool foldable = (is_norm(g.layer(j)) && is_plain_conv(g.layer(i))) ||
                          (is_plain_norm(g.layer(j)) && is_depthwise_conv(g.layer(i)));
    if (foldable && readers.count[i] == 1 && i != end - 1) folds[i] = j;
  }
  return folds;
}

// Per node of an inference step: the ReLU6 node that alone reads the BatchNormalization folded into
// this convolution (a normalization without a fused ReLU, not the model's output), or -1.
std::vector<int> inference_caps(const Graph& g, int end, const std::vector<int>& folds) {
  const Readers readers(g, end);
  std::vector<int> capped(g.size(), -1);
  for (int c = 0; c < end; ++c) {
    const int bn = folds[c];
    if (bn < 0 || !is_plain_norm(g.layer(bn)) || readers.count[bn] != 1 || bn == end - 1) continue;
    const int a = readers.only[bn];
    if (is_relu6(g.layer(a)) && g.inputs(a).size() == 1 && a != end - 1) capped[c] = a;
  }
  return capped;
}

// Which nodes of a training step need the gradient of their output: those with trainable
// parameters and every node after one (backward runs for them, step_plan.h).
std::vector<char> nodes_needing_gradients(const Graph& g, int end, const std::vector<bool>& trains) {
  std::vector<char> needs(g.size(), 0);
  for (int i = 0; i < end; ++i) {
    needs[i] = trains.at(i);
    for (int p : g.inputs(i))
      if (p != kModelInput && needs[p]) needs[i] = 1;
  }
  return needs;
}

// A training step's folds: inference_folds' pairs in the frozen part of the model (the transfer-
// learning guide's base: no backward runs through the convolution or the normalization, which
// normalizes with its moving statistics: frozen, or inside a model called with training=False),
// where the normalization is no block tail's (training_residuals' `residual`).
std::vector<int> frozen_folds(const Graph& g, int end, const std::vector<char>& needs,
                              const std::vector<int>& residual) {
  std::vector<int> folds = inference_folds(g, end);
  for (int c = 0; c < end; ++c) {
    const int bn = folds[c];
    if (bn < 0) continue;
    const Layer& norm = g.layer(bn);
    const bool moving = !norm.trainable() || norm.inference_only();
    if (needs[c] || needs[bn] || !moving || residual[bn] != kNoResidual) folds[c] = -1;
  }
  return folds;
}

// A residual block's tail: the plain ReLU that alone reads node a, where a is an Add of two inputs
// read by nothing else; else -1.
int tail_relu(const Graph& g, const Readers& readers, int a) {
  if (!is_add(g.layer(a)) || g.inputs(a).size() != 2 || readers.count[a] != 1) return -1;
  const int r = readers.only[a];
  if (!is_plain_relu(g.layer(r)) || g.inputs(r).size() != 1) return -1;
  return r;
}

// Per node, for an inference step: the shortcut a convolution adds before its block's ReLU, or
// kNoResidual (step_plan.h); `tail[k]` is set to that convolution for the Add and the ReLU it
// computes. `folds` as inference_folds made them.
std::vector<int> inference_residuals(const Graph& g, int end, const std::vector<int>& folds, std::vector<int>& tail) {
  const int n = g.size();
  const Readers readers(g, end);
  std::vector<int> folded_into(n, -1);
  for (int i = 0; i < n; ++i)
    if (folds[i] >= 0) folded_into[folds[i]] = i;
  std::vector<int> residual(n, kNoResidual);
  tail.assign(n, -1);
  for (int a = 0; a < end; ++a) {
    const int r = tail_relu(g, readers, a);
    if (r < 0) continue;
    const std::vector<int>& in = g.inputs(a);
    for (int s = 0; s < 2; ++s) {
      const int p = in[s], q = in[1 - s];
      if (p == kModelInput || p == q || readers.count[p] != 1) continue;
      const int c = folded_into[p] >= 0 ? folded_into[p] : p;  // the convolution computing p
      if (!is_plain_conv(g.layer(c)) || residual[c] != kNoResidual) continue;
      if (c != p && !is_plain_norm(g.layer(p))) continue;  // a folded normalization's ReLU comes first
      if (q != kModelInput && q >= c) continue;  // the shortcut must exist when the convolution runs
      residual[c] = q;
      tail[a] = tail[r] = c;
      break;
    }
  }
  return residual;
}

// Per node, for a training step: the shortcut a BatchNormalization adds before its block's ReLU,
// or kNoResidual (step_plan.h); `tail[k]` is set to that normalization for the Add and the ReLU it
// computes.
std::vector<int> training_residuals(const Graph& g, int end, std::vector<int>& tail) {
  const int n = g.size();
  const Readers readers(g, end);
  std::vector<int> residual(n, kNoResidual);
  tail.assign(n, -1);
  for (int a = 0; a < end; ++a) {
    const int r = tail_relu(g, readers, a);
    if (r < 0 || r == end - 1) continue;
    const std::vector<int>& in = g.inputs(a);
    // The later input first: the shortcut must exist when the normalization runs.
    const int first = in[0] > in[1] ? 0 : 1;
    for (int s : {first, 1 - first}) {
      const int p = in[s], q = in[1 - s];
      if (p == kModelInput || p == q || readers.count[p] != 1 || residual[p] != kNoResidual) continue;
      if (!is_plain_norm(g.layer(p))) continue;
      if (q != kModelInput && q >= p) continue;
      // The shortcut's other readers come before p: their contributions to its gradient are added
      // after p's backward masked the buffer they share.
      if (q != kModelInput) {
        bool later_reader = false;
        for (int k = 0; k < end; ++k)
          if (k != a && k > p)
            for (int i2 : g.inputs(k)) later_reader = later_reader || i2 == q;
        if (later_reader) continue;
      }
      residual[p] = q;
      tail[a] = tail[r] = p;
      break;
    }
  }
  return residual;
}

// Whether input p of the pass-through node i (an Add) may take dy's buffer as its gradient when
// its input q took it already: then no copy of dy is made (a residual block's shortcut). Safe when
// the buffer changes only by p's later contributions and q's backward reads it before any of
// them: q's output is read by i alone (nothing else adds into q's gradient), q's backward only
// reads its dy (not a pass-through handing the buffer on, not a layer that may write dy), and
// every other reader of p comes before q, so its backward runs after q's.
bool can_share_dy(const Graph& g, int end, int i, int q, int p) {
  if (q == kModelInput || q == p) return false;
  const Layer& lq = g.layer(q);
  if (lq.is_merge() || lq.backward_is_view() || lq.backward_writes_dy()) return false;
  for (int r = 0; r < end; ++r) {
    if (r == i) continue;
    for (int s : g.inputs(r)) {
      if (s == q) return false;           // q's output has another reader
      if (s == p && r > q) return false;  // a contribution to p's gradient before q's backward
    }
  }
  return true;
}

}  // namespace

StepPlan plan_step(const Graph& g, StepMode mode, int end, const std::vector<bool>& trains) {
  const int n = g.size();
  HPCNN_CHECK_BACKEND(end >= 1 && end <= n, "plan_step: end ", end, " outside [1, ", n, "]");
  StepPlan plan;
  plan.mode = mode;
  plan.end = end;
  plan.value_buffer.assign(n, kBatchBuffer);
  plan.forward_view.assign(n, 0);
  plan.runs_backward.assign(n, 0);
  plan.run.assign(n, RunKind::Plain);
  plan.back.assign(n, BackKind::None);
  plan.grad_buffer.assign(n, -1);
  plan.routes.assign(n, {});
  plan.temps.assign(n, {});
  auto add_buffer = [&](const Shape& per_sample, int t) {
    plan.buffers.push_back({shape_numel(per_sample), t, t});
    return static_cast<int>(plan.buffers.size()) - 1;
  };
  auto touch = [&](int b, int t) {
    if (b < 0) return;  // the staged batch: not ours to plan
    plan.buffers[b].first = std::min(plan.buffers[b].first, t);
    plan.buffers[b].last = std::max(plan.buffers[b].last, t);
  };
  auto value_of = [&](int p) { return p == kModelInput ? kBatchBuffer : plan.value_buffer[p]; };

  // ---- forward: each node's output, read by the nodes that take it
  const bool training = mode == StepMode::Train || mode == StepMode::Call;
  // Inference folds every BatchNormalization it can into the convolution before it; a training
  // step only those of its frozen part (frozen_folds: its forward is then as predict's there).
  const std::vector<char> needs = nodes_needing_gradients(g, end, trains);
  std::vector<int>& tail = plan.tail;  // an Add or ReLU whose value another node computes
  if (mode == StepMode::Train) {
    plan.residual = training_residuals(g, end, tail);
    plan.folds = frozen_folds(g, end, needs, plan.residual);
  } else if (training) {
    plan.residual = training_residuals(g, end, tail);
    plan.folds.assign(n, -1);
  } else {
    plan.folds = inference_folds(g, end);
    plan.residual = inference_residuals(g, end, plan.folds, tail);
  }
  plan.capped = inference_caps(g, end, plan.folds);
  plan.view_source.assign(n, kNotAView);
  for (int i = 0; i < n; ++i)
    for (int v : {plan.folds[i], plan.capped[i]})
      if (v >= 0) plan.view_source[v] = i;  // a folded node, a capped ReLU6: its conv wrote it
  for (int i = 0; i < n; ++i)
    if (tail[i] >= 0) plan.view_source[i] = tail[i];
  for (int i = 0; i < end; ++i) {
    const Layer& l = g.layer(i);
    const std::vector<int>& in = g.inputs(i);
    if (plan.view_source[i] == kNotAView && !l.is_merge() && l.forward_is_view(training)) plan.view_source[i] = in[0];
    if (plan.view_source[i] != kNotAView) {
      plan.forward_view[i] = 1;
      plan.value_buffer[i] = value_of(plan.view_source[i]);
    } else {
      plan.value_buffer[i] = add_buffer(g.output_shape(i), i);
    }
    for (int p : in) touch(value_of(p), i);
    if (plan.residual[i] != kNoResidual) touch(value_of(plan.residual[i]), i);  // read by the output stage
    if (plan.forward_view[i]) plan.run[i] = RunKind::View;
    else if (l.is_merge()) plan.run[i] = RunKind::Merge;
    else if (plan.residual[i] != kNoResidual) plan.run[i] = training ? RunKind::NormBlockTail : RunKind::ConvBlockTail;
    else if (plan.folds[i] >= 0) plan.run[i] = RunKind::FoldedConv;
  }
  touch(plan.value_buffer[end - 1], end);  // read by the loss (or copied out by predict)
  if (mode != StepMode::Train) return plan;

  // ---- backward: which nodes need the gradient of their output
  if (needs[end - 1]) plan.grad_buffer[end - 1] = add_buffer(g.output_shape(end - 1), end);  // dlogits
  for (int i = end - 1; i >= 0; --i) {
    if (!needs[i]) continue;
    plan.runs_backward[i] = 1;
    const int t = 2 * end - i;
    const Layer& l = g.layer(i);
    const std::vector<int>& in = g.inputs(i);
    touch(plan.grad_buffer[i], t);
    if (l.backward_reads_input())
      for (int p : in) touch(value_of(p), t);
    // A block tail's normalization reads its output for the ReLU's mask.
    if (l.backward_reads_output() || plan.residual[i] != kNoResidual) touch(plan.value_buffer[i], t);
    const bool pass = l.backward_is_view() || tail[i] >= 0;  // a block tail's Add and ReLU pass dy on
    bool donated = false;  // dy's buffer given to an input already
    int donee = kModelInput;  // the input that took it
    plan.routes[i].assign(in.size(), GradRoute::None);
    plan.temps[i].assign(in.size(), -1);
    for (size_t s = 0; s < in.size(); ++s) {
      const int p = in[s];
      if (p == kModelInput || !needs[p]) continue;
      GradRoute& r = plan.routes[i][s];
      if (plan.grad_buffer[p] < 0) {  // the first contribution to p's gradient
        // A block tail's shortcut always shares (training_residuals checked that it may).
        if (pass && (!donated || tail[i] >= 0 || can_share_dy(g, end, i, donee, p))) {
          r = GradRoute::Alias;
          plan.grad_buffer[p] = plan.grad_buffer[i];
          auto& b = plan.buffers[plan.grad_buffer[p]];
          b.per_sample = std::max(b.per_sample, shape_numel(g.output_shape(p)));
          if (!donated) donee = p;
          donated = true;
        } else {
          r = pass ? GradRoute::Copy : GradRoute::Write;
          plan.grad_buffer[p] = add_buffer(g.output_shape(p), t);
        }
      } else {
        touch(plan.grad_buffer[p], t);
        if (pass) {
          r = GradRoute::Accumulate;
        } else if (!l.is_merge() && l.backward_can_add()) {
          r = GradRoute::AddInto;
        } else {
          r = GradRoute::WriteTemp;
          plan.temps[i][s] = add_buffer(g.output_shape(p), t);
        }
      }
    }
    if (pass) plan.back[i] = BackKind::PassThrough;
    else if (l.is_merge()) plan.back[i] = BackKind::Merge;
    else if (plan.routes[i][0] == GradRoute::AddInto) plan.back[i] = BackKind::Adding;
    else if (plan.residual[i] != kNoResidual) plan.back[i] = BackKind::NormBlockTail;
    else plan.back[i] = BackKind::Plain;
  }
  return plan;
}

ArenaLayout pack_plan(const StepPlan& plan, long long rows) {
  std::vector<BufferLife> lives;
  for (const StepPlan::Buffer& b : plan.buffers)
    lives.push_back({checked_mul(checked_mul(b.per_sample, rows, "a step buffer"), 4, "a step buffer"), b.first, b.last});
  return pack_buffers(lives, kArenaAlignment);
}

}  // namespace hpcnn::nn
