// The model as Python sees it: hpcnn._core.Model, built from layer configs (dicts made by
// python/hpcnn/layers.py). Every call that computes releases the GIL.
#include <pybind11/stl.h>

#include <mutex>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "nn/layers.h"
#include "nn/sequential.h"

namespace hpcnn::bindings {

namespace {

using nn::LayerPtr;

template <typename T>
T get(const py::dict& d, const char* key) {
  if (!d.contains(key)) throw ValueError(cat("layer config is missing '", key, "'"));
  return d[key].cast<T>();
}

LayerPtr make_layer(const py::dict& cfg) {
  auto kind = get<std::string>(cfg, "class_name");
  if (kind == "Conv2D") {
    auto k = get<std::vector<int>>(cfg, "kernel_size");
    auto s = get<std::vector<int>>(cfg, "strides");
    return std::make_unique<nn::Conv2DLayer>(get<int>(cfg, "filters"), k.at(0), k.at(1), s.at(0), s.at(1),
                                             parse_padding(get<std::string>(cfg, "padding")),
                                             get<std::string>(cfg, "activation") == "relu");
  }
  if (kind == "MaxPooling2D") {
    auto p = get<std::vector<int>>(cfg, "pool_size");
    auto s = get<std::vector<int>>(cfg, "strides");
    return std::make_unique<nn::MaxPool2DLayer>(p.at(0), p.at(1), s.at(0), s.at(1),
                                                parse_padding(get<std::string>(cfg, "padding")));
  }
  if (kind == "Flatten") return std::make_unique<nn::FlattenLayer>();
  if (kind == "Dense")
    return std::make_unique<nn::DenseLayer>(get<int>(cfg, "units"), get<std::string>(cfg, "activation") == "relu");
  if (kind == "Dropout") return std::make_unique<nn::DropoutLayer>(get<float>(cfg, "rate"));
  if (kind == "Activation")
    return std::make_unique<nn::ActivationLayer>(nn::parse_activation(get<std::string>(cfg, "activation")));
  throw ValueError(cat("unknown layer class '", kind, "'"));
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

// Integer labels wider than int32 are range-checked on their own type before the cast: an int64
// 2**32+3 would otherwise become class 3 (the model then checks the int32 labels it stages).
template <typename T>
void check_labels_before_cast(const py::array& a, long long classes) {
  auto v = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
  const T* d = v.data();
  for (py::ssize_t i = 0; i < v.size(); ++i)
    if (!(d[i] >= 0 && static_cast<unsigned long long>(d[i]) < static_cast<unsigned long long>(classes)))
      throw ValueError(cat("label ", d[i], " (row ", i, ") is outside [0, ", classes, ") for a model with ", classes,
                           " outputs"));
}

Tensor target_tensor(const py::handle& obj, const nn::Sequential& model) {
  py::array a = py::array::ensure(obj);
  if (!a) throw ValueError("targets are not array-like");
  if (model.loss() == nn::Loss::CategoricalCrossentropy) return borrow_array(as_f32(a), "targets");
  if (a.dtype().kind() == 'f') {
    throw ValueError("sparse_categorical_crossentropy needs integer class indices, got floats "
                     "(convert with y.astype('int32'))");
  }
  if (!a.dtype().is(py::dtype::of<int32_t>())) {
    const long long classes = model.output_shapes().back().at(0);
    if (a.dtype().kind() == 'u') check_labels_before_cast<uint64_t>(a, classes);
    else if (a.dtype().kind() == 'i') check_labels_before_cast<int64_t>(a, classes);
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
  Tensor X = input_tensor(x), Y = target_tensor(y, *p.model);
  auto r = rows_of(rows);
  auto lk = lock_model(p);
  nn::BatchStats st;
  {
    py::gil_scoped_release nogil;
    st = train ? p.model->train_batch(X, Y, r.get()) : p.model->test_batch(X, Y, r.get());
  }
  return py::make_tuple(st.loss_sum, st.correct, st.n);
}

}  // namespace

void bind_nn(py::module_& m) {
  py::class_<PyModel>(m, "Model")
      .def(py::init([](std::vector<long long> input_shape, py::list layer_configs, uint64_t seed) {
             std::vector<LayerPtr> layers;
             for (auto c : layer_configs) layers.push_back(make_layer(c.cast<py::dict>()));
             auto pm = std::make_unique<PyModel>();
             pm->model = std::make_unique<nn::Sequential>(input_shape, std::move(layers), seed);
             return pm;
           }),
           py::arg("input_shape"), py::arg("layers"), py::arg("seed"))
      .def_property_readonly("num_params", [](PyModel& p) { return p.model->num_params(); })
      .def_property_readonly("num_trainable_params", [](PyModel& p) { return p.model->num_trainable_params(); })
      .def("set_trainable", [](PyModel& p, const std::vector<bool>& per_layer) {
        auto lk = lock_model(p);
        p.model->set_trainable(per_layer);
      }, py::arg("per_layer"), "Which core layers the optimizer updates (Python calls it at compile).")
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
        auto name = get<std::string>(opt, "name");
        std::unique_ptr<nn::Optimizer> o;
        if (name == "Adam")
          o = std::make_unique<nn::Adam>(get<float>(opt, "learning_rate"), get<float>(opt, "beta_1"),
                                         get<float>(opt, "beta_2"), get<float>(opt, "epsilon"));
        else if (name == "SGD")
          o = std::make_unique<nn::SGD>(get<float>(opt, "learning_rate"), get<float>(opt, "momentum"),
                                        get<bool>(opt, "nesterov"));
        else
          throw ValueError(cat("unknown optimizer '", name, "'"));
        nn::Loss l;
        if (loss == "categorical_crossentropy") l = nn::Loss::CategoricalCrossentropy;
        else if (loss == "sparse_categorical_crossentropy") l = nn::Loss::SparseCategoricalCrossentropy;
        else throw ValueError(cat("unknown loss '", loss,
                                  "': use 'categorical_crossentropy' or 'sparse_categorical_crossentropy'"));
        p.model->compile(std::move(o), l, from_logits);
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
      .def("optimizer_state", [](PyModel& p) {
        auto lk = lock_model(p);
        py::list out;
        if (p.model->optimizer())
          for (const Tensor& t : p.model->optimizer()->state()) out.append(to_numpy(t.to(Device::cpu())));
        return out;
      }, "Host copies of the optimizer's state (Adam: [m, v]; SGD: [velocity]; [] before the first step).")
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
        Tensor X = input_tensor(x), Y = target_tensor(y, *p.model);
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
      .def("parameter_buffer", [](PyModel& p) { return to_numpy(p.model->parameter_buffer()); },
           "The one parameter buffer (a copy when on a GPU; a live view on the CPU).")
      .def("gradient_buffer", [](PyModel& p) { return to_numpy(p.model->gradient_buffer()); });
}

}  // namespace hpcnn::bindings
