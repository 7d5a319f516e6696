// Device names: the grammar in device.h, and the usability check for GPUs.
#include "core/device.h"

#include <cctype>

#include "core/cuda_runtime.h"
#include "core/errors.h"

namespace hpcnn {

namespace {

std::string lower_trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  std::string out;
  out.reserve(e - b);
  for (size_t i = b; i < e; ++i) out += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  return out;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

const char* kSpellings = "use 'cpu', 'gpu' or 'gpu:N' (also 'cuda:N', '/device:GPU:N', '/physical_device:GPU:N')";

}  // namespace

Device parse_device(const std::string& spec) {
  std::string s = lower_trimmed(spec);
  // TensorFlow's prefixes; any leading slashes alone ("/gpu:0") are accepted as well.
  for (const char* prefix : {"/device:", "/physical_device:"}) {
    if (starts_with(s, prefix)) {
      s = s.substr(std::string(prefix).size());
      break;
    }
  }
  while (starts_with(s, "/")) s.erase(0, 1);

  const size_t colon = s.find(':');
  const std::string kind = s.substr(0, colon);
  const bool is_cpu = kind == "cpu";
  const bool is_gpu = kind == "gpu" || kind == "cuda";
  if (!is_cpu && !is_gpu) throw ValueError(cat("unknown device '", spec, "': ", kSpellings));

  int index = 0;
  if (colon != std::string::npos) {
    const std::string num = s.substr(colon + 1);  // "" ("gpu:") means the default, 0
    const bool digits = num.find_first_not_of("0123456789") == std::string::npos;
    HPCNN_CHECK_ARG(digits, "device '", spec, "': the index after ':' must be a number (e.g. 'gpu:0')");
    HPCNN_CHECK_ARG(num.size() <= 9, "device '", spec, "': index ", num, " is out of range");
    if (!num.empty()) index = std::stoi(num);
  }
  return is_cpu ? Device::cpu() : Device::cuda(index);
}

Device resolve_device(const std::string& spec) {
  Device d = parse_device(spec);
  if (d.is_cuda()) cuda::require_device(d.index);
  return d;
}

}  // namespace hpcnn
