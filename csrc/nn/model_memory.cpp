// The model's step memory: the step plans (one per step kind: who writes and reads each
// activation and gradient buffer when, nn/step_plan.h), the one arena they are packed into
// (nn/memory_plan.h), made only when a batch needs more than the last one, and the loss's own
// buffers next to it; the memory report of a batch size.
#include "nn/model.h"

#include <algorithm>

namespace hpcnn::nn {

namespace {

// Every buffer alive for the whole step: none shares memory with another (memory_reuse off).
void keep_apart(StepPlan& plan, int nodes) {
  for (StepPlan::Buffer& b : plan.buffers) {
    b.first = 0;
    b.last = 2 * nodes + 1;
  }
}

}  // namespace

std::vector<bool> Model::nodes_with_trainable_weights() const {
  std::vector<bool> trains(graph_.size(), false);
  for (int i = 0; i < graph_.size(); ++i)
    for (const ParamSpec& s : specs_[i]) trains[i] = trains[i] || (trainable_[i] && s.trainable);
  return trains;
}

void Model::make_plans() {
  const std::vector<bool> trains = nodes_with_trainable_weights();
  plans_[static_cast<int>(StepMode::Train)] = plan_step(graph_, StepMode::Train, loss_end(), trains);
  plans_[static_cast<int>(StepMode::Test)] = plan_step(graph_, StepMode::Test, loss_end(), trains);
  plans_[static_cast<int>(StepMode::Predict)] = plan_step(graph_, StepMode::Predict, graph_.size(), trains);
  plans_[static_cast<int>(StepMode::Call)] = plan_step(graph_, StepMode::Call, graph_.size(), trains);
  if (!memory_reuse_)
    for (StepPlan& plan : plans_) keep_apart(plan, graph_.size());
  plans_current_ = true;
  chunked_.forget_layout();  // the side arena's layout was of the old plans
}

void Model::set_memory_reuse(bool on) {
  memory_reuse_ = on;
  plans_current_ = false;
}

MemoryReport Model::memory_report(long long n) const {
  HPCNN_CHECK_ARG(n > 0, "memory_report: the batch size must be positive, got ", n);
  const std::vector<bool> trains = nodes_with_trainable_weights();
  MemoryReport r;
  r.batch = n;
  StepPlan train = plan_step(graph_, StepMode::Train, loss_end(), trains);
  r.train = pack_plan(train, n).bytes;
  for (int i = 0; i < graph_.size(); ++i) {
    r.train_residual_blocks += train.residual[i] != kNoResidual;
    r.train_folded += train.folds[i] >= 0;
  }
  keep_apart(train, graph_.size());
  r.train_keep_all = pack_plan(train, n).bytes;
  r.test = pack_plan(plan_step(graph_, StepMode::Test, loss_end(), trains), n).bytes;
  const StepPlan predict = plan_step(graph_, StepMode::Predict, graph_.size(), trains);
  r.predict = pack_plan(predict, n).bytes;
  for (int i = 0; i < graph_.size(); ++i) {
    r.predict_folded += predict.folds[i] >= 0;
    r.predict_capped += predict.capped[i] >= 0;
    r.predict_residual_blocks += predict.residual[i] != kNoResidual;
  }
  long long acts = 0, biggest = shape_numel(graph_.input_shape());
  for (int i = 0; i < graph_.size(); ++i) {
    const long long sz = shape_numel(graph_.output_shape(i));
    biggest = std::max(biggest, sz);
    const Layer& l = graph_.layer(i);
    if (l.is_merge() || !(l.forward_is_view(true) && l.forward_is_view(false))) acts += sz;
  }
  r.one_buffer_per_activation = 4 * n * (acts + 2 * biggest + shape_numel(graph_.output_shapes().back()));
  r.statistics = 8 * statistics_doubles();
  return r;
}

void Model::ensure_buffers(long long n) {
  if (n <= capacity_ && plans_current_ && stats_.defined()) return;
  const long long cap = std::max(n, capacity_);
  if (!plans_current_) make_plans();
  std::array<ArenaLayout, kModes> layouts;
  long long need = 0;
  for (int m = 0; m < kModes; ++m) {
    layouts[m] = pack_plan(plans_[m], cap);
    need = std::max(need, layouts[m].bytes);
  }
  if (arena_.defined() && stats_.defined() && need <= arena_bytes()) {
    // The arena is big enough: only the layouts change. Work still queued on the GPU uses the
    // old layout's offsets, and every later op runs after it on the same stream.
    arena_layouts_ = std::move(layouts);
    ensure_loss_buffers(cap);
    capacity_ = cap;
    return;
  }
  wait_device();  // the last step's backward may still read the buffers about to be replaced
  // Release the old arena first (also the step's views of it: on a GPU the new one needs that
  // memory) and mark the set incomplete: capacity_ 0 and stats_ undefined until every buffer
  // exists. After an OutOfMemory ("try a smaller batch_size") the next call then allocates afresh
  // for its own size instead of reusing a half-made set of the failed size.
  release_step_buffers();
  arena_ = Tensor::empty({need / 4}, DType::F32, device_);
  // doubles: loss sum, correct, penalty, then one per metric
  stats_ = Tensor::zeros({2 * statistics_doubles()}, DType::F32, device_);  // doubles in float32 storage
  ensure_loss_buffers(cap);
  arena_layouts_ = std::move(layouts);
  capacity_ = cap;
}

void Model::release_step_buffers() {
  capacity_ = 0;
  stats_ = arena_ = row_w_ = metric_out_ = Tensor();
  chunked_.release();
  vals_.clear();
  grads_now_.clear();
  xs_.clear();
  dx_targets_.clear();
}

// The loss's own buffers next to the arena: the per-row weights and (with a fused activation and
// metrics) the outputs the metrics read, for `cap` rows.
void Model::ensure_loss_buffers(long long cap) {
  const long long units = graph_.output_shapes().back().at(0);
  const bool need_out = fused_output_ && !metrics_.empty();
  const bool rows_ok = row_w_.defined() && row_w_.numel() >= cap;
  const bool out_ok = !need_out || (metric_out_.defined() && metric_out_.numel() >= cap * units);
  if (rows_ok && out_ok) return;
  wait_device();  // queued work may still read the buffers about to be replaced
  row_w_ = metric_out_ = Tensor();
  row_w_ = Tensor::empty({cap}, DType::F32, device_);
  if (need_out) metric_out_ = Tensor::empty({cap * units}, DType::F32, device_);
}

}  // namespace hpcnn::nn
