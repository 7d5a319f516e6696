// A C++ program on hpcnn_core alone (no Python): proof that the static library is usable from
// C++, and a smoke test of its main paths. Built with -DHPCNN_BUILD_CPP_TESTS=ON (CMakeLists.txt),
// run by tests/system/test_cpp_smoke.py. Prints one line per check; exits 0 when all pass.
//   1. an op: dense forward (+ReLU) against a plain loop
//   2. a model from configs (nn/factory.h): shapes and parameter count
//   3. training: 40 Adam steps on a learnable rule lower the loss; evaluation and prediction
//   4. errors: a bad config is an hpcnn::ValueError naming the key
//   5. optimizers from configs: Keras 3's state-buffer names per configuration, set_state
//      (refusing a wrong name), a learning-rate schedule driving the rate from `iterations`
//   6. a graph: a residual block (Add; the stem read by two layers) learns the same rule
//   7. the step's memory plan: buffers alive at the same time never share bytes
//   8. the step plan's run kinds (nn/step_plan.h): a residual block with BatchNormalization runs a
//      folded convolution and a convolution computing the block's tail in inference, its last
//      normalization computing the tail in training, and the backward kinds that go with them
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/tensor.h"
#include "nn/config.h"
#include "nn/factory.h"
#include "nn/memory_plan.h"
#include "nn/model.h"
#include "ops/blas.h"
#include "ops/ops.h"

namespace {

using namespace hpcnn;

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// Uniform values in [-1, 1) from a fixed linear congruential sequence (no <random>: the same
// numbers with every standard library).
void fill(float* p, long long n, unsigned seed) {
  uint32_t s = seed * 2654435761u + 1;
  for (long long i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(s >> 8) / static_cast<float>(1 << 24) * 2.f - 1.f;
  }
}

void dense_op() {
  const long long n = 5, in = 7, out = 3;
  Tensor x = Tensor::empty({n, in}), w = Tensor::empty({in, out});
  Tensor b = Tensor::empty({out}), y = Tensor::empty({n, out});
  fill(x.f32(), x.numel(), 1);
  fill(w.f32(), w.numel(), 2);
  fill(b.f32(), b.numel(), 3);
  ops::dense_forward(x, w, b, y, true);
  double err = 0;
  for (long long r = 0; r < n; ++r)
    for (long long j = 0; j < out; ++j) {
      double s = b.f32()[j];
      for (long long k = 0; k < in; ++k) s += (double)x.f32()[r * in + k] * w.f32()[k * out + j];
      err = std::max(err, std::fabs(std::max(s, 0.0) - y.f32()[r * out + j]));
    }
  check(err < 1e-5, "dense forward + ReLU matches a plain loop (max error " + std::to_string(err) + ")");
}

nn::Config layer(const std::string& class_name) {
  nn::Config c("layer config");
  c.set("class_name", class_name);
  return c;
}

nn::Config conv_config() {
  nn::Config conv = layer("Conv2D");
  conv.set("filters", 4LL);
  conv.set("kernel_size", std::vector<long long>{3, 3});
  conv.set("strides", std::vector<long long>{1, 1});
  conv.set("padding", std::string("same"));
  conv.set("activation", std::string("relu"));
  return conv;
}

std::unique_ptr<nn::Model> tiny_model() {
  std::vector<nn::LayerPtr> layers;
  layers.push_back(nn::make_layer(conv_config()));
  nn::Config pool = layer("MaxPooling2D");
  pool.set("pool_size", std::vector<long long>{2, 2});
  pool.set("strides", std::vector<long long>{2, 2});
  pool.set("padding", std::string("valid"));
  layers.push_back(nn::make_layer(pool));
  layers.push_back(nn::make_layer(layer("Flatten")));
  nn::Config dense = layer("Dense");
  dense.set("units", 3LL);
  dense.set("activation", std::string("linear"));
  layers.push_back(nn::make_layer(dense));
  nn::Config softmax = layer("Activation");
  softmax.set("activation", std::string("softmax"));
  layers.push_back(nn::make_layer(softmax));
  return std::make_unique<nn::Model>(Shape{6, 6, 1}, std::move(layers), 7);
}

nn::Config adam_config() {
  nn::Config adam("optimizer config");
  adam.set("name", std::string("Adam"));
  adam.set("learning_rate", 0.02);
  adam.set("beta_1", 0.9);
  adam.set("beta_2", 0.999);
  adam.set("epsilon", 1e-7);
  return adam;
}

// 48 images; the class is the third of the image (top, middle, bottom) that holds a bright bar.
struct Bars {
  Tensor x = Tensor::empty({48, 6, 6, 1}), y = Tensor::empty({48}, DType::I32);
  Bars() {
    fill(x.f32(), x.numel(), 4);
    for (long long i = 0; i < 48; ++i) {
      float* img = x.f32() + i * 36;
      for (int k = 0; k < 36; ++k) img[k] *= 0.1f;
      int c = static_cast<int>(i % 3);
      for (int k = 0; k < 6; ++k) img[(2 * c) * 6 + k] += 1.f;
      y.i32()[i] = c;
    }
  }
};

// 40 Adam steps on the bars: every loss finite, the loss halved, the evaluation right.
void train(nn::Model& m, const Bars& bars, const std::string& what) {
  m.compile(nn::make_optimizer(adam_config()), nn::parse_loss("sparse_categorical_crossentropy"), false);
  nn::Batch batch{bars.x, bars.y};
  double first = 0, last = 0;
  bool finite = true;
  for (int step = 0; step < 40; ++step) {
    nn::BatchStats s = m.train_step(&batch);
    double mean = s.loss_sum / s.n;
    finite = finite && std::isfinite(mean);
    if (step == 0) first = mean;
    last = mean;
  }
  check(finite, what + ": every training step's loss is finite");
  check(last < 0.5 * first,
        what + ": 40 Adam steps halve the loss (" + std::to_string(first) + " -> " + std::to_string(last) + ")");
  nn::BatchStats e = m.test_step(&batch);
  check(e.n == 48 && e.correct >= 0.9 * 48, what + ": evaluation: " + std::to_string(e.correct) + " of 48 correct");
}

void model() {
  auto m = tiny_model();
  check(m->num_params() == (3 * 3 * 1 * 4 + 4) + (3 * 3 * 4 * 3 + 3), "parameter count of the tiny model");
  check(m->output_shapes().back() == Shape{3}, "output shape (3,)");
  Bars bars;
  train(*m, bars, "chain");
  nn::Batch batch{bars.x, bars.y};
  Tensor p = m->predict_step(&batch);
  check(p.shape() == Shape{48, 3}, "prediction shape (48, 3)");
  check(m->get_weights().size() == 4, "four weights: conv kernel and bias, dense kernel and bias");
}

void graph() {
  nn::Config linear = conv_config();
  linear.set("activation", std::string("linear"));
  nn::Config pool = layer("MaxPooling2D");
  pool.set("pool_size", std::vector<long long>{2, 2});
  pool.set("strides", std::vector<long long>{2, 2});
  pool.set("padding", std::string("valid"));
  nn::Config dense = layer("Dense");
  dense.set("units", 3LL);
  dense.set("activation", std::string("linear"));
  nn::Config softmax = layer("Activation");
  softmax.set("activation", std::string("softmax"));
  std::vector<nn::Node> nodes;
  nodes.push_back({nn::make_layer(conv_config()), {nn::kModelInput}});  // 0: the stem, read by 1 and 3
  nodes.push_back({nn::make_layer(conv_config()), {0}});
  nodes.push_back({nn::make_layer(linear), {1}});
  nodes.push_back({nn::make_layer(layer("Add")), {2, 0}});              // 3: the residual connection
  nodes.push_back({nn::make_layer(pool), {3}});
  nodes.push_back({nn::make_layer(layer("Flatten")), {4}});
  nodes.push_back({nn::make_layer(dense), {5}});
  nodes.push_back({nn::make_layer(softmax), {6}});
  nn::Model m(Shape{6, 6, 1}, std::move(nodes), 7);
  check(m.num_nodes() == 8 && m.graph().consumers(0).size() == 2, "a graph: 8 nodes, the stem read twice");
  Bars bars;
  train(m, bars, "residual graph");
  nn::MemoryReport r = m.memory_report(48);
  check(m.arena_bytes() == std::max({r.train, r.test, r.predict}) && r.train < r.one_buffer_per_activation,
        "the step arena is the largest plan, smaller than one buffer per activation");
}

// Random lifetimes and sizes: every two buffers whose lifetimes overlap get disjoint, aligned bytes.
void memory_plan() {
  uint32_t s = 12345;
  auto next = [&](int mod) {
    s = s * 1664525u + 1013904223u;
    return static_cast<int>((s >> 8) % static_cast<uint32_t>(mod));
  };
  bool ok = true;
  for (int trial = 0; trial < 50 && ok; ++trial) {
    std::vector<nn::BufferLife> bufs;
    const int n = 1 + next(40);
    for (int i = 0; i < n; ++i) {
      const int first = next(30);
      bufs.push_back({1 + next(5000), first, first + next(10)});
    }
    nn::ArenaLayout lay = nn::pack_buffers(bufs, 256);
    for (int a = 0; a < n; ++a) {
      ok = ok && lay.offsets[a] % 256 == 0 && lay.offsets[a] + bufs[a].bytes <= lay.bytes;
      for (int b = a + 1; b < n; ++b) {
        const bool live_together = bufs[a].first <= bufs[b].last && bufs[b].first <= bufs[a].last;
        const bool disjoint = lay.offsets[a] + bufs[a].bytes <= lay.offsets[b] ||
                              lay.offsets[b] + bufs[b].bytes <= lay.offsets[a];
        ok = ok && (!live_together || disjoint);
      }
    }
  }
  check(ok, "memory plan: buffers alive at the same time never share bytes (50 random plans)");
}

void errors() {
  nn::Config conv = conv_config();
  conv.set("filters", std::string("four"));
  try {
    nn::make_layer(conv);
    check(false, "a string for 'filters' is refused");
  } catch (const ValueError& e) {
    check(std::string(e.what()).find("'filters' must be an integer") != std::string::npos,
          std::string("a bad config is a ValueError naming the key: ") + e.what());
  }
}

void optimizer_state() {
  auto config = [](const char* name) {
    nn::Config c("optimizer config");
    c.set("name", std::string(name));
    c.set("learning_rate", 0.01);
    return c;
  };
  nn::Config rms = config("RMSprop");
  rms.set("rho", 0.9);
  rms.set("momentum", 0.5);
  rms.set("epsilon", 1e-7);
  rms.set("centered", true);
  auto o = nn::make_optimizer(rms);
  check(o->state_names() == std::vector<std::string>{"velocity", "momentum", "average_gradient"},
        "RMSprop(momentum, centered) keeps velocity, momentum, average_gradient (Keras 3's names)");
  nn::Config sgd = config("SGD");
  sgd.set("momentum", 0.0);
  sgd.set("nesterov", false);
  check(nn::make_optimizer(sgd)->state_names().empty(), "SGD without momentum keeps no state (as Keras)");

  const long long n = 10;
  std::vector<nn::StateBuffer> state;
  for (const char* name : {"velocity", "momentum", "average_gradient"}) state.push_back({name, Tensor::zeros({n})});
  state[1].value.f32()[3] = 2.5f;
  o->set_state(state, n, Device::cpu());
  check(o->state().size() == 3 && o->state()[1].value.f32()[3] == 2.5f, "set_state restores the named buffers");
  state[2].name = "velocity_hat";
  try {
    o->set_state(state, n, Device::cpu());
    check(false, "set_state refuses a name the optimizer does not keep");
  } catch (const ValueError& e) {
    check(std::string(e.what()).find("no state buffer 'velocity_hat'") != std::string::npos,
          std::string("set_state names the wrong buffer: ") + e.what());
  }

  nn::Config adam = config("Adam");
  adam.set("beta_1", 0.9);
  adam.set("beta_2", 0.999);
  adam.set("epsilon", 1e-7);
  adam.set("schedule_class_name", std::string("ExponentialDecay"));
  adam.set("schedule_initial_learning_rate", 0.1);
  adam.set("schedule_decay_steps", 2LL);
  adam.set("schedule_decay_rate", 0.5);
  auto a = nn::make_optimizer(adam);
  a->iterations = 4;
  check(std::fabs(a->learning_rate() - 0.025) < 1e-12, "a schedule gives the rate at `iterations` (0.1 * 0.5^2)");
}

}  // namespace

// The kinds plan_step gives a residual block's nodes: what nn/run_kinds.cpp then runs for each.
void run_kinds() {
  nn::Config linear = conv_config();
  linear.set("activation", std::string("linear"));
  nn::Config bn = layer("BatchNormalization");
  bn.set("axis", -1LL);
  bn.set("momentum", 0.99);
  bn.set("epsilon", 1e-3);
  bn.set("center", true);
  bn.set("scale", true);
  nn::Config relu = layer("Activation");
  relu.set("activation", std::string("relu"));
  nn::Config dense = layer("Dense");
  dense.set("units", 3LL);
  dense.set("activation", std::string("linear"));
  nn::Config softmax = layer("Activation");
  softmax.set("activation", std::string("softmax"));
  std::vector<nn::Node> nodes;
  nodes.push_back({nn::make_layer(conv_config()), {nn::kModelInput}});  // 0: the stem (the shortcut)
  nodes.push_back({nn::make_layer(linear), {0}});
  nodes.push_back({nn::make_layer(bn), {1}});
  nodes.push_back({nn::make_layer(linear), {2}});
  nodes.push_back({nn::make_layer(bn), {3}});
  nodes.push_back({nn::make_layer(layer("Add")), {4, 0}});  // 5, 6: the block's tail
  nodes.push_back({nn::make_layer(relu), {5}});
  nodes.push_back({nn::make_layer(layer("Flatten")), {6}});
  nodes.push_back({nn::make_layer(dense), {7}});
  nodes.push_back({nn::make_layer(softmax), {8}});
  const nn::Graph g(Shape{6, 6, 1}, std::move(nodes));
  const std::vector<bool> trains(10, true);
  using R = nn::RunKind;
  using B = nn::BackKind;
  const nn::StepPlan predict = nn::plan_step(g, nn::StepMode::Predict, 10, trains);
  check(predict.run == std::vector<R>{R::Plain, R::FoldedConv, R::View, R::ConvBlockTail, R::View, R::View, R::View,
                                      R::View, R::Plain, R::Plain},
        "run kinds, inference: conv+BN folded, the last conv computes the block's tail, the rest views");
  const nn::StepPlan train = nn::plan_step(g, nn::StepMode::Train, 9, trains);  // the softmax fused in the loss
  check(train.run == std::vector<R>{R::Plain, R::Plain, R::Plain, R::Plain, R::NormBlockTail, R::View, R::View,
                                    R::View, R::Plain, R::Plain},
        "run kinds, training: the last BatchNormalization computes the block's tail");
  check(train.back == std::vector<B>{B::Plain, B::Adding, B::Plain, B::Plain, B::NormBlockTail, B::PassThrough,
                                     B::PassThrough, B::PassThrough, B::Plain, B::None},
        "backward kinds: the tail passes dy through, its normalization masks it, the first conv adds into the "
        "shortcut's gradient");
}

int main() {
  try {
    hpcnn::blas::init();
    dense_op();
    model();
    errors();
    optimizer_state();
    graph();
    memory_plan();
    run_kinds();
  } catch (const std::exception& e) {
    std::printf("FAIL unexpected exception: %s\n", e.what());
    return 1;
  }
  if (failures) {
    std::printf("hpcnn C++ smoke test: %d check(s) FAILED\n", failures);
    return 1;
  }
  std::printf("hpcnn C++ smoke test: all passed\n");
  return 0;
}
