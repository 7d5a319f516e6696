#include "distribute/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace hpcnn::distribute {

namespace {
struct Injection {
  std::mutex mu;
  int replica = -1;
  double stall_s = 0;
};
Injection& injection() {
  static Injection i;
  return i;
}
// Fires the injected failure when it is for `replica` (once).
void maybe_fail(int replica) {
  Injection& inj = injection();
  double stall = 0;
  {
    std::lock_guard<std::mutex> lk(inj.mu);
    if (inj.replica != replica) return;
    inj.replica = -1;
    stall = inj.stall_s;
  }
  if (stall > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(stall));
    return;
  }
  throw BackendError(cat("injected failure (a test) on replica ", replica, " before its first gradient bucket"));
}
}  // namespace

void inject_failure(int replica, double stall_s) {
  HPCNN_CHECK_ARG(stall_s >= 0, "inject_failure: stall_s must be >= 0");
  Injection& inj = injection();
  std::lock_guard<std::mutex> lk(inj.mu);
  inj.replica = replica;
  inj.stall_s = stall_s;
}

std::vector<Bucket> plan_buckets(const std::vector<nn::ParamRange>& layer_ranges, long long bucket_bytes) {
  std::vector<Bucket> out;
  bool open = false;
  Bucket cur;
  for (int i = static_cast<int>(layer_ranges.size()) - 1; i >= 0; --i) {
    const nn::ParamRange& r = layer_ranges[i];
    if (r.end <= r.begin) continue;  // no trainable gradients in this layer
    // Not adjacent (a frozen layer in between): a bucket of its own. Arrays start at aligned
    // offsets, so none starts in [r.end, align(r.end)) unless at r.end itself.
    const bool adjacent = cur.begin >= r.end && cur.begin <= nn::align_param_offset(r.end);
    if (open && !adjacent) {
      out.push_back(cur);
      open = false;
    }
    if (!open) {
      cur = Bucket{r.begin, r.end, i};
      open = true;
    } else {
      cur.begin = r.begin;
      cur.closing_layer = i;
    }
    if (bucket_bytes > 0 && (cur.end - cur.begin) * static_cast<long long>(sizeof(float)) >= bucket_bytes) {
      out.push_back(cur);
      open = false;
    }
  }
  if (open) out.push_back(cur);
  return out;
}

GradientReducer::GradientReducer(Communicator& comm, nn::Model& model, long long bucket_bytes)
    : comm_(comm), model_(model), bucket_bytes_(bucket_bytes) {
  HPCNN_CHECK_ARG(bucket_bytes >= 0, "bytes_per_pack must be >= 0, got ", bucket_bytes);
}

void GradientReducer::reduce_stats(double* values, int count) { comm_.allreduce_sum_host(values, count); }

void GradientReducer::begin_gradients() {
  // Planned at every step: the trainable layers may have changed since the last one (compile).
  buckets_ = plan_buckets(model_.layer_gradient_ranges(), bucket_bytes_);
  started_.assign(buckets_.size(), 0);
  step_collectives_ = step_bytes_ = 0;
  maybe_fail(comm_.rank());
}

void GradientReducer::start(size_t k) {
  started_[k] = 1;
  const Bucket& b = buckets_[k];
  comm_.start_allreduce_sum(model_.gradient_buffer().view(b.begin, {b.end - b.begin}));
  ++step_collectives_;
  long long elements = 0;  // the trainable parameters' gradients in the bucket, without the padding
  for (const nn::ParamRange& t : model_.trainable_ranges())
    elements += std::max(0LL, std::min(t.end, b.end) - std::max(t.begin, b.begin));
  step_bytes_ += elements * static_cast<long long>(sizeof(float));
}

void GradientReducer::gradients_ready(int layer) {
  // Buckets complete in order; start each one whose last layer (in backward order) is done. The
  // replicas start the same buckets in the same order: the collectives match.
  for (size_t k = 0; k < buckets_.size(); ++k)
    if (!started_[k] && buckets_[k].closing_layer == layer) start(k);
}

void GradientReducer::finish_gradients() {
  for (size_t k = 0; k < buckets_.size(); ++k)
    if (!started_[k]) start(k);  // e.g. a replica without rows: every bucket now
  comm_.wait_all();
}

void GradientReducer::average_state(const Tensor& state, bool contributed) {
  // Small (BatchNormalization: 2 x channels per layer): summed as doubles on the host, in the
  // transport's fixed order, with the count of contributing replicas in the same collective.
  const long long n = state.numel();
  Tensor host = state.device().is_cpu() ? state : state.to(Device::cpu());
  std::vector<double> v(static_cast<size_t>(n) + 1, 0.0);
  if (contributed) {
    const float* h = host.f32();
    for (long long i = 0; i < n; ++i) v[static_cast<size_t>(i)] = h[i];
    v[static_cast<size_t>(n)] = 1.0;
  }
  comm_.allreduce_sum_host(v.data(), static_cast<int>(v.size()));
  const double count = v[static_cast<size_t>(n)];
  if (count <= 0) return;  // nobody had rows: the state did not move anywhere
  Tensor mean = Tensor::empty({n}, DType::F32);
  float* m = mean.f32();
  for (long long i = 0; i < n; ++i) m[i] = static_cast<float>(v[static_cast<size_t>(i)] / count);
  Tensor dst = state;
  dst.copy_from(mean);
}

}  // namespace hpcnn::distribute
