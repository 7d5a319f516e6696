// The operators on NumPy arrays: hpcnn._core.ops.*. Every function takes `device` ('cpu',
// 'gpu:0', ...): inputs are copied there, the op runs, results come back as NumPy arrays. Tests
// compare the devices with the same calls; benchmarks time them. conv2d kernels (and dw) are
// Keras' HWIO here on every device: converted to and from the layout of the device's backend.
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
#include "ops/kernel_cache_cpu.h"
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

// A pooling window as the pool bindings take it: pool_size and strides (each an int or a pair;
// strides None means the pool size, as in Keras) and the padding's name.
struct PoolWindow {
  int ph, pw, sh, sw;
  Padding pad;
};

PoolWindow pool_window(const py::object& pool, const py::object& strides, const std::string& padding) {
  auto [ph, pw] = pair2(pool, "pool_size");
  auto [sh, sw] = strides.is_none() ? std::make_pair(ph, pw) : pair2(strides, "strides");
  return {ph, pw, sh, sw, parse_padding(padding)};
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

// An optional float32 array (None: undefined, e.g. no bias or no gamma).
Tensor optional_on(const py::object& o, Device d, const char* what) {
  return o.is_none() ? Tensor() : f32_on(o, d, what);
}

py::object optional_out(const Tensor& t) { return t.defined() ? py::object(to_numpy(t)) : py::none(); }

template <typename F>
void run_repeat(int repeat, F&& op) {
  HPCNN_CHECK_ARG(repeat >= 1, "repeat must be >= 1, got ", repeat);
  {
    py::gil_scoped_release nogil;
    for (int i = 0; i < repeat; ++i) op();
  }
  raise_core_warnings();
}

// The binding of maxpool2d_forward and of avgpool2d_forward: the same around each op's own
// geometry and kernel.
using PoolGeometry = Pool2dGeometry (*)(const Tensor&, int, int, int, int, Padding);
using PoolForward = void (*)(const Tensor&, Tensor&, int, int, int, int, Padding);

auto pool_forward_binding(PoolGeometry geometry, PoolForward forward) {
  return [geometry, forward](py::object x, py::object pool, py::object strides, std::string padding,
                             std::string device, int repeat) {
    Device d = resolve_device(device);
    const PoolWindow p = pool_window(pool, strides, padding);
    Tensor X = f32_on(x, d, "x");
    Pool2dGeometry g = geometry(X, p.ph, p.pw, p.sh, p.sw, p.pad);
    Tensor Y = Tensor::empty({g.n, g.oh, g.ow, g.c}, DType::F32, d);
    run_repeat(repeat, [&] { forward(X, Y, p.ph, p.pw, p.sh, p.sw, p.pad); });
    return to_numpy(Y);
  };
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

void bind_ops(py::module_& m) {
  m.def("conv2d_forward", [](py::object x, py::object w, py::object b, py::object strides, std::string padding,
                             bool relu, std::string device, int repeat, py::object residual) {
    Device d = resolve_device(device);
    auto [sh, sw] = pair2(strides, "strides");
    Tensor X = f32_on(x, d, "x"), W = conv_kernel_on(w, d), B = optional_on(b, d, "bias");
    Tensor R = optional_on(residual, d, "residual");
    Padding pad = parse_padding(padding);
    Conv2dGeometry g = ops::conv2d_geometry(X, W, sh, sw, pad);
    Tensor Y = Tensor::empty({g.n, g.oh, g.ow, g.f}, DType::F32, d);
    run_repeat(repeat, [&] { ops::conv2d_forward(X, W, B, Y, sh, sw, pad, relu, R); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("kernel"), py::arg("bias"), py::arg("strides") = 1, py::arg("padding") = "valid",
     py::arg("relu") = false, py::arg("device") = "cpu", py::arg("repeat") = 1, py::arg("residual") = py::none(),
     "bias None: no bias (use_bias=False). residual (the output's shape): added before the ReLU, "
     "y = act(conv + bias + residual).");

  m.def("winograd_kernel_cache", [](bool clear) {
    cpu::KernelCache& cache = cpu::winograd_kernel_cache();
    if (clear) cache.clear();
    const cpu::KernelCache::Stats s = cache.stats();
    py::dict d;
    d["entries"] = s.entries;
    d["bytes"] = s.bytes;
    d["made"] = s.made;
    d["reused"] = s.reused;
    d["max_bytes"] = cpu::KernelCache::kMaxBytes;
    return d;
  }, py::arg("clear") = false,
     "The CPU Winograd forward pass's kept kernel transforms (ops/kernel_cache_cpu.h): entries, bytes, transforms "
     "made and calls served from an entry since the last clear. clear=True: forget them all first.");

  m.def("conv_bn_fold", [](py::object w, py::object b, py::object gamma, py::object beta, py::object moving_mean,
                           py::object moving_var, float eps, std::string device) {
    Device d = resolve_device(device);
    Tensor W = conv_kernel_on(w, d), B = optional_on(b, d, "bias"), G = optional_on(gamma, d, "gamma"),
           Be = optional_on(beta, d, "beta"), M = f32_on(moving_mean, d, "moving_mean"),
           V = f32_on(moving_var, d, "moving_variance");
    Tensor WO = Tensor::empty(W.shape(), DType::F32, d);
    Tensor BO = Tensor::empty({M.numel()}, DType::F32, d);
    ops::conv_bn_fold(W, B, G, Be, M, V, eps, WO, BO);
    return py::make_tuple(conv_kernel_out(WO), to_numpy(BO));
  }, py::arg("kernel"), py::arg("bias"), py::arg("gamma"), py::arg("beta"), py::arg("moving_mean"),
     py::arg("moving_variance"), py::arg("epsilon"), py::arg("device") = "cpu",
     "A BatchNormalization in inference mode folded into the convolution before it: (kernel, bias) such that "
     "conv2d_forward with them is the convolution followed by the normalization. kernel in Keras' HWIO; bias, gamma, "
     "beta None: none (0, 1, 0).");

  m.def("conv2d_backward", [](py::object x, py::object w, py::object y, py::object dy, py::object strides,
                              std::string padding, bool relu, bool need_dx, std::string device, int repeat,
                              bool bias, py::object add_to) {
    Device d = resolve_device(device);
    auto [sh, sw] = pair2(strides, "strides");
    Tensor X = f32_on(x, d, "x"), W = conv_kernel_on(w, d);
    Tensor DY = f32_on(dy, d, "dy");
    if (d.is_cpu()) DY = DY.to(d);  // the op masks dy in place: never write into the caller's array
    Tensor Y = relu ? f32_on(y, d, "y") : Tensor();
    Padding pad = parse_padding(padding);
    Conv2dGeometry g = ops::conv2d_geometry(X, W, sh, sw, pad);
    const bool adding = !add_to.is_none();
    HPCNN_CHECK_ARG(!adding || need_dx, "conv2d_backward: add_to needs need_dx=True");
    Tensor DX = need_dx ? Tensor::empty(X.shape(), DType::F32, d) : Tensor();
    if (adding) {
      const Tensor A = f32_on(add_to, d, "add_to");
      HPCNN_CHECK_ARG(A.shape() == X.shape(), "conv2d_backward: add_to has shape ", shape_str(A.shape()),
                      ", x has ", shape_str(X.shape()));
      DX.copy_from(A);
    }
    Tensor DW = Tensor::empty(W.shape(), DType::F32, d);
    Tensor DB = bias ? Tensor::empty({g.f}, DType::F32, d) : Tensor();
    run_repeat(repeat, [&] {
      ops::conv2d_backward(X, W, Y, DY, need_dx ? &DX : nullptr, DW, DB, sh, sw, pad, relu, adding);
    });
    return py::make_tuple(need_dx ? py::object(to_numpy(DX)) : py::none(), conv_kernel_out(DW),
                          bias ? py::object(to_numpy(DB)) : py::none());
  }, py::arg("x"), py::arg("kernel"), py::arg("y"), py::arg("dy"), py::arg("strides") = 1,
     py::arg("padding") = "valid", py::arg("relu") = false, py::arg("need_dx") = true, py::arg("device") = "cpu",
     py::arg("repeat") = 1, py::arg("bias") = true, py::arg("add_to") = py::none(),
     "Returns (dx or None, dw, db or None); bias=False: a convolution without bias (no db). add_to (x's shape): "
     "dx is add_to + the input gradient, added in the op's output stage (how a model gathers the gradient of a "
     "tensor that several layers read).");

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

  m.def("maxpool2d_forward", pool_forward_binding(ops::maxpool2d_geometry, ops::maxpool2d_forward), py::arg("x"),
        py::arg("pool_size") = 2, py::arg("strides") = py::none(), py::arg("padding") = "valid",
        py::arg("device") = "cpu", py::arg("repeat") = 1);

  m.def("maxpool2d_backward", [](py::object x, py::object y, py::object dy, py::object pool, py::object strides,
                                 std::string padding, std::string device, int repeat) {
    Device d = resolve_device(device);
    const PoolWindow p = pool_window(pool, strides, padding);
    Tensor X = f32_on(x, d, "x"), Y = f32_on(y, d, "y"), DY = f32_on(dy, d, "dy");
    Tensor DX = Tensor::empty(X.shape(), DType::F32, d);
    run_repeat(repeat, [&] { ops::maxpool2d_backward(X, Y, DY, DX, p.ph, p.pw, p.sh, p.sw, p.pad); });
    return to_numpy(DX);
  }, py::arg("x"), py::arg("y"), py::arg("dy"), py::arg("pool_size") = 2, py::arg("strides") = py::none(),
     py::arg("padding") = "valid", py::arg("device") = "cpu", py::arg("repeat") = 1);

  m.def("dense_forward", [](py::object x, py::object w, py::object b, bool relu, std::string device, int repeat) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), W = f32_on(w, d, "kernel"), B = optional_on(b, d, "bias");
    HPCNN_CHECK_ARG(X.rank() == 2 && W.rank() == 2, "dense: x and kernel must be 2-D, got ", shape_str(X.shape()),
                    " and ", shape_str(W.shape()));
    Tensor Y = Tensor::empty({X.dim(0), W.dim(1)}, DType::F32, d);
    run_repeat(repeat, [&] { ops::dense_forward(X, W, B, Y, relu); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("kernel"), py::arg("bias"), py::arg("relu") = false, py::arg("device") = "cpu",
     py::arg("repeat") = 1);

  m.def("dense_backward", [](py::object x, py::object w, py::object y, py::object dy, bool relu, bool need_dx,
                             std::string device, int repeat, bool bias) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), W = f32_on(w, d, "kernel");
    Tensor DY = f32_on(dy, d, "dy");
    if (d.is_cpu()) DY = DY.to(d);
    Tensor Y = relu ? f32_on(y, d, "y") : Tensor();
    Tensor DX = need_dx ? Tensor::empty(X.shape(), DType::F32, d) : Tensor();
    Tensor DW = Tensor::empty(W.shape(), DType::F32, d);
    Tensor DB = bias ? Tensor::empty({W.dim(-1)}, DType::F32, d) : Tensor();
    run_repeat(repeat, [&] { ops::dense_backward(X, W, Y, DY, need_dx ? &DX : nullptr, DW, DB, relu); });
    return py::make_tuple(need_dx ? py::object(to_numpy(DX)) : py::none(), to_numpy(DW),
                          bias ? py::object(to_numpy(DB)) : py::none());
  }, py::arg("x"), py::arg("kernel"), py::arg("y"), py::arg("dy"), py::arg("relu") = false,
     py::arg("need_dx") = true, py::arg("device") = "cpu", py::arg("repeat") = 1, py::arg("bias") = true,
     "Returns (dx or None, dw, db or None); bias=False: no bias (no db).");

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
  m.def("activation_forward", [](py::object x, std::string activation, float alpha, std::string device, int repeat) {
    Device d = resolve_device(device);
    const Act a = parse_act(activation);
    Tensor X = f32_on(x, d, "x"), Y = Tensor::empty(X.shape(), DType::F32, d);
    run_repeat(repeat, [&] { ops::activation_forward(a, alpha, X, Y); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("activation"), py::arg("alpha") = 0.f, py::arg("device") = "cpu", py::arg("repeat") = 1,
     "An element-wise activation by Keras name ('tanh', 'gelu', 'gelu_approximate', 'leaky_relu' with alpha = "
     "the negative slope, 'elu' with alpha, ...).");
  m.def("activation_backward", [](py::object x, py::object y, py::object dy, std::string activation, float alpha,
                                  std::string device, int repeat) {
    Device d = resolve_device(device);
    const Act a = parse_act(activation);
    Tensor X = f32_on(x, d, "x"), Y = f32_on(y, d, "y"), DY = f32_on(dy, d, "dy");
    Tensor DX = Tensor::empty(X.shape(), DType::F32, d);
    run_repeat(repeat, [&] { ops::activation_backward(a, alpha, X, Y, DY, DX); });
    return to_numpy(DX);
  }, py::arg("x"), py::arg("y"), py::arg("dy"), py::arg("activation"), py::arg("alpha") = 0.f,
     py::arg("device") = "cpu", py::arg("repeat") = 1, "dx = dy * f'(x); y = f(x) from activation_forward.");

  m.def("avgpool2d_forward", pool_forward_binding(ops::avgpool2d_geometry, ops::avgpool2d_forward), py::arg("x"),
        py::arg("pool_size") = 2, py::arg("strides") = py::none(), py::arg("padding") = "valid",
        py::arg("device") = "cpu", py::arg("repeat") = 1);
  m.def("avgpool2d_backward", [](std::vector<long long> x_shape, py::object dy, py::object pool, py::object strides,
                                 std::string padding, std::string device, int repeat) {
    Device d = resolve_device(device);
    const PoolWindow p = pool_window(pool, strides, padding);
    Tensor DY = f32_on(dy, d, "dy"), DX = Tensor::empty(x_shape, DType::F32, d);
    run_repeat(repeat, [&] { ops::avgpool2d_backward(DY, DX, p.ph, p.pw, p.sh, p.sw, p.pad); });
    return to_numpy(DX);
  }, py::arg("x_shape"), py::arg("dy"), py::arg("pool_size") = 2, py::arg("strides") = py::none(),
     py::arg("padding") = "valid", py::arg("device") = "cpu", py::arg("repeat") = 1);

  m.def("global_pool2d_forward", [](py::object x, std::string mode, std::string device) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x");
    HPCNN_CHECK_ARG(mode == "avg" || mode == "max", "global_pool2d: mode must be 'avg' or 'max', got '", mode, "'");
    HPCNN_CHECK_ARG(X.rank() == 4, "global_pool2d: x must be 4-D (batch, height, width, channels), got ",
                    shape_str(X.shape()));
    Tensor Y = Tensor::empty({X.dim(0), X.dim(3)}, DType::F32, d);
    if (mode == "max") ops::global_maxpool2d_forward(X, Y);
    else ops::global_avgpool2d_forward(X, Y);
    return to_numpy(Y);
  }, py::arg("x"), py::arg("mode") = "avg", py::arg("device") = "cpu", "(N,H,W,C) -> (N,C): mode 'avg' or 'max'.");
  m.def("global_pool2d_backward", [](py::object x, py::object y, py::object dy, std::string mode, std::string device) {
    Device d = resolve_device(device);
    HPCNN_CHECK_ARG(mode == "avg" || mode == "max", "global_pool2d: mode must be 'avg' or 'max', got '", mode, "'");
    Tensor X = f32_on(x, d, "x"), DY = f32_on(dy, d, "dy"), DX = Tensor::empty(X.shape(), DType::F32, d);
    if (mode == "max") ops::global_maxpool2d_backward(X, f32_on(y, d, "y"), DY, DX);
    else ops::global_avgpool2d_backward(DY, DX);
    return to_numpy(DX);
  }, py::arg("x"), py::arg("y"), py::arg("dy"), py::arg("mode") = "avg", py::arg("device") = "cpu",
     "dx of global_pool2d_forward (y is read by 'max' only).");

  m.def("zero_pad2d_forward", [](py::object x, std::vector<int> padding, std::string device) {
    Device d = resolve_device(device);
    HPCNN_CHECK_ARG(padding.size() == 4, "zero_pad2d: padding is [top, bottom, left, right], got ", padding.size(),
                    " values");
    Tensor X = f32_on(x, d, "x");
    HPCNN_CHECK_ARG(X.rank() == 4, "zero_pad2d: x must be 4-D, got ", shape_str(X.shape()));
    Tensor Y = Tensor::empty({X.dim(0), X.dim(1) + padding[0] + padding[1], X.dim(2) + padding[2] + padding[3],
                              X.dim(3)}, DType::F32, d);
    ops::zero_pad2d_forward(X, Y, padding[0], padding[1], padding[2], padding[3]);
    return to_numpy(Y);
  }, py::arg("x"), py::arg("padding"), py::arg("device") = "cpu", "padding: [top, bottom, left, right].");
  m.def("zero_pad2d_backward", [](std::vector<long long> x_shape, py::object dy, std::vector<int> padding,
                                  std::string device) {
    Device d = resolve_device(device);
    HPCNN_CHECK_ARG(padding.size() == 4, "zero_pad2d: padding is [top, bottom, left, right], got ", padding.size(),
                    " values");
    Tensor DY = f32_on(dy, d, "dy"), DX = Tensor::empty(x_shape, DType::F32, d);
    ops::zero_pad2d_backward(DY, DX, padding[0], padding[1], padding[2], padding[3]);
    return to_numpy(DX);
  }, py::arg("x_shape"), py::arg("dy"), py::arg("padding"), py::arg("device") = "cpu");

  m.def("batchnorm_forward_training", [](py::object x, py::object gamma, py::object beta, float epsilon, bool relu,
                                         std::string device, int repeat, py::object residual) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), G = optional_on(gamma, d, "gamma"), B = optional_on(beta, d, "beta");
    Tensor R = optional_on(residual, d, "residual");
    HPCNN_CHECK_ARG(X.rank() >= 2, "batch_norm: x needs a batch and a channel axis, got ", shape_str(X.shape()));
    const long long c = X.dim(-1);
    Tensor Y = Tensor::empty(X.shape(), DType::F32, d), M = Tensor::empty({c}, DType::F32, d),
           V = Tensor::empty({c}, DType::F32, d), I = Tensor::empty({c}, DType::F32, d);
    run_repeat(repeat, [&] { ops::batchnorm_forward_training(X, G, B, Y, epsilon, relu, M, V, I, R); });
    return py::make_tuple(to_numpy(Y), to_numpy(M), to_numpy(V), to_numpy(I));
  }, py::arg("x"), py::arg("gamma"), py::arg("beta"), py::arg("epsilon") = 1e-3f, py::arg("relu") = false,
     py::arg("device") = "cpu", py::arg("repeat") = 1, py::arg("residual") = py::none(),
     "Batch norm over the last axis with the batch's statistics: (y, mean, var (biased), invstd). gamma/beta may "
     "be None; residual (x's shape) is added before the ReLU.");
  m.def("batchnorm_forward_inference", [](py::object x, py::object gamma, py::object beta, py::object moving_mean,
                                          py::object moving_var, float epsilon, bool relu, std::string device,
                                          int repeat, py::object residual) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), G = optional_on(gamma, d, "gamma"), B = optional_on(beta, d, "beta");
    Tensor MM = f32_on(moving_mean, d, "moving_mean"), MV = f32_on(moving_var, d, "moving_variance");
    Tensor R = optional_on(residual, d, "residual");
    Tensor Y = Tensor::empty(X.shape(), DType::F32, d);
    run_repeat(repeat, [&] { ops::batchnorm_forward_inference(X, G, B, MM, MV, Y, epsilon, relu, R); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("gamma"), py::arg("beta"), py::arg("moving_mean"), py::arg("moving_variance"),
     py::arg("epsilon") = 1e-3f, py::arg("relu") = false, py::arg("device") = "cpu", py::arg("repeat") = 1,
     py::arg("residual") = py::none());
  m.def("batchnorm_backward_training", [](py::object x, py::object y, py::object dy, py::object gamma,
                                          py::object mean, py::object invstd, float epsilon, bool relu, bool need_dx,
                                          std::string device, int repeat) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), DY = f32_on(dy, d, "dy"), G = optional_on(gamma, d, "gamma");
    if (d.is_cpu()) DY = DY.to(d);  // dy may be masked in place: never the caller's array
    Tensor Y = relu ? f32_on(y, d, "y") : Tensor();
    Tensor M = f32_on(mean, d, "mean"), I = f32_on(invstd, d, "invstd");
    const long long c = X.dim(-1);
    Tensor DX = need_dx ? Tensor::empty(X.shape(), DType::F32, d) : Tensor();
    Tensor DG = Tensor::empty({c}, DType::F32, d), DB = Tensor::empty({c}, DType::F32, d);
    run_repeat(repeat, [&] {
      ops::batchnorm_backward_training(X, Y, DY, G, M, I, epsilon, relu, need_dx ? &DX : nullptr, &DG, &DB);
    });
    return py::make_tuple(optional_out(DX), to_numpy(DG), to_numpy(DB));
  }, py::arg("x"), py::arg("y"), py::arg("dy"), py::arg("gamma"), py::arg("mean"), py::arg("invstd"),
     py::arg("epsilon") = 1e-3f, py::arg("relu") = false, py::arg("need_dx") = true, py::arg("device") = "cpu",
     py::arg("repeat") = 1, "(dx or None, dgamma, dbeta) with the forward's batch mean and invstd.");
  m.def("batchnorm_backward_inference", [](py::object y, py::object dy, py::object gamma, py::object moving_var,
                                           float epsilon, bool relu, std::string device) {
    Device d = resolve_device(device);
    Tensor DY = f32_on(dy, d, "dy"), G = optional_on(gamma, d, "gamma"), MV = f32_on(moving_var, d, "moving_variance");
    if (d.is_cpu()) DY = DY.to(d);
    Tensor Y = relu ? f32_on(y, d, "y") : Tensor();
    Tensor DX = Tensor::empty(DY.shape(), DType::F32, d);
    ops::batchnorm_backward_inference(Y, DY, G, MV, epsilon, relu, &DX);
    return to_numpy(DX);
  }, py::arg("y"), py::arg("dy"), py::arg("gamma"), py::arg("moving_variance"), py::arg("epsilon") = 1e-3f,
     py::arg("relu") = false, py::arg("device") = "cpu");
  m.def("batchnorm_inference_param_gradients", [](py::object x, py::object y, py::object dy, py::object moving_mean,
                                                  py::object moving_var, float epsilon, bool relu, std::string device) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), DY = f32_on(dy, d, "dy");
    if (d.is_cpu()) DY = DY.to(d);  // dy may be masked in place: never the caller's array
    Tensor Y = relu ? f32_on(y, d, "y") : Tensor();
    Tensor MM = f32_on(moving_mean, d, "moving_mean"), MV = f32_on(moving_var, d, "moving_variance");
    const long long c = X.dim(-1);
    Tensor DG = Tensor::empty({c}, DType::F32, d), DB = Tensor::empty({c}, DType::F32, d);
    ops::batchnorm_inference_param_gradients(X, Y, DY, MM, MV, epsilon, relu, &DG, &DB);
    return py::make_tuple(to_numpy(DG), to_numpy(DB), to_numpy(DY));
  }, py::arg("x"), py::arg("y"), py::arg("dy"), py::arg("moving_mean"), py::arg("moving_variance"),
     py::arg("epsilon") = 1e-3f, py::arg("relu") = false, py::arg("device") = "cpu",
     "(dgamma, dbeta, g) of a trainable batch normalization run in inference mode: the moving statistics as the "
     "constants; g is dy masked by y > 0 with relu.");
  m.def("batchnorm_update_moving", [](py::object moving_mean, py::object moving_var, py::object mean, py::object var,
                                      float momentum, std::string device) {
    Device d = resolve_device(device);
    Tensor MM = f32_on(moving_mean, d, "moving_mean").to(d), MV = f32_on(moving_var, d, "moving_variance").to(d);
    Tensor M = f32_on(mean, d, "mean"), V = f32_on(var, d, "var");
    ops::batchnorm_update_moving(MM, MV, M, V, momentum);
    return py::make_tuple(to_numpy(MM), to_numpy(MV));
  }, py::arg("moving_mean"), py::arg("moving_variance"), py::arg("mean"), py::arg("var"), py::arg("momentum") = 0.99f,
     py::arg("device") = "cpu", "Keras' moving-average update: returns new (moving_mean, moving_variance).");

  m.def("scale_shift_forward", [](py::object x, py::object scale, py::object offset, std::string device) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), S = f32_on(scale, d, "scale"), O = f32_on(offset, d, "offset");
    Tensor Y = Tensor::empty(X.shape(), DType::F32, d);
    ops::scale_shift_forward(X, S, O, Y);
    return to_numpy(Y);
  }, py::arg("x"), py::arg("scale"), py::arg("offset"), py::arg("device") = "cpu",
     "y = x * scale + offset over the last axis (scale, offset: one value per channel).");
  m.def("scale_shift_backward", [](py::object dy, py::object scale, std::string device) {
    Device d = resolve_device(device);
    Tensor DY = f32_on(dy, d, "dy"), S = f32_on(scale, d, "scale"), DX = Tensor::empty(DY.shape(), DType::F32, d);
    ops::scale_shift_backward(DY, S, DX);
    return to_numpy(DX);
  }, py::arg("dy"), py::arg("scale"), py::arg("device") = "cpu");

  m.def("dropout_forward", [](py::object x, float rate, uint64_t seed, uint64_t stream, std::string device,
                              int repeat, uint64_t offset) {
    Device d = resolve_device(device);
    Tensor X = f32_on(x, d, "x"), Y = Tensor::empty(X.shape(), DType::F32, d);
    run_repeat(repeat, [&] { ops::dropout_forward(X, Y, rate, seed, stream, offset); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("rate"), py::arg("seed") = 0, py::arg("stream") = 0, py::arg("device") = "cpu",
     py::arg("repeat") = 1, py::arg("offset") = 0,
     "Inverted dropout; element i's mask is the draw of counter offset + i (a replica's first global row "
     "times the elements per row).");
  m.def("dropout_backward", [](py::object dy, float rate, uint64_t seed, uint64_t stream, std::string device,
                               int repeat, uint64_t offset) {
    Device d = resolve_device(device);
    Tensor DY = f32_on(dy, d, "dy"), DX = Tensor::empty(DY.shape(), DType::F32, d);
    run_repeat(repeat, [&] { ops::dropout_backward(DY, DX, rate, seed, stream, offset); });
    return to_numpy(DX);
  }, py::arg("dy"), py::arg("rate"), py::arg("seed") = 0, py::arg("stream") = 0, py::arg("device") = "cpu",
     py::arg("repeat") = 1, py::arg("offset") = 0);

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
