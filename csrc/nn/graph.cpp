#include "nn/graph.h"

namespace hpcnn::nn {

Shape node_output_shape(const Layer& layer, const std::vector<Shape>& inputs) {
  if (layer.is_merge()) return static_cast<const MergeLayer&>(layer).merged_shape(inputs);
  HPCNN_CHECK_ARG(inputs.size() == 1, layer.kind(), " takes one input, got ", inputs.size());
  return layer.output_shape(inputs[0]);
}

std::vector<Node> Graph::chain(std::vector<LayerPtr> layers) {
  std::vector<Node> nodes;
  for (size_t i = 0; i < layers.size(); ++i)
    nodes.push_back(Node{std::move(layers[i]), {static_cast<int>(i) - 1}});
  return nodes;
}

std::string Graph::name(int i) const { return cat("layer ", i, " (", layer(i).kind(), ")"); }

Graph::Graph(Shape input_shape, std::vector<Node> nodes) : input_shape_(std::move(input_shape)), nodes_(std::move(nodes)) {
  HPCNN_CHECK_ARG(!input_shape_.empty(), "the model needs an input shape (InputLayer(input_shape=...))");
  for (long long d : input_shape_)
    HPCNN_CHECK_ARG(d > 0, "input shape ", shape_str(input_shape_), " has a non-positive dimension");
  HPCNN_CHECK_ARG(!nodes_.empty(), "the model has no layers");
  const int n = size();
  consumers_.assign(n, {});
  for (int i = 0; i < n; ++i) {
    HPCNN_CHECK_ARG(nodes_[i].layer != nullptr, "layer ", i, " is missing");
    const std::vector<int>& in = nodes_[i].inputs;
    HPCNN_CHECK_ARG(!in.empty(), name(i), " has no inputs");
    std::vector<Shape> shapes;
    for (size_t s = 0; s < in.size(); ++s) {
      const int p = in[s];
      HPCNN_CHECK_ARG(p == kModelInput || (p >= 0 && p < i), name(i), ": input ", s, " refers to node ", p,
                      ", which does not come before it (nodes must be in topological order; a graph with a "
                      "cycle has none)");
      if (p == kModelInput) {
        shapes.push_back(input_shape_);
      } else {
        consumers_[p].push_back({i, static_cast<int>(s)});
        shapes.push_back(out_shapes_[p]);
      }
    }
    try {
      out_shapes_.push_back(node_output_shape(*nodes_[i].layer, shapes));
    } catch (const ValueError& e) {
      throw ValueError(cat(name(i), ": ", e.what()));
    }
    in_shapes_.push_back(std::move(shapes));
  }
  for (int i = 0; i + 1 < n; ++i)
    HPCNN_CHECK_ARG(!consumers_[i].empty(), name(i), " is not connected to the output (no later layer reads it; "
                    "the output is ", name(n - 1), ")");
}

bool Graph::is_chain() const {
  for (int i = 0; i < size(); ++i)
    if (nodes_[i].inputs.size() != 1 || nodes_[i].inputs[0] != i - 1) return false;
  return true;
}

}  // namespace hpcnn::nn
