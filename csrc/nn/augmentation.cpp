#include "nn/augmentation.h"

#include <utility>

#include "core/errors.h"
#include "core/rng.h"
#include "nn/layers.h"
#include "ops/ops.h"

namespace hpcnn::nn {

// ------------------------------------------------------------------ the layer
AugmentationLayer::AugmentationLayer(std::string kind, const AugmentSpec& spec, std::optional<uint64_t> seed)
    : kind_(std::move(kind)), spec_(spec), seed_(seed) {
  check_augment_spec(spec_);
}

Shape AugmentationLayer::output_shape(const Shape& in) const {
  HPCNN_CHECK_ARG(in.size() == 3, kind_, " expects images of shape (height, width, channels), got ", shape_str(in));
  HPCNN_CHECK_ARG(in[0] < (1LL << 31) && in[1] < (1LL << 31), kind_, ": input ", shape_str(in), " is too large");
  int oh = 0, ow = 0;
  augment_output_hw(spec_, static_cast<int>(in[0]), static_cast<int>(in[1]), oh, ow);
  return {oh, ow, in[2]};
}

void AugmentationLayer::forward(const Tensor& x, Tensor& y, const StepContext& ctx) {
  ops::augment(x, y, spec_, augment_draw(ctx, ctx.layer_index, seed_));
}

void AugmentationLayer::backward(const Tensor&, const Tensor&, Tensor&, Tensor*, const StepContext&) {
  throw ValueError(cat(kind_, ": augmentation layers have no backward pass; they must come before every layer with "
                       "weights"));
}

AugmentDraw augment_draw(const StepContext& ctx, int layer, const std::optional<uint64_t>& layer_seed) {
  if (layer_seed) return AugmentDraw{ctx.training, layer_seed_key(*layer_seed), ctx.step, ctx.first_row};
  StepContext at = ctx;
  at.layer_index = layer;
  return AugmentDraw{ctx.training, ctx.seed, at.dropout_stream(), ctx.first_row};
}

uint64_t layer_seed_key(uint64_t seed) {
  // Stream 2^64 - 1 is never a model's (step * 1024 + layer) nor a seeded layer's (step).
  const rng::U32x4 r = rng::bits4(seed, ~0ull, 0);
  return static_cast<uint64_t>(r.v[0]) | (static_cast<uint64_t>(r.v[1]) << 32);
}

// ------------------------------------------------------------------ the stager's part
bool AugmentStage::active(bool training) const {
  if (training) return true;
  if (spec.kind != AugmentKind::Crop) return false;  // the identity in inference
  if (out != in) return true;
  // A crop of the input's own size from the symmetrically padded input: its centre is the input.
  const int range_h = static_cast<int>(in[0]) + spec.pad_top + spec.pad_bottom - spec.crop_h;
  const int range_w = static_cast<int>(in[1]) + spec.pad_left + spec.pad_right - spec.crop_w;
  return range_h / 2 != spec.pad_top || range_w / 2 != spec.pad_left;
}

bool LeadingAugmentation::active(bool training) const {
  for (const AugmentStage& s : stages)
    if (s.active(training)) return true;
  return false;
}

LeadingAugmentation leading_augmentation(const std::vector<const Layer*>& layers, const Shape& input) {
  LeadingAugmentation a;
  a.output = input;
  size_t i = 0;
  while (i < layers.size()) {
    AugmentStage st;
    st.in = a.output;
    int covers = 1;
    const auto* aug = dynamic_cast<const AugmentationLayer*>(layers[i]);
    if (!aug) {
      // A ZeroPadding2D right before a RandomCrop: the crop reads the padded input.
      const auto* pad = dynamic_cast<const ZeroPadding2DLayer*>(layers[i]);
      const auto* next = i + 1 < layers.size() ? dynamic_cast<const AugmentationLayer*>(layers[i + 1]) : nullptr;
      if (!pad || !next || next->spec().kind != AugmentKind::Crop) break;
      aug = next;
      covers = 2;
      st.spec = next->spec();
      st.seed = next->seed();
      pad->padding(st.spec.pad_top, st.spec.pad_bottom, st.spec.pad_left, st.spec.pad_right);
      st.layer = static_cast<int>(i + 1);
    } else {
      st.spec = aug->spec();
      st.seed = aug->seed();
      st.layer = static_cast<int>(i);
    }
    if (st.in.size() != 3) break;  // not images: the layer's own output_shape raises
    int oh = 0, ow = 0;
    augment_output_hw(st.spec, static_cast<int>(st.in[0]), static_cast<int>(st.in[1]), oh, ow);
    st.out = {oh, ow, st.in[2]};
    a.output = st.out;
    a.stages.push_back(std::move(st));
    i += covers;
    a.layers = static_cast<int>(i);
  }
  return a;
}

// ------------------------------------------------------------------ graphs
LeadingAugmentation leading_augmentation(const Graph& graph) {
  // The model's input must have one reader (node 0): the stager changes it for every reader.
  int input_readers = 0;
  for (int i = 0; i < graph.size(); ++i)
    for (int p : graph.inputs(i)) input_readers += p == kModelInput ? 1 : 0;
  std::vector<const Layer*> chain;
  if (input_readers == 1 && graph.size() > 0 && graph.inputs(0) == std::vector<int>{kModelInput}) {
    chain.push_back(&graph.layer(0));
    for (int i = 1; i < graph.size(); ++i) {
      // Node i continues the chain when it reads only node i - 1 and is its only reader.
      if (graph.inputs(i) != std::vector<int>{i - 1} || graph.consumers(i - 1).size() != 1) break;
      chain.push_back(&graph.layer(i));
    }
  }
  return leading_augmentation(chain, graph.input_shape());
}

void check_augmentation_placement(const Graph& graph, const std::vector<std::vector<ParamSpec>>& specs) {
  // Per node: the first node with weights at or upstream of it (-1: none).
  std::vector<int> weights_upstream(graph.size(), -1);
  for (int i = 0; i < graph.size(); ++i) {
    int first = -1;
    for (int p : graph.inputs(i))
      if (p != kModelInput && weights_upstream[p] >= 0 && (first < 0 || weights_upstream[p] < first))
        first = weights_upstream[p];
    if (dynamic_cast<const AugmentationLayer*>(&graph.layer(i)) && first >= 0)
      throw ValueError(cat(graph.layer(i).kind(), " comes after ", graph.layer(first).kind(), ", a layer with weights (",
                           graph.name(i), " after ", graph.name(first), "): augmentation layers must come before every "
                           "layer with weights (put them at the start of the model)"));
    if (first < 0 && i < static_cast<int>(specs.size()) && !specs[i].empty()) first = i;
    weights_upstream[i] = first;
  }
}

}  // namespace hpcnn::nn
