// A layer's or an optimizer's configuration as plain C++ values by key: what Python sends as a
// dict (one per Keras layer, which nn/lowering.h turns into the configs of core layers; an
// optimizer's or a schedule's). The binding only converts the dict's values; the lowering and the
// factories (factory.h) read them typed, and every missing key or value of the wrong kind is a
// ValueError that names the key.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace hpcnn::nn {

// A list of integers stays a list of integers; a list holding any other number is a list of doubles.
using ConfigValue = std::variant<bool, long long, double, std::string, std::vector<long long>, std::vector<double>>;

class Config {
 public:
  // `what` names the configuration in error messages ("layer config", "optimizer config").
  explicit Config(std::string what) : what_(std::move(what)) {}

  void set(const std::string& key, ConfigValue value) { values_[key] = std::move(value); }
  bool has(const std::string& key) const { return values_.count(key) != 0; }

  int get_int(const std::string& key) const;                  // an integer within int's range
  long long get_int64(const std::string& key) const;          // any integer (64-bit)
  float get_float(const std::string& key) const;              // a number (an integer is one too)
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::pair<int, int> get_int_pair(const std::string& key) const;  // a list of exactly two integers
  std::vector<double> get_floats(const std::string& key) const;    // a list of numbers
  double get_double(const std::string& key) const;                 // a number, in full precision

  // The entries whose key starts with `prefix`, with the prefix removed: a configuration nested in
  // this one (an optimizer's learning-rate schedule: "schedule_decay_steps" -> "decay_steps").
  Config prefixed(const std::string& prefix, const std::string& what) const;

  std::vector<int> get_int_list(const std::string& key, size_t n) const;  // a list of exactly n integers
  // A number or a non-empty list of numbers, as floats (a number is a list of one).
  std::vector<float> get_float_list(const std::string& key) const;
  // The value of an optional key: its default when the key is absent (None in Python).
  bool get_bool_or(const std::string& key, bool fallback) const { return has(key) ? get_bool(key) : fallback; }
  float get_float_or(const std::string& key, float fallback) const { return has(key) ? get_float(key) : fallback; }
  std::string get_string_or(const std::string& key, const std::string& fallback) const {
    return has(key) ? get_string(key) : fallback;
  }

 private:
  const ConfigValue& at(const std::string& key) const;  // ValueError when the key is missing
  [[noreturn]] void wrong_kind(const std::string& key, const char* expected) const;

  std::string what_;
  std::map<std::string, ConfigValue> values_;
};

}  // namespace hpcnn::nn
