#include "core/warnings.h"

#include <mutex>
#include <utility>

namespace hpcnn {

namespace {
std::mutex g_mutex;
std::vector<std::string> g_queue;
}  // namespace

void queue_warning(std::string message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_queue.empty() && g_queue.back() == message) return;
  g_queue.push_back(std::move(message));
}

std::vector<std::string> take_warnings() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return std::exchange(g_queue, {});
}

}  // namespace hpcnn
