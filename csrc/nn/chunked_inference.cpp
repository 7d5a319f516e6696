#include "nn/chunked_inference.h"

#include <algorithm>
#include <atomic>

#include "core/thread_pool.h"

namespace hpcnn::nn {

InferenceChunks ChunkedInference::choose(const Graph& g, const std::vector<std::vector<ParamSpec>>& specs,
                                         Device device, long long n) const {
  const int nodes = g.size();
  if (!device.is_cpu()) return {n, false, nodes};  // a GPU wants the whole batch at once
  const long long threads = get_num_threads();
  // Side by side: the first chunk alone, then one for every thread.
  auto side_by_side = [&](long long rows) { return threads > 1 && n >= (threads + 1) * rows; };
  if (rows_override_ > 0) {
    const long long rows = std::min(n, rows_override_);
    return {rows, side_by_side(rows), nodes};
  }
  long long largest = shape_numel(g.input_shape());  // floats per row
  long long all = largest;                            // every layer's output, floats per row
  for (int i = 0; i < nodes; ++i) {
    largest = std::max(largest, shape_numel(g.output_shape(i)));
    all += shape_numel(g.output_shape(i));
  }
  // One row's largest activation alone larger than a core's share of the caches (ResNet50 and
  // MobileNetV2 at 224x224: 3.2 and 4.8 MB a row): a chunk of it passes through memory as the
  // whole batch does, and reads every weight once more. ResNet50's predict at batch 32 took 1.2-1.4 s
  // in chunks of 2 rows against 0.86-1.0 s whole (bench/RESULTS.md, issue 38); MobileNetV2 and
  // the 180x180 photos model were level.
  if (4 * largest > kChunkBytesPerThread) return {n, false, nodes};
  const long long per_thread = std::max(kMinChunkRowsPerThread, kChunkBytesPerThread / (4 * std::max(1LL, largest)));
  // Every chunk reads the weights of its layers again: chunks pay only where a chunk's activations
  // outweigh them (ResNet-20: 8 rows of 1.8 MiB of activations against 1.1 MiB of weights). The
  // tutorial CNN's 8.4 MiB Dense kernel read per chunk of 8 rows made its predict 1.9x slower: its
  // dense layers and deep convolutions take the whole batch, its first layers chunks. The longest
  // prefix of the graph that passes, if it holds at least half of the activations; 0: none.
  auto chunked_prefix = [&](long long rows) {
    long long acts = shape_numel(g.input_shape()), weights = 0;
    int best = 0;
    long long best_acts = 0;
    for (int i = 0; i < nodes; ++i) {
      acts += shape_numel(g.output_shape(i));
      for (const ParamSpec& s : specs[i]) weights += shape_numel(s.shape);
      if (rows * acts >= kChunkActivationsPerWeight * weights) {
        best = i + 1;
        best_acts = acts;
      }
    }
    return 2 * best_acts >= all ? best : 0;
  };
  if (side_by_side(per_thread))
    if (const int split = chunked_prefix(per_thread)) return {per_thread, true, split};
  const long long shared = per_thread * threads;  // one chunk at a time, its ops over the threads
  if (shared < n)
    if (const int split = chunked_prefix(shared)) return {shared, false, split};
  return {n, false, nodes};
}

void ChunkedInference::set_rows_override(long long rows) {
  HPCNN_CHECK_ARG(rows >= 0, "inference chunk rows must be >= 0 (0: chosen from the caches), got ", rows);
  rows_override_ = rows;
}

Tensor ChunkedInference::run(const Tensor& x, const Graph& g, const StepPlan& plan, int start,
                             const InferenceChunks& chunks, const BufferPlace& step, std::vector<Tensor>& vals,
                             std::vector<Tensor>& xs, Device device, const RowsPass& rows_pass,
                             const TailPass& tail_pass) {
  const long long n = x.dim(0), chunk = chunks.rows;
  const int split = std::max(start + 1, std::min(chunks.split, plan.end));
  const bool whole_tail = split < plan.end;
  const Shape row_shape(x.shape().begin() + 1, x.shape().end());
  const long long x_row = shape_numel(row_shape);
  auto rows_of = [&](long long r0) { return x.view(r0 * x_row, with_batch(std::min(chunk, n - r0), row_shape)); };
  // What leaves a chunk. Every node: its output, copied into out. Nodes [0, split) only: the values
  // the later nodes read (`kept`: their own buffers, not views), copied into their buffers of the
  // step arena, which no chunk uses then (the chunks all run in the side arena: the step arena's
  // buffers share memory over the step, and a chunk's nodes would overwrite what an earlier chunk
  // kept there).
  std::vector<char> needed(g.size(), 0);
  if (whole_tail) {
    auto need = [&](int p) {
      if (p != kModelInput && p < split) needed[p] = 1;
    };
    for (int i = split; i < plan.end; ++i) {
      for (int p : g.inputs(i)) need(p);
      if (plan.residual[i] != kNoResidual) need(plan.residual[i]);
      if (plan.view_source[i] != kNotAView) need(plan.view_source[i]);
    }
    for (int p = split - 1; p >= start; --p)  // a view's value is its source's
      if (needed[p] && plan.forward_view[p]) need(plan.view_source[p]);
  }
  auto kept = [&](int p) { return needed[p] && p >= start && !plan.forward_view[p]; };
  Tensor out;
  long long out_row = 0;
  auto keep = [&](long long r0, const std::vector<Tensor>& chunk_vals, const Tensor& y) {
    if (!whole_tail) {
      out.view(r0 * out_row, y.shape()).copy_from(y);
      return;
    }
    for (int p = start; p < split; ++p)
      if (kept(p)) {
        const Tensor& v = chunk_vals[p];
        const long long row = v.numel() / v.dim(0);
        step.view(plan.value_buffer[p], with_batch(n, g.output_shape(p))).view(r0 * row, v.shape()).copy_from(v);
      }
  };
  const long long whole = (n - chunk) / chunk;  // chunks of full size after the first
  const int threads =
      chunks.side_by_side && whole >= 2 ? static_cast<int>(std::min<long long>(whole, get_num_threads())) : 1;
  // In the step arena when every node runs in chunks and the output is all that leaves them; in
  // the side arena when a whole-batch tail follows (see `kept`).
  if (whole_tail || threads > 1) ensure_side_arena(plan, chunk, threads, device);
  auto place = [&](int tid) { return whole_tail || tid > 0 ? side_buffers(tid) : step; };
  const Tensor first = rows_pass(rows_of(0), 0, place(0), vals, xs, split);
  if (!whole_tail) {
    out_row = first.numel() / std::min(chunk, n);
    out = Tensor::empty(with_batch(n, Shape(first.shape().begin() + 1, first.shape().end())), first.dtype(), device);
  }
  keep(0, vals, first);
  long long r0 = chunk;
  if (threads > 1) {
    // Each thread takes the next chunk when it is done with one, so a core slowed by other work
    // (a shared node, a noisy virtual machine) takes fewer: a chunk's rows do not depend on the
    // thread that runs them.
    std::atomic<long long> next{0};
    parallel_region([&](int tid, int) {
      std::vector<Tensor> own_vals, own_xs;
      for (long long k = next++; k < whole; k = next++) {
        const long long c0 = r0 + k * chunk;
        const Tensor y = rows_pass(rows_of(c0), c0, place(tid), own_vals, own_xs, split);
        keep(c0, own_vals, y);
      }
    }, threads);
    r0 += whole * chunk;
  }
  for (; r0 < n; r0 += chunk) {
    const Tensor y = rows_pass(rows_of(r0), r0, place(0), vals, xs, split);
    keep(r0, vals, y);
  }
  if (!whole_tail) return out;
  // The tail on the whole batch, from the kept values (and views of them).
  vals.assign(g.size(), Tensor());
  if (start > 0) vals[start - 1] = x;
  auto value = [&](int p) -> const Tensor& { return p == kModelInput ? x : vals[p]; };
  for (int p = start; p < split; ++p) {
    if (!needed[p]) continue;
    const Shape full = with_batch(n, g.output_shape(p));
    vals[p] = plan.forward_view[p] ? value(plan.view_source[p]).reshape(full) : step.view(plan.value_buffer[p], full);
  }
  tail_pass(vals, split, plan.end);
  return vals[plan.end - 1];
}

void ChunkedInference::ensure_side_arena(const StepPlan& plan, long long rows, int threads, Device device) {
  if (side_rows_ != rows || side_mode_ != plan.mode) {
    side_layout_ = pack_plan(plan, rows);
    side_stride_ = (side_layout_.bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment / 4;
    side_mode_ = plan.mode;
    side_rows_ = rows;
  }
  const long long need = side_stride_ * threads;
  if (!side_arena_.defined() || side_arena_.numel() < need) {
    side_arena_ = Tensor();  // the old one first: the new one may need its memory
    side_arena_ = Tensor::empty({need}, DType::F32, device);
  }
}

void ChunkedInference::release() {
  side_arena_ = Tensor();
  side_rows_ = 0;
}

}  // namespace hpcnn::nn
