#include "nn/sequential.h"

#include <cmath>
#include <cstring>

#include "core/cuda_async.h"
#include "core/cuda_runtime.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "nn/layers.h"
#include "ops/ops.h"

namespace hpcnn::nn {

namespace {

Shape with_batch(long long n, const Shape& s) {
  Shape out{n};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// glorot_uniform as Keras: U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)); counter-based
// draws, so the same seed gives the same weights on any machine and thread count.
void initialize(float* p, long long count, const ParamSpec& s, uint64_t seed, uint64_t stream) {
  if (s.init == Init::Zeros) {
    std::memset(p, 0, sizeof(float) * count);
    return;
  }
  double limit = std::sqrt(6.0 / static_cast<double>(s.fan_in + s.fan_out));
  for (long long i = 0; i < count; ++i)
    p[i] = static_cast<float>((2.0 * rng::uniform(seed, stream, static_cast<uint64_t>(i)) - 1.0) * limit);
}

}  // namespace

Sequential::Sequential(Shape input_shape, std::vector<LayerPtr> layers, uint64_t seed)
    : input_shape_(std::move(input_shape)), layers_(std::move(layers)), seed_(seed) {
  HPCNN_CHECK_ARG(!input_shape_.empty(), "the model needs an input shape (InputLayer(input_shape=...))");
  for (long long d : input_shape_)
    HPCNN_CHECK_ARG(d > 0, "input shape ", shape_str(input_shape_), " has a non-positive dimension");
  HPCNN_CHECK_ARG(!layers_.empty(), "the model has no layers");
  Shape cur = input_shape_;
  long long total = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    in_shapes_.push_back(cur);
    try {
      cur = layers_[i]->output_shape(cur);
    } catch (const ValueError& e) {
      throw ValueError(cat("layer ", i, " (", layers_[i]->kind(), "): ", e.what()));
    }
    out_shapes_.push_back(cur);
    specs_.push_back(layers_[i]->param_specs(in_shapes_.back()));
    std::vector<long long> offs;
    for (const ParamSpec& s : specs_.back()) {
      offs.push_back(total);
      total = checked_add(total, shape_numel(s.shape), "the model's parameter count");
    }
    param_offsets_.push_back(offs);
  }
  params_ = Tensor::empty({total});
  grads_ = Tensor::zeros({total});
  set_trainable(std::vector<bool>(layers_.size(), true));
  uint64_t stream = 1;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t j = 0; j < specs_[i].size(); ++j)
      initialize(params_.f32() + param_offsets_[i][j], shape_numel(specs_[i][j].shape), specs_[i][j], seed_,
                 stream++);
  bind_layers();
}

Sequential::~Sequential() {
  try {
    discard_prefetch();  // its copy may still be writing a buffer that is about to be freed
  } catch (...) {
    // A device error here has nothing left to report to; the buffers are freed regardless.
  }
}

// Gives each layer views of its parameters and gradients in the two buffers.
void Sequential::bind_layers() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<Tensor> p, g;
    for (size_t j = 0; j < specs_[i].size(); ++j) {
      p.push_back(params_.view(param_offsets_[i][j], specs_[i][j].shape));
      g.push_back(grads_.view(param_offsets_[i][j], specs_[i][j].shape));
    }
    layers_[i]->bind(p, g);
  }
}

// ------------------------------------------------------------------ weights
std::vector<Tensor> Sequential::get_weights() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t j = 0; j < specs_[i].size(); ++j)
      out.push_back(params_.view(param_offsets_[i][j], specs_[i][j].shape).to(Device::cpu()));
  return out;
}

void Sequential::set_weights(const std::vector<Tensor>& ws) {
  size_t expected = 0;
  for (auto& s : specs_) expected += s.size();
  HPCNN_CHECK_ARG(ws.size() == expected, "set_weights: the model has ", expected, " weight arrays, got ", ws.size());
  size_t k = 0;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t j = 0; j < specs_[i].size(); ++j, ++k)
      HPCNN_CHECK_ARG(ws[k].shape() == specs_[i][j].shape, "set_weights: weight ", k, " (layer ", i, " ",
                      layers_[i]->kind(), " ", specs_[i][j].name, ") has shape ", shape_str(ws[k].shape()),
                      ", expected ", shape_str(specs_[i][j].shape));
  k = 0;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t j = 0; j < specs_[i].size(); ++j, ++k) {
      Tensor dst = params_.view(param_offsets_[i][j], specs_[i][j].shape);
      dst.copy_from(ws[k]);
    }
}

// ------------------------------------------------------------------ compile and device
void Sequential::compile(std::unique_ptr<Optimizer> optimizer, Loss loss, bool from_logits) {
  HPCNN_CHECK_ARG(optimizer != nullptr, "compile: an optimizer is required");
  const Shape& out = out_shapes_.back();
  HPCNN_CHECK_ARG(out.size() == 1, "compile: the model output ", shape_str(out),
                  " is not (classes,): add Flatten() and a Dense output layer");
  auto* last = dynamic_cast<const ActivationLayer*>(layers_.back().get());
  bool softmax_last = last && last->activation() == Activation::Softmax;
  if (!from_logits)
    HPCNN_CHECK_ARG(softmax_last, "compile: cross-entropy expects probabilities, but the last layer has no "
                    "softmax: use activation='softmax' on the last layer, or a loss with from_logits=True");
  fused_softmax_ = softmax_last && !from_logits;
  HPCNN_CHECK_ARG(!(softmax_last && from_logits), "compile: from_logits=True but the last layer already applies "
                  "softmax; drop one of the two");
  optimizer->to(device_);
  optimizer_ = std::move(optimizer);
  loss_ = loss;
}

void Sequential::set_trainable(const std::vector<bool>& per_layer) {
  HPCNN_CHECK_ARG(per_layer.size() == layers_.size(), "set_trainable: the model has ", layers_.size(),
                  " layers, got ", per_layer.size(), " flags");
  std::vector<ParamRange> ranges;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!per_layer[i] || specs_[i].empty()) continue;
    const long long b = param_offsets_[i].front();
    const long long e = param_offsets_[i].back() + shape_numel(specs_[i].back().shape);
    if (!ranges.empty() && ranges.back().end == b) ranges.back().end = e;  // adjacent: one range
    else ranges.push_back({b, e});
  }
  trainable_ = per_layer;
  trainable_ranges_ = std::move(ranges);
}

long long Sequential::num_trainable_params() const {
  long long n = 0;
  for (const ParamRange& r : trainable_ranges_) n += r.end - r.begin;
  return n;
}

void Sequential::to(Device d) {
  if (d == device_) return;
  discard_prefetch();
  if (d.is_cuda()) cuda::require_device(d.index);
  // Both buffers are made on `d` before either replaces the old one: an OutOfMemory here leaves
  // the model whole on its old device (not parameters on one device and gradients on the other).
  Tensor params = params_.to(d);
  Tensor grads = Tensor::zeros(params_.shape(), DType::F32, d);
  if (optimizer_) optimizer_->to(d);
  params_ = std::move(params);
  grads_ = std::move(grads);
  bind_layers();
  device_ = d;
  capacity_ = 0;  // buffers are re-made on the new device at the next step
  act_.clear();
  acts_now_.clear();
  grad_a_ = grad_b_ = dlogits_ = stats_ = Tensor();
  for (int s = 0; s < 2; ++s) x_host_[s] = x_dev_[s] = y_host_[s] = y_dev_[s] = Tensor();
}

// ------------------------------------------------------------------ buffers and staging
void Sequential::ensure_buffers(long long n) {
  if (n <= capacity_ && stats_.defined()) return;
  discard_prefetch();  // its buffers are about to be replaced
  const long long cap = std::max(n, capacity_);
  // Release the old set first (also the step's views of it: on a GPU the new set needs that
  // memory) and mark it incomplete: capacity_ 0 and stats_ undefined until every buffer exists.
  // After an OutOfMemory ("try a smaller batch_size") the next call then allocates afresh for its
  // own size instead of reusing a half-made set of the failed size.
  capacity_ = 0;
  stats_ = Tensor();
  acts_now_.clear();
  act_.assign(layers_.size(), Tensor());
  grad_a_ = grad_b_ = dlogits_ = Tensor();
  for (int s = 0; s < 2; ++s) x_host_[s] = x_dev_[s] = y_host_[s] = y_dev_[s] = Tensor();
  long long biggest = shape_numel(input_shape_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    long long sz = shape_numel(out_shapes_[i]);
    biggest = std::max(biggest, sz);
    if (!(layers_[i]->forward_is_view(true) && layers_[i]->forward_is_view(false)))
      act_[i] = Tensor::empty(with_batch(cap, out_shapes_[i]), DType::F32, device_);
  }
  const long long grad_elems = checked_mul(cap, biggest, "the gradient buffer of a batch");
  grad_a_ = Tensor::empty({grad_elems}, DType::F32, device_);
  grad_b_ = Tensor::empty({grad_elems}, DType::F32, device_);
  dlogits_ = Tensor::empty(with_batch(cap, out_shapes_.back()), DType::F32, device_);
  stats_ = Tensor::zeros({4}, DType::F32, device_);  // two doubles: loss sum, correct
  capacity_ = cap;
}

long long Sequential::batch_rows(const Tensor& x, const std::vector<long long>* rows) const {
  HPCNN_CHECK_ARG(x.rank() >= 1, "input must have a batch axis, got a scalar");
  long long n = rows ? static_cast<long long>(rows->size()) : x.dim(0);
  HPCNN_CHECK_ARG(n > 0, "empty batch: input has shape ", shape_str(x.shape()));
  return n;
}

// Per-sample shape check: x (N, *input_shape), or (N, H, W) for an (H, W, 1) input.
static void check_input_shape(const Tensor& x, const Shape& want) {
  Shape per(x.shape().begin() + 1, x.shape().end());
  Shape per1 = per;
  per1.push_back(1);
  HPCNN_CHECK_ARG(per == want || per1 == want, "input shape mismatch: the model expects (None, ",
                  shape_str(want).substr(1), " but got ", shape_str(x.shape()));
}

// A host staging buffer of (at least) `shape` and `dtype`: page-locked on a GPU (copy_h2d_async
// needs a pinned source; it also makes the synchronous copies faster), ordinary memory on the CPU.
// Before a batch is staged on a GPU, wait_staging_free() waits for the copies that read them.
Tensor& Sequential::host_staging(Tensor& buf, const Shape& shape, DType dtype) {
  if (buf.defined() && buf.dtype() == dtype && buf.shape() == shape) return buf;
  buf = Tensor();
  if (device_.is_cpu()) {
    buf = Tensor::empty(shape, dtype);
  } else {
    const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
    void* p = cuda::malloc_pinned(bytes ? bytes : 1, device_.index);
    std::shared_ptr<void> owner(p, [](void* q) { cuda::free_pinned(q); });  // RAII: freed with the last view
    buf = Tensor::borrow(p, shape, dtype, Device::cpu(), std::move(owner));
  }
  return buf;
}

// Copies the staged host batch into `dev` (the slot's device buffer, made on first use) and
// returns nothing: the caller takes the view. Synchronous: Tensor::copy_from on the legacy
// default stream, which waits for the (blocking) compute stream, so any buffer may be written.
// Async: cuda::copy_h2d_async on the copy stream; ops enqueued later wait for it (an event).
// after_queued_compute is false on purpose: the slot written is never read by queued work (see
// prefetch()), so the copy may run while the previous step's backward pass runs.
void Sequential::upload(const Tensor& host, Tensor& dev, bool async) {
  if (async) {
    cuda::copy_h2d_async(device_.index, dev.raw(), host.raw(), static_cast<size_t>(host.nbytes()), false);
  } else {
    dev.copy_from(host);
  }
}

Tensor Sequential::stage_input(const Tensor& x, const std::vector<long long>* rows, long long n, int slot,
                               bool async) {
  check_input_shape(x, input_shape_);
  HPCNN_CHECK_ARG(x.device().is_cpu(), "input must be a host array");
  HPCNN_CHECK_ARG(x.dtype() == DType::F32 || x.dtype() == DType::U8, "input must be float32 or uint8, got ",
                  dtype_name(x.dtype()));
  const long long per = shape_numel(input_shape_);
  const Shape full = with_batch(n, input_shape_);
  if (rows)
    for (long long r : *rows)
      HPCNN_CHECK_ARG(r >= 0 && r < x.dim(0), "row index ", r, " is outside the input's ", x.dim(0), " rows");
  Tensor staged;
  // The caller's float32 rows in order are used in place (zero-copy), except for an async upload
  // on a GPU: that needs a pinned source, so they are copied into the staging buffer.
  if (x.dtype() == DType::F32 && !rows && !(async && device_.is_cuda())) {
    staged = x.reshape(full);  // zero-copy
  } else {
    staged = host_staging(x_host_[slot], with_batch(capacity_, input_shape_), DType::F32).view(0, full);
    float* dst = staged.f32();
    const bool u8 = x.dtype() == DType::U8;
    // uint8 is converted to float unscaled, as Keras does; scaling is the data pipeline's job.
    parallel_for(n, [&](long long b, long long e, int) {
      for (long long i = b; i < e; ++i) {
        long long src_row = rows ? (*rows)[i] : i;
        if (u8) {
          const uint8_t* s = x.u8() + src_row * per;
          for (long long k = 0; k < per; ++k) dst[i * per + k] = static_cast<float>(s[k]);
        } else {
          std::memcpy(dst + i * per, x.f32() + src_row * per, sizeof(float) * per);
        }
      }
    }, 8);
  }
  if (x.dtype() == DType::F32) ops::check_finite(staged, "input batch");
  if (device_.is_cpu()) return staged;
  if (!x_dev_[slot].defined())
    x_dev_[slot] = Tensor::empty(with_batch(capacity_, input_shape_), DType::F32, device_);
  Tensor d = x_dev_[slot].view(0, full);
  upload(staged, d, async);
  return d;
}

Tensor Sequential::stage_target(const Tensor& y, const std::vector<long long>* rows, long long n, int slot,
                                bool async) {
  const long long classes = out_shapes_.back().at(0);
  HPCNN_CHECK_ARG(y.device().is_cpu(), "targets must be a host array");
  long long ny = y.rank() ? y.dim(0) : 0;
  if (rows) {
    for (long long r : *rows) HPCNN_CHECK_ARG(r >= 0 && r < ny, "row index ", r, " is outside the targets' ", ny, " rows");
  } else {
    HPCNN_CHECK_ARG(ny == n, "inputs have ", n, " rows but targets have ", ny);
  }
  const bool pinned_needed = async && device_.is_cuda();
  Tensor staged;
  if (loss_ == Loss::CategoricalCrossentropy) {
    HPCNN_CHECK_ARG(y.dtype() == DType::F32 && y.rank() == 2 && y.dim(1) == classes,
                    "categorical_crossentropy needs one-hot targets of shape (n, ", classes, "), got ", y.str(),
                    ": use hpcnn.utils.to_categorical(y, ", classes, ") (or HDF5Dataset(..., one_hot=", classes,
                    ")), or loss='sparse_categorical_crossentropy' for class indices");
    ops::check_finite(y, "targets");
    const Shape full{n, classes};
    if (!rows && !pinned_needed) {
      staged = y;
    } else {
      staged = host_staging(y_host_[slot], {capacity_, classes}, DType::F32).view(0, full);
      for (long long i = 0; i < n; ++i)
        std::memcpy(staged.f32() + i * classes, y.f32() + (rows ? (*rows)[i] : i) * classes,
                    sizeof(float) * classes);
    }
  } else {
    HPCNN_CHECK_ARG(y.dtype() == DType::I32 && (y.rank() == 1 || (y.rank() == 2 && y.dim(1) == 1)),
                    "sparse_categorical_crossentropy needs integer class indices of shape (n,) or (n, 1), got ",
                    y.str(), (y.rank() == 2 && y.dim(1) == classes ? ": these look one-hot; use "
                                                                      "loss='categorical_crossentropy'" : ""));
    staged = host_staging(y_host_[slot], {capacity_}, DType::I32).view(0, {n});
    for (long long i = 0; i < n; ++i) {
      int32_t label = y.i32()[rows ? (*rows)[i] : i];
      HPCNN_CHECK_ARG(label >= 0 && label < classes, "label ", label, " (row ", rows ? (*rows)[i] : i,
                      ") is outside [0, ", classes, ") for a model with ", classes, " outputs");
      staged.i32()[i] = label;
    }
  }
  if (device_.is_cpu()) return staged;
  if (!y_dev_[slot].defined() || y_dev_[slot].dtype() != staged.dtype()) {
    Shape cap = staged.shape();
    cap[0] = capacity_;
    y_dev_[slot] = Tensor::empty(cap, staged.dtype(), device_);
  }
  Tensor d = y_dev_[slot].view(0, staged.shape());
  upload(staged, d, async);
  return d;
}

// ------------------------------------------------------------------ the step
Tensor Sequential::forward(const Tensor& x, int end, bool training) {
  StepContext ctx{training, seed_, step_, 0};
  const long long n = x.dim(0);
  acts_now_.assign(layers_.size(), Tensor());
  Tensor cur = x;
  for (int i = 0; i < end; ++i) {
    ctx.layer_index = i;
    Layer& l = *layers_[i];
    const Shape full = with_batch(n, out_shapes_[i]);
    Tensor y;
    if (l.forward_is_view(training)) {
      y = cur.reshape(full);
    } else {
      y = act_[i].view(0, full);
      l.forward(cur, y, ctx);
    }
    acts_now_[i] = y;
    cur = y;
  }
  return cur;
}

int Sequential::loss_end() const { return num_layers() - (fused_softmax_ ? 1 : 0); }

BatchStats Sequential::loss_and_stats(const Tensor& logits, const Tensor& target, Tensor* dlogits) {
  stats_.fill_zero();
  double* s = reinterpret_cast<double*>(stats_.raw());
  const long long n = logits.dim(0);
  ops::softmax_xent(logits, target, dlogits, 1.0f / static_cast<float>(n), s);
  Tensor host = device_.is_cpu() ? stats_ : stats_.to(Device::cpu());
  const double* h = reinterpret_cast<const double*>(host.raw());
  return BatchStats{h[0], h[1], n};
}

namespace {
bool same_array(const Tensor& a, const Tensor& b) {
  return a.raw() == b.raw() && a.shape() == b.shape() && a.dtype() == b.dtype();
}
}  // namespace

std::pair<Tensor, Tensor> Sequential::stage_batch(const Tensor& x, const Tensor& y, const std::vector<long long>* rows,
                                                  const char* purpose) {
  HPCNN_CHECK_ARG(compiled(), "the model must be compiled before ", purpose, ": call model.compile(...)");
  if (pending_ && same_array(pending_->x, x) && same_array(pending_->y, y) && pending_->has_rows == (rows != nullptr) &&
      (!rows || pending_->rows == *rows)) {
    // Staged (and on a GPU, uploaded or being uploaded) by prefetch(): the ops enqueued from now
    // on wait for that copy on the device, so no host wait is needed here.
    std::pair<Tensor, Tensor> out{pending_->X, pending_->Y};
    slot_ = pending_->slot;  // only now is it the slot of the last step
    pending_.reset();
    return out;
  }
  discard_prefetch();
  const long long n = batch_rows(x, rows);
  wait_staging_free();  // before any staging buffer is refilled or (growing) freed
  ensure_buffers(n);
  slot_ = 1 - slot_;
  Tensor X = stage_input(x, rows, n, slot_, false);
  return {X, stage_target(y, rows, n, slot_, false)};
}

// Why writing slot 1 - slot_ without waiting is safe on a GPU. Only a train_batch returns with
// work still queued (its backward pass and optimizer step; test_batch and predict_batch end with
// a device->host readback that waits for all of their work). That step, the last one, reads its
// input X from slot_ (the first layer's backward reads X). The other slot was last read by an
// earlier step, whose whole work was enqueued on the compute stream before the last step's
// forward pass and loss; the last step's stats readback waited for those, hence (streams run in
// order) for the earlier step's backward too. So nothing queued reads the other slot, and the
// copy may run alongside the last step's backward. The host staging buffers are refilled only
// after wait_staging_free() (the copies that read them have finished). The synchronous staging
// (stage_batch) needs none of this: its copy runs on the legacy default stream, which waits for
// the compute and copy streams (both are blocking streams).
void Sequential::prefetch(const Tensor& x, const Tensor& y, const std::vector<long long>* rows) {
  HPCNN_CHECK_ARG(compiled(), "the model must be compiled before training: call model.compile(...)");
  discard_prefetch();
  const long long n = batch_rows(x, rows);
  wait_staging_free();  // before any staging buffer is refilled or (growing) freed
  ensure_buffers(n);
  const int slot = 1 - slot_;
  Prefetched p;
  try {
    p.X = stage_input(x, rows, n, slot, true);
    p.Y = stage_target(y, rows, n, slot, true);
  } catch (...) {
    // Bad targets after the input's copy was enqueued: let that copy finish before its buffers
    // can be refilled or freed (the next staging waits too; this is explicit).
    wait_staging_free();
    throw;
  }
  // Only a completely staged batch is recorded (an error above leaves no pending prefetch).
  // slot_ stays the slot of the last step until the batch is used: were this prefetch dropped and
  // another one made before the next step, that one must again avoid the last step's slot.
  p.slot = slot;
  p.x = x;
  p.y = y;
  p.has_rows = rows != nullptr;
  if (rows) p.rows = *rows;
  pending_ = std::move(p);
}

// On a GPU, blocks until the last async copy has finished, so that both slots' host staging
// buffers may be refilled. Called once before a batch is staged (not between its x and y: that
// would wait for the x upload just started). Normally returns at once: the last copy belonged to a
// prefetch that the previous step used, and that step's stats readback came after it.
void Sequential::wait_staging_free() {
  if (device_.is_cuda()) cuda::copy_wait_host(device_.index);
}

// Drops a pending prefetch. On a GPU its copy may still be in flight: wait for it, so that the
// buffers it writes and reads can be refilled or freed.
void Sequential::discard_prefetch() {
  if (!pending_) return;
  pending_.reset();
  if (device_.is_cuda()) cuda::copy_wait_host(device_.index);
}

BatchStats Sequential::train_batch(const Tensor& x, const Tensor& y, const std::vector<long long>* rows) {
  auto [X, Y] = stage_batch(x, y, rows, "training");
  // From here on, any error leaves no pending prefetch to be used (stage_batch took or dropped it).
  ++step_;
  const int end = loss_end();
  Tensor logits = forward(X, end, true);
  Tensor dl = dlogits_.view(0, logits.shape());
  BatchStats st = loss_and_stats(logits, Y, &dl);
  if (!std::isfinite(st.loss_sum))
    throw ValueError(cat("the loss is ", std::isnan(st.loss_sum) ? "NaN" : "inf",
                         ": training diverged (try a smaller learning rate); the weights were not updated"));

  // Backward, from the loss to the first layer that has trainable parameters (frozen layers
  // before it need neither their parameter gradients nor the gradient of their input).
  int first_param = end;
  for (int i = 0; i < end; ++i)
    if (!specs_[i].empty() && trainable_[i]) {
      first_param = i;
      break;
    }
  StepContext ctx{true, seed_, step_, 0};
  Tensor g = dl;
  bool g_in_a = false;
  for (int i = end - 1; i >= first_param; --i) {
    ctx.layer_index = i;
    Layer& l = *layers_[i];
    const Tensor& xi = i ? acts_now_[i - 1] : X;
    if (l.backward_is_view()) {
      g = g.reshape(xi.shape());
      continue;
    }
    const bool need_dx = i > first_param;
    Tensor dx;
    if (need_dx) dx = (g_in_a ? grad_b_ : grad_a_).view(0, xi.shape());
    l.backward(xi, acts_now_[i], g, need_dx ? &dx : nullptr, ctx);
    if (need_dx) {
      g = dx;
      g_in_a = !g_in_a;
    }
  }
  optimizer_->step(params_, grads_, trainable_ranges_);
  return st;
}

BatchStats Sequential::test_batch(const Tensor& x, const Tensor& y, const std::vector<long long>* rows) {
  auto [X, Y] = stage_batch(x, y, rows, "evaluation");
  Tensor logits = forward(X, loss_end(), false);
  return loss_and_stats(logits, Y, nullptr);
}

Tensor Sequential::predict_batch(const Tensor& x, const std::vector<long long>* rows) {
  discard_prefetch();  // the staging below may reuse its buffers
  const long long n = batch_rows(x, rows);
  wait_staging_free();  // before any staging buffer is refilled or (growing) freed
  ensure_buffers(n);
  slot_ = 1 - slot_;
  Tensor X = stage_input(x, rows, n, slot_, false);
  Tensor out = forward(X, num_layers(), false);
  return out.to(Device::cpu());  // a copy: the activation buffers are reused by the next batch
}

}  // namespace hpcnn::nn
