// The normalization operators on NumPy arrays, in hpcnn._core.ops beside the other layers'
// (bindings/ops.cpp, whose conventions hold here: `device`, `repeat`): batch normalization in
// training and inference mode, forward and backward, its moving-statistics update, and the
// per-channel scale and shift (and Keras' Normalization's constants for it); the broadcast product
// (the Multiply layer's).
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "ops/ops.h"

namespace hpcnn::bindings {

void bind_norm_ops(py::module_& m) {
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

  m.def("normalization_constants", [](py::object mean, py::object variance, float epsilon, std::string device) {
    Device d = resolve_device(device);
    Tensor M = f32_on(mean, d, "mean"), V = f32_on(variance, d, "variance");
    HPCNN_CHECK_ARG(M.rank() == 1, "normalization_constants: mean must be 1-D, got ", shape_str(M.shape()));
    Tensor S = Tensor::empty(M.shape(), DType::F32, d), O = Tensor::empty(M.shape(), DType::F32, d);
    ops::normalization_constants(M, V, epsilon, S, O);
    return py::make_tuple(to_numpy(S), to_numpy(O));
  }, py::arg("mean"), py::arg("variance"), py::arg("epsilon") = 1e-7f, py::arg("device") = "cpu",
     "Keras' Normalization as (scale, offset) for scale_shift_forward: 1 / max(sqrt(variance), epsilon), "
     "-mean * scale.");

  m.def("multiply_forward", [](py::object a, py::object b, std::string device, int repeat) {
    Device d = resolve_device(device);
    Tensor A = f32_on(a, d, "a"), B = f32_on(b, d, "b");
    Tensor Y = Tensor::empty(ops::broadcast_shape(A.shape(), B.shape(), "multiply"), DType::F32, d);
    run_repeat(repeat, [&] { ops::multiply_forward(A, B, Y); });
    return to_numpy(Y);
  }, py::arg("a"), py::arg("b"), py::arg("device") = "cpu", py::arg("repeat") = 1,
     "a * b with Keras' broadcasting (each axis equal or 1; the first, the batch, never broadcast).");
  m.def("multiply_backward", [](py::object a, py::object b, py::object dy, std::string device) {
    Device d = resolve_device(device);
    Tensor A = f32_on(a, d, "a"), B = f32_on(b, d, "b"), DY = f32_on(dy, d, "dy");
    Tensor DA = Tensor::empty(A.shape(), DType::F32, d), DB = Tensor::empty(B.shape(), DType::F32, d);
    ops::multiply_backward(A, B, DY, &DA, &DB);
    return py::make_tuple(to_numpy(DA), to_numpy(DB));
  }, py::arg("a"), py::arg("b"), py::arg("dy"), py::arg("device") = "cpu",
     "(da, db) of multiply_forward: dy times the other input, summed over the axes each was broadcast along.");
}

}  // namespace hpcnn::bindings
