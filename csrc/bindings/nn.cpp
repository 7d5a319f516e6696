// The model as Python sees it: hpcnn._core.Model, built from layer configs (dicts made by
// python/hpcnn/layers.py, turned into layers by nn/factory.h). Every call that computes releases
// the GIL.
#include <pybind11/stl.h>

#include <mutex>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "nn/config.h"
#include "nn/factory.h"
#include "nn/sequential.h"

namespace hpcnn::bindings {

namespace {

using nn::LayerPtr;

// A config dict as nn::Config: booleans, integers (Python's or NumPy's), other numbers, strings
// and lists/tuples of integers; None means "not given". Anything else is a ValueError.
nn::Config to_config(const py::handle& obj, const char* what) {
  if (!py::isinstance<py::dict>(obj)) throw ValueError(cat(what, " must be a dict"));
  nn::Config cfg(what);
  for (auto [k, v] : py::reinterpret_borrow<py::dict>(obj)) {
    if (!py::isinstance<py::str>(k)) throw ValueError(cat(what, ": keys must be strings"));
    const std::string key = k.cast<std::string>();
    if (v.is_none()) continue;
    if (PyBool_Check(v.ptr())) {
      cfg.set(key, v.cast<bool>());
    } else if (PyIndex_Check(v.ptr())) {
      cfg.set(key, py::int_(py::reinterpret_borrow<py::object>(v)).cast<long long>());
    } else if (py::isinstance<py::str>(v)) {
      cfg.set(key, v.cast<std::string>());
    } else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
      std::vector<long long> ints;
      for (auto e : v) {
        if (PyBool_Check(e.ptr()) || !PyIndex_Check(e.ptr()))
          throw ValueError(cat(what, ": '", key, "' must hold integers only"));
        ints.push_back(py::int_(py::reinterpret_borrow<py::object>(e)).cast<long long>());
      }
      cfg.set(key, std::move(ints));
    } else if (PyFloat_Check(v.ptr()) || PyNumber_Check(v.ptr())) {
      cfg.set(key, py::float_(py::reinterpret_borrow<py::object>(v)).cast<double>());
    } else {
      std::string type = py::str(py::type::handle_of(v).attr("__name__"));
      throw ValueError(cat(what, ": '", key, "' has a value of type ", type,
                           " (expected a number, a string or a list of integers)"));
    }
  }
  return cfg;
}

// A host tensor for model input: float32 or uint8 as given (borrowed), anything else as float32.
Tensor input_tensor(const py::handle& obj) {
  py::array a = py::array::ensure(obj);
  if (!a) throw ValueError("input is not array-like");
  if (a.dtype().is(py::dtype::of<uint8_t>())) {
    auto c = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>::ensure(a);
    return borrow_array(c, "input");
  }
  if (a.dtype().kind() != 'f' && a.dtype().kind() != 'i' && a.dtype().kind() != 'u' && a.dtype().kind() != 'b')
    throw ValueError(cat("input has dtype ", std::string(py::str(a.dtype())), "; expected numbers"));
  return borrow_array(as_f32(a), "input");
}

Tensor target_tensor(const py::handle& obj, nn::Loss loss) {
  py::array a = py::array::ensure(obj);
  if (!a) throw ValueError("targets are not array-like");
  if (loss == nn::Loss::CategoricalCrossentropy) return borrow_array(as_f32(a), "targets");
  if (a.dtype().kind() == 'f') {
    throw ValueError("sparse_categorical_crossentropy needs integer class indices, got floats "
                     "(convert with y.astype('int32'))");
  }
  auto i = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(a);
  return borrow_array(i, "targets");
}

std::unique_ptr<std::vector<long long>> rows_of(const py::object& rows) {
  if (rows.is_none()) return nullptr;
  auto r = py::array_t<long long, py::array::c_style | py::array::forcecast>::ensure(rows);
  if (!r || r.ndim() != 1) throw ValueError("rows must be a 1-D array of row indices");
  return std::make_unique<std::vector<long long>>(r.data(), r.data() + r.size());
}

// The model plus a lock: calls run without the GIL, so two Python threads must not interleave.
struct PyModel {
  std::unique_ptr<nn::Sequential> model;
  std::mutex mu;
};

// Takes the model's lock WITHOUT holding the GIL. A call in progress holds the lock with the GIL
// released and may need the GIL itself (dropping a prefetched batch releases the NumPy arrays it
// kept alive); waiting for the lock while holding the GIL could then deadlock two threads.
std::unique_lock<std::mutex> lock_model(PyModel& p) {
  py::gil_scoped_release nogil;
  return std::unique_lock<std::mutex>(p.mu);
}

// One training (or evaluation) step without the GIL; returns (loss_sum, correct, n).
py::tuple run_step(PyModel& p, const py::object& x, const py::object& y, const py::object& rows, bool train) {
  if (!p.model->compiled())
    throw ValueError(cat("the model must be compiled before ", train ? "training" : "evaluation",
                         ": call model.compile(...)"));
  Tensor X = input_tensor(x), Y = target_tensor(y, p.model->loss());
  auto r = rows_of(rows);
  auto lk = lock_model(p);
  nn::BatchStats st;
  {
    py::gil_scoped_release nogil;
    st = train ? p.model->train_batch(X, Y, r.get()) : p.model->test_batch(X, Y, r.get());
  }
  return py::make_tuple(st.loss_sum, st.correct, st.n);
}

// A flat buffer of the model (parameters or gradients) as NumPy: as held, or in Keras' layout.
py::array flat_buffer(PyModel& p, const Tensor& flat, bool keras_layout) {
  auto lk = lock_model(p);
  if (!keras_layout) return to_numpy(flat);
  const Tensor host = flat.device().is_cpu() ? flat : flat.to(Device::cpu());
  return to_numpy(p.model->param_layout().convert(host, flat.device(), Device::cpu()));
}

}  // namespace

void bind_nn(py::module_& m) {
  py::class_<PyModel>(m, "Model")
      .def(py::init([](std::vector<long long> input_shape, py::list layer_configs, uint64_t seed) {
             std::vector<LayerPtr> layers;
             for (auto c : layer_configs) layers.push_back(nn::make_layer(to_config(c, "layer config")));
             auto pm = std::make_unique<PyModel>();
             pm->model = std::make_unique<nn::Sequential>(input_shape, std::move(layers), seed);
             return pm;
           }),
           py::arg("input_shape"), py::arg("layers"), py::arg("seed"))
      .def_property_readonly("num_params", [](PyModel& p) { return p.model->num_params(); })
      .def_property_readonly("output_shapes", [](PyModel& p) { return p.model->output_shapes(); })
      .def_property_readonly("weight_shapes", [](PyModel& p) {
        py::list out;
        for (auto& layer : p.model->weight_specs()) {
          py::list l;
          for (auto& s : layer) l.append(py::make_tuple(s.name, s.shape));
          out.append(l);
        }
        return out;
      })
      .def_property_readonly("device", [](PyModel& p) { return p.model->device().str(); })
      .def_property_readonly("step", [](PyModel& p) { return p.model->step(); })
      .def("to", [](PyModel& p, const std::string& dev) {
        auto lk = lock_model(p);
        Device d = parse_device(dev);
        py::gil_scoped_release nogil;
        p.model->to(d);
      })
      .def("compile", [](PyModel& p, py::dict opt, const std::string& loss, bool from_logits) {
        auto lk = lock_model(p);
        std::unique_ptr<nn::Optimizer> o = nn::make_optimizer(to_config(opt, "optimizer config"));
        p.model->compile(std::move(o), nn::parse_loss(loss), from_logits);
      }, py::arg("optimizer"), py::arg("loss"), py::arg("from_logits") = false)
      .def_property("learning_rate",
                    [](PyModel& p) {
                      if (!p.model->optimizer()) throw ValueError("the model is not compiled");
                      return p.model->optimizer()->learning_rate;
                    },
                    [](PyModel& p, float lr) {
                      if (!p.model->optimizer()) throw ValueError("the model is not compiled");
                      if (!(lr > 0)) throw ValueError(cat("learning_rate must be positive, got ", lr));
                      p.model->optimizer()->learning_rate = lr;
                    })
      .def_property_readonly("iterations", [](PyModel& p) {
        return p.model->optimizer() ? p.model->optimizer()->iterations : 0LL;
      })
      .def("train_batch", [](PyModel& p, py::object x, py::object y, py::object rows) {
        return run_step(p, x, y, rows, true);
      }, py::arg("x"), py::arg("y"), py::arg("rows") = py::none(),
         "One training step; returns (loss_sum, correct, n).")
      .def("prefetch", [](PyModel& p, py::object x, py::object y, py::object rows) {
        if (!p.model->compiled())
          throw ValueError("the model must be compiled before training: call model.compile(...)");
        Tensor X = input_tensor(x), Y = target_tensor(y, p.model->loss());
        auto r = rows_of(rows);
        auto lk = lock_model(p);
        py::gil_scoped_release nogil;
        p.model->prefetch(X, Y, r.get());
      }, py::arg("x"), py::arg("y"), py::arg("rows") = py::none(),
         "Stages the next train_batch/test_batch(x, y, rows) ahead (on a GPU: uploads it on the copy "
         "stream while the current step runs); the next call with the same arrays and rows uses it.")
      .def_property_readonly("has_prefetch", [](PyModel& p) { return p.model->has_prefetch(); })
      .def_property_readonly("staging_slots", [](PyModel& p) {
        return py::make_tuple(p.model->last_step_slot(), p.model->prefetch_slot());
      }, "(slot of the last staged step, slot of the pending prefetch or -1): for tests")
      .def("test_batch", [](PyModel& p, py::object x, py::object y, py::object rows) {
        return run_step(p, x, y, rows, false);
      }, py::arg("x"), py::arg("y"), py::arg("rows") = py::none(), "Loss and accuracy without training.")
      .def("predict_batch", [](PyModel& p, py::object x, py::object rows) {
        Tensor X = input_tensor(x);
        auto r = rows_of(rows);
        Tensor out;
        {
          auto lk = lock_model(p);
          py::gil_scoped_release nogil;
          out = p.model->predict_batch(X, r.get());
        }
        return to_numpy(out);
      }, py::arg("x"), py::arg("rows") = py::none())
      .def("get_weights", [](PyModel& p) {
        auto lk = lock_model(p);
        py::list out;
        for (auto& t : p.model->get_weights()) out.append(to_numpy(t));
        return out;
      })
      .def("set_weights", [](PyModel& p, py::list ws) {
        std::vector<Tensor> ts;
        for (auto w : ws) ts.push_back(borrow_array(as_f32(w), "weight"));
        auto lk = lock_model(p);
        p.model->set_weights(ts);
      })
      // ---- the flat buffers, in the layout of the model's device (nn/param_layout.h)
      .def("parameter_buffer", [](PyModel& p, bool keras_layout) {
        return flat_buffer(p, p.model->parameter_buffer(), keras_layout);
      }, py::arg("keras_layout") = false,
         "The one parameter buffer in the layout of the model's device: conv kernels are (kh, kw, in, out) on "
         "the CPU but (out, kh, kw, in) on a GPU. A live view on the CPU, a copy from a GPU. keras_layout=True: "
         "a copy with every kernel in Keras' layout (get_weights' arrays, flattened and concatenated), "
         "comparable across devices.")
      .def("gradient_buffer", [](PyModel& p, bool keras_layout) {
        return flat_buffer(p, p.model->gradient_buffer(), keras_layout);
      }, py::arg("keras_layout") = false,
         "The gradients of the last training step, aligned with parameter_buffer(keras_layout) element for "
         "element (the device's layout unless keras_layout=True).")
      .def("relayout_buffer", [](PyModel& p, py::array_t<float, py::array::c_style | py::array::forcecast> flat,
                                 const std::string& from_device, const std::string& to_device) {
        Tensor host = borrow_array(flat, "buffer");
        Device from = parse_device(from_device), to = parse_device(to_device);
        auto lk = lock_model(p);
        return to_numpy(p.model->param_layout().convert(host.reshape({host.numel()}), from, to));
      }, py::arg("buffer"), py::arg("from_device"), py::arg("to_device"),
         "A host copy of `buffer` (flat, aligned with the parameters: parameters, gradients, optimizer moments) "
         "converted from the layout the parameters have on from_device to the one on to_device: the conversion "
         "to() applies. A host computation: needs no GPU (for tests and tools).");
}

}  // namespace hpcnn::bindings
