// The operators of a training step's loss and update and of the data path on NumPy arrays, in
// hpcnn._core.ops beside the layers' (bindings/ops.cpp, whose conventions hold here: `device`,
// `repeat`): the losses, per-row weights and metrics, the optimizer updates and the sums over a
// model's variables (segment tables), the FMA peak, the uint8 decode and the augmentation.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "diagnostics/peak_flops.h"
#include "nn/config.h"
#include "nn/factory.h"
#include "nn/loss.h"
#include "ops/ops.h"

namespace hpcnn::bindings {

namespace {

// A target for the loss: float one-hot rows or int32 class indices.
Tensor target_on(const py::handle& obj, Device d) {
  py::array a = py::array::ensure(obj);
  if (!a) throw ValueError("target: not an array");
  if (a.dtype().kind() == 'f') return f32_on(a, d, "target");
  auto idx = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(a);
  Tensor t = borrow_array(idx, "target").reshape({static_cast<long long>(idx.size())});
  return d.is_cpu() ? t : t.to(d);
}

// Variables of a flat buffer of n elements for the segment-table ops: `sizes` (element counts in
// order, summing to at most n; None: one variable of n), and optional per-variable lists `decay`
// (booleans), `l1`, `l2` (numbers).
std::vector<VariableSpan> spans_of(long long n, const py::object& sizes, const py::object& decay, const py::object& l1,
                                   const py::object& l2) {
  std::vector<long long> counts = sizes.is_none() ? std::vector<long long>{n} : sizes.cast<std::vector<long long>>();
  auto per_variable = [&](const py::object& o, const char* what) {
    std::vector<double> v = o.is_none() ? std::vector<double>() : o.cast<std::vector<double>>();
    if (!o.is_none() && v.size() != counts.size())
      throw ValueError(cat(what, " has ", v.size(), " values for ", counts.size(), " variables"));
    return v;
  };
  const std::vector<double> dec = per_variable(decay, "decay"), a = per_variable(l1, "l1"), b = per_variable(l2, "l2");
  std::vector<VariableSpan> out;
  long long at = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] < 0 || counts[k] > n - at) throw ValueError(cat("sizes: the variables do not fit in ", n, " elements"));
    VariableSpan s;
    s.begin = at;
    s.end = at + counts[k];
    s.decay = dec.empty() || dec[k] != 0;
    s.l1 = a.empty() ? 0.f : static_cast<float>(a[k]);
    s.l2 = b.empty() ? 0.f : static_cast<float>(b[k]);
    out.push_back(s);
    at = s.end;
  }
  return out;
}

ops::UpdateOptions update_options(float lr, float weight_decay, float clipvalue) {
  ops::UpdateOptions o;
  o.decay = lr * weight_decay;
  o.clipvalue = clipvalue;
  return o;
}

}  // namespace

void bind_step_ops(py::module_& m) {
  m.def("softmax_cross_entropy", [](py::object logits, py::object target, float grad_scale, std::string device,
                                    int repeat, py::object row_weights, float label_smoothing) {
    Device d = resolve_device(device);
    Tensor L = f32_on(logits, d, "logits");
    Tensor T = target_on(target, d);
    Tensor W;
    if (!row_weights.is_none()) W = f32_on(row_weights, d, "row_weights");
    Tensor G = Tensor::empty(L.shape(), DType::F32, d);
    Tensor S = Tensor::zeros({4}, DType::F32, d);  // 2 doubles
    run_repeat(repeat, [&] {
      ops::softmax_xent(L, T, &G, grad_scale, reinterpret_cast<double*>(S.raw()), W.defined() ? &W : nullptr,
                        label_smoothing);
    });
    Tensor Sh = S.device().is_cpu() ? S : S.to(Device::cpu());
    const double* s = reinterpret_cast<const double*>(Sh.raw());
    return py::make_tuple(s[0] / repeat, s[1] / repeat, to_numpy(G));  // stats accumulate over repeats
  }, py::arg("logits"), py::arg("target"), py::arg("grad_scale") = 1.0f, py::arg("device") = "cpu",
     py::arg("repeat") = 1, py::arg("row_weights") = py::none(), py::arg("label_smoothing") = 0.0f,
     "Returns (loss_sum, correct, dlogits); row_weights (N,) weigh each row's loss and gradient.");

  m.def("row_loss", [](py::object pred, py::object target, std::string kind, bool from_logits, float label_smoothing,
                       py::object row_weights, float grad_scale, std::string device) {
    Device d = resolve_device(device);
    const std::optional<RowLossParams> p = nn::row_loss_params(nn::parse_loss(kind), from_logits, label_smoothing);
    if (!p)
      throw ValueError("row_loss: kind must be 'mean_squared_error', 'mean_absolute_error' or 'binary_crossentropy'");
    Tensor P = f32_on(pred, d, "pred"), T = f32_on(target, d, "target");
    Tensor W;
    if (!row_weights.is_none()) W = f32_on(row_weights, d, "row_weights");
    Tensor G = Tensor::empty(P.shape(), DType::F32, d);
    Tensor S = Tensor::zeros({2}, DType::F32, d);  // 1 double
    ops::row_loss(*p, P, T, W.defined() ? &W : nullptr, &G, grad_scale, reinterpret_cast<double*>(S.raw()));
    Tensor Sh = S.device().is_cpu() ? S : S.to(Device::cpu());
    return py::make_tuple(*reinterpret_cast<const double*>(Sh.raw()), to_numpy(G));
  }, py::arg("pred"), py::arg("target"), py::arg("kind"), py::arg("from_logits") = false,
     py::arg("label_smoothing") = 0.0f, py::arg("row_weights") = py::none(), py::arg("grad_scale") = 1.0f,
     py::arg("device") = "cpu",
     "A per-row loss (mean over the last axis): returns (sum over rows of weight * loss, dloss/dpred * grad_scale).");

  m.def("row_weights", [](py::object target, py::object sample_weight, py::object class_weight, std::string device) {
    Device d = resolve_device(device);
    Tensor T = target_on(target, d);
    if (T.dtype() == DType::F32 && T.rank() == 1) T = T.reshape({T.dim(0), 1});
    Tensor SW, CW;
    if (!sample_weight.is_none()) SW = f32_on(sample_weight, d, "sample_weight");
    if (!class_weight.is_none()) CW = f32_on(class_weight, d, "class_weight");
    Tensor W = Tensor::empty({T.dim(0)}, DType::F32, d);
    ops::row_weights(T, SW.defined() ? &SW : nullptr, CW.defined() ? &CW : nullptr, W);
    return to_numpy(W);
  }, py::arg("target"), py::arg("sample_weight") = py::none(), py::arg("class_weight") = py::none(),
     py::arg("device") = "cpu", "Per-row loss weights: sample_weight[r] * class_weight[class of row r].");

  m.def("metric_rows", [](py::object pred, py::object target, std::string name, int k, float threshold,
                          std::string device) {
    Device d = resolve_device(device);
    Tensor P = f32_on(pred, d, "pred"), T = target_on(target, d);
    Tensor S = Tensor::zeros({2}, DType::F32, d);
    ops::metric_rows({nn::parse_metric(name), k, threshold}, P, T, reinterpret_cast<double*>(S.raw()));
    Tensor Sh = S.device().is_cpu() ? S : S.to(Device::cpu());
    return *reinterpret_cast<const double*>(Sh.raw());
  }, py::arg("pred"), py::arg("target"), py::arg("name"), py::arg("k") = 5, py::arg("threshold") = 0.5f,
     py::arg("device") = "cpu", "The sum over rows of a metric (Keras' function name) of pred against target.");

  // ---- over a model's variables. A flat buffer of n elements is split into variables by `sizes`
  // (element counts in order; None: one variable of all n).
  m.def("adam_step", [](py::object p, py::object g, py::object m1, py::object v, float lr, float b1, float b2,
                        float eps, long long t, py::object sizes, py::object decay, float weight_decay, float clipvalue,
                        std::string device, int repeat) {
    Device d = resolve_device(device);
    Tensor P = f32_on(p, d, "params").to(d), G = f32_on(g, d, "grads"), M = f32_on(m1, d, "m").to(d),
           V = f32_on(v, d, "v").to(d);
    const SegmentTable segs(spans_of(P.numel(), sizes, decay, py::none(), py::none()), d);
    run_repeat(repeat, [&] {
      ops::adam_step(P, G, M, V, segs, AdamParams{lr, b1, b2, eps, t}, update_options(lr, weight_decay, clipvalue));
    });
    return py::make_tuple(to_numpy(P), to_numpy(M), to_numpy(V));
  }, py::arg("params"), py::arg("grads"), py::arg("m"), py::arg("v"), py::arg("lr") = 0.001f,
     py::arg("beta_1") = 0.9f, py::arg("beta_2") = 0.999f, py::arg("epsilon") = 1e-7f, py::arg("t") = 1,
     py::arg("sizes") = py::none(), py::arg("decay") = py::none(), py::arg("weight_decay") = 0.f,
     py::arg("clipvalue") = 0.f, py::arg("device") = "cpu", py::arg("repeat") = 1,
     "Keras' Adam step; weight_decay: decoupled (w -= lr * weight_decay * w first), on the variables whose `decay` "
     "flag is set (all by default); clipvalue > 0 clamps the gradient. Returns (params, m, v).");
  m.def("sgd_step", [](py::object p, py::object g, py::object vel, float lr, float momentum, bool nesterov,
                       py::object sizes, py::object decay, float weight_decay, float clipvalue, std::string device) {
    Device d = resolve_device(device);
    Tensor P = f32_on(p, d, "params").to(d), G = f32_on(g, d, "grads"), V = f32_on(vel, d, "velocity").to(d);
    const SegmentTable segs(spans_of(P.numel(), sizes, decay, py::none(), py::none()), d);
    ops::sgd_step(P, G, &V, segs, SgdParams{lr, momentum, nesterov}, update_options(lr, weight_decay, clipvalue));
    return py::make_tuple(to_numpy(P), to_numpy(V));
  }, py::arg("params"), py::arg("grads"), py::arg("velocity"), py::arg("lr") = 0.01f, py::arg("momentum") = 0.f,
     py::arg("nesterov") = false, py::arg("sizes") = py::none(), py::arg("decay") = py::none(),
     py::arg("weight_decay") = 0.f, py::arg("clipvalue") = 0.f, py::arg("device") = "cpu",
     "Keras' SGD step (the velocity is left as given without momentum). Returns (params, velocity).");
  m.def("rmsprop_step", [](py::object p, py::object g, py::object vel, py::object mom, py::object avg, float lr,
                           float rho, float momentum, float eps, bool centered, py::object sizes, py::object decay,
                           float weight_decay, float clipvalue, std::string device) {
    Device d = resolve_device(device);
    Tensor P = f32_on(p, d, "params").to(d), G = f32_on(g, d, "grads"), V = f32_on(vel, d, "velocity").to(d),
           MOM = f32_on(mom, d, "momentum").to(d), AVG = f32_on(avg, d, "average_gradient").to(d);
    const SegmentTable segs(spans_of(P.numel(), sizes, decay, py::none(), py::none()), d);
    ops::rmsprop_step(P, G, V, momentum > 0 ? &MOM : nullptr, centered ? &AVG : nullptr, segs,
                      RmspropParams{lr, rho, momentum, eps, centered}, update_options(lr, weight_decay, clipvalue));
    return py::make_tuple(to_numpy(P), to_numpy(V), to_numpy(MOM), to_numpy(AVG));
  }, py::arg("params"), py::arg("grads"), py::arg("velocity"), py::arg("momentum_buffer"),
     py::arg("average_gradient"), py::arg("lr") = 0.001f, py::arg("rho") = 0.9f, py::arg("momentum") = 0.f,
     py::arg("epsilon") = 1e-7f, py::arg("centered") = false, py::arg("sizes") = py::none(),
     py::arg("decay") = py::none(), py::arg("weight_decay") = 0.f, py::arg("clipvalue") = 0.f,
     py::arg("device") = "cpu",
     "Keras' RMSprop step. Returns (params, velocity, momentum_buffer, average_gradient); the momentum buffer is "
     "used only with momentum > 0, the average gradient only when centered.");
  m.def("variable_sums", [](py::object x, py::object sizes, std::string device) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x");
    const SegmentTable segs(spans_of(X.numel(), sizes, py::none(), py::none(), py::none()), d);
    Tensor S = Tensor::zeros({4LL * std::max(segs.variables(), 1)}, DType::F32, d);  // 2 doubles per variable
    ops::variable_sums(X.reshape({X.numel()}), segs, reinterpret_cast<double*>(S.raw()));
    Tensor host = S.device().is_cpu() ? S : S.to(Device::cpu());
    const double* h = reinterpret_cast<const double*>(host.raw());
    py::array_t<double> out({static_cast<py::ssize_t>(segs.variables()), static_cast<py::ssize_t>(2)});
    std::copy(h, h + 2 * segs.variables(), out.mutable_data());
    return out;
  }, py::arg("x"), py::arg("sizes") = py::none(), py::arg("device") = "cpu",
     "Per variable: (sum |x|, sum x^2) in float64, in the fixed order both backends use.");
  m.def("clip_scales", [](py::object g, py::object sizes, double clipnorm, bool global, std::string device) {
    Device d = resolve_device(device);
    Tensor G = f32_on(g, d, "grads");
    const SegmentTable segs(spans_of(G.numel(), sizes, py::none(), py::none(), py::none()), d);
    Tensor S = Tensor::empty({static_cast<long long>(segs.variables())}, DType::F32, d);
    ops::clip_scales(G.reshape({G.numel()}), segs, global ? ops::ClipMode::Global : ops::ClipMode::PerVariable,
                     clipnorm, S);
    return to_numpy(S);
  }, py::arg("grads"), py::arg("sizes") = py::none(), py::arg("clipnorm") = 1.0, py::arg("global_norm") = false,
     py::arg("device") = "cpu", "Keras' clipnorm (or global_clipnorm) factor of each variable's gradient.");
  m.def("weight_penalty", [](py::object w, py::object g, py::object sizes, py::object l1, py::object l2,
                             std::string device) {
    Device d = resolve_device(device);
    Tensor W = f32_on(w, d, "weights"), G = f32_on(g, d, "grads").to(d);
    const SegmentTable segs(spans_of(W.numel(), sizes, py::none(), l1, l2), d);
    Tensor S = Tensor::zeros({2}, DType::F32, d);  // one double
    Tensor Wf = W.reshape({W.numel()}), Gf = G.reshape({G.numel()});
    ops::weight_penalty(Wf, &Gf, segs, reinterpret_cast<double*>(S.raw()));
    Tensor host = S.device().is_cpu() ? S : S.to(Device::cpu());
    return py::make_tuple(*reinterpret_cast<const double*>(host.raw()), to_numpy(G));
  }, py::arg("weights"), py::arg("grads"), py::arg("sizes") = py::none(), py::arg("l1") = py::none(),
     py::arg("l2") = py::none(), py::arg("device") = "cpu",
     "The regularizers' penalty sum_v l1_v sum |w_v| + l2_v sum w_v^2 (l1, l2: a factor per variable) and grads + "
     "its gradient. Returns (penalty, grads).");

  m.def("measure_peak_gflops", [](int threads, double seconds) {
    py::gil_scoped_release nogil;
    return diagnostics::measure_peak_gflops(threads, seconds);
  }, py::arg("threads"), py::arg("seconds") = 1.0,
     "FP32 peak GFLOP/s measured by an FMA loop on min(threads, get_num_threads()) threads.");

  m.def("decode_u8", [](py::array_t<uint8_t, py::array::c_style | py::array::forcecast> x, std::vector<float> scale,
                        std::vector<float> shift, std::string device) {
    Device d = resolve_device(device);
    Tensor X = borrow_array(x, "x");
    if (!d.is_cpu()) X = X.to(d);
    HPCNN_CHECK_ARG(X.rank() >= 1 && (long long)scale.size() == X.dim(-1) && scale.size() == shift.size(),
                    "decode_u8: scale and shift need one value per channel (", X.rank() ? X.dim(-1) : 0, ")");
    Tensor Y = Tensor::empty(X.shape(), DType::F32, d);
    ops::decode_u8(X, Y, scale.data(), shift.data());
    return to_numpy(Y);
  }, py::arg("x"), py::arg("scale"), py::arg("shift"), py::arg("device") = "cpu");

  // The augmentation of one layer (ops/augment.h), its spec from the layer's core config (what
  // layers.py sends: class_name RandomFlip, RandomTranslation, RandomRotation, RandomZoom or
  // RandomCrop and their keys; a seed key is ignored: the draw is `seed`, `stream`), a
  // crop optionally from the input with `padding` (top, bottom, left, right) zeros around it.
  // float32 x on any device; `rows`, or a uint8 x (decoded with scale, shift per channel), take
  // the stager's host pass (ops::augment_rows).
  m.def("augment", [](py::object x, py::dict config, bool training, uint64_t seed, uint64_t stream,
                      long long first_row, py::object rows, std::vector<float> scale, std::vector<float> shift,
                      std::vector<int> padding, std::string device, int repeat) {
    nn::Config cfg("augment config");
    for (auto [k, v] : config) {
      const std::string key = k.cast<std::string>();
      if (py::isinstance<py::str>(v)) cfg.set(key, v.cast<std::string>());
      else if (py::isinstance<py::bool_>(v)) cfg.set(key, v.cast<bool>());
      else if (py::isinstance<py::int_>(v)) cfg.set(key, v.cast<long long>());
      else cfg.set(key, v.cast<double>());
    }
    AugmentSpec spec = nn::make_augment_spec(cfg);
    if (!padding.empty()) {
      HPCNN_CHECK_ARG(padding.size() == 4, "augment: padding is (top, bottom, left, right)");
      spec.pad_top = padding[0];
      spec.pad_bottom = padding[1];
      spec.pad_left = padding[2];
      spec.pad_right = padding[3];
    }
    const AugmentDraw draw{training, seed, stream, first_row};
    Device d = resolve_device(device);
    py::array a = py::array::ensure(x);
    HPCNN_CHECK_ARG(a && a.ndim() == 4, "augment: x must be 4-D (n, height, width, channels)");
    const bool u8 = a.dtype().is(py::dtype::of<uint8_t>());
    std::vector<long long> row_list;
    if (!rows.is_none()) row_list = rows.cast<std::vector<long long>>();
    if (u8 || !rows.is_none()) {
      HPCNN_CHECK_ARG(d.is_cpu(), "augment: rows and uint8 input take the host pass (device='cpu')");
      Tensor X = u8 ? borrow_array(py::array_t<uint8_t, py::array::c_style | py::array::forcecast>::ensure(a), "x")
                    : f32_on(a, d, "x");
      HPCNN_CHECK_ARG(!u8 || ((long long)scale.size() == X.dim(3) && scale.size() == shift.size()),
                      "augment: a uint8 x needs scale and shift, one per channel");
      const long long n = rows.is_none() ? X.dim(0) : static_cast<long long>(row_list.size());
      int oh = 0, ow = 0;
      augment_output_hw(spec, static_cast<int>(X.dim(1)), static_cast<int>(X.dim(2)), oh, ow);
      Tensor Y = Tensor::empty({n, oh, ow, X.dim(3)}, DType::F32, d);
      run_repeat(repeat, [&] {
        ops::augment_rows(X, rows.is_none() ? nullptr : row_list.data(), u8 ? scale.data() : nullptr,
                          u8 ? shift.data() : nullptr, Y, spec, draw);
      });
      return to_numpy(Y);
    }
    Tensor X = f32_on(a, d, "x");
    int oh = 0, ow = 0;
    augment_output_hw(spec, static_cast<int>(X.dim(1)), static_cast<int>(X.dim(2)), oh, ow);
    Tensor Y = Tensor::empty({X.dim(0), oh, ow, X.dim(3)}, DType::F32, d);
    run_repeat(repeat, [&] { ops::augment(X, Y, spec, draw); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("config"), py::arg("training") = true, py::arg("seed") = 0, py::arg("stream") = 0,
     py::arg("first_row") = 0, py::arg("rows") = py::none(), py::arg("scale") = std::vector<float>(),
     py::arg("shift") = std::vector<float>(), py::arg("padding") = std::vector<int>(), py::arg("device") = "cpu",
     py::arg("repeat") = 1);
}

}  // namespace hpcnn::bindings
