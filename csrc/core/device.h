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

// Parses "cpu", "gpu", "gpu:1", "cuda:0", "/device:GPU:0" (TensorFlow's spelling); ValueError otherwise.
Device parse_device(const std::string& spec);

}  // namespace hpcnn
