// Where a tensor lives. A model owns a Device; there is no global "current device" mode.
#pragma once

#include <string>

namespace hpcnn {

enum class DeviceType { CPU = 0, CUDA = 1 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && (is_cpu() || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const { return is_cpu() ? "cpu" : "gpu:" + std::to_string(index); }
};

// The one grammar of device names (Python's hpcnn.device(...) and compile(device=...) ask it too).
// Case-insensitive, surrounding blanks ignored:
//   "cpu", "cpu:0"                                   -> CPU
//   "gpu", "gpu:N", "cuda", "cuda:N"                 -> GPU N (0 when no index is given)
//   "/device:GPU:N", "/GPU:N"                        -> TensorFlow's logical device names
//   "/physical_device:GPU:N"                         -> the names list_physical_devices() shows
// Anything else is a ValueError naming the spelling. Says nothing about whether the GPU exists.
Device parse_device(const std::string& spec);

// parse_device, and for a GPU the check that it can be used from this process: BackendError
// (RuntimeError) saying why not (no CUDA backend built, no driver, CUDA_VISIBLE_DEVICES empty,
// an index past the visible devices). Use it wherever a user's device name is about to be used.
Device resolve_device(const std::string& spec);

}  // namespace hpcnn
