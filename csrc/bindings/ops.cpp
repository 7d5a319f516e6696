// The operators on NumPy arrays: hpcnn._core.ops.*. Every function takes `device` ('cpu',
// 'gpu:0', ...): inputs are copied there, the op runs, results come back as NumPy arrays. Tests
// compare the devices with the same calls; benchmarks time them. conv2d kernels (and dw) are
// Keras' HWIO here on every device: converted to and from the layout of the device's backend.
#include <pybind11/stl.h>

#include <tuple>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
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

  m.def("depthwise_conv2d_forward", [](py::object x, py::object w, py::object b, py::object strides,
                                       std::string padding, py::object dilation_rate, std::string device, int repeat) {
    Device d = resolve_device(device);
    auto [sh, sw] = pair2(strides, "strides");
    auto [dh, dw] = pair2(dilation_rate, "dilation_rate");
    Tensor X = f32_on(x, d, "x"), W = f32_on(w, d, "kernel"), B = optional_on(b, d, "bias");
    Padding pad = parse_padding(padding);
    DepthwiseGeometry g = ops::depthwise_conv2d_geometry(X, W, sh, sw, dh, dw, pad);
    Tensor Y = Tensor::empty({g.n, g.oh, g.ow, g.oc()}, DType::F32, d);
    run_repeat(repeat, [&] { ops::depthwise_conv2d_forward(X, W, B, Y, sh, sw, dh, dw, pad); });
    return to_numpy(Y);
  }, py::arg("x"), py::arg("kernel"), py::arg("bias"), py::arg("strides") = 1, py::arg("padding") = "valid",
     py::arg("dilation_rate") = 1, py::arg("device") = "cpu", py::arg("repeat") = 1,
     "Keras' DepthwiseConv2D: x (n, h, w, c), kernel (kh, kw, c, depth_multiplier) on every device, bias "
     "(c * depth_multiplier,) or None -> (n, oh, ow, c * depth_multiplier).");

  m.def("depthwise_conv2d_backward", [](py::object x, py::object w, py::object dy, py::object strides,
                                        std::string padding, py::object dilation_rate, bool need_dx, bool bias,
                                        std::string device, int repeat) {
    Device d = resolve_device(device);
    auto [sh, sw] = pair2(strides, "strides");
    auto [dh, dw] = pair2(dilation_rate, "dilation_rate");
    Tensor X = f32_on(x, d, "x"), W = f32_on(w, d, "kernel"), DY = f32_on(dy, d, "dy");
    Padding pad = parse_padding(padding);
    DepthwiseGeometry g = ops::depthwise_conv2d_geometry(X, W, sh, sw, dh, dw, pad);
    Tensor DX = need_dx ? Tensor::empty(X.shape(), DType::F32, d) : Tensor();
    Tensor DW = Tensor::empty(W.shape(), DType::F32, d);
    Tensor DB = bias ? Tensor::empty({g.oc()}, DType::F32, d) : Tensor();
    run_repeat(repeat, [&] {
      ops::depthwise_conv2d_backward(X, W, DY, need_dx ? &DX : nullptr, DW, DB, sh, sw, dh, dw, pad);
    });
    return py::make_tuple(need_dx ? py::object(to_numpy(DX)) : py::none(), to_numpy(DW),
                          bias ? py::object(to_numpy(DB)) : py::none());
  }, py::arg("x"), py::arg("kernel"), py::arg("dy"), py::arg("strides") = 1, py::arg("padding") = "valid",
     py::arg("dilation_rate") = 1, py::arg("need_dx") = true, py::arg("bias") = true, py::arg("device") = "cpu",
     py::arg("repeat") = 1, "Returns (dx or None, dw, db or None) of depthwise_conv2d_forward.");

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
  m.def("relu_clip", [](py::object x, py::object dy, py::object max_value, float negative_slope, float threshold,
                        std::string device) {
    Device d = resolve_device(device);
    ReluClipParams p;
    p.negative_slope = negative_slope;
    p.threshold = threshold;
    p.has_max = !max_value.is_none();
    p.max_value = p.has_max ? max_value.cast<float>() : 0.f;
    Tensor X = f32_on(x, d, "x"), Y = Tensor::empty(X.shape(), DType::F32, d);
    ops::relu_clip_forward(p, X, Y);
    if (dy.is_none()) return py::make_tuple(to_numpy(Y), py::object(py::none()));
    Tensor DY = f32_on(dy, d, "dy"), DX = Tensor::empty(X.shape(), DType::F32, d);
    ops::relu_clip_backward(p, X, DY, DX);
    return py::make_tuple(to_numpy(Y), py::object(to_numpy(DX)));
  }, py::arg("x"), py::arg("dy"), py::arg("max_value") = py::none(), py::arg("negative_slope") = 0.f,
     py::arg("threshold") = 0.f, py::arg("device") = "cpu",
     "Keras' ReLU(max_value, negative_slope, threshold): (y, dx or None when dy is None).");

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
}

}  // namespace hpcnn::bindings
