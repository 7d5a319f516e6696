// The model as Python sees it: hpcnn._core.Model, built from layer configs (dicts made by
// python/hpcnn/layers.py, turned into layers by nn/factory.h) and, for a graph, each layer's
// inputs (python/hpcnn/models.py). Every call that computes releases the GIL.
#include <pybind11/stl.h>

#include <mutex>
#include <optional>
#include <tuple>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "distribute/replica_set.h"
#include "nn/config.h"
#include "nn/factory.h"
#include "nn/model.h"

namespace hpcnn::bindings {

namespace {

using nn::LayerPtr;

// A config dict as nn::Config: booleans, integers (Python's or NumPy's), other numbers, strings
// and lists/tuples of numbers (of integers only: a list of integers; with any other number: a list
// of doubles); None means "not given". Anything else is a ValueError.
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
      bool all_ints = true;
      for (auto e : v) {
        if (PyBool_Check(e.ptr()) || !(PyIndex_Check(e.ptr()) || PyFloat_Check(e.ptr()) || PyNumber_Check(e.ptr())) ||
            py::isinstance<py::str>(e))
          throw ValueError(cat(what, ": '", key, "' must hold numbers only"));
        all_ints = all_ints && PyIndex_Check(e.ptr());
      }
      if (all_ints) {
        std::vector<long long> ints;
        for (auto e : v) ints.push_back(py::int_(py::reinterpret_borrow<py::object>(e)).cast<long long>());
        cfg.set(key, std::move(ints));
      } else {
        std::vector<double> reals;
        for (auto e : v) reals.push_back(py::float_(py::reinterpret_borrow<py::object>(e)).cast<double>());
        cfg.set(key, std::move(reals));
      }
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
  if (holds<uint8_t>(a)) {
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

Tensor target_tensor(const py::handle& obj, const nn::Model& model) {
  py::array a = py::array::ensure(obj);
  if (!a) throw ValueError("targets are not array-like");
  if (!nn::takes_class_indices(model.loss())) {
    if (a.dtype().kind() != 'f' && a.dtype().kind() != 'i' && a.dtype().kind() != 'u' && a.dtype().kind() != 'b')
      throw ValueError(cat("targets have dtype ", std::string(py::str(a.dtype())), "; expected numbers"));
    return borrow_array(as_f32(a), "targets");
  }
  if (a.dtype().kind() == 'f') {
    throw ValueError("sparse_categorical_crossentropy needs integer class indices, got floats "
                     "(convert with y.astype('int32'))");
  }
  if (!holds<int32_t>(a)) {
    const long long classes = model.output_shapes().back().at(0);
    if (a.dtype().kind() == 'u') check_labels_before_cast<uint64_t>(a, classes);
    else if (a.dtype().kind() == 'i') check_labels_before_cast<int64_t>(a, classes);
  }
  auto i = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(a);
  return borrow_array(i, "targets");
}

std::optional<std::vector<long long>> rows_of(const py::handle& rows) {
  if (rows.is_none()) return std::nullopt;
  auto r = py::array_t<long long, py::array::c_style | py::array::forcecast>::ensure(rows);
  if (!r || r.ndim() != 1) throw ValueError("rows must be a 1-D array of row indices");
  return std::vector<long long>(r.data(), r.data() + r.size());
}

// A number or a sequence of numbers, as floats.
std::vector<float> floats_of(const py::handle& v, const char* what) {
  try {
    if (py::isinstance<py::sequence>(v)) return v.cast<std::vector<float>>();
    return {v.cast<float>()};
  } catch (const py::cast_error&) {
    throw ValueError(cat("uint8 decode: ", what, " must be a number or a sequence of numbers"));
  }
}

// A step's batch from Python: a tuple (x, y[, rows[, decode[, sample_weight[, first_row,
// global_rows]]]]), decode = (scale, shift) per channel (or one value each) for uint8 x or None,
// sample_weight float (N,) or None, first_row/global_rows: this process's share of a global batch.
// `with_targets`: y (and the sample weights) are converted for the loss; without, they are ignored
// (prediction).
nn::Batch batch_of(const py::handle& obj, const nn::Model& model, bool with_targets) {
  if (!py::isinstance<py::tuple>(obj) && !py::isinstance<py::list>(obj))
    throw ValueError("a batch is a tuple (x, y[, rows[, decode[, sample_weight[, first_row, global_rows]]]])");
  py::sequence t = py::reinterpret_borrow<py::sequence>(obj);
  const size_t k = t.size();
  if (k < 1 || k > 7)
    throw ValueError(cat("a batch is a tuple (x, y[, rows[, decode[, sample_weight[, first_row, global_rows]]]]), got ",
                         k, " items"));
  nn::Batch b;
  b.x = input_tensor(t[0]);
  if (with_targets && k >= 2 && !t[1].is_none()) b.y = target_tensor(t[1], model);
  if (k >= 3) b.rows = rows_of(t[2]);
  if (k >= 4 && !t[3].is_none()) {
    py::sequence d = py::reinterpret_borrow<py::sequence>(t[3]);
    if (!py::isinstance<py::sequence>(t[3]) || d.size() != 2)
      throw ValueError("decode must be a (scale, shift) pair");
    b.decode.scale = floats_of(d[0], "scale");
    b.decode.shift = floats_of(d[1], "shift");
  }
  if (with_targets && k >= 5 && !t[4].is_none()) {
    py::array w = py::array::ensure(t[4]);
    if (!w || (w.dtype().kind() != 'f' && w.dtype().kind() != 'i' && w.dtype().kind() != 'u' &&
               w.dtype().kind() != 'b'))
      throw ValueError("sample weights must be an array of numbers");
    b.w = borrow_array(as_f32(w), "sample weights");
  }
  if (k == 6) throw ValueError("a batch's first_row comes with global_rows (7 items)");
  if (k == 7) {
    // This process's share of a global batch (an HDF5 loader that reads only this rank's rows).
    const long long first = t[5].cast<long long>(), global = t[6].cast<long long>();
    const long long n = b.rows ? static_cast<long long>(b.rows->size()) : (b.x.rank() >= 1 ? b.x.dim(0) : 0);
    if (first < 0 || global < 0 || first + n > global)
      throw ValueError(cat("a batch share of ", n, " rows starting at row ", first, " does not fit in a global batch of ",
                           global, " rows"));
    b.first_row = first;
    b.global_rows = global;
  }
  return b;
}

// The batch a step is to stage ahead. One that cannot even be converted is staged as its error,
// raised when its turn comes (as any other error of that batch).
std::optional<nn::Batch> next_batch_of(const py::handle& obj, const nn::Model& model, bool with_targets) {
  if (obj.is_none()) return std::nullopt;
  try {
    return batch_of(obj, model, with_targets);
  } catch (const py::error_already_set&) {
    throw;  // a Python exception (e.g. KeyboardInterrupt while converting): not ours to keep
  } catch (const std::exception&) {
    nn::Batch failed;
    failed.error = std::current_exception();
    return failed;
  }
}

// The model plus a lock: calls run without the GIL, so two Python threads must not interleave.
// With a strategy (hpcnn.distribute) it also holds the model's other replicas of this process and
// the replica set that trains them all: `model` is replica 0, the one Python reads weights from;
// calls that change what a step computes (weights, trainable flags, learning rate) reach every
// replica. What the replicas are built from is kept here for that.
struct PyModel {
  std::unique_ptr<nn::Model> model;
  std::mutex mu;
  std::vector<double> last_metrics;  // the last train/test step's metric sums (set_metrics' order)
  // How the model was built and compiled (for its replicas).
  Shape input_shape;
  std::vector<nn::Config> layer_configs;
  std::optional<std::vector<std::vector<int>>> node_inputs;  // a graph's node inputs (none: a chain)
  std::optional<nn::Config> optimizer_config;
  nn::LossSpec loss;                   // compile's loss (kind, from_logits, label_smoothing)
  std::vector<nn::MetricSpec> metrics;  // set_metrics'
  std::vector<float> class_weights;     // set_class_weights' ([]: none)
  std::vector<bool> trainable;
  // Data parallelism: replicas 1.. of this process (replica 0 is `model`) and their driver.
  std::vector<std::unique_ptr<nn::Model>> others;
  std::unique_ptr<distribute::ReplicaSet> replicas;

  std::vector<nn::Model*> all() {
    std::vector<nn::Model*> v{model.get()};
    for (auto& o : others) v.push_back(o.get());
    return v;
  }
  void undistribute() {
    replicas.reset();  // detaches the reducers before the replicas go
    others.clear();
  }
};

// A chain of layers (inputs none: a Sequential model) or a graph (per layer, the layers it reads).
std::unique_ptr<nn::Model> make_model(const Shape& input_shape, std::vector<LayerPtr> layers,
                                      const std::optional<std::vector<std::vector<int>>>& inputs, uint64_t seed) {
  if (!inputs) return std::make_unique<nn::Model>(input_shape, std::move(layers), seed);
  if (inputs->size() != layers.size())
    throw ValueError(cat("inputs: one list per layer, got ", inputs->size(), " for ", layers.size(), " layers"));
  std::vector<nn::Node> nodes;
  for (size_t i = 0; i < layers.size(); ++i) nodes.push_back(nn::Node{std::move(layers[i]), (*inputs)[i]});
  return std::make_unique<nn::Model>(input_shape, std::move(nodes), seed);
}

// Takes the model's lock WITHOUT holding the GIL. A call in progress holds the lock with the GIL
// released and may need the GIL itself (dropping a staged batch releases the NumPy arrays it
// kept alive); waiting for the lock while holding the GIL could then deadlock two threads.
std::unique_lock<std::mutex> lock_model(PyModel& p) {
  py::gil_scoped_release nogil;
  return std::unique_lock<std::mutex>(p.mu);
}

enum class StepKind { Train, Test };

// One training (or evaluation) step without the GIL; returns (loss_sum, correct, n).
py::tuple run_step(PyModel& p, const py::object& batch, const py::object& next, StepKind kind) {
  const bool train = kind == StepKind::Train;
  if (!p.model->compiled())
    throw ValueError(cat("the model must be compiled before ", train ? "training" : "evaluation",
                         ": call model.compile(...)"));
  std::optional<nn::Batch> current;
  if (!batch.is_none()) current = batch_of(batch, *p.model, true);
  std::optional<nn::Batch> ahead = next_batch_of(next, *p.model, true);
  auto lk = lock_model(p);
  nn::BatchStats st;
  {
    py::gil_scoped_release nogil;
    const nn::Batch* c = current ? &*current : nullptr;
    const nn::Batch* n = ahead ? &*ahead : nullptr;
    if (p.replicas) st = train ? p.replicas->train_step(c, n) : p.replicas->test_step(c, n);
    else st = train ? p.model->train_step(c, n) : p.model->test_step(c, n);
    current.reset();  // the arrays, released without the GIL: their keep-alive takes it
    ahead.reset();
  }
  p.last_metrics = std::move(st.metrics);
  raise_core_warnings();
  return py::make_tuple(st.loss_sum, st.correct, st.n);
}

int slot_number(nn::StagingSlot s) { return s == nn::StagingSlot::First ? 0 : 1; }

// A flat buffer of the model (parameters or gradients) as NumPy: as held, or in Keras' layout.
py::array flat_buffer(PyModel& p, const Tensor& flat, bool keras_layout) {
  auto lk = lock_model(p);
  if (!keras_layout) return to_numpy(flat);
  const Tensor host = flat.device().is_cpu() ? flat : flat.to(Device::cpu());
  return to_numpy(p.model->param_layout().convert(host, flat.device(), Device::cpu()));
}

}  // namespace

void bind_nn(py::module_& m) {
  // nn::NonFiniteLoss -> hpcnn._core.NonFiniteLossError(ValueError) with the batch's mean loss as `.loss`.
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::object> non_finite;
  non_finite.call_once_and_store_result([&]() -> py::object {
    return py::exception<nn::NonFiniteLoss>(m, "NonFiniteLossError", PyExc_ValueError);
  });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const nn::NonFiniteLoss& e) {
      py::object type = non_finite.get_stored();
      py::object err = type(e.what());
      err.attr("loss") = e.loss;
      PyErr_SetObject(type.ptr(), err.ptr());
    }
  });
  m.def("learning_rate_schedule_value", [](py::dict config, long long step) {
    HPCNN_CHECK_ARG(step >= 0, "a schedule's step must be >= 0, got ", step);
    return nn::make_learning_rate_schedule(to_config(config, "schedule config"))->at(step);
  }, py::arg("config"), py::arg("step"),
     "The learning rate a schedule (config: class_name and Keras' arguments, as optimizers send it) gives the "
     "step taken after `step` steps: the C++ code a training step runs.");

  m.def("layer_output_shape", [](py::list layer_configs, std::vector<std::vector<long long>> input_shapes) {
    std::vector<LayerPtr> layers;
    for (auto c : layer_configs) layers.push_back(nn::make_layer(to_config(c, "layer config")));
    if (layers.empty()) throw ValueError("layer_output_shape: no layers");
    Shape shape = nn::node_output_shape(*layers[0], input_shapes);
    for (size_t i = 1; i < layers.size(); ++i) shape = nn::node_output_shape(*layers[i], {shape});
    return shape;
  }, py::arg("layers"), py::arg("input_shapes"),
     "The per-sample output shape of core layers (configs) in a chain, the first taking every shape in "
     "input_shapes (ValueError when they do not fit): a layer's output shape when called on symbolic tensors.");

  py::class_<PyModel>(m, "Model")
      .def(py::init([](std::vector<long long> input_shape, py::list layer_configs, uint64_t seed,
                       std::optional<std::vector<std::vector<int>>> inputs) {
             auto pm = std::make_unique<PyModel>();
             std::vector<LayerPtr> layers;
             for (auto c : layer_configs) {
               pm->layer_configs.push_back(to_config(c, "layer config"));
               layers.push_back(nn::make_layer(pm->layer_configs.back()));
             }
             pm->input_shape = input_shape;
             pm->node_inputs = inputs;
             pm->model = make_model(input_shape, std::move(layers), inputs, seed);
             pm->trainable.assign(static_cast<size_t>(pm->model->num_nodes()), true);
             return pm;
           }),
           py::arg("input_shape"), py::arg("layers"), py::arg("seed"), py::arg("inputs") = py::none(),
           "A model of `layers` (configs). inputs: per layer, the indices of the layers it reads (-1: the model's "
           "input; each earlier in the list; the last layer is the output); None: a chain (Sequential).")
      .def_property_readonly("node_inputs", [](PyModel& p) {
        std::vector<std::vector<int>> out;
        for (int i = 0; i < p.model->num_nodes(); ++i) out.push_back(p.model->graph().inputs(i));
        return out;
      }, "Per layer, the indices of the layers it reads (-1: the model's input).")
      .def_property("memory_reuse", [](PyModel& p) { return p.model->memory_reuse(); },
                    [](PyModel& p, bool on) {
                      auto lk = lock_model(p);
                      for (nn::Model* m : p.all()) m->set_memory_reuse(on);
                    },
                    "Whether a step's buffers share memory once nothing later reads them (default). False, for "
                    "tests: every buffer kept apart for the whole step; the results must be the same bits.")
      .def("memory_report", [](PyModel& p, long long batch_size) {
        auto lk = lock_model(p);
        nn::MemoryReport r = p.model->memory_report(batch_size);
        py::dict d;
        d["batch_size"] = r.batch;
        d["train"] = r.train;
        d["test"] = r.test;
        d["predict"] = r.predict;
        d["train_keep_all"] = r.train_keep_all;
        d["one_buffer_per_activation"] = r.one_buffer_per_activation;
        d["allocated"] = p.model->arena_bytes();
        return d;
      }, py::arg("batch_size"),
         "Bytes of a step's activations and gradients for batches of batch_size rows: the planned arena of each "
         "step kind (train, test, predict), for comparison the training step's buffers each kept for the whole step "
         "(train_keep_all: no reuse, memory_reuse=False) and the layout of one buffer per activation, and the arena "
         "allocated now.")
      .def_property_readonly("num_params", [](PyModel& p) { return p.model->num_params(); })
      .def_property_readonly("num_trainable_params", [](PyModel& p) { return p.model->num_trainable_params(); })
      .def("set_trainable", [](PyModel& p, const std::vector<bool>& per_layer) {
        auto lk = lock_model(p);
        for (nn::Model* m : p.all()) m->set_trainable(per_layer);
        p.trainable = per_layer;
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
      .def_property_readonly("step", [](PyModel& p) { return p.model->step(); },
                             "Training steps taken: with the seed, the key of dropout's masks.")
      .def_property_readonly("seed", [](PyModel& p) { return p.model->seed(); })
      .def("set_rng_state", [](PyModel& p, uint64_t seed, uint64_t step) {
        auto lk = lock_model(p);
        for (nn::Model* m : p.all()) m->set_rng_state(seed, step);
      }, py::arg("seed"), py::arg("step"),
         "Restores the random state (seed and step counter) of a saved or backed-up model: its next training "
         "steps then draw the dropout masks of an uninterrupted run.")
      .def("to", [](PyModel& p, const std::string& dev) {
        auto lk = lock_model(p);
        Device d = parse_device(dev);
        if (p.replicas && d != p.model->device())
          throw ValueError(cat("the model trains with a distribution strategy on ",
                               p.replicas->group().devices().size(), " replica(s) starting at ",
                               p.model->device().str(), ": its devices are the strategy's (create the model in "
                               "another strategy's scope to use other devices)"));
        py::gil_scoped_release nogil;
        p.model->to(d);
      })
      .def("compile", [](PyModel& p, py::dict opt, const std::string& loss, bool from_logits, float label_smoothing) {
        auto lk = lock_model(p);
        nn::Config cfg = to_config(opt, "optimizer config");
        std::unique_ptr<nn::Optimizer> o = nn::make_optimizer(cfg);
        const nn::LossSpec spec{nn::parse_loss(loss), from_logits, label_smoothing};
        p.undistribute();  // a strategy distributes the model again after compile (fresh optimizers)
        p.model->compile(std::move(o), spec);
        p.optimizer_config = cfg;
        p.loss = spec;
        p.metrics.clear();  // compile clears the model's metrics (set_metrics follows)
      }, py::arg("optimizer"), py::arg("loss"), py::arg("from_logits") = false, py::arg("label_smoothing") = 0.0f)
      .def("set_metrics", [](PyModel& p, const std::vector<std::tuple<std::string, int, float>>& metrics) {
        std::vector<nn::MetricSpec> specs;
        for (const auto& [name, k, threshold] : metrics) specs.push_back({nn::parse_metric(name), k, threshold});
        auto lk = lock_model(p);
        for (nn::Model* m : p.all()) m->set_metrics(specs);  // every replica: reduce_stats sums the same count
        p.metrics = specs;
        p.last_metrics.clear();
      }, py::arg("metrics"),
         "The metrics each train/test step computes on the outputs: (core name, k, threshold) each; their sums "
         "over the last step's rows (of every replica under a strategy) are last_metric_sums.")
      .def("set_class_weights", [](PyModel& p, const std::vector<float>& weights) {
        auto lk = lock_model(p);
        for (nn::Model* m : p.all()) m->set_class_weights(weights);
        p.class_weights = weights;
      }, py::arg("weights"), "Per-class loss weights indexed by the target's class ([]: none).")
      .def_property_readonly("last_metric_sums", [](PyModel& p) { return p.last_metrics; },
                             "The last train/test step's sum over its rows (of every replica under a strategy) of "
                             "each metric of set_metrics.")
      .def_property("learning_rate",
                    [](PyModel& p) {
                      auto lk = lock_model(p);
                      if (!p.model->optimizer()) throw ValueError("the model is not compiled");
                      return p.model->optimizer()->learning_rate();
                    },
                    [](PyModel& p, double lr) {
                      auto lk = lock_model(p);
                      if (!p.model->optimizer()) throw ValueError("the model is not compiled");
                      for (nn::Model* m : p.all()) m->optimizer()->set_learning_rate(lr);
                    },
                    "The learning rate of the next step: a schedule's value at `iterations`, or the fixed rate "
                    "(settable only without a schedule).")
      .def("set_learning_rate_schedule", [](PyModel& p, py::dict schedule) {
        nn::Config cfg = to_config(schedule, "schedule config");
        auto lk = lock_model(p);
        if (!p.model->optimizer()) throw ValueError("the model is not compiled");
        for (nn::Model* m : p.all()) m->optimizer()->set_schedule(nn::make_learning_rate_schedule(cfg));
      }, py::arg("schedule"), "Lets a schedule (class_name and Keras' arguments) drive the learning rate from the next "
         "step on, evaluated at `iterations`.")
      .def("optimizer_state", [](PyModel& p, bool keras_layout) {
        auto lk = lock_model(p);
        std::vector<nn::StateBuffer> state;
        {
          py::gil_scoped_release nogil;
          state = p.model->optimizer_state(keras_layout);
        }
        py::dict out;
        for (const nn::StateBuffer& s : state) out[py::str(s.name)] = to_numpy(s.value);
        return out;
      }, py::arg("keras_layout") = false,
         "Host copies of the optimizer's state buffers by name, in state_names order (Keras 3's names: Adam, AdamW: "
         "momentum, velocity; SGD with momentum: momentum; RMSprop: velocity, momentum (momentum > 0), "
         "average_gradient (centered)), each flat over the parameter buffer: in the layout of the model's device, or "
         "keras_layout=True in Keras' layout (what files hold). {} before the first step.")
      .def("set_optimizer_state", [](PyModel& p, py::dict buffers, long long iterations) {
        std::vector<nn::StateBuffer> state;
        for (auto [k, v] : buffers) {
          if (!py::isinstance<py::str>(k)) throw ValueError("optimizer state: buffer names must be strings");
          py::array a = py::array::ensure(v);
          if (!a || !a.dtype().is(py::dtype::of<float>()))
            throw ValueError(cat("optimizer state: buffer '", k.cast<std::string>(), "' must be a float32 array"));
          state.push_back({k.cast<std::string>(), borrow_array(as_f32(a), "optimizer state")});
        }
        auto lk = lock_model(p);
        py::gil_scoped_release nogil;
        // Every replica of this process (each rank restores the same file: a resumed data-parallel run).
        for (nn::Model* m : p.all()) m->set_optimizer_state(state, iterations);
      }, py::arg("buffers"), py::arg("iterations"),
         "Restores the optimizer: buffers {name: flat float32 array in Keras' layout} (all of state_names, or {} "
         "for a fresh state) and the step count. ValueError, nothing changed, when they do not fit.")
      .def_property_readonly("optimizer_state_names", [](PyModel& p) {
        if (!p.model->optimizer()) throw ValueError("the model is not compiled");
        return p.model->optimizer()->state_names();
      }, "The names of the optimizer's state buffers for its configuration (Adam: ['momentum', 'velocity'], "
         "SGD with momentum: ['momentum'], without: []).")
      .def_property_readonly("iterations", [](PyModel& p) {
        return p.model->optimizer() ? p.model->optimizer()->iterations : 0LL;
      })
      .def("train_step", [](PyModel& p, py::object batch, py::object next) {
        return run_step(p, batch, next, StepKind::Train);
      }, py::arg("batch"), py::arg("next") = py::none(),
         "One training step; returns (loss_sum, correct, n) (the compiled metrics' sums: last_metric_sums). batch: "
         "(x, y[, rows[, decode[, sample_weight[, first_row, global_rows]]]]) (first_row, global_rows: these rows' "
         "place in a global batch, for a rank's share), or None for the batch staged by the previous call's `next`. next: the following batch, staged now (on a GPU its upload "
         "overlaps this step's backward pass); an error staging it is raised by the call that takes it.")
      .def("test_step", [](PyModel& p, py::object batch, py::object next) {
        return run_step(p, batch, next, StepKind::Test);
      }, py::arg("batch"), py::arg("next") = py::none(),
         "Loss and accuracy without training: (loss_sum, correct, n); batch and next as for train_step.")
      .def("predict_step", [](PyModel& p, py::object batch, py::object next) {
        std::optional<nn::Batch> current;
        if (!batch.is_none()) current = batch_of(batch, *p.model, false);
        std::optional<nn::Batch> ahead = next_batch_of(next, *p.model, false);
        Tensor out;
        {
          auto lk = lock_model(p);
          py::gil_scoped_release nogil;
          const nn::Batch* c = current ? &*current : nullptr;
          const nn::Batch* n = ahead ? &*ahead : nullptr;
          out = p.replicas ? p.replicas->predict_step(c, n) : p.model->predict_step(c, n);
          current.reset();
          ahead.reset();
        }
        raise_core_warnings();
        return to_numpy(out);
      }, py::arg("batch"), py::arg("next") = py::none(),
         "Outputs for batch (x[, y[, rows[, decode]]]) (y is ignored), or None for the staged batch; stages next.")
      .def_property_readonly("has_staged", [](PyModel& p) {
        auto lk = lock_model(p);
        return p.replicas ? p.replicas->has_staged() : p.model->has_staged();
      }, "Whether a batch is staged (by the last step's `next`) and not yet taken.")
      .def("drop_staged", [](PyModel& p) {
        auto lk = lock_model(p);
        py::gil_scoped_release nogil;
        if (p.replicas) p.replicas->drop_staged();
        else p.model->drop_staged();
      }, "Drops a staged batch (and releases its arrays).")
      .def_property_readonly("staging_slots", [](PyModel& p) {
        auto lk = lock_model(p);
        const nn::BatchStager& s = p.model->stager();
        auto ahead = s.ahead_slot();
        return py::make_tuple(slot_number(s.last_slot()), ahead ? slot_number(*ahead) : -1);
      }, "(staging slot of the last step's batch, slot of the staged batch or -1): for tests")
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
        for (nn::Model* m : p.all()) m->set_weights(ts);
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
      // ---- data parallelism (hpcnn.distribute)
      .def("distribute", [](PyModel& p, std::shared_ptr<distribute::Group> group, long long bucket_bytes) {
        auto lk = lock_model(p);
        if (!p.model->compiled() || !p.optimizer_config)
          throw ValueError("distribute: the model must be compiled first");
        if (p.model->optimizer()->iterations != 0)
          throw ValueError("distribute: the model has trained since compile(); a strategy takes a model at "
                           "compile() (build and compile it inside strategy.scope())");
        py::gil_scoped_release nogil;
        p.undistribute();
        p.model->drop_staged();
        const std::vector<Device>& devices = group->devices();
        p.model->to(devices[0]);
        for (size_t i = 1; i < devices.size(); ++i) {
          std::vector<LayerPtr> layers;
          for (const nn::Config& c : p.layer_configs) layers.push_back(nn::make_layer(c));
          auto m = make_model(p.input_shape, std::move(layers), p.node_inputs, p.model->seed());
          m->set_memory_reuse(p.model->memory_reuse());
          m->set_rng_state(p.model->seed(), p.model->step());
          m->to(devices[i]);
          m->compile(nn::make_optimizer(*p.optimizer_config), p.loss);
          m->set_metrics(p.metrics);
          m->set_class_weights(p.class_weights);
          m->set_trainable(p.trainable);
          p.others.push_back(std::move(m));
        }
        p.replicas = std::make_unique<distribute::ReplicaSet>(group, p.all(), bucket_bytes);
        p.replicas->broadcast_parameters();  // the same initial weights everywhere: replica 0 of rank 0's
      }, py::arg("group"), py::arg("bucket_bytes"),
         "Trains this (compiled) model data-parallel with `group`: makes this process's other replicas (same "
         "layers, seed and optimizer, on the group's devices), broadcasts replica 0 of rank 0's weights, and "
         "sums gradients in buckets of bucket_bytes (0: one bucket).")
      .def("undistribute", [](PyModel& p) {
        auto lk = lock_model(p);
        py::gil_scoped_release nogil;
        p.undistribute();
      }, "Back to one replica (this process's replica 0 keeps its weights and device).")
      .def("sync_replicas", [](PyModel& p) {
        auto lk = lock_model(p);
        if (!p.replicas) return;
        py::gil_scoped_release nogil;
        p.replicas->broadcast_parameters();
      }, "Replica 0 of rank 0's weights to every replica (collective: every rank calls it).")
      .def_property_readonly("distributed", [](PyModel& p) { return p.replicas != nullptr; })
      .def_property_readonly("replica_devices", [](PyModel& p) {
        std::vector<std::string> out;
        for (nn::Model* m : p.all()) out.push_back(m->device().str());
        return out;
      }, "The devices of this process's replicas (just the model's without a strategy).")
      .def("replica_weights", [](PyModel& p, int i) {
        auto lk = lock_model(p);
        std::vector<nn::Model*> ms = p.all();
        if (i < 0 || i >= static_cast<int>(ms.size())) throw ValueError(cat("no replica ", i));
        py::list out;
        for (auto& t : ms[static_cast<size_t>(i)]->get_weights()) out.append(to_numpy(t));
        return out;
      }, py::arg("replica"), "get_weights() of this process's replica `replica` (for tests).")
      .def_property_readonly("step_collectives", [](PyModel& p) {
        auto lk = lock_model(p);
        if (!p.replicas) return py::tuple(py::make_tuple(0, 0, 0));
        const distribute::GradientReducer& r = p.replicas->reducer(0);
        return py::tuple(
            py::make_tuple(r.step_collectives(), r.step_bytes(), static_cast<long long>(r.buckets().size())));
      }, "(collectives, bytes, buckets) of the gradient sums of the last training step (0s without a strategy); "
         "the statistics' small host sum is not counted.")
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
