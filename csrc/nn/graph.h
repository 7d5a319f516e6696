// A model's structure: layers at the positions of a directed acyclic graph. Each node is a layer
// and the nodes whose outputs it takes (kModelInput: the model's input); nodes are given in a
// topological order (every input comes before the node that reads it) and the last node is the
// model's output. A Sequential model is the chain: node i reads node i - 1.
//
// The graph checks itself when built (ValueError naming the node): inputs that refer to the node
// itself or a later one (so a cycle cannot be described), a layer of one input given several or a
// merge layer given fewer than two, a node whose output no later node reads (not connected to the
// output), and every layer's shape rule. (The first node can only read the model's input, so
// every graph reads it.)
#pragma once

#include <string>
#include <vector>

#include "nn/layer.h"

namespace hpcnn::nn {

constexpr int kModelInput = -1;

struct Node {
  LayerPtr layer;
  std::vector<int> inputs;  // kModelInput or the indices of earlier nodes, in the layer's order
};

// The output shape of `layer` at a position whose inputs have these (per-sample) shapes: a merge
// layer takes them all, any other layer exactly one. ValueError when they do not fit.
Shape node_output_shape(const Layer& layer, const std::vector<Shape>& inputs);

class Graph {
 public:
  Graph() = default;
  Graph(Shape input_shape, std::vector<Node> nodes);
  // node i reads node i - 1 (node 0 the model's input)
  static std::vector<Node> chain(std::vector<LayerPtr> layers);

  // One input of a node, as read by a later one: its index and which of its inputs it is.
  struct Use {
    int node, slot;
  };

  const Shape& input_shape() const { return input_shape_; }
  int size() const { return static_cast<int>(nodes_.size()); }
  Layer& layer(int i) const { return *nodes_.at(i).layer; }
  const std::vector<int>& inputs(int i) const { return nodes_.at(i).inputs; }
  const std::vector<Shape>& input_shapes(int i) const { return in_shapes_.at(i); }
  const Shape& output_shape(int i) const { return out_shapes_.at(i); }
  const std::vector<Shape>& output_shapes() const { return out_shapes_; }
  const std::vector<Use>& consumers(int i) const { return consumers_.at(i); }  // in node order
  bool is_chain() const;
  // "layer 3 (Conv2D)": how messages name a node
  std::string name(int i) const;

 private:
  Shape input_shape_;
  std::vector<Node> nodes_;
  std::vector<std::vector<Shape>> in_shapes_;
  std::vector<Shape> out_shapes_;
  std::vector<std::vector<Use>> consumers_;
};

}  // namespace hpcnn::nn
