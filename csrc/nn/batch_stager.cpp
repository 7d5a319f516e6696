#include "nn/batch_stager.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "core/cuda_async.h"
#include "core/cuda_runtime.h"
#include "core/thread_pool.h"
#include "nn/layer.h"
#include "ops/decode.h"
#include "core/pixel.h"
#include "ops/ops.h"

namespace hpcnn::nn {

namespace {

// Per-sample shape check: x (N, *input_shape), or (N, H, W) for an (H, W, 1) input.
void check_input_shape(const Tensor& x, const Shape& want) {
  Shape per(x.shape().begin() + 1, x.shape().end());
  Shape per1 = per;
  per1.push_back(1);
  HPCNN_CHECK_ARG(per == want || per1 == want, "input shape mismatch: the model expects (None, ",
                  shape_str(want).substr(1), " but got ", shape_str(x.shape()));
}

void check_rows(const std::optional<std::vector<long long>>& rows, long long have, const char* whose) {
  if (!rows) return;
  for (long long r : *rows)
    HPCNN_CHECK_ARG(r >= 0 && r < have, "row index ", r, " is outside the ", whose, " ", have, " rows");
}

long long source_row(const Batch& b, long long i) { return b.rows ? (*b.rows)[i] : i; }

// Copies the batch's rows of `src` (row_bytes each) to `dst`, in batch order, on hpcnn's threads.
void gather_rows(const Batch& b, long long n, const void* src, void* dst, size_t row_bytes) {
  parallel_for(n, [&](long long i0, long long i1, int) {
    for (long long i = i0; i < i1; ++i)
      std::memcpy(static_cast<char*>(dst) + i * row_bytes,
                  static_cast<const char*>(src) + source_row(b, i) * row_bytes, row_bytes);
  }, 8);
}

// The decode of a uint8 batch, one (scale, shift) per channel.
struct ChannelDecode {
  std::vector<float> scale, shift;
  bool uniform = true;  // one value for every channel
};

ChannelDecode channel_decode(const InputDecode& d, long long channels) {
  auto expand = [&](const std::vector<float>& v, float fallback, const char* what) {
    HPCNN_CHECK_ARG(v.empty() || v.size() == 1 || static_cast<long long>(v.size()) == channels, "uint8 decode: ",
                    what, " has ", v.size(), " values; expected 1 or one per channel (", channels, ")");
    std::vector<float> out(static_cast<size_t>(channels));
    for (long long c = 0; c < channels; ++c) {
      out[c] = v.empty() ? fallback : v.size() == 1 ? v[0] : v[c];
      HPCNN_CHECK_ARG(std::isfinite(out[c]), "uint8 decode: ", what, " ", out[c], " (channel ", c, ") is not finite");
    }
    return out;
  };
  ChannelDecode cd{expand(d.scale, 1.0f, "scale"), expand(d.shift, 0.0f, "shift")};
  for (long long c = 1; c < channels; ++c)
    cd.uniform = cd.uniform && cd.scale[c] == cd.scale[0] && cd.shift[c] == cd.shift[0];
  return cd;
}

// uint8 rows of the batch -> float32 with pixel::decode_u8, the function the GPU kernel uses.
void decode_rows(const Batch& b, long long n, long long per, const ChannelDecode& cd, float* dst) {
  const long long channels = static_cast<long long>(cd.scale.size());
  std::vector<float> scale_row(per), shift_row(per);  // per element of a row: a loop that vectorizes
  for (long long e = 0; e < per; ++e) {
    scale_row[e] = cd.scale[e % channels];
    shift_row[e] = cd.shift[e % channels];
  }
  const float* sc = scale_row.data();
  const float* sh = shift_row.data();
  const uint8_t* x = b.x.u8();
  parallel_for(n, [&](long long i0, long long i1, int) {
    for (long long i = i0; i < i1; ++i) {
      const uint8_t* __restrict__ s = x + source_row(b, i) * per;
      float* __restrict__ d = dst + i * per;
      for (long long e = 0; e < per; ++e) d[e] = pixel::decode_u8(s[e], sc[e], sh[e]);
    }
  }, 8);
}

}  // namespace

BatchStager::BatchStager(Shape input_shape) : input_shape_(std::move(input_shape)) {}

BatchStager::~BatchStager() {
  try {
    drop_ahead();
    wait_device();
  } catch (...) {
    // A device error here has nothing left to report to; the buffers are freed regardless.
  }
}

void BatchStager::to(Device d) {
  drop_ahead();
  wait_device();
  for (SlotBuffers& s : slots_) s = SlotBuffers();
  device_ = d;
}

void BatchStager::set_targets(Loss loss, long long classes) {
  loss_ = loss;
  classes_ = classes;
}

std::optional<StagingSlot> BatchStager::ahead_slot() const {
  if (!ahead_) return std::nullopt;
  return ahead_->slot;
}

// ------------------------------------------------------------------ the three entry points
StagedBatch BatchStager::stage(const Batch& b, bool with_targets, const StepContext& step) {
  drop_ahead();
  if (b.error) std::rethrow_exception(b.error);
  const StagingSlot s = other(last_slot_);
  StagedBatch out = stage_into(b, with_targets, s, Upload::AfterQueuedWork, step);
  // Only a completely staged batch moves the last step's slot: after an error the last step may
  // still have work queued that reads its slot, so the next batch must again avoid it.
  last_slot_ = s;
  return out;
}

// Why a batch staged ahead may be uploaded into other(last_slot_) while the step just enqueued
// still runs its backward pass and optimizer step (only a training step returns with work queued;
// evaluation and prediction end by reading their result back, which waits for all of their work).
// stage_ahead is called only right after a step that completed up to its result's readback. That
// step reads its input from last_slot_ (the first layer's backward reads x). The other slot
// was last read by an earlier step, whose whole work was enqueued on the compute stream before the
// last step's forward pass; the last step's loss readback waited for that work, hence (a stream
// runs in order) for the earlier step's backward too. So no queued work reads the other slot, and
// its upload (copy stream) may run alongside the last step's backward. Its uint8 decode runs on
// the compute stream, after that backward, like any later op. The host buffers are refilled only
// after wait_copies() (the uploads that read them have finished); a device buffer that must grow
// is freed only after wait_device(). A batch staged for the step about to run (stage()) makes no
// such claim: the call before may have failed after enqueuing work that reads either slot, so its
// upload starts after the queued work (the step's own work has to wait for that anyway).
void BatchStager::stage_ahead(const Batch& b, bool with_targets, const StepContext& step) noexcept {
  Ahead a;
  a.slot = other(last_slot_);
  a.with_targets = with_targets;
  a.step = step;
  try {
    drop_ahead();
    if (b.error) std::rethrow_exception(b.error);
    a.batch = stage_into(b, with_targets, a.slot, Upload::AlongsideQueuedWork, step);
  } catch (...) {
    a.batch = StagedBatch();
    a.error = std::current_exception();  // raised at the batch's turn, by take_ahead
  }
  // last_slot_ stays the last step's until a step takes the batch: were this one dropped and
  // another staged before the next step, that one must again avoid the last step's slot.
  ahead_ = std::move(a);
}

StagedBatch BatchStager::take_ahead(bool with_targets, const StepContext& step) {
  HPCNN_CHECK_ARG(ahead_.has_value(), "no batch is staged: pass this step's batch, or stage it with the "
                  "previous step's `next`");
  Ahead a = std::move(*ahead_);
  ahead_.reset();
  if (a.error) {
    wait_copies();  // a part of it may have been uploading
    std::rethrow_exception(a.error);
  }
  if (with_targets && !a.with_targets) {
    wait_copies();
    throw ValueError("the staged batch has no targets (it was staged by a prediction step), but this step needs "
                     "them: pass the batch with its targets");
  }
  // The leading augmentation made the batch for one step: a training step's images are not an
  // evaluation's, nor another training step's.
  const bool augmented = aug_.active(a.step.training) || aug_.active(step.training);
  if (augmented && (a.step.training != step.training || (step.training && a.step.step != step.step))) {
    wait_copies();
    throw ValueError(cat("the staged batch was augmented for ", a.step.training ? "training step " : "inference",
                         a.step.training ? std::to_string(a.step.step) : std::string(), ", but this is ",
                         step.training ? "training step " : "an inference step",
                         step.training ? std::to_string(step.step) : std::string(),
                         " (the model starts with augmentation layers): pass this step's batch itself"));
  }
  last_slot_ = a.slot;  // only now is it the slot of the last step
  return std::move(a.batch);
}

void BatchStager::drop_ahead() {
  if (!ahead_) return;
  ahead_.reset();
  wait_copies();  // its upload may still be writing its buffers and reading its source
}

// ------------------------------------------------------------------ staging one batch
StagedBatch BatchStager::stage_into(const Batch& b, bool with_targets, StagingSlot slot_id, Upload when,
                                    const StepContext& step) {
  HPCNN_CHECK_ARG(b.x.defined(), "the batch has no input (x)");
  HPCNN_CHECK_ARG(b.x.rank() >= 1, "input must have a batch axis, got a scalar");
  const long long n = b.rows ? static_cast<long long>(b.rows->size()) : b.x.dim(0);
  HPCNN_CHECK_ARG(n > 0, "empty batch: input has shape ", shape_str(b.x.shape()));
  wait_copies();  // before any host staging buffer is refilled (normally done already)
  SlotBuffers& s = slot(slot_id);
  HPCNN_CHECK_ARG(b.global_rows == 0 || (b.first_row >= 0 && b.first_row + n <= b.global_rows),
                  "a share of rows [", b.first_row, ", ", b.first_row + n, ") does not fit a global batch of ",
                  b.global_rows, " rows");
  StagedBatch out;
  out.first_row = b.global_rows ? b.first_row : 0;
  out.global_rows = b.global_rows ? b.global_rows : n;
  try {
    out.x = stage_input(b, n, s, when, step);
    if (with_targets) out.y = stage_targets(b, n, s, when);
    if (with_targets && b.w.defined()) out.w = stage_weights(b, n, s, when);
  } catch (...) {
    // Bad targets after the input's upload was enqueued: let that upload finish before its
    // buffers can be refilled or freed (the next staging would wait too; this is explicit).
    wait_copies();
    throw;
  }
  return out;
}

Tensor BatchStager::stage_input(const Batch& b, long long n, SlotBuffers& s, Upload when, const StepContext& step) {
  const Tensor& x = b.x;
  check_input_shape(x, input_shape_);
  HPCNN_CHECK_ARG(x.device().is_cpu(), "input must be a host array");
  HPCNN_CHECK_ARG(x.dtype() == DType::F32 || x.dtype() == DType::U8, "input must be float32 or uint8, got ",
                  dtype_name(x.dtype()));
  check_rows(b.rows, x.dim(0), "input's");
  const bool u8 = x.dtype() == DType::U8;
  HPCNN_CHECK_ARG(u8 || (b.decode.scale.empty() && b.decode.shift.empty()),
                  "a uint8 decode (scale, shift) was given for a float32 input; it applies to uint8 inputs only");
  const long long per = shape_numel(input_shape_);
  const long long channels = input_shape_.back();
  const Shape full = with_batch(n, input_shape_);
  const ChannelDecode cd = u8 ? channel_decode(b.decode, channels) : ChannelDecode{};
  const bool augment = aug_.active(step.training);
  StepContext at = step;
  at.first_row = b.global_rows ? b.first_row : 0;  // as StagedBatch::first_row

  if (device_.is_cpu()) {
    if (augment) return augment_on_host(b, n, s, at);
    if (!u8 && !b.rows) {
      Tensor X = x.reshape(full);  // the caller's rows in order: used in place
      ops::check_finite(X, "input batch");
      return X;
    }
    Tensor X = host_buffer(s.host_x, full, DType::F32);
    if (u8) {
      decode_rows(b, n, per, cd, X.f32());
    } else {
      gather_rows(b, n, x.raw(), X.raw(), sizeof(float) * per);
      ops::check_finite(X, "input batch");
    }
    return X;
  }
  const Tensor X = upload_input(b, n, s, when);
  return augment ? augment_on_device(X, s, at) : X;
}

Tensor BatchStager::upload_input(const Batch& b, long long n, SlotBuffers& s, Upload when) {
  const Tensor& x = b.x;
  const bool u8 = x.dtype() == DType::U8;
  const long long per = shape_numel(input_shape_);
  const long long channels = input_shape_.back();
  const Shape full = with_batch(n, input_shape_);
  const ChannelDecode cd = u8 ? channel_decode(b.decode, channels) : ChannelDecode{};
  // uint8 crosses as uint8 and is decoded on the GPU, when the kernel can take the decode: one
  // value for all channels (then the batch is viewed as one channel), or few channels.
  if (u8 && (cd.uniform || channels <= cuda::kDecodeMaxChannels)) {
    const Shape as_decoded = cd.uniform ? Shape{n * per, 1} : full;
    const bool in_place = !b.rows && pinned(x);
    Tensor src = in_place ? x.reshape(full) : host_buffer(s.host_x, full, DType::U8);
    if (!in_place) gather_rows(b, n, x.raw(), src.raw(), static_cast<size_t>(per));
    Tensor X8 = upload(src, s.dev_x_u8, when).reshape(as_decoded);
    Tensor X = device_buffer(s.dev_x, full, DType::F32);
    Tensor Xd = X.reshape(as_decoded);
    ops::decode_u8(X8, Xd, cd.scale.data(), cd.shift.data());  // on the compute stream, after the upload
    return X;
  }
  const bool in_place = !u8 && !b.rows && pinned(x);
  Tensor src = in_place ? x.reshape(full) : host_buffer(s.host_x, full, DType::F32);
  if (u8) decode_rows(b, n, per, cd, src.f32());  // too many distinct channels for the kernel
  else if (!in_place) gather_rows(b, n, x.raw(), src.raw(), sizeof(float) * per);
  if (!u8) ops::check_finite(src, "input batch");
  return upload(src, s.dev_x, when);
}

// One pass per stage: the first reads the batch's rows where they are (uint8 decoded on the way),
// each further one the previous output (the slot's two host buffers in turn). In inference only
// the active stages run (a crop that is not the identity); the first pass always runs, as the
// gather.
Tensor BatchStager::augment_on_host(const Batch& b, long long n, SlotBuffers& s, const StepContext& step) {
  const bool u8 = b.x.dtype() == DType::U8;
  const Tensor x = b.x.reshape(with_batch(b.x.dim(0), input_shape_));  // (N, H, W) -> (N, H, W, 1)
  const ChannelDecode cd = u8 ? channel_decode(b.decode, input_shape_.back()) : ChannelDecode{};
  std::shared_ptr<HostBuffer>* bufs[2] = {&s.host_x, &s.host_aug};
  int next = 0;
  Tensor cur;  // undefined: still the caller's rows
  for (const AugmentStage& st : aug_.stages) {
    if (cur.defined() && !st.active(step.training)) continue;
    Tensor out = host_buffer(*bufs[next], with_batch(n, st.out), DType::F32);
    next ^= 1;
    const AugmentDraw d = augment_draw(step, st.layer, st.seed);
    if (cur.defined()) {
      ops::augment(cur, out, st.spec, d);
    } else {
      ops::augment_rows(x, b.rows ? b.rows->data() : nullptr, u8 ? cd.scale.data() : nullptr,
                        u8 ? cd.shift.data() : nullptr, out, st.spec, d);
    }
    cur = out;
  }
  if (!u8) ops::check_finite(cur, "input batch");  // what the model reads of it
  return cur;
}

// On the compute stream after the upload and decode; the slot's two device buffers in turn.
Tensor BatchStager::augment_on_device(const Tensor& x, SlotBuffers& s, const StepContext& step) {
  const long long n = x.dim(0);
  Tensor cur = x.reshape(with_batch(n, input_shape_));
  int next = 0;
  for (const AugmentStage& st : aug_.stages) {
    if (!st.active(step.training)) continue;
    Tensor out = device_buffer(s.dev_aug[next], with_batch(n, st.out), DType::F32);
    next ^= 1;
    ops::augment(cur, out, st.spec, augment_draw(step, st.layer, st.seed));
    cur = out;
  }
  return cur;
}

Tensor BatchStager::stage_targets(const Batch& b, long long n, SlotBuffers& s, Upload when) {
  const Tensor& y = b.y;
  HPCNN_CHECK_ARG(y.defined(), "this step needs targets (y), but the batch has none");
  HPCNN_CHECK_ARG(y.device().is_cpu(), "targets must be a host array");
  const long long classes = classes_;
  const long long ny = y.rank() ? y.dim(0) : 0;
  if (b.rows) check_rows(b.rows, ny, "targets'");
  else HPCNN_CHECK_ARG(ny == n, "inputs have ", n, " rows but targets have ", ny);
  Tensor staged;
  if (!takes_class_indices(loss_)) {
    if (loss_ == Loss::CategoricalCrossentropy)
      HPCNN_CHECK_ARG(y.dtype() == DType::F32 && y.rank() == 2 && y.dim(1) == classes,
                      "categorical_crossentropy needs one-hot targets of shape (n, ", classes, "), got ", y.str(),
                      ": use hpcnn.utils.to_categorical(y, ", classes, ") (or HDF5Dataset(..., one_hot=", classes,
                      ")), or loss='sparse_categorical_crossentropy' for class indices");
    else
      HPCNN_CHECK_ARG(y.dtype() == DType::F32 && y.rank() == 2 && y.dim(1) == classes,
                      "the loss needs float targets of the outputs' shape (n, ", classes, "), got ", y.str());
    ops::check_finite(y, "targets");
    if (!b.rows && device_.is_cpu()) return y;  // in place
    if (!b.rows && pinned(y)) return upload(y, s.dev_y, when);  // the caller's pinned rows: in place
    staged = host_buffer(s.host_y, {n, classes}, DType::F32);
    gather_rows(b, n, y.raw(), staged.raw(), sizeof(float) * classes);
  } else {
    HPCNN_CHECK_ARG(y.dtype() == DType::I32 && (y.rank() == 1 || (y.rank() == 2 && y.dim(1) == 1)),
                    "sparse_categorical_crossentropy needs integer class indices of shape (n,) or (n, 1), got ",
                    y.str(), (y.rank() == 2 && y.dim(1) == classes ? ": these look one-hot; use "
                                                                      "loss='categorical_crossentropy'" : ""));
    staged = host_buffer(s.host_y, {n}, DType::I32);
    for (long long i = 0; i < n; ++i) {
      const long long r = source_row(b, i);
      const int32_t label = y.i32()[r];
      HPCNN_CHECK_ARG(label >= 0 && label < classes, "label ", label, " (row ", r, ") is outside [0, ", classes,
                      ") for a model with ", classes, " outputs");
      staged.i32()[i] = label;
    }
  }
  if (device_.is_cpu()) return staged;
  return upload(staged, s.dev_y, when);
}

Tensor BatchStager::stage_weights(const Batch& b, long long n, SlotBuffers& s, Upload when) {
  const Tensor& w = b.w;
  HPCNN_CHECK_ARG(w.device().is_cpu(), "sample weights must be a host array");
  HPCNN_CHECK_ARG(w.dtype() == DType::F32 && w.rank() == 1, "sample weights must be float32 of shape (n,), got ",
                  w.str());
  if (b.rows) check_rows(b.rows, w.dim(0), "sample weights'");
  else HPCNN_CHECK_ARG(w.dim(0) == n, "inputs have ", n, " rows but sample weights have ", w.dim(0));
  Tensor staged = host_buffer(s.host_w, {n}, DType::F32);
  for (long long i = 0; i < n; ++i) {
    const long long r = source_row(b, i);
    const float v = w.f32()[r];
    HPCNN_CHECK_ARG(std::isfinite(v) && v >= 0.f, "sample weight ", v, " (row ", r,
                    ") must be a finite number >= 0");
    staged.f32()[i] = v;
  }
  if (device_.is_cpu()) return staged;
  return upload(staged, s.dev_w, when);
}

// ------------------------------------------------------------------ buffers and copies
Tensor BatchStager::host_buffer(std::shared_ptr<HostBuffer>& buf, const Shape& shape, DType dtype) {
  const size_t need = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  // Page-locked on a GPU: copy_h2d_async needs a pinned source.
  const HostMemory kind = device_.is_cuda() ? HostMemory::Pinned : HostMemory::Pageable;
  if (!buf || buf->bytes() < need || buf->kind() != kind) {
    buf.reset();  // the old block first: the new one may need its memory
    buf = std::make_shared<HostBuffer>(need, kind, device_.index);
  }
  return host_tensor(buf, shape, dtype);
}

Tensor BatchStager::device_buffer(Tensor& buf, const Shape& shape, DType dtype) {
  const size_t need = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  if (!buf.defined() || buf.nbytes() < need) {
    // Kernels still queued may read the old block (cudaFree is not promised to wait for them).
    if (buf.defined()) wait_device();
    buf = Tensor();  // the old block first: the new one may need its memory
    buf = Tensor::empty({static_cast<long long>(need)}, DType::U8, device_);
  }
  return Tensor::borrow(buf.raw(), shape, dtype, device_, buf.storage());
}

Tensor BatchStager::upload(const Tensor& host, Tensor& dev_buf, Upload when) {
  Tensor d = device_buffer(dev_buf, host.shape(), host.dtype());
  copies_pending_ = true;
  cuda::copy_h2d_async(device_.index, d.raw(), host.raw(), host.nbytes(), when == Upload::AfterQueuedWork);
  // The source lives until the copy has finished: a staging buffer of ours is refilled only after
  // wait_copies(), and a caller's array (uploaded in place) is kept alive until then.
  in_flight_.push_back(host);
  return d;
}

bool BatchStager::pinned(const Tensor& host) const {
  return device_.is_cuda() && cuda::is_pinned(host.raw(), device_.index);
}

void BatchStager::wait_copies() {
  if (copies_pending_) cuda::copy_wait_host(device_.index);
  copies_pending_ = false;
  in_flight_.clear();
}

void BatchStager::wait_device() {
  wait_copies();
  if (!device_.is_cuda()) return;
  bool any = false;  // device buffers of ours that queued kernels may read
  for (const SlotBuffers& s : slots_)
    any = any || s.dev_x.defined() || s.dev_x_u8.defined() || s.dev_y.defined() || s.dev_w.defined() ||
          s.dev_aug[0].defined() || s.dev_aug[1].defined();
  if (any) cuda::synchronize_compute(device_.index);
}

}  // namespace hpcnn::nn
