// Keras' names of the element-wise activations (ops/activation.h), shared by both backends.
#include <string>

#include "core/errors.h"
#include "ops/activation.h"

namespace hpcnn {

namespace {
struct Named {
  const char* name;
  Act act;
};
// The first name of a kind is the one act_name() gives.
constexpr Named kNames[] = {
    {"linear", Act::Linear},       {"relu", Act::ReLU},
    {"relu6", Act::ReLU6},         {"leaky_relu", Act::LeakyReLU},
    {"elu", Act::ELU},             {"selu", Act::SELU},
    {"gelu", Act::GELU},           {"gelu_approximate", Act::GELUTanh},
    {"tanh", Act::Tanh},           {"sigmoid", Act::Sigmoid},
    {"hard_sigmoid", Act::HardSigmoid}, {"swish", Act::Swish},
    {"silu", Act::Swish},          {"softplus", Act::Softplus},
    {"softsign", Act::Softsign},   {"mish", Act::Mish},
    {"hard_silu", Act::HardSwish}, {"hard_swish", Act::HardSwish},
};
}  // namespace

const char* act_name(Act a) {
  for (const Named& n : kNames)
    if (n.act == a) return n.name;
  return "?";
}

Act parse_act(const std::string& name) {
  for (const Named& n : kNames)
    if (name == n.name) return n.act;
  std::string all;
  for (const Named& n : kNames) all += std::string(all.empty() ? "" : ", ") + "'" + n.name + "'";
  throw ValueError(cat("unknown activation '", name, "': use ", all, " or 'softmax'"));
}

}  // namespace hpcnn
