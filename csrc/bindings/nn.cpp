// The model as Python sees it: hpcnn._core.Model, a distribute::ReplicatedModel built from one
// config dict per Keras layer and, for a graph, each layer's inputs (lowered to core layers by
// nn/lowering.h). The binding converts values, takes the model's lock, releases the GIL around
// every call that computes and maps errors; the model does the rest.
#include <pybind11/stl.h>

#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "distribute/replicated_model.h"
#include "nn/config.h"
#include "nn/factory.h"
#include "nn/lowering.h"
#include "nn/model.h"

namespace hpcnn::bindings {

namespace {

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

// The model (its replicas under a strategy, distribute/replicated_model.h) plus a lock: calls run
// without the GIL, so two Python threads must not interleave.
struct PyModel {
  std::unique_ptr<distribute::ReplicatedModel> rm;
  std::mutex mu;
  // The Python batch the core staged at the last step (its `next`), None when nothing is staged:
  // a step given that very object takes what the core staged (the core holds the staging state;
  // Python passes each batch and the one after it, and keeps no record of what is staged).
  py::object staged_source = py::none();

  nn::Model& model() { return rm->model(); }  // replica 0: the one Python reads weights from
};

// Per layer (Keras position): (name, shape, trainable) of each weight.
py::list weight_tuples(const std::vector<nn::ParamSpec>& specs) {
  py::list out;
  for (const nn::ParamSpec& s : specs) out.append(py::make_tuple(s.name, s.shape, s.trainable));
  return out;
}

std::vector<nn::Config> layer_configs_of(const py::list& layers) {
  std::vector<nn::Config> out;
  for (auto c : layers) out.push_back(to_config(c, "layer config"));
  return out;
}

// Takes the model's lock WITHOUT holding the GIL. A call in progress holds the lock with the GIL
// released and may need the GIL itself (dropping a staged batch releases the NumPy arrays it
// kept alive); waiting for the lock while holding the GIL could then deadlock two threads.
std::unique_lock<std::mutex> lock_model(PyModel& p) {
  py::gil_scoped_release nogil;
  return std::unique_lock<std::mutex>(p.mu);
}

enum class StepKind { Train, Test, Predict };

// One step's batch and the next one, as the core takes them (called with the model's lock and the
// GIL held). `batch` is the batch the core staged at the last step when it is that step's `next`
// (or None): then `current` stays empty and the core takes what it staged. Any other batch is
// converted, and a batch staged for another one is dropped first.
struct StepBatches {
  std::optional<nn::Batch> current, ahead;
  bool drop_staged = false;
};

StepBatches step_batches(PyModel& p, const py::object& batch, const py::object& next, bool with_targets) {
  StepBatches b;
  const bool staged = p.rm->has_staged();
  const bool takes_staged = batch.is_none() || (staged && batch.is(p.staged_source));
  p.staged_source = py::none();  // until this step has staged `next`
  if (!takes_staged) {
    b.current = batch_of(batch, p.model(), with_targets);
    b.drop_staged = staged;
  }
  b.ahead = next_batch_of(next, p.model(), with_targets);
  return b;
}

// One step without the GIL: train_step, test_step or predict_step of the model (of its replicas).
template <typename Result>
Result run_staged(PyModel& p, const py::object& batch, const py::object& next, StepKind kind) {
  auto lk = lock_model(p);
  StepBatches b = step_batches(p, batch, next, kind != StepKind::Predict);
  Result out;
  {
    py::gil_scoped_release nogil;
    if (b.drop_staged) p.rm->drop_staged();
    const nn::Batch* c = b.current ? &*b.current : nullptr;
    const nn::Batch* n = b.ahead ? &*b.ahead : nullptr;
    if constexpr (std::is_same_v<Result, Tensor>) out = p.rm->predict_step(c, n);
    else out = kind == StepKind::Train ? p.rm->train_step(c, n) : p.rm->test_step(c, n);
    b.current.reset();  // the arrays, released without the GIL: their keep-alive takes it
    b.ahead.reset();
  }
  if (!next.is_none()) p.staged_source = next;
  return out;
}

// One training (or evaluation) step; returns (loss_sum, correct, n, metric_sums): everything the
// loop adds to its running sums comes back from the one call.
py::tuple run_step(PyModel& p, const py::object& batch, const py::object& next, StepKind kind) {
  if (!p.model().compiled())
    throw ValueError(cat("the model must be compiled before ", kind == StepKind::Train ? "training" : "evaluation",
                         ": call model.compile(...)"));
  nn::BatchStats st = run_staged<nn::BatchStats>(p, batch, next, kind);
  raise_core_warnings();
  return py::make_tuple(st.loss_sum, st.correct, st.n, py::cast(st.metrics));
}

int slot_number(nn::StagingSlot s) { return s == nn::StagingSlot::First ? 0 : 1; }

// A flat buffer of the model (parameters or gradients) as NumPy: packed (one value per parameter,
// nn/param_layout.h) in the device's layout or Keras', or as held (padded: a live view on the CPU).
py::array flat_buffer(PyModel& p, const Tensor& flat, bool keras_layout, bool padded) {
  auto lk = lock_model(p);
  HPCNN_CHECK_ARG(!(padded && keras_layout), "keras_layout=True gives the packed form; padded=True the buffer as held");
  if (padded) return to_numpy(flat);
  const Tensor host = flat.device().is_cpu() ? flat : flat.to(Device::cpu());
  return to_numpy(p.model().param_layout().pack(host, flat.device(), keras_layout ? Device::cpu() : flat.device()));
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

  m.def("layer_output_shape", [](py::dict layer, std::vector<std::vector<long long>> input_shapes) {
    return nn::layer_output_shape(to_config(layer, "layer config"), input_shapes);
  }, py::arg("layer"), py::arg("input_shapes"),
     "The per-sample output shape of one Keras layer (its config, as Model takes them) whose inputs have these "
     "per-sample shapes (a merge layer takes them all; ValueError when they do not fit): a layer's output shape "
     "when called on symbolic tensors.");
  m.def("layer_weight_shapes", [](py::dict layer, std::vector<std::vector<long long>> input_shapes) {
    return weight_tuples(nn::layer_weights(to_config(layer, "layer config"), input_shapes));
  }, py::arg("layer"), py::arg("input_shapes"),
     "The weights of one Keras layer (its config) on inputs of these per-sample shapes: (name, shape, trainable) "
     "each, in get_weights' order; trainable False for a weight no optimizer steps (BatchNormalization's "
     "moving_mean and moving_variance).");

  py::class_<PyModel>(m, "Model")
      .def(py::init([](std::vector<long long> input_shape, py::list layers, uint64_t seed,
                       std::optional<std::vector<std::vector<int>>> inputs) {
             auto pm = std::make_unique<PyModel>();
             pm->rm = std::make_unique<distribute::ReplicatedModel>(input_shape, layer_configs_of(layers),
                                                                     std::move(inputs), seed);
             return pm;
           }),
           py::arg("input_shape"), py::arg("layers"), py::arg("seed"), py::arg("inputs") = py::none(),
           "A model of `layers`: one config per Keras layer (its position; class_name the Keras class), lowered to "
           "core layers by the core (nn/lowering.h: fused ReLUs, the softmax split, BatchNormalization+ReLU). "
           "inputs: per layer, the indices of the layers it reads (-1: the model's input; each earlier in the "
           "list; the last layer is the output); None: a chain (Sequential).")
      .def_property_readonly("node_inputs", [](PyModel& p) {
        std::vector<std::vector<int>> out;
        for (int i = 0; i < p.model().num_nodes(); ++i) out.push_back(p.model().graph().inputs(i));
        return out;
      }, "Per core layer, the indices of the core layers it reads (-1: the model's input).")
      .def_property_readonly("core_layers", [](PyModel& p) { return p.rm->lowering().names; },
                             "Per layer, the core layers it was lowered to, in node order ('Conv2D+relu', "
                             "['Dense', 'Activation:softmax'], 'BatchNormalization+relu', 'Identity', ...).")
      .def_property_readonly("layer_output_shapes", [](PyModel& p) { return p.rm->layer_output_shapes(); },
                             "Per layer, its per-sample output shape.")
      .def_property_readonly("layer_weights", [](PyModel& p) {
        py::list out;
        for (const auto& specs : p.rm->layer_weights()) out.append(weight_tuples(specs));
        return out;
      }, "Per layer, (name, shape, trainable) of each of its weights in get_weights' order; trainable False: a "
         "weight no optimizer steps (BatchNormalization's moving statistics), whatever the layer's flag.")
      .def_property_readonly("layer_param_counts", [](PyModel& p) {
        std::vector<long long> out;
        for (const auto& specs : p.rm->layer_weights()) out.push_back(nn::param_count(specs));
        return out;
      }, "Per layer, its number of weights (trainable and not).")
      .def_property("memory_reuse", [](PyModel& p) { return p.model().memory_reuse(); },
                    [](PyModel& p, bool on) {
                      auto lk = lock_model(p);
                      p.rm->set_memory_reuse(on);
                    },
                    "Whether a step's buffers share memory once nothing later reads them (default). False, for "
                    "tests: every buffer kept apart for the whole step; the results must be the same bits.")
      .def("inference_chunk_rows", [](PyModel& p, long long batch_size) {
        auto lk = lock_model(p);
        return p.model().inference_chunk_rows(batch_size);
      }, py::arg("batch_size"),
         "How many rows of a batch of batch_size an inference step (evaluate, predict) runs through all the layers "
         "at a time: on the CPU, chunks whose activations stay in the caches (batch_size on a GPU).")
      .def("inference_chunks_split", [](PyModel& p, long long batch_size) {
        auto lk = lock_model(p);
        return p.model().inference_chunks_split(batch_size);
      }, py::arg("batch_size"),
         "How many of the graph's leading nodes an inference step of batch_size rows on the CPU runs in chunks "
         "(the rest on the whole batch; every node where it equals the number of nodes).")
      .def("inference_chunks_side_by_side", [](PyModel& p, long long batch_size) {
        auto lk = lock_model(p);
        return p.model().inference_chunks(batch_size).side_by_side;
      }, py::arg("batch_size"),
         "Whether an inference step of batch_size rows on the CPU runs its chunks side by side, one per thread "
         "(each op on its thread alone), after the first chunk; else one after another, each op over the threads.")
      .def("set_inference_chunk_rows", [](PyModel& p, long long rows) {
        auto lk = lock_model(p);
        p.rm->set_inference_chunk_rows(rows);
      }, py::arg("rows"),
         "rows > 0: inference steps on the CPU run chunks of that many rows (tests, benchmarks); 0: chosen from "
         "the caches (the default).")
      .def("memory_report", [](PyModel& p, long long batch_size) {
        auto lk = lock_model(p);
        nn::MemoryReport r = p.model().memory_report(batch_size);
        py::dict d;
        d["batch_size"] = r.batch;
        d["train"] = r.train;
        d["test"] = r.test;
        d["predict"] = r.predict;
        d["train_keep_all"] = r.train_keep_all;
        d["one_buffer_per_activation"] = r.one_buffer_per_activation;
        d["statistics"] = r.statistics;
        d["allocated"] = p.model().arena_bytes();
        d["predict_folded"] = r.predict_folded;
        d["predict_capped"] = r.predict_capped;
        d["predict_residual_blocks"] = r.predict_residual_blocks;
        d["train_residual_blocks"] = r.train_residual_blocks;
        d["train_folded"] = r.train_folded;
        return d;
      }, py::arg("batch_size"),
         "Bytes of a step's activations and gradients for batches of batch_size rows: the planned arena of each "
         "step kind (train, test, predict), for comparison the training step's buffers each kept for the whole step "
         "(train_keep_all: no reuse, memory_reuse=False) and the layout of one buffer per activation, the arena "
         "allocated now, the bytes of the statistics a training or test step copies back (statistics), and what the "
         "predict plan merges: BatchNormalizations folded into convolutions (predict_folded), the ReLU6s after them "
         "(predict_capped), residual blocks whose Add and ReLU the last convolution computes (predict_residual_blocks);"
         " the training plan's block tails its BatchNormalization computes (train_residual_blocks), its frozen folds "
         "(train_folded).")
      .def_property_readonly("num_params", [](PyModel& p) { return p.model().num_params(); })
      .def_property_readonly("num_trainable_params", [](PyModel& p) { return p.model().num_trainable_params(); })
      .def("set_trainable", [](PyModel& p, const std::vector<bool>& per_layer) {
        auto lk = lock_model(p);
        p.rm->set_trainable(per_layer);
      }, py::arg("per_layer"), "Which layers (one flag per Keras layer) the optimizer updates (Python calls it at "
         "compile).")
      .def_property_readonly("output_shapes", [](PyModel& p) { return p.model().output_shapes(); },
                             "Per core layer (node_inputs' nodes), its per-sample output shape (the last: the "
                             "model's output).")
      .def_property_readonly("weight_shapes", [](PyModel& p) {
        py::list out;
        for (const auto& specs : p.rm->layer_weights()) {
          py::list l;
          for (const nn::ParamSpec& s : specs) l.append(py::make_tuple(s.name, s.shape));
          out.append(l);
        }
        return out;
      }, "Per layer, (name, shape) of each of its weights in get_weights' order.")
      .def_property_readonly("device", [](PyModel& p) { return p.model().device().str(); })
      .def_property_readonly("step", [](PyModel& p) { return p.model().step(); },
                             "Training steps taken: with the seed, the key of dropout's masks.")
      .def_property_readonly("seed", [](PyModel& p) { return p.model().seed(); })
      .def("set_rng_state", [](PyModel& p, uint64_t seed, uint64_t step) {
        auto lk = lock_model(p);
        p.rm->set_rng_state(seed, step);
      }, py::arg("seed"), py::arg("step"),
         "Restores the random state (seed and step counter) of a saved or backed-up model: its next training "
         "steps then draw the dropout masks of an uninterrupted run.")
      .def("to", [](PyModel& p, const std::string& dev) {
        auto lk = lock_model(p);
        Device d = parse_device(dev);
        py::gil_scoped_release nogil;
        p.rm->to(d);
      })
      .def("compile", [](PyModel& p, py::dict opt, const std::string& loss, bool from_logits, float label_smoothing) {
        auto lk = lock_model(p);
        nn::Config cfg = to_config(opt, "optimizer config");
        const nn::LossSpec spec{nn::parse_loss(loss), from_logits, label_smoothing};
        p.rm->compile(cfg, spec);  // a strategy distributes the model again after compile (fresh optimizers)
      }, py::arg("optimizer"), py::arg("loss"), py::arg("from_logits") = false, py::arg("label_smoothing") = 0.0f)
      .def("set_metrics", [](PyModel& p, const std::vector<std::tuple<std::string, int, float>>& metrics) {
        std::vector<nn::MetricSpec> specs;
        for (const auto& [name, k, threshold] : metrics) specs.push_back({nn::parse_metric(name), k, threshold});
        auto lk = lock_model(p);
        p.rm->set_metrics(specs);
      }, py::arg("metrics"),
         "The metrics each train/test step computes on the outputs: (core name, k, threshold) each; their sums "
         "over the step's rows (of every replica under a strategy) are the step's fourth result.")
      .def("set_class_weights", [](PyModel& p, const std::vector<float>& weights) {
        auto lk = lock_model(p);
        p.rm->set_class_weights(weights);
      }, py::arg("weights"), "Per-class loss weights indexed by the target's class ([]: none).")
      .def_property("learning_rate",
                    [](PyModel& p) {
                      auto lk = lock_model(p);
                      return p.rm->learning_rate();
                    },
                    [](PyModel& p, double lr) {
                      auto lk = lock_model(p);
                      p.rm->set_learning_rate(lr);
                    },
                    "The learning rate of the next step: a schedule's value at `iterations`, or the fixed rate "
                    "(settable only without a schedule).")
      .def("set_learning_rate_schedule", [](PyModel& p, py::dict schedule) {
        nn::Config cfg = to_config(schedule, "schedule config");
        auto lk = lock_model(p);
        p.rm->set_learning_rate_schedule(cfg);
      }, py::arg("schedule"), "Lets a schedule (class_name and Keras' arguments) drive the learning rate from the next "
         "step on, evaluated at `iterations`.")
      .def("optimizer_state", [](PyModel& p, bool keras_layout) {
        auto lk = lock_model(p);
        std::vector<nn::StateBuffer> state;
        {
          py::gil_scoped_release nogil;
          state = p.model().optimizer_state(keras_layout);
        }
        py::dict out;
        for (const nn::StateBuffer& s : state) out[py::str(s.name)] = to_numpy(s.value);
        return out;
      }, py::arg("keras_layout") = false,
         "Host copies of the optimizer's state buffers by name, in state_names order (Keras 3's names: Adam, AdamW: "
         "momentum, velocity; SGD with momentum: momentum; RMSprop: velocity, momentum (momentum > 0), "
         "average_gradient (centered)), each flat and packed like parameter_buffer() (one value per parameter): in "
         "the layout of the model's device, or keras_layout=True in Keras' layout (what files hold). {} before the "
         "first step.")
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
        p.rm->set_optimizer_state(state, iterations);
      }, py::arg("buffers"), py::arg("iterations"),
         "Restores the optimizer: buffers {name: flat float32 array in Keras' layout} (all of state_names, or {} "
         "for a fresh state) and the step count. ValueError, nothing changed, when they do not fit.")
      .def_property_readonly("optimizer_state_names", [](PyModel& p) {
        if (!p.model().optimizer()) throw ValueError("the model is not compiled");
        return p.model().optimizer()->state_names();
      }, "The names of the optimizer's state buffers for its configuration (Adam: ['momentum', 'velocity'], "
         "SGD with momentum: ['momentum'], without: []).")
      .def_property_readonly("iterations", [](PyModel& p) {
        return p.model().optimizer() ? p.model().optimizer()->iterations : 0LL;
      })
      .def("train_step", [](PyModel& p, py::object batch, py::object next) {
        return run_step(p, batch, next, StepKind::Train);
      }, py::arg("batch"), py::arg("next") = py::none(),
         "One training step; returns (loss_sum, correct, n, metric_sums): metric_sums is each set_metrics metric's "
         "sum over the step's rows (of every replica under a strategy), in set_metrics' order. batch: "
         "(x, y[, rows[, decode[, sample_weight[, first_row, global_rows]]]]) (first_row, global_rows: these rows' "
         "place in a global batch, for a rank's share). next: the following batch, staged now (on a GPU its upload "
         "overlaps this step's backward pass); an error staging it is raised by the call that takes it. The core "
         "keeps what it staged: the call given that same `next` object as its batch (or None) takes it, any other "
         "batch drops it.")
      .def("test_step", [](PyModel& p, py::object batch, py::object next) {
        return run_step(p, batch, next, StepKind::Test);
      }, py::arg("batch"), py::arg("next") = py::none(),
         "Loss, accuracy and metric sums without training: (loss_sum, correct, n, metric_sums); batch and next "
         "as for train_step.")
      .def("predict_step", [](PyModel& p, py::object batch, py::object next) {
        Tensor out = run_staged<Tensor>(p, batch, next, StepKind::Predict);
        raise_core_warnings();
        return to_numpy(out);
      }, py::arg("batch"), py::arg("next") = py::none(),
         "Outputs for batch (x[, y[, rows[, decode]]]) (y is ignored); stages next. batch as for train_step.")
      .def("call_training", [](PyModel& p, py::object batch) {
        Tensor out;
        {
          auto lk = lock_model(p);
          std::optional<nn::Batch> b = batch_of(batch, p.model(), false);
          p.staged_source = py::none();  // a batch staged ahead is dropped
          {
            py::gil_scoped_release nogil;
            if (p.rm->has_staged()) p.rm->drop_staged();
            out = p.rm->call_training(*b);
            b.reset();  // the arrays, released without the GIL: their keep-alive takes it
          }
        }
        raise_core_warnings();
        return to_numpy(out);
      }, py::arg("batch"),
         "Keras' model(x, training=True): the outputs of a forward pass in training mode (dropout drawn, "
         "BatchNormalization on the batch's statistics, updating its moving statistics), with no loss, backward "
         "pass or optimizer step; the model need not be compiled. Dropout draws its own stream (a call counter): "
         "two calls draw different masks, fit's steps are unchanged. batch: (x,) as for predict_step. Drops a "
         "batch staged ahead.")
      .def_property_readonly("calls", [](PyModel& p) {
        auto lk = lock_model(p);
        return p.model().calls();
      }, "How many call_training calls the model has made (their random streams' counter).")
      .def_property_readonly("has_staged", [](PyModel& p) {
        auto lk = lock_model(p);
        return p.rm->has_staged();
      }, "Whether a batch is staged (by the last step's `next`) and not yet taken.")
      .def("drop_staged", [](PyModel& p) {
        auto lk = lock_model(p);
        p.staged_source = py::none();
        py::gil_scoped_release nogil;
        p.rm->drop_staged();
      }, "Drops a staged batch (and releases its arrays): a loop left early.")
      .def_property_readonly("staging_slots", [](PyModel& p) {
        auto lk = lock_model(p);
        const nn::BatchStager& s = p.model().stager();
        auto ahead = s.ahead_slot();
        return py::make_tuple(slot_number(s.last_slot()), ahead ? slot_number(*ahead) : -1);
      }, "(staging slot of the last step's batch, slot of the staged batch or -1): for tests")
      .def("get_weights", [](PyModel& p) {
        auto lk = lock_model(p);
        py::list out;
        for (auto& t : p.model().get_weights()) out.append(to_numpy(t));
        return out;
      })
      .def("set_weights", [](PyModel& p, py::list ws) {
        std::vector<Tensor> ts;
        for (auto w : ws) ts.push_back(borrow_array(as_f32(w), "weight"));
        auto lk = lock_model(p);
        p.rm->set_weights(ts);
      })
      .def("get_layer_weights", [](PyModel& p, int position) {
        auto lk = lock_model(p);
        std::vector<Tensor> ws;
        {
          py::gil_scoped_release nogil;
          ws = p.rm->get_layer_weights(position);
        }
        py::list out;
        for (auto& t : ws) out.append(to_numpy(t));
        return out;
      }, py::arg("position"),
         "One layer's weights (its position: the index of its config), host copies in Keras' order and layouts, "
         "wherever the model lives: get_weights() for one layer.")
      .def("set_layer_weights", [](PyModel& p, int position, py::list ws) {
        std::vector<Tensor> ts;
        for (auto w : ws) ts.push_back(borrow_array(as_f32(w), "weight"));
        auto lk = lock_model(p);
        py::gil_scoped_release nogil;
        p.rm->set_layer_weights(position, ts);
      }, py::arg("position"), py::arg("weights"),
         "Replaces one layer's weights (Keras' order and layouts) on every replica of this process, on the "
         "model's device. ValueError naming the layer and the expected shapes, and nothing changed, on a count "
         "or shape mismatch.")
      // ---- the flat buffers, in the layout of the model's device (nn/param_layout.h)
      .def("parameter_buffer", [](PyModel& p, bool keras_layout, bool padded) {
        return flat_buffer(p, p.model().parameter_buffer(), keras_layout, padded);
      }, py::arg("keras_layout") = false, py::arg("padded") = false,
         "A copy of the parameters, packed (one value per parameter: the trainable arrays, then the others, "
         "flattened) in the layout of the model's device: conv kernels are (kh, kw, in, out) on the CPU but "
         "(out, kh, kw, in) on a GPU. keras_layout=True: every kernel in Keras' layout (comparable across "
         "devices). padded=True: the buffer as held, every array at param_offsets with zero padding between "
         "them (a live view on the CPU, a copy from a GPU).")
      .def("gradient_buffer", [](PyModel& p, bool keras_layout, bool padded) {
        return flat_buffer(p, p.model().gradient_buffer(), keras_layout, padded);
      }, py::arg("keras_layout") = false, py::arg("padded") = false,
         "The gradients of the last training step, aligned with parameter_buffer(keras_layout, padded) element for "
         "element (packed in the device's layout unless keras_layout=True; padded=True: as held, live on the CPU).")
      .def_property_readonly("param_offsets", [](PyModel& p) {
        const nn::ParamLayout& l = p.model().param_layout();
        std::vector<long long> out;
        for (size_t k = 0; k < l.size(); ++k) out.push_back(l.offset(k));
        return out;
      }, "Per weight array (get_weights' order), its offset in floats in the parameter buffer as held "
         "(parameter_buffer(padded=True)): each a multiple of 64 floats (256 bytes).")
      .def_property_readonly("param_buffer_size", [](PyModel& p) { return p.model().param_layout().numel(); },
                             "Floats of the parameter buffer as held: num_params plus the padding between arrays.")
      // ---- data parallelism (hpcnn.distribute)
      .def("distribute", [](PyModel& p, std::shared_ptr<distribute::Group> group, long long bucket_bytes) {
        auto lk = lock_model(p);
        py::gil_scoped_release nogil;
        p.rm->distribute(std::move(group), bucket_bytes);
      }, py::arg("group"), py::arg("bucket_bytes"),
         "Trains this (compiled) model data-parallel with `group`: makes this process's other replicas (same "
         "layers, seed and optimizer, on the group's devices), broadcasts replica 0 of rank 0's weights, and "
         "sums gradients in buckets of bucket_bytes (0: one bucket).")
      .def("undistribute", [](PyModel& p) {
        auto lk = lock_model(p);
        py::gil_scoped_release nogil;
        p.rm->undistribute();
      }, "Back to one replica (this process's replica 0 keeps its weights and device).")
      .def("sync_replicas", [](PyModel& p) {
        auto lk = lock_model(p);
        py::gil_scoped_release nogil;
        p.rm->sync_replicas();
      }, "Replica 0 of rank 0's weights to every replica (collective: every rank calls it).")
      .def_property_readonly("distributed", [](PyModel& p) { return p.rm->replica_set() != nullptr; })
      .def_property_readonly("replica_devices", [](PyModel& p) {
        std::vector<std::string> out;
        for (nn::Model* m : p.rm->replicas()) out.push_back(m->device().str());
        return out;
      }, "The devices of this process's replicas (just the model's without a strategy).")
      .def("replica_weights", [](PyModel& p, int i) {
        auto lk = lock_model(p);
        std::vector<nn::Model*> ms = p.rm->replicas();
        if (i < 0 || i >= static_cast<int>(ms.size())) throw ValueError(cat("no replica ", i));
        py::list out;
        for (auto& t : ms[static_cast<size_t>(i)]->get_weights()) out.append(to_numpy(t));
        return out;
      }, py::arg("replica"), "get_weights() of this process's replica `replica` (for tests).")
      .def_property_readonly("step_collectives", [](PyModel& p) {
        auto lk = lock_model(p);
        if (!p.rm->replica_set()) return py::tuple(py::make_tuple(0, 0, 0));
        const distribute::GradientReducer& r = p.rm->replica_set()->reducer(0);
        return py::tuple(
            py::make_tuple(r.step_collectives(), r.step_bytes(), static_cast<long long>(r.buckets().size())));
      }, "(collectives, bytes, buckets) of the gradient sums of the last training step (0s without a strategy); "
         "the statistics' small host sum is not counted.")
      .def("relayout_buffer", [](PyModel& p, py::array_t<float, py::array::c_style | py::array::forcecast> flat,
                                 const std::string& from_device, const std::string& to_device) {
        Tensor host = borrow_array(flat, "buffer");
        Device from = parse_device(from_device), to = parse_device(to_device);
        auto lk = lock_model(p);
        const nn::ParamLayout& l = p.model().param_layout();
        return to_numpy(l.pack(l.unpack(host.reshape({host.numel()}), from, from, "relayout_buffer"), from, to));
      }, py::arg("buffer"), py::arg("from_device"), py::arg("to_device"),
         "A host copy of `buffer` (flat and packed, aligned with parameter_buffer(): parameters, gradients, "
         "optimizer moments) converted from the layout the parameters have on from_device to the one on "
         "to_device: the conversion to() applies. A host computation: needs no GPU (for tests and tools).");
}

}  // namespace hpcnn::bindings
