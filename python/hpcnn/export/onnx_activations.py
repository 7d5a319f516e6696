"""Keras' activations (hpcnn.layers' list: ``activation=`` of Conv2D and Dense, the Activation,
ReLU, LeakyReLU, ELU and Softmax layers) as ONNX operators, with the constants hpcnn computes them
with (csrc/ops/elementwise.h). Where ONNX has the operator only from a later opset (Gelu: 20,
Mish: 18) an older opset gets its formula from older operators (Erf, Tanh, Softplus)."""
from __future__ import annotations

import math
from typing import Callable, Dict

import numpy as np

from .onnx_graph import OnnxGraph, Value

SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805


def _const(g: OnnxGraph, prefix: str, value: float) -> str:
    return g.weight(f"{prefix}/const", np.float32(value))


def _relu6(g: OnnxGraph, x: str, p: str) -> str:
    return g.op("Clip", [x, _const(g, p, 0.0), _const(g, p, 6.0)], f"{p}/Clip")


def _gelu(g: OnnxGraph, x: str, p: str) -> str:
    if g.opset >= 20:
        return g.op("Gelu", [x], f"{p}/Gelu")
    # 0.5 x (1 + erf(x / sqrt(2)))
    e = g.op("Erf", [g.op("Div", [x, _const(g, p, math.sqrt(2.0))], f"{p}/Div")], f"{p}/Erf")
    y = g.op("Mul", [x, g.op("Add", [e, _const(g, p, 1.0)], f"{p}/Add")], f"{p}/Mul")
    return g.op("Mul", [y, _const(g, p, 0.5)], f"{p}/Mul")


def _gelu_approximate(g: OnnxGraph, x: str, p: str) -> str:
    if g.opset >= 20:
        return g.op("Gelu", [x], f"{p}/Gelu", approximate="tanh")
    # 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2 / pi) (x + 0.044715 x^3): hpcnn's form, without
    # 1 + tanh's cancellation for u << 0
    x3 = g.op("Mul", [g.op("Mul", [x, x], f"{p}/Mul"), x], f"{p}/Mul")
    inner = g.op("Add", [x, g.op("Mul", [x3, _const(g, p, 0.044715)], f"{p}/Mul")], f"{p}/Add")
    s = g.op("Sigmoid", [g.op("Mul", [inner, _const(g, p, 2.0 * math.sqrt(2.0 / math.pi))], f"{p}/Mul")],
             f"{p}/Sigmoid")
    return g.op("Mul", [x, s], f"{p}/Mul")


def _swish(g: OnnxGraph, x: str, p: str) -> str:
    return g.op("Mul", [x, g.op("Sigmoid", [x], f"{p}/Sigmoid")], f"{p}/Mul")


def _mish(g: OnnxGraph, x: str, p: str) -> str:
    if g.opset >= 18:
        return g.op("Mish", [x], f"{p}/Mish")
    return g.op("Mul", [x, g.op("Tanh", [g.op("Softplus", [x], f"{p}/Softplus")], f"{p}/Tanh")], f"{p}/Mul")


def _hard_silu(g: OnnxGraph, x: str, p: str) -> str:
    if g.opset >= 14:
        return g.op("HardSwish", [x], f"{p}/HardSwish")  # x * max(0, min(1, x / 6 + 1/2)): Keras 3's
    return g.op("Mul", [x, g.op("HardSigmoid", [x], f"{p}/HardSigmoid", alpha=1.0 / 6.0, beta=0.5)], f"{p}/Mul")


def _op(op_type: str, **attributes: float) -> Callable[[OnnxGraph, str, str], str]:
    return lambda g, x, p: g.op(op_type, [x], f"{p}/{op_type}", **attributes)


# Elementwise activations by Keras' name (softmax and linear are activation()'s own).
_ELEMENTWISE: Dict[str, Callable[[OnnxGraph, str, str], str]] = {
    "relu": _op("Relu"),
    "relu6": _relu6,
    "leaky_relu": _op("LeakyRelu", alpha=0.2),  # keras.activations.leaky_relu's slope
    "elu": _op("Elu", alpha=1.0),
    "selu": _op("Selu", alpha=SELU_ALPHA, gamma=SELU_SCALE),
    "gelu": _gelu,
    "gelu_approximate": _gelu_approximate,
    "tanh": _op("Tanh"),
    "sigmoid": _op("Sigmoid"),
    "hard_sigmoid": _op("HardSigmoid", alpha=1.0 / 6.0, beta=0.5),  # Keras 3's relu6(x + 3) / 6
    "swish": _swish,
    "silu": _swish,
    "softplus": _op("Softplus"),
    "softsign": _op("Softsign"),
    "mish": _mish,
    "hard_silu": _hard_silu,
    "hard_swish": _hard_silu,
}

NAMES = tuple(_ELEMENTWISE) + ("softmax", "linear")


def activation(g: OnnxGraph, v: Value, name: str, prefix: str) -> Value:
    """``v`` through Keras' activation ``name`` ('linear': ``v`` itself); softmax over the channels
    (Keras' last axis, wherever the value's layout keeps it)."""
    if name == "linear":
        return v
    p = f"{prefix}/{name}"
    if name == "softmax":
        return Value(g.op("Softmax", [v.name], f"{p}/Softmax", axis=v.channel_axis), v.shape, v.layout)
    if name not in _ELEMENTWISE:
        raise NotImplementedError(f"export: the activation {name!r} of {prefix!r} has no ONNX form in hpcnn")
    return Value(_ELEMENTWISE[name](g, v.name, p), v.shape, v.layout)


def leaky_relu(g: OnnxGraph, v: Value, slope: float, prefix: str) -> Value:
    return Value(g.op("LeakyRelu", [v.name], f"{prefix}/LeakyRelu", alpha=float(slope)), v.shape, v.layout)


def general_relu(g: OnnxGraph, v: Value, max_value: object, slope: float, threshold: float, prefix: str) -> Value:
    """Keras' ReLU(max_value, negative_slope, threshold) in any combination, its steps as
    keras.activations.relu takes them (csrc/ops/relu_clip.h)."""
    p, x = f"{prefix}/relu", v.name
    if threshold:
        zero = _const(g, p, 0.0)
        above = g.op("Greater", [x, _const(g, p, threshold)], f"{p}/Greater")
        a = g.op("Where", [above, x, zero], f"{p}/Where")
    else:
        a = g.op("Relu", [x], f"{p}/Relu")
    if max_value is not None:
        a = g.op("Clip", [a, _const(g, p, 0.0), _const(g, p, float(max_value))], f"{p}/Clip")  # type: ignore
    if slope:
        below = g.op("Relu", [g.op("Sub", [_const(g, p, threshold), x], f"{p}/Sub")], f"{p}/Relu")
        a = g.op("Sub", [a, g.op("Mul", [below, _const(g, p, slope)], f"{p}/Mul")], f"{p}/Sub")
    return Value(a, v.shape, v.layout)


def elu(g: OnnxGraph, v: Value, alpha: float, prefix: str) -> Value:
    return Value(g.op("Elu", [v.name], f"{prefix}/Elu", alpha=float(alpha)), v.shape, v.layout)
