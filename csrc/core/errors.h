// Errors of the core. Each maps to one Python exception through pybind11's built-in translation:
//   ValueError    <- hpcnn::ValueError    (derives std::invalid_argument): bad shapes or arguments
//   RuntimeError  <- hpcnn::BackendError  (derives std::runtime_error): a library or device failure
//   MemoryError   <- hpcnn::OutOfMemory   (derives std::bad_alloc): an allocation that failed
//   OSError       <- hpcnn::OsError       (derives std::runtime_error): the file system refused a write
//                    (disk full, quota, file size limit, I/O error); errno and file name kept
//                    (translated in bindings/data.cpp)
// Messages carry their context (operator, shapes, file:line of the failed call) so that a user
// can act on them without a debugger.
#pragma once

#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace hpcnn {

struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct BackendError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string msg) : msg_(std::move(msg)) {}
  const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

// The operating system refused a file operation: `err` is its errno, `filename` the file the user
// named (not a temporary one). Python sees OSError(err, what(), filename).
struct OsError : std::runtime_error {
  OsError(int err, std::string filename, const std::string& msg)
      : std::runtime_error(msg), err(err), filename(std::move(filename)) {}
  int err;
  std::string filename;
};

// Builds a message from any streamable parts: cat("conv2d: x is ", shape, ", expected rank 4").
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// "(2, 32, 32, 3)": the way NumPy prints shapes, so messages read like Python.
inline std::string shape_str(const std::vector<long long>& shape) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ',';
  os << ')';
  return os.str();
}

}  // namespace hpcnn

// Argument checks: throw ValueError with the message when the condition fails.
#define HPCNN_CHECK_ARG(cond, ...)                                 \
  do {                                                             \
    if (!(cond)) throw ::hpcnn::ValueError(::hpcnn::cat(__VA_ARGS__)); \
  } while (0)

// Internal invariants and backend failures: RuntimeError with file:line.
#define HPCNN_CHECK_BACKEND(cond, ...)                                                       \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw ::hpcnn::BackendError(::hpcnn::cat(__VA_ARGS__, " [", __FILE__, ":", __LINE__, "]")); \
  } while (0)
