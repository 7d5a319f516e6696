// NumPy <-> Tensor for the bindings. Host arrays are borrowed without a copy (the Tensor keeps
// the array alive); tensors go back to NumPy as zero-copy views that keep their storage alive.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "core/tensor.h"

namespace hpcnn::bindings {

namespace py = pybind11;

// A C-contiguous float32 view of `obj` (converting only when it is not one already).
inline py::array_t<float, py::array::c_style | py::array::forcecast> as_f32(const py::handle& obj) {
  return py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(obj);
}

inline Shape shape_of(const py::array& a) {
  Shape s;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s.push_back(a.shape(i));
  return s;
}

// Whether `a` holds T's in native byte order. Not dtype::is, which compares the dtype objects: a
// dtype rebuilt by unpickling (arrays from pickle, multiprocessing, joblib) is float32 all the
// same but another object. NumPy's own equivalence test (PyArray_EquivTypes) also tells a
// byte-swapped '>f4' from float32.
template <typename T>
bool holds(const py::array& a) {
  return py::array_t<T>::check_(a);
}

// Borrow a contiguous array of a supported dtype as a CPU tensor.
inline Tensor borrow_array(const py::array& a, const char* what) {
  DType dt;
  if (holds<float>(a)) dt = DType::F32;
  else if (holds<uint8_t>(a)) dt = DType::U8;
  else if (holds<int32_t>(a)) dt = DType::I32;
  else throw ValueError(cat(what, ": unsupported dtype ", std::string(py::str(a.dtype()))));
  if (!(a.flags() & py::array::c_style)) throw ValueError(cat(what, ": array must be C-contiguous"));
  // The keep-alive may be released without the GIL (tensors die in C++ code); take it then.
  std::shared_ptr<void> holder(new py::object(a), [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  return Tensor::borrow(const_cast<void*>(a.data()), shape_of(a), dt, Device::cpu(), holder);
}

// A float32 array (converted if needed) as a tensor on `device` (copied there when not the CPU).
inline Tensor f32_on(const py::handle& obj, Device device, const char* what) {
  auto a = as_f32(obj);
  if (!a) throw ValueError(cat(what, ": cannot convert to a float32 array"));
  Tensor t = borrow_array(a, what);
  return device.is_cpu() ? t : t.to(device);
}

// A zero-copy NumPy view of a CPU tensor (copied to the host first when on a GPU).
inline py::array to_numpy(const Tensor& t_in) {
  Tensor t = t_in.device().is_cpu() ? t_in : t_in.to(Device::cpu());
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  auto* keep = new std::shared_ptr<Storage>(t.storage());
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  switch (t.dtype()) {
    case DType::F32: return py::array_t<float>(shape, t.f32(), owner);
    case DType::U8: return py::array_t<uint8_t>(shape, t.u8(), owner);
    case DType::I32: return py::array_t<int32_t>(shape, t.i32(), owner);
  }
  throw BackendError("to_numpy: unknown dtype");
}

// An optional float32 array (None: undefined, e.g. no bias or no gamma).
inline Tensor optional_on(const py::object& o, Device d, const char* what) {
  return o.is_none() ? Tensor() : f32_on(o, d, what);
}

inline py::object optional_out(const Tensor& t) { return t.defined() ? py::object(to_numpy(t)) : py::none(); }

}  // namespace hpcnn::bindings
