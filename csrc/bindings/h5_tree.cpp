// hpcnn._core.data's HDF5 tree reader and writer (data/h5_tree.h): the files of Keras' layouts
// that python/hpcnn/keras_files.py reads and writes. Conversion of values only.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "core/errors.h"
#include "data/h5_tree.h"

namespace hpcnn::bindings {

namespace py = pybind11;
using namespace hpcnn::data;

namespace {

py::object value_to_python(const H5Value& v) {
  switch (v.kind) {
    case H5Value::Kind::Text: return py::str(v.texts.at(0));
    case H5Value::Kind::Texts: {
      py::list out;
      for (const auto& s : v.texts) out.append(py::str(s));
      return out;
    }
    case H5Value::Kind::Numbers: {
      if (v.shape.empty()) return py::float_(v.numbers.at(0));
      std::vector<py::ssize_t> shape(v.shape.begin(), v.shape.end());
      py::array_t<double> a(shape);
      std::copy(v.numbers.begin(), v.numbers.end(), a.mutable_data());
      return std::move(a);
    }
    case H5Value::Kind::Unsupported: break;
  }
  return py::none();
}

py::dict attributes_to_python(const H5Attributes& attrs) {
  py::dict d;
  for (const auto& [name, value] : attrs) d[py::str(name)] = value_to_python(value);
  return d;
}

// str -> a text; a list or tuple of str -> texts; a number or NumPy array -> float64 numbers.
H5Value value_from_python(const std::string& name, py::handle v) {
  H5Value out;
  if (py::isinstance<py::str>(v)) {
    out.kind = H5Value::Kind::Text;
    out.texts.push_back(v.cast<std::string>());
    return out;
  }
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    out.kind = H5Value::Kind::Texts;
    for (py::handle item : v) {
      if (!py::isinstance<py::str>(item)) throw ValueError(cat("attribute '", name, "': a list attribute holds texts only"));
      out.texts.push_back(item.cast<std::string>());
    }
    out.shape = {static_cast<long long>(out.texts.size())};
    return out;
  }
  py::array_t<double, py::array::c_style | py::array::forcecast> a;
  try {
    a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(v);
  } catch (const py::error_already_set&) {
  }
  if (!a) throw ValueError(cat("attribute '", name, "' must be a str, a list of str or numbers"));
  out.kind = H5Value::Kind::Numbers;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) out.shape.push_back(a.shape(d));
  out.numbers.assign(a.data(), a.data() + a.size());
  return out;
}

H5Attributes attributes_from_python(const py::dict& d) {
  H5Attributes out;
  for (auto [k, v] : d) {
    const std::string name = py::str(k);
    out.emplace_back(name, value_from_python(name, v));
  }
  return out;
}

// Items (path, array or None, attributes) -> H5Items; `keep` holds the contiguous arrays alive.
std::vector<H5Item> items_from_python(const py::list& items, std::vector<py::array>& keep) {
  std::vector<H5Item> out;
  for (py::handle h : items) {
    auto t = h.cast<py::tuple>();
    if (t.size() != 3) throw ValueError("an HDF5 item is (path, array or None, attributes)");
    H5Item item;
    item.path = t[0].cast<std::string>();
    if (!t[1].is_none()) {
      py::array a = py::array::ensure(t[1], py::array::c_style);
      if (!a) throw ValueError(cat("dataset '", item.path, "' is not convertible to a contiguous array"));
      keep.push_back(a);
      item.is_dataset = true;
      item.data.name = item.path;
      item.data.data = a.data();
      item.data.shape = shape_of(a);
      item.data.elem_size = static_cast<size_t>(a.itemsize());
      const char k = a.dtype().kind();
      if (k == 'f') item.data.kind = ScalarKind::Float;
      else if (k == 'i') item.data.kind = ScalarKind::Int;
      else if (k == 'u' || k == 'b') item.data.kind = ScalarKind::UInt;
      else throw ValueError(cat("dataset '", item.path, "' has dtype ", std::string(py::str(a.dtype())),
                                "; expected integers or floats"));
    }
    item.attributes = attributes_from_python(t[2].cast<py::dict>());
    out.push_back(std::move(item));
  }
  return out;
}

}  // namespace

void bind_h5_tree(py::module_& m) {
  // The reader's limits (data/h5_tree.h), by the names hpcnn.formats.h5_limits gives them.
  py::dict limits;
  limits["MAX_ATTRIBUTE_BYTES"] = H5TreeLimits::kMaxAttributeBytes;
  limits["MAX_ATTRIBUTE_ELEMENTS"] = H5TreeLimits::kMaxAttributeElements;
  limits["MAX_ATTRIBUTES_PER_OBJECT"] = H5TreeLimits::kMaxAttributesPerObject;
  limits["MAX_WEIGHT_ELEMENTS"] = H5TreeLimits::kMaxWeightElements;
  limits["MAX_WEIGHT_BYTES"] = H5TreeLimits::kMaxWeightBytes;
  limits["MAX_DEPTH"] = H5TreeLimits::kMaxDepth;
  limits["MAX_NAME_BYTES"] = H5TreeLimits::kMaxNameBytes;
  m.attr("H5_TREE_LIMITS") = limits;

  py::class_<H5Reader>(m, "H5Reader", "An HDF5 file opened read-only, listed and read as a tree (Keras' layouts).")
      .def(py::init([](const std::string& path) {
             py::gil_scoped_release nogil;
             return H5Reader::open_file(path);
           }),
           py::arg("path"))
      .def_static("from_bytes", [](py::bytes data, const std::string& label) {
        std::string s = data;
        std::vector<uint8_t> bytes(s.begin(), s.end());
        py::gil_scoped_release nogil;
        return H5Reader::open_image(bytes, label);
      }, py::arg("data"), py::arg("label"), "An HDF5 file held in memory; `label` names it in messages.")
      .def_property_readonly("label", &H5Reader::label)
      .def("list", [](const H5Reader& r, long long max_objects) {
        std::vector<H5Object> objs;
        {
          py::gil_scoped_release nogil;
          objs = r.list(max_objects);
        }
        py::list out;
        for (const auto& o : objs) {
          py::dict d;
          d["path"] = o.path;
          d["kind"] = o.is_dataset ? "dataset" : "group";
          d["shape"] = o.is_dataset ? py::object(py::tuple(py::cast(o.shape))) : py::object(py::none());
          d["dtype"] = o.is_dataset ? py::object(py::str(o.dtype)) : py::object(py::none());
          d["attrs"] = attributes_to_python(o.attributes);
          out.append(d);
        }
        return out;
      }, py::arg("max_objects") = 1000000,
         "Every group and dataset reached by hard links, the root first: dicts of path, kind ('group' or "
         "'dataset'), shape and dtype (datasets) and attrs (str, list of str, float or float64 array; None for "
         "a type hpcnn does not read).")
      .def("read", [](const H5Reader& r, const std::string& path) {
        H5Array a;
        {
          py::gil_scoped_release nogil;
          a = r.read(path);
        }
        std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end());
        if (a.is_float) {
          py::array_t<float> out(shape);
          std::copy(a.f32.begin(), a.f32.end(), out.mutable_data());
          return py::array(out);
        }
        py::array_t<int64_t> out(shape);
        std::copy(a.i64.begin(), a.i64.end(), out.mutable_data());
        return py::array(out);
      }, py::arg("path"), "Dataset `path` as float32 (any float type) or int64 (any integer type).")
      .def("close", &H5Reader::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](H5Reader& r, py::args) { r.close(); });

  m.def("write_h5_tree", [](const std::string& path, const py::list& items, const std::string& caller) {
    std::vector<py::array> keep;
    std::vector<H5Item> w = items_from_python(items, keep);
    py::gil_scoped_release nogil;
    write_h5_tree(path, w, caller);
  }, py::arg("path"), py::arg("items"), py::arg("caller") = "write_h5_tree",
     "Writes items (path, array or None for a group, attributes dict) to a new HDF5 file, atomically.");

  m.def("h5_tree_image", [](const py::list& items, const std::string& caller) {
    std::vector<py::array> keep;
    std::vector<H5Item> w = items_from_python(items, keep);
    std::vector<uint8_t> image;
    {
      py::gil_scoped_release nogil;
      image = h5_tree_image(w, caller);
    }
    return py::bytes(reinterpret_cast<const char*>(image.data()), image.size());
  }, py::arg("items"), py::arg("caller") = "h5_tree_image", "The HDF5 file write_h5_tree would write, as bytes.");

  m.def("write_file_atomically", [](const std::string& path, py::bytes data, const std::string& caller) {
    std::string s = data;
    std::vector<uint8_t> bytes(s.begin(), s.end());
    py::gil_scoped_release nogil;
    write_file_atomically(path, bytes, caller);
  }, py::arg("path"), py::arg("data"), py::arg("caller") = "write_file_atomically",
     "Writes bytes to `path` through a temporary file renamed into place (the rules of write_hdf5's target).");
}

}  // namespace hpcnn::bindings
