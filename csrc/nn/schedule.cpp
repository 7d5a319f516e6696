#include "nn/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/errors.h"

namespace hpcnn::nn {

namespace {

constexpr double kPi = 3.14159265358979323846;

void check_finite(const char* schedule, const char* name, double v, bool positive) {
  HPCNN_CHECK_ARG(std::isfinite(v) && (positive ? v > 0 : v >= 0), schedule, ": `", name, "` must be ",
                  positive ? "> 0" : ">= 0", " and finite. Received: ", name, "=", v);
}

}  // namespace

// ------------------------------------------------------------------ ExponentialDecay, InverseTimeDecay
StepDecay::StepDecay(bool inverse, double initial, double decay_steps, double decay_rate, bool staircase)
    : inverse_(inverse), initial_(initial), decay_steps_(decay_steps), decay_rate_(decay_rate), staircase_(staircase) {
  const std::string who = name();
  check_finite(who.c_str(), "initial_learning_rate", initial, false);
  check_finite(who.c_str(), "decay_steps", decay_steps, true);
  check_finite(who.c_str(), "decay_rate", decay_rate, false);
}

double StepDecay::at(long long step) const {
  double p = static_cast<double>(step) / decay_steps_;
  if (staircase_) p = std::floor(p);
  return inverse_ ? initial_ / (1.0 + decay_rate_ * p) : initial_ * std::pow(decay_rate_, p);
}

// ------------------------------------------------------------------ PiecewiseConstantDecay
PiecewiseConstantDecay::PiecewiseConstantDecay(std::vector<double> boundaries, std::vector<double> values)
    : boundaries_(std::move(boundaries)), values_(std::move(values)) {
  HPCNN_CHECK_ARG(boundaries_.size() + 1 == values_.size(),
                  "PiecewiseConstantDecay: the length of boundaries should be 1 less than the length of values. "
                  "Received: ", boundaries_.size(), " boundaries and ", values_.size(), " values");
  for (size_t i = 0; i < boundaries_.size(); ++i) {
    HPCNN_CHECK_ARG(std::isfinite(boundaries_[i]), "PiecewiseConstantDecay: boundary ", i, " is not finite");
    HPCNN_CHECK_ARG(i == 0 || boundaries_[i] > boundaries_[i - 1],
                    "PiecewiseConstantDecay: boundaries must be strictly increasing, got ", boundaries_[i - 1],
                    " then ", boundaries_[i]);
  }
  for (double v : values_) check_finite("PiecewiseConstantDecay", "values", v, false);
}

double PiecewiseConstantDecay::at(long long step) const {
  const double s = static_cast<double>(step);
  for (size_t i = 0; i < boundaries_.size(); ++i)
    if (s <= boundaries_[i]) return values_[i];
  return values_.back();
}

// ------------------------------------------------------------------ PolynomialDecay
PolynomialDecay::PolynomialDecay(double initial, double decay_steps, double end, double power, bool cycle)
    : initial_(initial), decay_steps_(decay_steps), end_(end), power_(power), cycle_(cycle) {
  check_finite("PolynomialDecay", "initial_learning_rate", initial, false);
  check_finite("PolynomialDecay", "decay_steps", decay_steps, true);
  check_finite("PolynomialDecay", "end_learning_rate", end, false);
  check_finite("PolynomialDecay", "power", power, false);
}

double PolynomialDecay::at(long long step) const {
  double s = static_cast<double>(step), d = decay_steps_;
  if (cycle_) {
    d *= step == 0 ? 1.0 : std::ceil(s / decay_steps_);
  } else {
    s = std::min(s, d);
  }
  return (initial_ - end_) * std::pow(1.0 - s / d, power_) + end_;
}

// ------------------------------------------------------------------ CosineDecay
CosineDecay::CosineDecay(double initial, double decay_steps, double alpha, bool has_warmup, double warmup_target,
                         double warmup_steps)
    : initial_(initial), decay_steps_(decay_steps), alpha_(alpha), has_warmup_(has_warmup),
      warmup_target_(warmup_target), warmup_steps_(warmup_steps) {
  check_finite("CosineDecay", "initial_learning_rate", initial, false);
  check_finite("CosineDecay", "decay_steps", decay_steps, true);
  check_finite("CosineDecay", "alpha", alpha, false);
  if (has_warmup) check_finite("CosineDecay", "warmup_target", warmup_target, false);
  check_finite("CosineDecay", "warmup_steps", warmup_steps, false);
}

double CosineDecay::at(long long step) const {
  auto decay = [&](double s, double from) {
    const double cosine = 0.5 * (1.0 + std::cos(kPi * s / decay_steps_));
    return from * ((1.0 - alpha_) * cosine + alpha_);
  };
  double s = static_cast<double>(step);
  if (!has_warmup_) return decay(std::min(s, decay_steps_), initial_);
  s = std::min(s, decay_steps_ + warmup_steps_);
  if (s < warmup_steps_) return (warmup_target_ - initial_) * (s / warmup_steps_) + initial_;
  return decay(s - warmup_steps_, warmup_target_);
}

// ------------------------------------------------------------------ CosineDecayRestarts
CosineDecayRestarts::CosineDecayRestarts(double initial, double first_decay_steps, double t_mul, double m_mul,
                                         double alpha)
    : initial_(initial), first_decay_steps_(first_decay_steps), t_mul_(t_mul), m_mul_(m_mul), alpha_(alpha) {
  check_finite("CosineDecayRestarts", "initial_learning_rate", initial, false);
  check_finite("CosineDecayRestarts", "first_decay_steps", first_decay_steps, true);
  check_finite("CosineDecayRestarts", "t_mul", t_mul, true);
  check_finite("CosineDecayRestarts", "m_mul", m_mul, false);
  check_finite("CosineDecayRestarts", "alpha", alpha, false);
}

double CosineDecayRestarts::at(long long step) const {
  double fraction = static_cast<double>(step) / first_decay_steps_;
  double restart;
  if (t_mul_ == 1.0) {
    restart = std::floor(fraction);
    fraction -= restart;
  } else {
    // Periods of length t_mul^i: the restart whose period holds `fraction`, and the fraction of it done.
    restart = std::floor(std::log(1.0 - fraction * (1.0 - t_mul_)) / std::log(t_mul_));
    const double before = (1.0 - std::pow(t_mul_, restart)) / (1.0 - t_mul_);
    fraction = (fraction - before) / std::pow(t_mul_, restart);
  }
  const double cosine = 0.5 * std::pow(m_mul_, restart) * (1.0 + std::cos(kPi * fraction));
  return initial_ * ((1.0 - alpha_) * cosine + alpha_);
}

}  // namespace hpcnn::nn
