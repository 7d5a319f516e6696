// HDF5 files as trees of groups, attributes and datasets, read and written with the C API: what
// model and weights files in Keras' layouts need (Keras 3's `.weights.h5`, the legacy Keras HDF5
// layout with `layer_names` / `weight_names` attributes, the weights inside a `.keras` archive).
// A file is read or written once per save or load: simplicity over speed here.
//
// Reading: a file by path, or an HDF5 image held in memory (a `.keras` archive's member). Neither
// Keras nor hpcnn writes anything but a tree of hard links and datasets stored in the file, so the
// listing refuses (ValueError naming the file, the object and what is wrong) whatever would make
// reading open another file or walk without end: a soft or external link (an external link can
// name any file; a soft link can loop), a group reached twice (linked into itself or shared), a
// dataset whose raw data is in an external file (HDF5 external storage names any path, e.g.
// /etc/shadow) or a virtual dataset (its sources are other files), groups nested deeper than
// H5TreeLimits::kMaxDepth, names and texts that are not UTF-8, and attributes beyond the limits
// below (checked before their values are read). Attribute values are texts (fixed or
// variable-length strings), lists of texts, or numbers. A dataset is read only when asked for
// (after the caller checked its shape), converted to float32 (any float type) or int64 (any
// integer type), its size checked against the limits before anything is allocated.
//
// Writing: groups, attributes (variable-length UTF-8 strings, as h5py stores a Python str, and
// float64 numbers) and uncompressed datasets, either to a temporary file renamed onto the target
// (write_target.h: never a half-written file) or to an image in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "data/h5.h"
#include "data/writer.h"

namespace hpcnn::data {

// The most the tree reader accepts (hpcnn.formats.h5_limits names them for Python, and
// docs/reliability.md says why each value): past one, a ValueError names the limit. Each admits
// real models with a wide margin (the largest attribute Keras writes is a model's JSON config,
// ~100 KB for ResNet-50; its `layer_names` has 177 names; a 100M-parameter Dense kernel is 4e8 bytes).
struct H5TreeLimits {
  // One attribute's value as read: 8 bytes per number, each text's bytes (fixed-length strings:
  // their declared size). Checked before reading (variable-length texts: their count first, their
  // bytes as read).
  static constexpr long long kMaxAttributeBytes = 64LL << 20;
  // Elements of one attribute (numbers or texts).
  static constexpr long long kMaxAttributeElements = 1LL << 20;
  // Attributes of one group or dataset (Keras splits a list past 64 KB into name0, name1, ...: this
  // admits 256 MB of names).
  static constexpr long long kMaxAttributesPerObject = 1LL << 12;
  // One dataset read as an array (a weight tensor): its elements, and its bytes as read (float32
  // for floats, int64 for integers). Checked before anything is allocated.
  static constexpr long long kMaxWeightElements = 1LL << 31;
  static constexpr long long kMaxWeightBytes = 1LL << 33;
  // Levels of groups below the root (Keras 3 nests two levels per nested model).
  static constexpr int kMaxDepth = 64;
  // A link's or attribute's name.
  static constexpr long long kMaxNameBytes = 65535;
};

// One attribute's value.
struct H5Value {
  enum class Kind { Text, Texts, Numbers, Unsupported };
  Kind kind = Kind::Text;
  std::vector<std::string> texts;  // Text: exactly one; Texts: one per element, row-major
  std::vector<double> numbers;     // Numbers: row-major
  Shape shape;                     // Texts and Numbers: the attribute's shape ({} for a scalar)
  std::string type;                // Unsupported: what it holds ("compound", "reference", ...)
};
using H5Attributes = std::vector<std::pair<std::string, H5Value>>;

// A group or dataset of a file, as the listing reports it.
struct H5Object {
  std::string path;  // "/" for the root group, then "/model_weights", "/model_weights/dense", ...
  bool is_dataset = false;
  Shape shape;        // datasets ({} for a scalar)
  std::string dtype;  // datasets, NumPy-style: "float32", "float64", "int64", "uint8", "string", ...
  H5Attributes attributes;
};

// A dataset's values: float32 for any float type, int64 for any integer type.
struct H5Array {
  bool is_float = true;
  Shape shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
};

class H5Reader {
 public:
  static constexpr int kMaxDepth = H5TreeLimits::kMaxDepth;

  // ValueError naming `path` when it is missing, not a regular file, not HDF5, or damaged.
  static std::unique_ptr<H5Reader> open_file(const std::string& path);
  // An HDF5 file held in memory (copied); `label` names it in messages.
  static std::unique_ptr<H5Reader> open_image(const std::vector<uint8_t>& bytes, const std::string& label);

  // Every group and dataset under the root, depth-first in name order, the root first.
  std::vector<H5Object> list(long long max_objects) const;
  // Dataset `path` ("/layers/dense/vars/0"): ValueError when it is missing, reached through a soft
  // or external link, not a dataset, stored outside the file, of a type other than float or
  // integer, beyond kMaxWeightElements / kMaxWeightBytes, or unreadable; MemoryError when it does
  // not fit in memory.
  H5Array read(const std::string& path) const;
  const std::string& label() const { return label_; }
  void close();

 private:
  H5Reader(H5Id file, std::string label) : file_(std::move(file)), label_(std::move(label)) {}
  H5Id file_;
  std::string label_;
};

// One thing to write: a group (with attributes; "/" is the root) or a dataset.
struct H5Item {
  std::string path;
  bool is_dataset = false;
  ArrayToWrite data;  // datasets: C-contiguous native values; shape {} for a scalar
  H5Attributes attributes;
};

// Writes `items` in order (groups are created where missing, intermediate ones included) to a
// new file at `path`, atomically (built in memory, then written as write_file_atomically writes);
// ValueError naming `caller` for an unwritable target or items, OsError when the file system
// refuses the write (disk full, ...).
void write_h5_tree(const std::string& path, const std::vector<H5Item>& items, const std::string& caller);
// The same file as bytes in memory (for an archive member).
std::vector<uint8_t> h5_tree_image(const std::vector<H5Item>& items, const std::string& caller);

// Writes `bytes` to `path` atomically (write_target.h: write_bytes_atomically).
void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes, const std::string& caller);

}  // namespace hpcnn::data
