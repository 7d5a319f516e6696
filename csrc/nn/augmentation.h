// Keras' augmentation layers (RandomFlip, RandomTranslation, RandomRotation, RandomZoom,
// RandomCrop) and where a model runs them. They change the images in training only (in inference
// a crop takes the centre, the others are the identity), drawing per sample from (model seed,
// step, the sample's global row, the layer's index): ops/augment.h has the draws and the
// arithmetic. A layer given Keras' seed= draws from (its own seed, step, global row) instead: the
// same images whatever the model's seed and wherever the layer sits (Keras: a layer with a seed
// has a SeedGenerator of its own; two layers with the same seed draw alike).
//
//   at the model's start   the leading augmentation layers, and a ZeroPadding2D right before a
//                          RandomCrop (the crop then reads the padded input: "pad 4, crop 32" in
//                          one pass), are the batch stager's (nn/batch_stager.h): on the CPU it
//                          augments while it gathers and decodes the batch's rows, on a GPU it
//                          augments on the device after the upload. The step starts after them.
//                          In a graph: of the chain of nodes right after the model's input (node 0
//                          its only reader, each next node the only reader of the one before).
//   after layers without weights (e.g. after a Rescaling): an op of the step's forward pass.
//   after a layer with weights (anywhere upstream, in a graph): a ValueError when the model is built (its backward pass would
//                          have to go through the augmentation; Keras models put it first).
// Both ways give the same images: the draws do not depend on where the layer runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/graph.h"
#include "nn/layer.h"
#include "ops/augment.h"

namespace hpcnn::nn {

class AugmentationLayer : public Layer {
 public:
  // kind: "RandomFlip", "RandomTranslation", "RandomRotation", "RandomZoom" or "RandomCrop" (what
  // spec.kind is); seed: the layer's own (Keras' seed=), or none (the model's).
  AugmentationLayer(std::string kind, const AugmentSpec& spec, std::optional<uint64_t> seed = std::nullopt);
  std::string kind() const override { return kind_; }
  const AugmentSpec& spec() const { return spec_; }
  const std::optional<uint64_t>& seed() const { return seed_; }
  Shape output_shape(const Shape& in) const override;
  // In inference a flip and a translation return their input.
  bool forward_is_view(bool training) const override { return !training && spec_.kind != AugmentKind::Crop; }
  void forward(const Tensor& x, Tensor& y, const StepContext& ctx) override;
  // Never called: no layer with weights comes before an augmentation layer (checked at build).
  void backward(const Tensor& x, const Tensor& y, Tensor& dy, Tensor* dx, const StepContext& ctx) override;

 private:
  std::string kind_;
  AugmentSpec spec_;
  std::optional<uint64_t> seed_;
};

// The draw of the augmentation layer at index `layer` in the step `ctx` describes: the model's
// seed and dropout's stream rule (StepContext::dropout_stream of that layer); for a layer with a
// seed of its own, the key layer_seed_key(seed) and the stream `step` (not the layer's index).
AugmentDraw augment_draw(const StepContext& ctx, int layer, const std::optional<uint64_t>& layer_seed = std::nullopt);
// The Philox key of a layer's own seed: the seed hashed (one Philox block of it), so that a layer
// seed equal to a model seed does not replay the model's streams.
uint64_t layer_seed_key(uint64_t seed);

// One stage of the stager's augmentation: a layer's spec (a crop with the padding of the
// ZeroPadding2D before it), the index of the layer that draws, per-sample shapes in and out.
struct AugmentStage {
  AugmentSpec spec;
  int layer = 0;
  std::optional<uint64_t> seed;  // the layer's own seed (Keras' seed=)
  Shape in, out;
  // Whether it changes the images (training: always; inference: a crop that is not the identity).
  bool active(bool training) const;
};

// The augmentation the batch stager runs: the model's leading augmentation layers.
struct LeadingAugmentation {
  std::vector<AugmentStage> stages;
  int layers = 0;  // how many of the model's first layers the stages stand for
  Shape output;    // the per-sample shape after them (the model's input shape when there are none)
  bool active(bool training) const;
};

// The leading augmentation of a chain of layers on per-sample input `input` (a Sequential model).
LeadingAugmentation leading_augmentation(const std::vector<const Layer*>& layers, const Shape& input);

// The leading augmentation of a graph: of the chain of nodes the model's input starts with (node 0
// reads the input and is its only reader, node i reads node i - 1 and is its only reader), before
// the first branch or merge. Those layers are nodes 0 .. layers - 1; a later node reading node
// layers - 1 reads the stager's output.
LeadingAugmentation leading_augmentation(const Graph& graph);

// ValueError when an augmentation node has a layer with weights anywhere upstream of it (`specs`:
// each node's weights).
void check_augmentation_placement(const Graph& graph, const std::vector<std::vector<ParamSpec>>& specs);

}  // namespace hpcnn::nn
