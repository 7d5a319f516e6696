// Learning-rate schedules with Keras' names, arguments and formulas
// (keras.optimizers.schedules): the rate of a step is a pure function of the optimizer's step
// count (`iterations`, the steps taken before this one), evaluated here, in C++, at every step. A
// resumed run with the same step count therefore gets the same rate, and no Python code runs per
// batch. Rates are computed in double; the update ops take them as float.
//
//   ExponentialDecay(initial, decay_steps, decay_rate, staircase)
//       initial * decay_rate ^ (step / decay_steps)          (floor of the exponent if staircase)
//   PiecewiseConstantDecay(boundaries, values)
//       values[0] while step <= boundaries[0], values[i] while boundaries[i-1] < step <=
//       boundaries[i], values[-1] after the last boundary
//   PolynomialDecay(initial, decay_steps, end, power, cycle)
//       (initial - end) * (1 - s / d) ^ power + end, s = min(step, decay_steps), d = decay_steps;
//       cycle: s = step, d = decay_steps * ceil(step / decay_steps) (1 at step 0)
//   InverseTimeDecay(initial, decay_steps, decay_rate, staircase)
//       initial / (1 + decay_rate * step / decay_steps)       (floor of step / decay_steps if staircase)
//   CosineDecay(initial, decay_steps, alpha, warmup_target, warmup_steps)
//       without warmup_target: initial * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) + alpha),
//       s = min(step, decay_steps). With warmup_target: a linear warmup from initial to
//       warmup_target over warmup_steps steps, then the cosine decay from warmup_target over
//       decay_steps steps (step capped at warmup_steps + decay_steps)
//   CosineDecayRestarts(initial, first_decay_steps, t_mul, m_mul, alpha)
//       cosine decays restarted after first_decay_steps, t_mul times longer and m_mul times
//       higher each period (SGDR)
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace hpcnn::nn {

class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  virtual std::string name() const = 0;  // Keras' class name
  // The learning rate of the step taken after `step` steps (step >= 0).
  virtual double at(long long step) const = 0;
};

// ExponentialDecay (inverse = false) and InverseTimeDecay (inverse = true): the same arguments
// and checks, and the same exponent p = step / decay_steps (floored if staircase), in
// initial * decay_rate^p or initial / (1 + decay_rate * p).
class StepDecay : public LearningRateSchedule {
 public:
  StepDecay(bool inverse, double initial, double decay_steps, double decay_rate, bool staircase);
  std::string name() const override { return inverse_ ? "InverseTimeDecay" : "ExponentialDecay"; }
  double at(long long step) const override;

 private:
  bool inverse_;
  double initial_, decay_steps_, decay_rate_;
  bool staircase_;
};

// The two by name (what the factory builds).
struct ExponentialDecay : StepDecay {
  ExponentialDecay(double initial, double decay_steps, double decay_rate, bool staircase)
      : StepDecay(false, initial, decay_steps, decay_rate, staircase) {}
};
struct InverseTimeDecay : StepDecay {
  InverseTimeDecay(double initial, double decay_steps, double decay_rate, bool staircase)
      : StepDecay(true, initial, decay_steps, decay_rate, staircase) {}
};

class PiecewiseConstantDecay : public LearningRateSchedule {
 public:
  PiecewiseConstantDecay(std::vector<double> boundaries, std::vector<double> values);
  std::string name() const override { return "PiecewiseConstantDecay"; }
  double at(long long step) const override;

 private:
  std::vector<double> boundaries_, values_;
};

class PolynomialDecay : public LearningRateSchedule {
 public:
  PolynomialDecay(double initial, double decay_steps, double end, double power, bool cycle);
  std::string name() const override { return "PolynomialDecay"; }
  double at(long long step) const override;

 private:
  double initial_, decay_steps_, end_, power_;
  bool cycle_;
};

class CosineDecay : public LearningRateSchedule {
 public:
  // has_warmup: warmup_target was given (Keras' warmup_target=None otherwise).
  CosineDecay(double initial, double decay_steps, double alpha, bool has_warmup, double warmup_target,
              double warmup_steps);
  std::string name() const override { return "CosineDecay"; }
  double at(long long step) const override;

 private:
  double initial_, decay_steps_, alpha_;
  bool has_warmup_;
  double warmup_target_, warmup_steps_;
};

class CosineDecayRestarts : public LearningRateSchedule {
 public:
  CosineDecayRestarts(double initial, double first_decay_steps, double t_mul, double m_mul, double alpha);
  std::string name() const override { return "CosineDecayRestarts"; }
  double at(long long step) const override;

 private:
  double initial_, first_decay_steps_, t_mul_, m_mul_, alpha_;
};

}  // namespace hpcnn::nn
