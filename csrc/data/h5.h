// The HDF5 C API as the data pipeline uses it: one RAII owner for every hid_t, and HDF5's error
// stack turned into exception text.
//
// HDF5 prints its error stack to stderr by default; hpcnn silences that (per thread: a thread-safe
// HDF5 keeps one default stack per thread) and folds the stack's messages into the exception it
// throws, so a user sees one Python exception that names the file, the dataset and HDF5's reason.
#pragma once

#include <hdf5.h>

#include <mutex>
#include <string>

namespace hpcnn::data {

// hpcnn's own lock around every HDF5 call it makes. Debian's HDF5 is a thread-safe build (one
// global lock inside), but conda's and many clusters' builds are not; the loader's producer thread
// and the Python thread both call HDF5, so hpcnn serializes its calls itself. Recursive: helpers
// that lock may call each other. Never held while running work on the thread pool.
std::recursive_mutex& h5_mutex();
using H5Lock = std::lock_guard<std::recursive_mutex>;

// Owns one HDF5 identifier and closes it with the matching H5?close. Move-only.
class H5Id {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Id() = default;
  H5Id(hid_t id, Closer close) : id_(id), close_(close) {}
  ~H5Id() { reset(); }
  H5Id(H5Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports whether the close succeeded (a file's close flushes: it can fail).
  bool close() {
    if (id_ < 0) return true;
    H5Lock lock(h5_mutex());
    herr_t s = close_ ? close_(id_) : 0;
    id_ = H5I_INVALID_HID;
    return s >= 0;
  }
  void reset() noexcept {
    if (id_ < 0) return;
    H5Lock lock(h5_mutex());
    if (close_) close_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

// Turns off HDF5's automatic error printing for the calling thread (idempotent, cheap).
void h5_quiet();

// The messages on the calling thread's HDF5 error stack, innermost last, joined by "; " (and
// clears the stack). Empty when the stack is empty.
std::string h5_error_text();

// Throws ValueError("<context>: <HDF5's messages>") when id < 0, else returns the owner.
H5Id h5_own(hid_t id, H5Id::Closer close, const std::string& context);
// Throws ValueError("<context>: <HDF5's messages>") when status < 0.
void h5_check(herr_t status, const std::string& context);

// A datatype's name as NumPy spells numbers ("int16", "uint8", "float32"), else its HDF5 class
// ("string", "compound", "enum", ...): what error messages and dataset descriptions show users.
std::string h5_type_name(hid_t type);

// hpcnn reads integers and IEEE floats in their standard layouts (the bytes of the element, all
// of its bits): what NumPy, h5py and every writer produce. HDF5 can describe others (12-bit
// integers at a bit offset, custom float formats), and a damaged type message does: HDF5 1.10
// converts those to garbage or zeros without an error. Empty when `type` (of class `cls`, `size`
// bytes) is standard, else why not.
std::string nonstandard_number(hid_t type, H5T_class_t cls, size_t size);

}  // namespace hpcnn::data
