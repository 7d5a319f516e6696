#include "distribute/replica_set.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/batch_shares.h"
#include "nn/loss.h"

namespace hpcnn::distribute {

// ------------------------------------------------------------------ threads
struct ReplicaThreads::Shared {
  int replicas = 1;
  std::vector<std::thread> workers;  // replicas 1..n-1
  std::mutex mu;
  std::condition_variable start, done;
  const std::function<void(int)>* job = nullptr;
  unsigned long long generation = 0;
  int pending = 0;
  bool stop = false;
  std::vector<std::exception_ptr> errors;

  void worker(int i) {
    unsigned long long seen = 0;
    for (;;) {
      const std::function<void(int)>* fn;
      {
        std::unique_lock<std::mutex> lk(mu);
        start.wait(lk, [&] { return stop || generation != seen; });
        if (stop) return;
        seen = generation;
        fn = job;
      }
      std::exception_ptr err;
      try {
        (*fn)(i);
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard<std::mutex> lk(mu);
      errors[static_cast<size_t>(i)] = err;
      if (--pending == 0) done.notify_all();
    }
  }
};

ReplicaThreads::ReplicaThreads(int replicas) : shared_(std::make_unique<Shared>()) {
  shared_->replicas = replicas;
  shared_->errors.assign(static_cast<size_t>(replicas), nullptr);
  for (int i = 1; i < replicas; ++i) shared_->workers.emplace_back([s = shared_.get(), i] { s->worker(i); });
}

ReplicaThreads::~ReplicaThreads() {
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    shared_->stop = true;
  }
  shared_->start.notify_all();
  for (auto& t : shared_->workers) t.join();
}

std::vector<std::exception_ptr> ReplicaThreads::run(const std::function<void(int)>& fn) {
  Shared& s = *shared_;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    s.errors.assign(static_cast<size_t>(s.replicas), nullptr);
    s.job = &fn;
    s.pending = s.replicas - 1;
    ++s.generation;
  }
  s.start.notify_all();
  std::exception_ptr first;
  try {
    fn(0);
  } catch (...) {
    first = std::current_exception();
  }
  std::unique_lock<std::mutex> lk(s.mu);
  s.done.wait(lk, [&] { return s.pending == 0; });
  s.job = nullptr;
  s.errors[0] = first;
  return s.errors;
}

// ------------------------------------------------------------------ the replica set
namespace {

// The same exception with `prefix` in front of its message (and of the same kind, so that Python
// sees the same exception type).
[[noreturn]] void rethrow_prefixed(std::exception_ptr e, const std::string& prefix) {
  if (prefix.empty()) std::rethrow_exception(e);
  try {
    std::rethrow_exception(e);
  } catch (const nn::NonFiniteLoss&) {
    throw;
  } catch (const PeerFailure& x) {
    throw PeerFailure(prefix + x.what());
  } catch (const ValueError& x) {
    throw ValueError(prefix + x.what());
  } catch (const OutOfMemory& x) {
    throw OutOfMemory(prefix + x.what());
  } catch (const std::exception& x) {
    throw BackendError(prefix + x.what());
  }
}

bool is_non_finite(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const nn::NonFiniteLoss&) {
    return true;
  } catch (...) {
    return false;
  }
}

bool is_peer_failure(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const PeerFailure&) {
    return true;
  } catch (...) {
    return false;
  }
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown error";
  }
}

// Rows [a, b) of a batch tensor (rows first) as a view.
Tensor rows_view(const Tensor& t, long long a, long long b) {
  Shape s = t.shape();
  const long long per = s[0] > 0 ? t.numel() / s[0] : 0;
  s[0] = b - a;
  return t.view(a * per, s);
}

}  // namespace

ReplicaSet::ReplicaSet(std::shared_ptr<Group> group, std::vector<nn::Model*> models, long long bucket_bytes)
    : group_(std::move(group)), models_(std::move(models)), bucket_bytes_(bucket_bytes),
      threads_(static_cast<int>(models_.size())), ahead_(models_.size(), Ahead::None), deferred_(models_.size()) {
  HPCNN_CHECK_ARG(static_cast<int>(models_.size()) == group_->local_size(), "a replica set needs one model per "
                  "replica of the group: ", group_->local_size(), " replicas, ", models_.size(), " models");
  for (size_t i = 0; i < models_.size(); ++i) {
    HPCNN_CHECK_ARG(models_[i]->device() == group_->devices()[i], "replica ", i, " is on ", models_[i]->device().str(),
                    " but the group expects ", group_->devices()[i].str());
    reducers_.push_back(std::make_unique<GradientReducer>(group_->endpoint(static_cast<int>(i)), *models_[i],
                                                          bucket_bytes));
    models_[i]->set_gradient_sync(reducers_.back().get());
  }
}

ReplicaSet::~ReplicaSet() {
  for (nn::Model* m : models_) m->set_gradient_sync(nullptr);
}

std::vector<ReplicaSet::Share> ReplicaSet::split(const nn::Batch& b, bool global) const {
  const int local = group_->local_size();
  std::vector<Share> out(static_cast<size_t>(local));
  if (b.error || !b.x.defined() || b.x.rank() < 1) {  // every replica raises the batch's error at its turn
    for (Share& s : out) s.batch = b;
    return out;
  }
  const long long n = b.rows ? static_cast<long long>(b.rows->size()) : b.x.dim(0);
  const long long total = global && b.global_rows > 0 ? b.global_rows : n;
  const long long first = global && b.global_rows > 0 ? b.first_row : 0;
  const long long replicas = global ? group_->size() : local;
  for (int i = 0; i < local; ++i) {
    const long long r = global ? group_->first_replica() + i : i;
    const long long lo = share_begin(total, replicas, r), hi = share_end(total, replicas, r);
    HPCNN_CHECK_ARG(lo >= first && hi <= first + n, "this process was given rows [", first, ", ", first + n,
                    ") of a global batch of ", total, " rows, but its replica ", r, " of ", replicas,
                    " needs rows [", lo, ", ", hi, ")");
    Share& s = out[static_cast<size_t>(i)];
    s.empty = hi == lo;
    nn::Batch& sb = s.batch;
    sb.decode = b.decode;
    sb.first_row = global ? lo : 0;
    sb.global_rows = global ? total : 0;
    const long long a = lo - first, e = hi - first;
    if (b.rows) {  // the sample weights are indexed like x and y: by the rows
      sb.x = b.x;
      sb.y = b.y;
      sb.w = b.w;
      sb.rows = std::vector<long long>(b.rows->begin() + a, b.rows->begin() + e);
    } else {
      sb.x = rows_view(b.x, a, e);
      if (b.y.defined() && b.y.rank() >= 1 && b.y.dim(0) == n) sb.y = rows_view(b.y, a, e);
      else sb.y = b.y;  // a mismatch: the stager reports it
      if (b.w.defined() && b.w.rank() == 1 && b.w.dim(0) == n) sb.w = rows_view(b.w, a, e);
      else sb.w = b.w;  // a mismatch: the stager reports it
    }
  }
  return out;
}

nn::BatchStats ReplicaSet::run(StepKind kind, const nn::Batch* current, const nn::Batch* next,
                               std::vector<Tensor>* outputs) {
  std::lock_guard<std::mutex> lk(group_->step_mutex());
  if (group_->failed()) {
    const std::string f = group_->failure();
    throw PeerFailure(f.empty() ? "the group of replicas stopped after a failure (see the first error)" : f);
  }
  const bool global = kind != StepKind::Predict;
  const int local = group_->local_size();
  std::vector<Share> cur, nxt;
  if (current) cur = split(*current, global);
  if (next) nxt = split(*next, global);
  std::vector<nn::BatchStats> stats(static_cast<size_t>(local));
  std::vector<uint64_t> steps(static_cast<size_t>(local));
  for (int i = 0; i < local; ++i) steps[static_cast<size_t>(i)] = models_[static_cast<size_t>(i)]->step();
  if (outputs) outputs->assign(static_cast<size_t>(local), Tensor());
  std::vector<Ahead> ahead(static_cast<size_t>(local), Ahead::None);
  std::vector<nn::Batch> deferred(static_cast<size_t>(local));

  auto errors = threads_.run([&](int i) {
    const size_t k = static_cast<size_t>(i);
    nn::Model& m = *models_[k];
    try {
      const nn::Batch* mine = nullptr;
      bool empty = false;
      if (current) {
        empty = cur[k].empty;
        if (!empty) mine = &cur[k].batch;
      } else if (ahead_[k] == Ahead::Empty) {
        empty = true;
      } else if (ahead_[k] == Ahead::Deferred) {
        mine = &deferred_[k];
      } else if (ahead_[k] == Ahead::None) {
        throw ValueError("no batch is staged: pass this step's batch, or stage it with the previous step's `next`");
      }  // Staged: the model takes its own (mine stays null)
      const nn::Batch* stage = nullptr;
      if (next) {
        if (nxt[k].empty) ahead[k] = Ahead::Empty;
        else stage = &nxt[k].batch;
      }
      if (empty) {
        m.drop_staged();
        if (kind == StepKind::Train) {
          stats[k] = m.compute_gradients(nn::StagedBatch{});
          m.apply_gradients();
        } else if (kind == StepKind::Test) {
          stats[k] = m.evaluate_staged(nn::StagedBatch{});
        } else {
          (*outputs)[k] = Tensor::empty(nn::with_batch(0, m.output_shapes().back()));
        }
        if (stage) {  // nothing staged this time: the next call stages it
          ahead[k] = Ahead::Deferred;
          deferred[k] = *stage;
        }
        return;
      }
      if (kind == StepKind::Train) stats[k] = m.train_step(mine, stage);
      else if (kind == StepKind::Test) stats[k] = m.test_step(mine, stage);
      else (*outputs)[k] = m.predict_step(mine, stage);
      if (stage) ahead[k] = Ahead::Staged;
    } catch (...) {
      // Wake the others at once (they may wait for this replica in a collective). A non-finite
      // loss is no failure: every replica sees the same summed loss and stops at the same point.
      std::exception_ptr e = std::current_exception();
      if (!is_non_finite(e) && !is_peer_failure(e))
        group_->abort(local > 1 ? cat("replica ", group_->first_replica() + i, " (", m.device().str(), "): ", what_of(e))
                                : what_of(e));
      throw;
    }
  });

  bool any = false, all_non_finite = true;
  for (const auto& e : errors) {
    any = any || e;
    all_non_finite = all_non_finite && e && is_non_finite(e);
  }
  if (!any) {
    ahead_ = std::move(ahead);
    deferred_ = std::move(deferred);
    return stats[0];
  }
  if (all_non_finite) {  // the same on every replica; nothing was staged (the step stopped first)
    ahead_.assign(ahead_.size(), Ahead::None);
    deferred_.assign(deferred_.size(), nn::Batch());
    std::rethrow_exception(errors[0]);
  }
  fail(errors, steps);
}

void ReplicaSet::fail(const std::vector<std::exception_ptr>& errors, const std::vector<uint64_t>& steps) {
  // The first error that is not another replica's failure reported back: the cause.
  int cause = -1;
  for (size_t i = 0; i < errors.size(); ++i)
    if (errors[i] && !is_peer_failure(errors[i])) {
      cause = static_cast<int>(i);
      break;
    }
  if (cause < 0)
    for (size_t i = 0; i < errors.size(); ++i)
      if (errors[i]) {
        cause = static_cast<int>(i);
        break;
      }
  // This process's replicas start the next step as if this one had not been taken.
  for (size_t i = 0; i < models_.size(); ++i) {
    try {
      models_[i]->drop_staged();
    } catch (...) {
    }
    models_[i]->set_rng_state(models_[i]->seed(), steps[i]);
  }
  ahead_.assign(ahead_.size(), Ahead::None);
  deferred_.assign(deferred_.size(), nn::Batch());
  if (!group_->multi_process()) group_->recover();
  const std::string prefix =
      group_->local_size() > 1 && !is_peer_failure(errors[static_cast<size_t>(cause)])
          ? cat("replica ", group_->first_replica() + cause, " (", models_[static_cast<size_t>(cause)]->device().str(),
                "): ")
          : "";
  rethrow_prefixed(errors[static_cast<size_t>(cause)], prefix);
}

nn::BatchStats ReplicaSet::train_step(const nn::Batch* current, const nn::Batch* next) {
  return run(StepKind::Train, current, next, nullptr);
}

nn::BatchStats ReplicaSet::test_step(const nn::Batch* current, const nn::Batch* next) {
  return run(StepKind::Test, current, next, nullptr);
}

Tensor ReplicaSet::predict_step(const nn::Batch* current, const nn::Batch* next) {
  std::vector<Tensor> outs;
  run(StepKind::Predict, current, next, &outs);
  if (outs.size() == 1) return outs[0];
  long long rows = 0;
  for (const Tensor& t : outs) rows += t.dim(0);
  Tensor all = Tensor::empty(nn::with_batch(rows, models_[0]->output_shapes().back()));
  long long at = 0;
  for (const Tensor& t : outs) {
    if (t.dim(0) == 0) continue;
    all.view(at * (t.numel() / t.dim(0)), t.shape()).copy_from(t);
    at += t.dim(0);
  }
  return all;
}

bool ReplicaSet::has_staged() const {
  for (Ahead a : ahead_)
    if (a != Ahead::None) return true;
  return false;
}

void ReplicaSet::drop_staged() {
  for (nn::Model* m : models_) m->drop_staged();
  ahead_.assign(ahead_.size(), Ahead::None);
  deferred_.assign(deferred_.size(), nn::Batch());
}

void ReplicaSet::broadcast_parameters() {
  std::lock_guard<std::mutex> lk(group_->step_mutex());
  if (group_->failed()) throw PeerFailure(group_->failure().empty() ? "the group of replicas stopped after a failure"
                                                                    : group_->failure());
  auto errors = threads_.run([&](int i) {
    try {
      group_->endpoint(i).broadcast(models_[static_cast<size_t>(i)]->parameter_buffer(), 0);
    } catch (...) {
      if (!is_peer_failure(std::current_exception())) group_->abort(what_of(std::current_exception()));
      throw;
    }
  });
  for (const auto& e : errors)
    if (e) {
      std::vector<uint64_t> steps;
      for (nn::Model* m : models_) steps.push_back(m->step());
      fail(errors, steps);
    }
}

}  // namespace hpcnn::distribute
