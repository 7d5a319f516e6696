// The operators on NumPy arrays: hpcnn._core.ops.*. Every function takes `device` ('cpu',
// 'gpu:0', ...): inputs are copied there, the op runs, results come back as NumPy arrays. Tests
// compare the devices with the same calls; benchmarks time them. conv2d kernels (and dw) are
// Keras' HWIO here on every device: converted to and from the layout of the device's backend.
#include <pybind11/stl.h>

#include <tuple>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "diagnostics/peak_flops.h"
#include "ops/ops.h"

namespace hpcnn::bindings {

namespace {

std::pair<int, int> pair2(const py::object& o, const char* what) {
  if (py::isinstance<py::int_>(o)) {
    int v = o.cast<int>();
    return {v, v};
  }
  auto t = o.cast<std::vector<int>>();
  if (t.size() != 2) throw ValueError(cat(what, " must be an int or a pair, got ", t.size(), " values"));
  return {t[0], t[1]};
}

// A target for the loss: float one-hot rows or int32 class indices.
Tensor target_on(const py::handle& obj, Device d) {
  py::array a = py::array::ensure(obj);
  if (!a) throw ValueError("target: not an array");
  if (a.dtype().kind() == 'f') return f32_on(a, d, "target");
  auto idx = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(a);
  Tensor t = borrow_array(idx, "target").reshape({static_cast<long long>(idx.size())});
  return d.is_cpu() ? t : t.to(d);
}

// A conv2d kernel given in Keras' HWIO layout, on device d in the layout d's backend takes
// (ops::conv2d_kernel_layout): the explicit conversion for the GPU, a plain copy on the CPU.
Tensor conv_kernel_on(const py::object& w, Device d) {
  const KernelLayout l = ops::conv2d_kernel_layout(d);
  if (l == KernelLayout::HWIO) return f32_on(w, d, "kernel");  // as given (borrowed on the CPU)
  return convert_kernel(f32_on(w, Device::cpu(), "kernel"), KernelLayout::HWIO, l, d);
}

// A kernel (gradient) in the layout of its device's backend, back as a Keras HWIO NumPy array.
py::array conv_kernel_out(const Tensor& w) {
  const KernelLayout l = ops::conv2d_kernel_layout(w.device());
  if (l == KernelLayout::HWIO) return to_numpy(w);
  return to_numpy(convert_kernel(w, l, KernelLayout::HWIO, Device::cpu()));
}

KernelLayout layout_named(const std::string& name) {
  if (name == "HWIO") return KernelLayout::HWIO;
  if (name == "OHWI") return KernelLayout::OHWI;
  throw ValueError(cat("unknown kernel layout '", name, "': use 'HWIO' (Keras, the CPU) or 'OHWI' (cuDNN, a GPU)"));
}

const char* layout_code(KernelLayout l) { return l == KernelLayout::HWIO ? "HWIO" : "OHWI"; }

// Runs the op `repeat` times without the GIL. repeat > 1 is for benchmarks: the op is timed
// inside C++, free of the NumPy conversions around it (ops that update their inputs in place,
// like the optimizers, simply take `repeat` steps).
// An activation op on `device`: y = act(x), and dx from (y, dy).
py::array activation_forward(const py::object& x, const std::string& device, void (*op)(const Tensor&, Tensor&)) {
  Device d = resolve_device(device);
  Tensor X = f32_on(x, d, "x"), Y = Tensor::empty(X.shape(), DType::F32, d);
  op(X, Y);
  return to_numpy(Y);
}

py::array activation_backward(const py::object& y, const py::object& dy, const std::string& device,
                              void (*op)(const Tensor&, const Tensor&, Tensor&)) {
  Device d = resolve_device(device);
  Tensor Y = f32_on(y, d, "y"), DY = f32_on(dy, d, "dy"), DX = Tensor::empty(Y.shape(), DType::F32, d);
  op(Y, DY, DX);
  return to_numpy(DX);
}

template <typename F>
void run_repeat(int repeat, F&& op) {
  HPCNN_CHECK_ARG(repeat >= 1, "repeat must be >= 1, got ", repeat);
  {
    py::gil_scoped_release nogil;
    for (int i = 0; i < repeat; ++i) op();
  }
  raise_core_warnings();
}

}  // namespace

void bind_ops(py::module_& m) {
  m.def("conv2d_forward", [](py::object x, py::object w, py::object b, py::object strides, std::string padding,
                             bool relu, std::string device, int repeat) {
    Device d = resolve_device(device);
    auto [sh, sw] = pair2(strides, "strides");
    Tensor X = f32_on(x, d, "x"), W = conv_kernel_on(w, d), B = f32_on(b, d, "bias");
    Padding pad = parse_padding(padding);
    Conv2dGeometry g = ops::conv2d_geometry(X, W, sh, sw, pad);
    Tensor Y = Tensor::empty({g.n, g.oh, g.ow, g.f}, DType::F32, d);
    run_repeat(repeat, [&] { ops::conv2d_forward(X, W, B, Y, sh, sw, pad, relu); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("kernel"), py::arg("bias"), py::arg("strides") = 1, py::arg("padding") = "valid",
     py::arg("relu") = false, py::arg("device") = "cpu", py::arg("repeat") = 1);

  m.def("conv2d_backward", [](py::object x, py::object w, py::object y, py::object dy, py::object strides,
                              std::string padding, bool relu, bool need_dx, std::string device, int repeat) {
    Device d = resolve_device(device);
    auto [sh, sw] = pair2(strides, "strides");
    Tensor X = f32_on(x, d, "x"), W = conv_kernel_on(w, d);
    Tensor DY = f32_on(dy, d, "dy");
    if (d.is_cpu()) DY = DY.to(d);  // the op masks dy in place: never write into the caller's array
    Tensor Y = relu ? f32_on(y, d, "y") : Tensor();
    Padding pad = parse_padding(padding);
    Conv2dGeometry g = ops::conv2d_geometry(X, W, sh, sw, pad);
    Tensor DX = need_dx ? Tensor::empty(X.shape(), DType::F32, d) : Tensor();
    Tensor DW = Tensor::empty(W.shape(), DType::F32, d), DB = Tensor::empty({g.f}, DType::F32, d);
    run_repeat(repeat, [&] { ops::conv2d_backward(X, W, Y, DY, need_dx ? &DX : nullptr, DW, DB, sh, sw, pad, relu); });
    return py::make_tuple(need_dx ? py::object(to_numpy(DX)) : py::none(), conv_kernel_out(DW), to_numpy(DB));
  }, py::arg("x"), py::arg("kernel"), py::arg("y"), py::arg("dy"), py::arg("strides") = 1,
     py::arg("padding") = "valid", py::arg("relu") = false, py::arg("need_dx") = true, py::arg("device") = "cpu",
     py::arg("repeat") = 1);

  m.def("conv2d_kernel_layout", [](std::string device) {
    return layout_code(ops::conv2d_kernel_layout(parse_device(device)));
  }, py::arg("device"),
     "The conv2d kernel layout the backend of `device` computes with, and a model on it holds: 'HWIO' "
     "(kh, kw, in, out; Keras' own) on the CPU, 'OHWI' (out, kh, kw, in; cuDNN's NHWC filter) on a GPU. "
     "Needs no GPU.");
  m.def("convert_conv2d_kernel", [](py::object w, std::string from_layout, std::string to_layout) {
    return to_numpy(convert_kernel(f32_on(w, Device::cpu(), "kernel"), layout_named(from_layout),
                                   layout_named(to_layout), Device::cpu()));
  }, py::arg("kernel"), py::arg("from_layout"), py::arg("to_layout"),
     "A conv2d kernel converted between 'HWIO' and 'OHWI' on the host: the conversion a model applies in "
     "get_weights, set_weights and when it moves between the CPU and a GPU.");

  m.def("maxpool2d_forward", [](py::object x, py::object pool, py::object strides, std::string padding,
                                std::string device, int repeat) {
    Device d = resolve_device(device);
    auto [ph, pw] = pair2(pool, "pool_size");
    auto [sh, sw] = strides.is_none() ? std::make_pair(ph, pw) : pair2(strides, "strides");
    Tensor X = f32_on(x, d, "x");
    Padding pad = parse_padding(padding);
    Pool2dGeometry g = ops::maxpool2d_geometry(X, ph, pw, sh, sw, pad);
    Tensor Y = Tensor::empty({g.n, g.oh, g.ow, g.c}, DType::F32, d);
    run_repeat(repeat, [&] { ops::maxpool2d_forward(X, Y, ph, pw, sh, sw, pad); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("pool_size") = 2, py::arg("strides") = py::none(), py::arg("padding") = "valid",
     py::arg("device") = "cpu", py::arg("repeat") = 1);

  m.def("maxpool2d_backward", [](py::object x, py::object y, py::object dy, py::object pool, py::object strides,
                                 std::string padding, std::string device, int repeat) {
    Device d = resolve_device(device);
    auto [ph, pw] = pair2(pool, "pool_size");
    auto [sh, sw] = strides.is_none() ? std::make_pair(ph, pw) : pair2(strides, "strides");
    Tensor X = f32_on(x, d, "x"), Y = f32_on(y, d, "y"), DY = f32_on(dy, d, "dy");
    Tensor DX = Tensor::empty(X.shape(), DType::F32, d);
    Padding pad = parse_padding(padding);
    run_repeat(repeat, [&] { ops::maxpool2d_backward(X, Y, DY, DX, ph, pw, sh, sw, pad); });
    return to_numpy(DX);
  }, py::arg("x"), py::arg("y"), py::arg("dy"), py::arg("pool_size") = 2, py::arg("strides") = py::none(),
     py::arg("padding") = "valid", py::arg("device") = "cpu", py::arg("repeat") = 1);

  m.def("dense_forward", [](py::object x, py::object w, py::object b, bool relu, std::string device, int repeat) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), W = f32_on(w, d, "kernel"), B = f32_on(b, d, "bias");
    HPCNN_CHECK_ARG(X.rank() == 2 && W.rank() == 2, "dense: x and kernel must be 2-D, got ", shape_str(X.shape()),
                    " and ", shape_str(W.shape()));
    Tensor Y = Tensor::empty({X.dim(0), W.dim(1)}, DType::F32, d);
    run_repeat(repeat, [&] { ops::dense_forward(X, W, B, Y, relu); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("kernel"), py::arg("bias"), py::arg("relu") = false, py::arg("device") = "cpu",
     py::arg("repeat") = 1);

  m.def("dense_backward", [](py::object x, py::object w, py::object y, py::object dy, bool relu, bool need_dx,
                             std::string device, int repeat) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), W = f32_on(w, d, "kernel");
    Tensor DY = f32_on(dy, d, "dy");
    if (d.is_cpu()) DY = DY.to(d);
    Tensor Y = relu ? f32_on(y, d, "y") : Tensor();
    Tensor DX = need_dx ? Tensor::empty(X.shape(), DType::F32, d) : Tensor();
    Tensor DW = Tensor::empty(W.shape(), DType::F32, d), DB = Tensor::empty({W.dim(-1)}, DType::F32, d);
    run_repeat(repeat, [&] { ops::dense_backward(X, W, Y, DY, need_dx ? &DX : nullptr, DW, DB, relu); });
    return py::make_tuple(need_dx ? py::object(to_numpy(DX)) : py::none(), to_numpy(DW), to_numpy(DB));
  }, py::arg("x"), py::arg("kernel"), py::arg("y"), py::arg("dy"), py::arg("relu") = false,
     py::arg("need_dx") = true, py::arg("device") = "cpu", py::arg("repeat") = 1);

  m.def("relu_forward", [](py::object x, std::string device) {
    return activation_forward(x, device, ops::relu_forward);
  }, py::arg("x"), py::arg("device") = "cpu");
  m.def("relu_backward", [](py::object y, py::object dy, std::string device) {
    return activation_backward(y, dy, device, ops::relu_backward);
  }, py::arg("y"), py::arg("dy"), py::arg("device") = "cpu");
  m.def("softmax_forward", [](py::object x, std::string device) {
    return activation_forward(x, device, ops::softmax_forward);
  }, py::arg("x"), py::arg("device") = "cpu");
  m.def("softmax_backward", [](py::object y, py::object dy, std::string device) {
    return activation_backward(y, dy, device, ops::softmax_backward);
  }, py::arg("y"), py::arg("dy"), py::arg("device") = "cpu");

  // ---- the merging layers' ops and gradient accumulation (ops/add.h, ops/concat.h)
  m.def("add", [](py::list xs, std::string device) {
    Device d = resolve_device(device);
    std::vector<Tensor> X;
    for (auto x : xs) X.push_back(f32_on(x, d, "x"));
    HPCNN_CHECK_ARG(!X.empty(), "add: no inputs");
    Tensor Y = Tensor::empty(X[0].shape(), DType::F32, d);
    ops::add_n(X, Y);
    return to_numpy(Y);
  }, py::arg("xs"), py::arg("device") = "cpu", "xs[0] + xs[1] + ... (two or more arrays of one shape).");
  m.def("accumulate", [](py::object dst, py::object src, std::string device) {
    Device d = resolve_device(device);
    Tensor D = f32_on(dst, Device::cpu(), "dst").to(d), S = f32_on(src, d, "src");
    ops::accumulate(D, S);
    return to_numpy(D);
  }, py::arg("dst"), py::arg("src"), py::arg("device") = "cpu", "dst + src, computed as the in-place dst += src.");
  m.def("concatenate", [](py::list xs, int axis, std::string device) {
    Device d = resolve_device(device);
    std::vector<Tensor> X;
    for (auto x : xs) X.push_back(f32_on(x, d, "x"));
    HPCNN_CHECK_ARG(!X.empty(), "concatenate: no inputs");
    Shape out = X[0].shape();
    const int a = axis < 0 ? axis + static_cast<int>(out.size()) : axis;
    HPCNN_CHECK_ARG(a >= 0 && a < static_cast<int>(out.size()), "concatenate: axis ", axis,
                    " is out of range for shape ", shape_str(out));
    out[a] = 0;
    for (const Tensor& x : X) out[a] += x.rank() > a ? x.dim(a) : 0;
    Tensor Y = Tensor::empty(out, DType::F32, d);
    ops::concat(X, Y, axis);
    return to_numpy(Y);
  }, py::arg("xs"), py::arg("axis") = -1, py::arg("device") = "cpu",
     "The arrays side by side along `axis` (not 0, the batch axis).");
  m.def("split", [](py::object dy, std::vector<long long> sizes, int axis, std::vector<bool> need, std::string device) {
    Device d = resolve_device(device);
    Tensor DY = f32_on(dy, d, "dy");
    const int a = axis < 0 ? axis + DY.rank() : axis;
    HPCNN_CHECK_ARG(a >= 0 && a < DY.rank(), "split: axis ", axis, " is out of range for shape ", shape_str(DY.shape()));
    if (need.empty()) need.assign(sizes.size(), true);
    HPCNN_CHECK_ARG(need.size() == sizes.size(), "split: ", need.size(), " need flags for ", sizes.size(), " parts");
    std::vector<Tensor> parts(sizes.size());
    std::vector<Tensor*> ptrs(sizes.size(), nullptr);
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (!need[i]) continue;
      Shape s = DY.shape();
      s[a] = sizes[i];
      parts[i] = Tensor::empty(s, DType::F32, d);
      ptrs[i] = &parts[i];
    }
    ops::split(DY, sizes, ptrs, axis);
    py::list out;
    for (size_t i = 0; i < parts.size(); ++i) out.append(need[i] ? py::object(to_numpy(parts[i])) : py::none());
    return out;
  }, py::arg("dy"), py::arg("sizes"), py::arg("axis") = -1, py::arg("need") = std::vector<bool>{},
     py::arg("device") = "cpu",
     "concatenate's backward: the parts of dy, sizes[i] long along `axis` (None where need[i] is False).");
  m.def("copy", [](py::object x, std::string device) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), Y = Tensor::empty(X.shape(), DType::F32, d);
    ops::copy(X, Y);
    return to_numpy(Y);
  }, py::arg("x"), py::arg("device") = "cpu", "A copy of x made on the device (its compute stream on a GPU).");

  m.def("dropout_forward", [](py::object x, float rate, uint64_t seed, uint64_t stream, std::string device,
                              int repeat) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), Y = Tensor::empty(X.shape(), DType::F32, d);
    run_repeat(repeat, [&] { ops::dropout_forward(X, Y, rate, seed, stream); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("rate"), py::arg("seed") = 0, py::arg("stream") = 0, py::arg("device") = "cpu",
     py::arg("repeat") = 1);
  m.def("dropout_backward", [](py::object dy, float rate, uint64_t seed, uint64_t stream, std::string device,
                               int repeat) {
    Device d = resolve_device(device);
    Tensor DY = f32_on(dy, d, "dy"), DX = Tensor::empty(DY.shape(), DType::F32, d);
    run_repeat(repeat, [&] { ops::dropout_backward(DY, DX, rate, seed, stream); });
    return to_numpy(DX);
  }, py::arg("dy"), py::arg("rate"), py::arg("seed") = 0, py::arg("stream") = 0, py::arg("device") = "cpu",
     py::arg("repeat") = 1);

  m.def("softmax_cross_entropy", [](py::object logits, py::object target, float grad_scale, std::string device,
                                    int repeat) {
    Device d = resolve_device(device);
    Tensor L = f32_on(logits, d, "logits");
    Tensor T = target_on(target, d);
    Tensor G = Tensor::empty(L.shape(), DType::F32, d);
    Tensor S = Tensor::zeros({4}, DType::F32, d);  // 2 doubles
    run_repeat(repeat, [&] { ops::softmax_xent(L, T, &G, grad_scale, reinterpret_cast<double*>(S.raw())); });
    Tensor Sh = S.device().is_cpu() ? S : S.to(Device::cpu());
    const double* s = reinterpret_cast<const double*>(Sh.raw());
    return py::make_tuple(s[0] / repeat, s[1] / repeat, to_numpy(G));  // stats accumulate over repeats
  }, py::arg("logits"), py::arg("target"), py::arg("grad_scale") = 1.0f, py::arg("device") = "cpu",
     py::arg("repeat") = 1, "Returns (loss_sum, correct, dlogits).");

  m.def("adam_step", [](py::object p, py::object g, py::object m1, py::object v, float lr, float b1, float b2,
                        float eps, long long t, std::string device, int repeat) {
    Device d = resolve_device(device);
    Tensor P = f32_on(p, d, "params").to(d), G = f32_on(g, d, "grads"), M = f32_on(m1, d, "m").to(d),
           V = f32_on(v, d, "v").to(d);
    run_repeat(repeat, [&] { ops::adam_step(P, G, M, V, AdamParams{lr, b1, b2, eps, t}); });
    return py::make_tuple(to_numpy(P), to_numpy(M), to_numpy(V));
  }, py::arg("params"), py::arg("grads"), py::arg("m"), py::arg("v"), py::arg("lr") = 0.001f,
     py::arg("beta_1") = 0.9f, py::arg("beta_2") = 0.999f, py::arg("epsilon") = 1e-7f, py::arg("t") = 1,
     py::arg("device") = "cpu", py::arg("repeat") = 1);
  m.def("sgd_step", [](py::object p, py::object g, py::object vel, float lr, float momentum, bool nesterov,
                       std::string device) {
    Device d = resolve_device(device);
    Tensor P = f32_on(p, d, "params").to(d), G = f32_on(g, d, "grads"), V = f32_on(vel, d, "velocity").to(d);
    ops::sgd_step(P, G, V, SgdParams{lr, momentum, nesterov});
    return py::make_tuple(to_numpy(P), to_numpy(V));
  }, py::arg("params"), py::arg("grads"), py::arg("velocity"), py::arg("lr") = 0.01f, py::arg("momentum") = 0.f,
     py::arg("nesterov") = false, py::arg("device") = "cpu");

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
}

}  // namespace hpcnn::bindings
