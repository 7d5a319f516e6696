#include "nn/config.h"

#include <limits>

#include "core/errors.h"

namespace hpcnn::nn {

namespace {

int to_int(long long v, const std::string& what, const std::string& key) {
  HPCNN_CHECK_ARG(v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(), what, ": '", key,
                  "' = ", v, " is out of range");
  return static_cast<int>(v);
}

}  // namespace

const ConfigValue& Config::at(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw ValueError(cat(what_, " is missing '", key, "'"));
  return it->second;
}

void Config::wrong_kind(const std::string& key, const char* expected) const {
  throw ValueError(cat(what_, ": '", key, "' must be ", expected));
}

int Config::get_int(const std::string& key) const {
  const ConfigValue& v = at(key);
  if (!std::holds_alternative<long long>(v)) wrong_kind(key, "an integer");
  return to_int(std::get<long long>(v), what_, key);
}

long long Config::get_int64(const std::string& key) const {
  const ConfigValue& v = at(key);
  if (!std::holds_alternative<long long>(v)) wrong_kind(key, "an integer");
  return std::get<long long>(v);
}

float Config::get_float(const std::string& key) const { return static_cast<float>(get_double(key)); }

double Config::get_double(const std::string& key) const {
  const ConfigValue& v = at(key);
  if (std::holds_alternative<double>(v)) return std::get<double>(v);
  if (std::holds_alternative<long long>(v)) return static_cast<double>(std::get<long long>(v));
  wrong_kind(key, "a number");
}

bool Config::get_bool(const std::string& key) const {
  const ConfigValue& v = at(key);
  if (!std::holds_alternative<bool>(v)) wrong_kind(key, "True or False");
  return std::get<bool>(v);
}

std::string Config::get_string(const std::string& key) const {
  const ConfigValue& v = at(key);
  if (!std::holds_alternative<std::string>(v)) wrong_kind(key, "a string");
  return std::get<std::string>(v);
}

std::pair<int, int> Config::get_int_pair(const std::string& key) const {
  const ConfigValue& v = at(key);
  if (std::holds_alternative<std::vector<double>>(v))
    throw ValueError(cat(what_, ": '", key, "' must hold integers only"));
  if (!std::holds_alternative<std::vector<long long>>(v) || std::get<std::vector<long long>>(v).size() != 2)
    wrong_kind(key, "a list of two integers");
  const auto& p = std::get<std::vector<long long>>(v);
  return {to_int(p[0], what_, key), to_int(p[1], what_, key)};
}

std::vector<double> Config::get_floats(const std::string& key) const {
  const ConfigValue& v = at(key);
  if (std::holds_alternative<std::vector<double>>(v)) return std::get<std::vector<double>>(v);
  if (std::holds_alternative<std::vector<long long>>(v)) {
    const auto& ints = std::get<std::vector<long long>>(v);
    return std::vector<double>(ints.begin(), ints.end());
  }
  wrong_kind(key, "a list of numbers");
}

Config Config::prefixed(const std::string& prefix, const std::string& what) const {
  Config out(what);
  for (const auto& [k, v] : values_)
    if (k.size() > prefix.size() && k.compare(0, prefix.size(), prefix) == 0) out.set(k.substr(prefix.size()), v);
  return out;
}

std::vector<int> Config::get_int_list(const std::string& key, size_t n) const {
  const ConfigValue& v = at(key);
  if (std::holds_alternative<std::vector<double>>(v)) throw ValueError(cat(what_, ": '", key, "' must hold integers only"));
  if (!std::holds_alternative<std::vector<long long>>(v) || std::get<std::vector<long long>>(v).size() != n)
    wrong_kind(key, cat("a list of ", n, " integers").c_str());
  std::vector<int> out;
  for (long long e : std::get<std::vector<long long>>(v)) out.push_back(to_int(e, what_, key));
  return out;
}

std::vector<float> Config::get_float_list(const std::string& key) const {
  const ConfigValue& v = at(key);
  std::vector<float> out;
  if (std::holds_alternative<double>(v) || std::holds_alternative<long long>(v)) {
    out.push_back(get_float(key));
  } else if (std::holds_alternative<std::vector<double>>(v) || std::holds_alternative<std::vector<long long>>(v)) {
    for (double d : get_floats(key)) out.push_back(static_cast<float>(d));
  }
  if (out.empty()) wrong_kind(key, "a number or a non-empty list of numbers");
  return out;
}

}  // namespace hpcnn::nn
