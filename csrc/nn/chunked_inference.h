// Inference (evaluate, predict) on the CPU a chunk of rows at a time: the chunk size rule and the
// scheduler that runs a batch's chunks, one after another or side by side on the threads.
//
// A batch is taken in chunks of rows small enough that a chunk's activations stay in a core's
// caches while every layer runs over them: all layers on rows [0, 8), then all on [8, 16), ...
// instead of each layer streaming the whole batch through memory to the next. No inference layer
// mixes rows, so the result is the same. At ResNet-20's 32x32x16 activations (64 KiB an image) a
// chunk of 8 rows is 512 KiB, one core's L2.
//
// Where the batch has enough rows (choose), the chunks after the first run side by side, one per
// thread, each op of a chunk on its thread alone: no barrier between the ops (a chunk's ~25 ops
// each split over the threads were ~25 barriers, ~10 % of a chunked predict), each thread's chunk
// in its own copy of the step's buffers (the side arena: rows of the step arena's buffers will not
// do, they share memory over the step and the threads are at different layers), so nothing is
// shared but the weights. The first chunk runs alone, its ops split over the threads: what a step
// derives from the weights (a folded conv+BN kernel, Conv2DLayer::fold) is made there once, and
// the later chunks, all of its size or smaller, only read it (StepContext::later_chunk). The last
// chunk, when shorter, runs alone as well.
//
// Chunks only pay where the weights, read again by every chunk, are small beside a chunk's
// activations. A training step cannot chunk: its batch normalization reads the statistics of the
// whole batch.
#pragma once

#include <functional>
#include <vector>

#include "nn/graph.h"
#include "nn/memory_plan.h"
#include "nn/step_plan.h"

namespace hpcnn::nn {

// Where a forward pass finds its step buffers: `layout` in `arena` from float `base` on.
struct BufferPlace {
  const Tensor* arena;
  const ArenaLayout* layout;
  long long base = 0;
  Tensor view(int buffer, const Shape& shape) const { return arena->view(base + layout->offsets.at(buffer) / 4, shape); }
};

struct InferenceChunks {
  long long rows;     // per chunk (n: one piece)
  bool side_by_side;  // one chunk per thread at a time
  int split;          // nodes [0, split) run in chunks, the rest on the whole batch
};

class ChunkedInference {
 public:
  // A chunk has the most rows whose largest activation takes at most kChunkBytesPerThread (so
  // that it passes from layer to layer in a core's caches), at least kMinChunkRowsPerThread. Where
  // the batch has a chunk for every thread after the first chunk, the chunks run side by side, one
  // per thread (each op on its thread alone); else one after another, each of `threads` times
  // those rows with its ops split over the threads. n on a GPU, n where one row's largest
  // activation alone exceeds kChunkBytesPerThread (no chunk would stay in the caches), and n where
  // the weights are large beside a chunk's activations (kChunkActivationsPerWeight). Only the leading layers may take
  // chunks (`split`): those of the longest prefix of the graph whose activations outweigh its
  // weights, if that prefix has at least half of all activations (the tutorial CNN: its first two
  // convolutions and poolings; the deeper layers' weights, read again by every chunk, take the
  // whole batch).
  static constexpr long long kChunkBytesPerThread = 512 * 1024;
  static constexpr long long kMinChunkRowsPerThread = 2;
  // ... and only where a chunk's activations (all layers' outputs) are at least this many times
  // the weights, which every chunk reads again; otherwise the whole batch at once.
  static constexpr long long kChunkActivationsPerWeight = 4;

  // The chunks of a batch of n rows for a model of graph g and weights `specs` on `device`.
  InferenceChunks choose(const Graph& g, const std::vector<std::vector<ParamSpec>>& specs, Device device,
                         long long n) const;
  // rows > 0: chunks of that many rows instead (tests, benchmarks); 0: the rule above.
  void set_rows_override(long long rows);
  long long rows_override() const { return rows_override_; }

  // Nodes [start, to) over one chunk of rows: row0, its first row in the batch; its activations in
  // `place`; vals, xs: the chunk's node outputs and a merge layer's inputs. Returns node to - 1's.
  using RowsPass = std::function<Tensor(const Tensor& rows, long long row0, const BufferPlace& place,
                                        std::vector<Tensor>& vals, std::vector<Tensor>& xs, int to)>;
  // Nodes [from, to) on the whole batch, reading (and writing) vals, in the step arena.
  using TailPass = std::function<void(std::vector<Tensor>& vals, int from, int to)>;
  // The plan's forward over x in chunks: every node, or (chunks.split < plan.end) nodes
  // [0, split) in chunks and the rest on the whole batch. start: the first node run here (the
  // leading augmentation nodes ran in the stager); step: the step arena; vals, xs: the step's own.
  Tensor run(const Tensor& x, const Graph& g, const StepPlan& plan, int start, const InferenceChunks& chunks,
             const BufferPlace& step, std::vector<Tensor>& vals, std::vector<Tensor>& xs, Device device,
             const RowsPass& rows_pass, const TailPass& tail_pass);

  void forget_layout() { side_rows_ = 0; }  // the plans changed
  void release();                           // frees the side arena

 private:
  // `threads` copies of the layout of the plan's buffers for `rows` rows, one per thread, made when
  // they do not fit.
  void ensure_side_arena(const StepPlan& plan, long long rows, int threads, Device device);
  BufferPlace side_buffers(int thread) const { return {&side_arena_, &side_layout_, thread * side_stride_}; }

  long long rows_override_ = 0;
  Tensor side_arena_;
  ArenaLayout side_layout_;
  long long side_stride_ = 0;  // floats between the threads' copies
  StepMode side_mode_ = StepMode::Predict;
  long long side_rows_ = 0;  // side_layout_ is for side_mode_'s plan at this many rows
};

}  // namespace hpcnn::nn
