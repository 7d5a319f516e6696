#include "data/size_checks.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/errors.h"

namespace hpcnn::data {

namespace {

constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();
// cgroup files say "no limit" with a huge number (v1: 2^63 rounded down to a page) or "max" (v2).
constexpr uint64_t kNoLimit = uint64_t(1) << 60;

// The first number in a file (or after `key` in a "key value" file); kUnknown when absent.
uint64_t read_number(const std::string& path, const std::string& key = "") {
  std::ifstream in(path);
  if (!in) return kUnknown;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (!key.empty()) {
      std::string k;
      ls >> k;
      if (k != key) continue;
    }
    std::string v;
    ls >> v;
    if (v == "max") return kUnknown;
    try {
      size_t used = 0;
      unsigned long long n = std::stoull(v, &used);
      return used ? static_cast<uint64_t>(n) : kUnknown;
    } catch (const std::exception&) {
      return kUnknown;
    }
  }
  return kUnknown;
}

// "VmSize:   434556 kB" -> bytes.
uint64_t status_kb(const std::string& key) {
  uint64_t kb = read_number("/proc/self/status", key + ":");
  return kb == kUnknown ? kUnknown : kb * 1024;
}

uint64_t headroom(uint64_t limit, uint64_t used) {
  if (limit == kUnknown || limit >= kNoLimit) return kUnknown;
  if (used == kUnknown) return limit;
  return limit > used ? limit - used : 0;
}

bool is_dir(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

// The memory headroom of this process's cgroup: v2 walks from its own group up to the root (a
// Slurm job's limit sits on an ancestor of the step's group); v1 reads the hierarchical limit.
uint64_t cgroup_headroom() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  uint64_t best = kUnknown;
  while (std::getline(in, line)) {
    // "hierarchy-id:controllers:path"
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {  // v2
      std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
      if (!is_dir(dir)) dir = "/sys/fs/cgroup";  // a cgroup namespace shows its own root
      while (true) {
        best = std::min(best, headroom(read_number(dir + "/memory.max"), read_number(dir + "/memory.current")));
        if (dir == "/sys/fs/cgroup") break;
        dir = dir.substr(0, dir.rfind('/'));
        if (dir.size() < std::string("/sys/fs/cgroup").size()) break;
      }
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {  // v1
      std::string dir = "/sys/fs/cgroup/memory" + (path == "/" ? std::string() : path);
      if (!is_dir(dir)) dir = "/sys/fs/cgroup/memory";
      uint64_t limit = read_number(dir + "/memory.stat", "hierarchical_memory_limit");
      if (limit == kUnknown) limit = read_number(dir + "/memory.limit_in_bytes");
      best = std::min(best, headroom(limit, read_number(dir + "/memory.usage_in_bytes")));
    }
  }
  return best;
}

uint64_t rlimit_headroom(int resource, const char* used_key) {
  struct rlimit rl;
  if (::getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kUnknown;
  return headroom(static_cast<uint64_t>(rl.rlim_cur), status_kb(used_key));
}

}  // namespace

bool checked_mul(uint64_t a, uint64_t b, uint64_t& out) {
  if (a != 0 && b > kMax / a) return false;
  out = a * b;
  return true;
}

bool checked_add(uint64_t a, uint64_t b, uint64_t& out) {
  if (a > kMax || b > kMax - a) return false;
  out = a + b;
  return true;
}

std::string bytes_str(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return cat(bytes, " bytes");
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

uint64_t available_memory() {
  uint64_t kb = read_number("/proc/meminfo", "MemAvailable:");
  uint64_t best = kb == kUnknown ? kUnknown : kb * 1024;
  best = std::min(best, cgroup_headroom());
  best = std::min(best, rlimit_headroom(RLIMIT_AS, "VmSize"));
  best = std::min(best, rlimit_headroom(RLIMIT_DATA, "VmData"));
  return best;
}

void require_memory(uint64_t need, const std::string& what) {
  uint64_t avail = available_memory();
  if (need > avail)
    throw OutOfMemory(cat(what, " needs ", bytes_str(need), " of memory, but only ", bytes_str(avail),
                          " is available"));
}

}  // namespace hpcnn::data
