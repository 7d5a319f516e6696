"""Keras-named layers. Each is a configuration; the C++ core does the work.

Input is NHWC (batch, height, width, channels), as in Keras. ``Conv2D`` kernels are
(kh, kw, in, out) and ``Dense`` kernels (in, out), so ``get_weights``/``set_weights`` move
weights to and from Keras unchanged; ``Flatten`` flattens in (H, W, C) order as Keras does.
``BatchNormalization``'s weights are Keras' four, in Keras' order: gamma, beta, moving_mean,
moving_variance (the last two non-trainable).

Activations (``activation=`` of Conv2D and Dense, ``Activation(...)``) by Keras' names: 'relu',
'relu6', 'leaky_relu' (slope 0.2, as keras.activations.leaky_relu), 'elu', 'selu', 'gelu' (Keras'
default exact erf form), 'gelu_approximate' (the tanh form, Keras' ``gelu(x, approximate=True)``),
'tanh', 'sigmoid', 'hard_sigmoid' (Keras 3's relu6(x + 3) / 6), 'swish' / 'silu', 'softplus',
'softsign', 'mish', 'softmax' (over the last axis, on any layer) and 'linear' / None. ReLU is fused
into Conv2D and Dense; any other activation runs as its own step after them.

Layers go into a ``Sequential`` model, or are called on symbolic tensors to build a graph for
``hpcnn.Model`` (the functional API, functional.py): ``y = Conv2D(8, 3)(hpcnn.Input((32, 32, 3)))``.
``Add`` and ``Concatenate`` take a list of tensors.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core, regularizers, validation
from .functional import KerasTensor, call_layer, layer_label

IntPair = Union[int, Sequence[int]]

# Keras' activation names hpcnn computes (csrc/ops/activation.h has the formulas).
_ACTIVATIONS = ("relu", "softmax", "linear", "relu6", "leaky_relu", "elu", "selu", "gelu", "gelu_approximate",
                "tanh", "sigmoid", "hard_sigmoid", "swish", "silu", "softplus", "softsign", "mish")


def _activation(a: Any) -> str:
    """An activation name from a string, None ('linear') or a function named like one (for
    example ``keras.activations.tanh`` or ``hpcnn.activations.tanh``)."""
    if a is None:
        return "linear"
    if callable(a) and getattr(a, "__name__", None) in _ACTIVATIONS:
        return a.__name__
    if not isinstance(a, str) or a.lower() not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {a!r}: use one of {', '.join(repr(n) for n in _ACTIVATIONS)} or None")
    return a.lower()


def _padding(p: str) -> str:
    if not isinstance(p, str) or p.lower() not in ("same", "valid"):
        raise ValueError(f"The `padding` argument must be one of 'valid' or 'same'. Received: padding={p!r}")
    return p.lower()


def _is_float32(dtype: Any, also: Tuple[str, ...] = ()) -> bool:
    try:
        return np.dtype(dtype).name in ("float32",) + also
    except TypeError:
        return False


def _keras_defaults_only(kwargs: Dict[str, Any], caller: str, accepted: Dict[str, Callable[[Any], bool]]) -> None:
    """Pops Keras arguments that hpcnn supports only at their default value; any other value is a
    ValueError naming it (never ignored)."""
    for key, is_default in accepted.items():
        if key in kwargs:
            v = kwargs.pop(key)
            if not is_default(v):
                raise ValueError(f"{caller}: {key}={v!r} is not supported (hpcnn supports only Keras' default)")


def _is_none(v: Any) -> bool:
    return v is None


def _is_one_pair(v: Any) -> bool:
    return v == 1 or (isinstance(v, (tuple, list)) and list(v) == [1, 1])


# Keras' activity regularizer and weight constraints: hpcnn has none, so only None is accepted.
_NO_REGULARIZERS = {k: _is_none for k in ("activity_regularizer", "kernel_constraint", "bias_constraint")}


class _WeightRegularizers:
    """kernel_regularizer / bias_regularizer of a layer with a kernel and a bias (Conv2D, Dense):
    taken by the constructor, in get_config when set (Keras' serialized form), and sent to the
    core as the factors kernel_l1, kernel_l2, bias_l1, bias_l2 (nn/regularization.h)."""

    def _take_regularizers(self, kwargs: Dict[str, Any]) -> None:
        self.kernel_regularizer = regularizers.get(kwargs.pop("kernel_regularizer", None), "kernel_regularizer")
        self.bias_regularizer = regularizers.get(kwargs.pop("bias_regularizer", None), "bias_regularizer")

    def _regularizer_config(self) -> Dict[str, Any]:
        return {k: regularizers.serialize(r) for k, r in (("kernel_regularizer", self.kernel_regularizer),
                                                           ("bias_regularizer", self.bias_regularizer))
                if r is not None}

    def _regularizer_core_config(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for param, r in (("kernel", self.kernel_regularizer), ("bias", self.bias_regularizer)):
            if param == "bias" and not getattr(self, "use_bias", True):
                continue  # no bias, nothing to regularize (Keras ignores bias_regularizer then too)
            if r is not None:
                out[f"{param}_l1"], out[f"{param}_l2"] = r.l1, r.l2
        return out


class Layer:
    """Base class: a named piece of configuration that knows its output shape.

    ``trainable`` (Keras' attribute): a layer with ``trainable = False`` keeps its weights fixed in
    ``fit`` / ``train_on_batch`` (no optimizer step touches them, nor Adam's moments for them) and
    is counted as non-trainable by ``summary()``. As in Keras, a change takes effect at the next
    ``compile()``: the model trains with the setting it was compiled with.
    """

    _keras_name = "layer"
    _merges_inputs = False  # takes a list of tensors (Add, Concatenate)

    def __init__(self, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 trainable: bool = True, dtype: Any = None, **kwargs: Any) -> None:
        cls = type(self).__name__
        validation.no_other_arguments(kwargs, cls)
        if dtype is not None and not _is_float32(dtype):
            raise ValueError(f"{cls}: hpcnn layers compute in float32; dtype={dtype!r} is not supported")
        self.name = validation.name(name, cls)
        self.input_shape = validation.shape(input_shape, "input_shape", cls) if input_shape is not None else None
        self.trainable = trainable
        # Its one position in a graph (functional.py): the tensors it was called on, and its output.
        self._inbound: Optional[List[KerasTensor]] = None
        self._output: Optional[KerasTensor] = None

    def __call__(self, inputs: Any, **kwargs: Any) -> KerasTensor:
        """Apply the layer to a symbolic tensor (a list of them for ``Add``/``Concatenate``) and
        return its output tensor; shapes are checked now. A layer is called once (one position
        per layer)."""
        return call_layer(self, inputs, kwargs)

    @property
    def output(self) -> KerasTensor:
        """The tensor this layer output when called (Keras' ``layer.output``)."""
        if getattr(self, "_output", None) is None:
            raise AttributeError(f"layer {layer_label(self)} has never been called and thus has no defined output")
        return self._output  # type: ignore[return-value]

    @property
    def input(self) -> Union[KerasTensor, List[KerasTensor]]:
        """The tensor (a list for a merging layer) this layer was called on (Keras' ``layer.input``)."""
        inbound = getattr(self, "_inbound", None)
        if inbound is None or isinstance(self, InputLayer):
            if isinstance(self, InputLayer):
                return self.output
            raise AttributeError(f"layer {layer_label(self)} is not connected, no input to return")
        return list(inbound) if self._merges_inputs else inbound[0]

    @property
    def trainable(self) -> bool:
        """Whether fit updates this layer's weights (takes effect at the next compile())."""
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = validation.boolean(value, "trainable", type(self).__name__)

    # The layer's own config (Keras' get_config), without the class name.
    def get_config(self) -> Dict[str, Any]:
        cfg: Dict[str, Any] = {"name": self.name, "trainable": self.trainable}
        if self.input_shape is not None:
            cfg["input_shape"] = list(self.input_shape)
        return cfg

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Layer":
        return cls(**config)

    def core_config(self) -> Dict[str, Any]:
        """What the C++ core is given for this layer: one dict, ``class_name`` the Keras class and
        the layer's normalized arguments. The core lowers it to its own layers (fusions, the
        softmax split: csrc/nn/lowering.h) and reports shapes, weights and counts."""
        raise NotImplementedError

    def count_params(self, input_shape: Tuple[int, ...]) -> int:
        """The number of weights (trainable and not) for a per-sample input shape, as the core
        counts them."""
        return sum(int(np.prod(shape)) for _, shape, _ in
                   _core.layer_weight_shapes(self.core_config(), [list(input_shape)]))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items()
                         if k != "name" and v is not None and not (k == "trainable" and v))
        return f"{type(self).__name__}({args})"


class InputLayer(Layer):
    """Declares the per-sample input shape, e.g. ``InputLayer(input_shape=[32, 32, 3])``.

    ``batch_size`` is accepted for Keras compatibility and checked, but batches are sized by
    ``fit``/``evaluate``/``predict``; ``dtype`` may be float32 or uint8 (both are taken as input
    either way)."""

    _keras_name = "input_layer"

    def __init__(self, input_shape: Optional[Sequence[int]] = None, shape: Optional[Sequence[int]] = None,
                 name: Optional[str] = None, batch_size: Optional[int] = None, dtype: Any = None,
                 batch_shape: Optional[Sequence[Optional[int]]] = None, sparse: Optional[bool] = None,
                 **kwargs: Any) -> None:
        validation.integer(batch_size, "batch_size", "InputLayer", allow_none=True)
        if dtype is not None and not _is_float32(dtype, ("uint8",)):
            raise ValueError(f"InputLayer: dtype must be float32 or uint8, got {dtype!r}")
        if sparse:
            raise ValueError("InputLayer: sparse inputs are not supported")
        given = [s for s in (input_shape, shape) if s is not None]
        if batch_shape is not None:
            if isinstance(batch_shape, (str, bytes)) or not isinstance(batch_shape, Sequence) or len(batch_shape) < 2:
                raise ValueError(f"InputLayer: batch_shape must be (batch, *shape), got {batch_shape!r}")
            validation.integer(batch_shape[0], "batch_shape[0]", "InputLayer", allow_none=True)
            given.append(batch_shape[1:])
        if not given:
            raise ValueError("InputLayer needs input_shape=(height, width, channels) (or shape=...)")
        shp = validation.shape(given[0], "input_shape" if input_shape is not None else "shape", "InputLayer")
        for other in given[1:]:
            if validation.shape(other, "shape", "InputLayer") != shp:
                raise ValueError(f"InputLayer: input_shape, shape and batch_shape disagree: {given}")
        super().__init__(name=name, input_shape=shp, **kwargs)
        self._inbound = []
        self._output = KerasTensor(shp, self, dtype="uint8" if _is_float32(dtype, ("uint8",)) and
                                   np.dtype(dtype).name == "uint8" else "float32")

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "input_shape": list(self.input_shape or ())}

    def count_params(self, input_shape: Optional[Tuple[int, ...]] = None) -> int:
        """No weights (the core never sees an InputLayer: it is the model's input shape)."""
        return 0


def Input(shape: Optional[Sequence[int]] = None, batch_size: Optional[int] = None, dtype: Any = None,
          sparse: Optional[bool] = None, batch_shape: Optional[Sequence[Optional[int]]] = None,
          name: Optional[str] = None, **kwargs: Any) -> KerasTensor:
    """``x = hpcnn.Input(shape=(32, 32, 3))``: the symbolic input of a functional model (Keras'
    ``keras.Input``), per-sample shape without the batch axis. It may also start a Sequential
    (``Sequential([hpcnn.Input((32, 32, 3)), ...])``). Arguments as ``InputLayer``."""
    for k in ("tensor", "optional"):  # Keras' arguments, supported at their defaults only
        v = kwargs.pop(k, None)
        if v is not None and v is not False:
            raise ValueError(f"Input: {k}={v!r:.100} is not supported")
    return InputLayer(shape=shape, batch_size=batch_size, dtype=dtype, sparse=sparse, batch_shape=batch_shape,
                      name=name, **kwargs).output


class Conv2D(_WeightRegularizers, Layer):
    """2-D convolution, NHWC, Keras semantics for ``padding`` and ``strides`` (any stride; the
    CPU computes strided 3x3 and 1x1 convolutions with their own fast paths);
    ``use_bias=False`` drops the bias (Keras' convention before a BatchNormalization).
    ``kernel_regularizer`` / ``bias_regularizer``: hpcnn.regularizers (L1, L2, L1L2)."""

    _keras_name = "conv2d"

    def __init__(self, filters: int, kernel_size: IntPair, strides: IntPair = (1, 1), padding: str = "valid",
                 activation: Optional[str] = None, use_bias: bool = True, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        for k in ("kernel_initializer", "bias_initializer", "data_format"):
            v = kwargs.pop(k, None)
            if k == "data_format" and v not in (None, "channels_last"):
                raise ValueError("hpcnn is NHWC only: data_format must be 'channels_last'")
            if k == "kernel_initializer" and v not in (None, "glorot_uniform"):
                raise ValueError("hpcnn initializes kernels with glorot_uniform (Keras' default) only")
            if k == "bias_initializer" and v not in (None, "zeros"):
                raise ValueError("hpcnn initializes biases with zeros (Keras' default) only")
        _keras_defaults_only(kwargs, "Conv2D", dict(_NO_REGULARIZERS, dilation_rate=_is_one_pair,
                                                    groups=lambda v: v == 1))
        self._take_regularizers(kwargs)
        self.use_bias = validation.boolean(use_bias, "use_bias", "Conv2D")
        if not validation.is_integer(filters) or not 0 < filters <= validation.INT32_MAX:
            raise ValueError("Invalid value for argument `filters`. Expected a strictly positive integer "
                             f"(at most {validation.INT32_MAX}). Received filters={filters!r}.")
        self.filters = int(filters)
        self.kernel_size = validation.int_tuple(kernel_size, 2, "kernel_size")
        self.strides = validation.int_tuple(strides, 2, "strides")
        self.padding = _padding(padding)
        self.activation = _activation(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(filters=self.filters, kernel_size=list(self.kernel_size), strides=list(self.strides),
                   padding=self.padding, activation=self.activation, use_bias=self.use_bias)
        cfg.update(self._regularizer_config())
        return cfg

    def core_config(self) -> Dict[str, Any]:
        conv = dict(class_name="Conv2D", filters=self.filters, kernel_size=list(self.kernel_size),
                    strides=list(self.strides), padding=self.padding, use_bias=self.use_bias,
                    activation=self.activation)
        conv.update(self._regularizer_core_config())
        return conv


class _Pooling2D(Layer):
    """What MaxPooling2D and AveragePooling2D share: ``pool_size``, ``strides`` (default: ``pool_size``,
    as Keras) and ``padding``, their checks and config."""

    _core_class = ""

    def __init__(self, pool_size: IntPair = (2, 2), strides: Optional[IntPair] = None, padding: str = "valid",
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        _channels_last_only(kwargs)
        self.pool_size = validation.int_tuple(pool_size, 2, "pool_size")
        self.strides = validation.int_tuple(strides, 2, "strides") if strides is not None else self.pool_size
        self.padding = _padding(padding)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(pool_size=list(self.pool_size), strides=list(self.strides), padding=self.padding)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name=self._core_class, pool_size=list(self.pool_size), strides=list(self.strides),
                    padding=self.padding)


class MaxPooling2D(_Pooling2D):
    """Max pooling, NHWC; ``strides`` default to ``pool_size`` (Keras)."""

    _keras_name = "max_pooling2d"
    _core_class = "MaxPooling2D"


MaxPool2D = MaxPooling2D


class Flatten(Layer):
    """(H, W, C) -> (H*W*C,), in Keras' (H, W, C) order; no copy."""

    _keras_name = "flatten"

    def __init__(self, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        if kwargs.pop("data_format", None) not in (None, "channels_last"):
            raise ValueError("hpcnn is NHWC only: data_format must be 'channels_last'")
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="Flatten")


class Dense(_WeightRegularizers, Layer):
    """Fully connected: ``x @ kernel + bias``, kernel (in, out); ``use_bias=False``: no bias.
    ``kernel_regularizer`` / ``bias_regularizer``: hpcnn.regularizers (L1, L2, L1L2)."""

    _keras_name = "dense"

    def __init__(self, units: int, activation: Optional[str] = None, use_bias: bool = True,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        for k, default in (("kernel_initializer", "glorot_uniform"), ("bias_initializer", "zeros")):
            v = kwargs.pop(k, None)
            if v not in (None, default):
                raise ValueError(f"Dense: only Keras' default initializers are supported ({k}={v!r}; hpcnn "
                                 f"initializes with {k}='{default}')")
        _keras_defaults_only(kwargs, "Dense", _NO_REGULARIZERS)
        self._take_regularizers(kwargs)
        self.use_bias = validation.boolean(use_bias, "use_bias", "Dense")
        if not validation.is_integer(units) or not 0 < units <= validation.INT32_MAX:
            raise ValueError("Received an invalid value for `units`, expected a positive integer "
                             f"(at most {validation.INT32_MAX}). Received: units={units!r}")
        self.units = int(units)
        self.activation = _activation(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(units=self.units, activation=self.activation, use_bias=self.use_bias)
        cfg.update(self._regularizer_config())
        return cfg

    def core_config(self) -> Dict[str, Any]:
        dense = dict(class_name="Dense", units=self.units, use_bias=self.use_bias, activation=self.activation)
        dense.update(self._regularizer_core_config())
        return dense


class Dropout(Layer):
    """Inverted dropout while training; identity at inference. The masks are counter-based draws
    from the model's seed (``Sequential(seed=...)`` or ``hpcnn.utils.set_random_seed``), the same
    on every thread count and on the GPU, so there is no per-layer ``seed``."""

    _keras_name = "dropout"

    def __init__(self, rate: float, name: Optional[str] = None, seed: Optional[int] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        if seed is not None:
            raise ValueError("Dropout: seed= is not supported: dropout masks are drawn from the model's seed "
                             "(Sequential(..., seed=N) or hpcnn.utils.set_random_seed(N))")
        _keras_defaults_only(kwargs, "Dropout", {"noise_shape": _is_none})
        validation.number(rate, "rate", low=0.0, high=1.0, high_open=True,
                          expected="a float value between 0 and 1 (1 excluded)")
        self.rate = float(rate)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(rate=self.rate)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="Dropout", rate=self.rate)


class Activation(Layer):
    """``Activation(name)``: any activation of this module's list ('relu', 'tanh', 'gelu',
    'softmax', ...), element-wise (softmax: over the last axis)."""

    _keras_name = "activation"

    def __init__(self, activation: Any, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.activation = _activation(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(activation=self.activation)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="Activation", activation=self.activation)


def _non_negative_slope(value: Any, caller: str) -> float:
    """Keras' check of a leaky ReLU slope (a number >= 0)."""
    ok = (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
          and np.isfinite(value) and value >= 0)
    if not ok:
        raise ValueError(f"{caller}: The negative_slope value of a Leaky ReLU layer cannot be None or negative "
                         f"value. Expected a float. Received: negative_slope={value!r}")
    return float(value)


class ReLU(Layer):
    """``ReLU(max_value=None, negative_slope=0.0, threshold=0.0)`` as in Keras, for the forms hpcnn
    computes: the plain ReLU, ``max_value=6`` (ReLU6) and ``negative_slope > 0`` (a leaky ReLU);
    other combinations are a ValueError."""

    _keras_name = "re_lu"

    def __init__(self, max_value: Optional[float] = None, negative_slope: float = 0.0, threshold: float = 0.0,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        slope = _non_negative_slope(negative_slope, "ReLU")
        if max_value is not None:
            validation.number(max_value, "max_value", "ReLU", low=0.0)
        validation.number(threshold, "threshold", "ReLU")
        if threshold != 0:
            raise ValueError(f"ReLU: threshold={threshold!r} is not supported (hpcnn supports only Keras' default)")
        if max_value is not None and (float(max_value) != 6.0 or slope != 0.0):
            raise ValueError(f"ReLU: max_value={max_value!r} is not supported (hpcnn computes max_value=None, and "
                             "max_value=6 without a negative_slope: ReLU6)")
        self.max_value = None if max_value is None else float(max_value)
        self.negative_slope = slope
        self.threshold = 0.0
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(max_value=self.max_value, negative_slope=self.negative_slope, threshold=self.threshold)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="ReLU", max_value=self.max_value, negative_slope=self.negative_slope,
                    threshold=self.threshold)


class LeakyReLU(Layer):
    """``LeakyReLU(negative_slope=0.3)``: x if x > 0 else negative_slope * x. Keras 3's default
    slope; ``alpha=`` (Keras 2's name for it) is accepted too."""

    _keras_name = "leaky_re_lu"

    def __init__(self, negative_slope: float = 0.3, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        if "alpha" in kwargs:  # Keras 2's name (Keras 3 still takes it)
            negative_slope = kwargs.pop("alpha")
        self.negative_slope = _non_negative_slope(negative_slope, "LeakyReLU")
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(negative_slope=self.negative_slope)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="LeakyReLU", negative_slope=self.negative_slope)


class ELU(Layer):
    """``ELU(alpha=1.0)``: x if x > 0 else alpha * (exp(x) - 1)."""

    _keras_name = "elu"

    def __init__(self, alpha: float = 1.0, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.alpha = validation.number(alpha, "alpha", "ELU")
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(alpha=self.alpha)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="ELU", alpha=self.alpha)


class Softmax(Layer):
    """``Softmax(axis=-1)``: softmax over the last axis, on any layer (not only the output)."""

    _keras_name = "softmax"

    def __init__(self, axis: int = -1, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        if not (validation.is_integer(axis) and int(axis) == -1):
            raise ValueError(f"Softmax: axis={axis!r} is not supported: hpcnn takes the softmax over the last axis "
                             "(axis=-1)")
        self.axis = -1
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(axis=self.axis)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="Softmax", axis=self.axis)


def _channels_last_only(kwargs: Dict[str, Any]) -> None:
    if kwargs.pop("data_format", None) not in (None, "channels_last"):
        raise ValueError("hpcnn is NHWC only: data_format must be 'channels_last'")


class AveragePooling2D(_Pooling2D):
    """Average pooling, NHWC; ``strides`` default to ``pool_size`` (Keras). With ``padding='same'``
    each window averages its in-bounds positions only (padding is not counted), as Keras does."""

    _keras_name = "average_pooling2d"
    _core_class = "AveragePooling2D"


AvgPool2D = AveragePooling2D


class _GlobalPooling2D(Layer):
    """(H, W, C) -> (C,) (``keepdims=True``: (1, 1, C))."""

    _core_class = ""

    def __init__(self, keepdims: bool = False, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        _channels_last_only(kwargs)
        self.keepdims = validation.boolean(keepdims, "keepdims", type(self).__name__)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(keepdims=self.keepdims)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name=self._core_class, keepdims=self.keepdims)


class GlobalAveragePooling2D(_GlobalPooling2D):
    """The mean over the spatial axes of each channel: (H, W, C) -> (C,) (keepdims: (1, 1, C))."""

    _keras_name = "global_average_pooling2d"
    _core_class = "GlobalAveragePooling2D"


class GlobalMaxPooling2D(_GlobalPooling2D):
    """The max over the spatial axes of each channel: (H, W, C) -> (C,) (keepdims: (1, 1, C)); the
    gradient goes to the first maximal position, as MaxPooling2D's."""

    _keras_name = "global_max_pooling2d"
    _core_class = "GlobalMaxPooling2D"


GlobalAvgPool2D = GlobalAveragePooling2D
GlobalMaxPool2D = GlobalMaxPooling2D


def _zero_padding(padding: Any) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    """Keras' ZeroPadding2D padding: an int, (rows, cols) or ((top, bottom), (left, right))."""
    def bad(extra: str = "") -> ValueError:
        return ValueError("`padding` should be either an int, a tuple of 2 ints (symmetric_height_pad, "
                          "symmetric_width_pad), or a tuple of 2 tuples of 2 ints ((top_pad, bottom_pad), "
                          f"(left_pad, right_pad)) of values >= 0{extra}. Received: padding={padding!r}")

    def count(v: Any) -> int:
        if not validation.is_integer(v) or not 0 <= v <= validation.INT32_MAX:
            raise bad()
        return int(v)

    if validation.is_integer(padding):
        p = count(padding)
        return (p, p), (p, p)
    if isinstance(padding, (str, bytes)) or not isinstance(padding, Sequence) or len(padding) != 2:
        raise bad()
    axes = []
    for a in padding:
        if validation.is_integer(a):
            axes.append((count(a), count(a)))
        elif isinstance(a, Sequence) and not isinstance(a, (str, bytes)) and len(a) == 2:
            axes.append((count(a[0]), count(a[1])))
        else:
            raise bad()
    return axes[0], axes[1]


class ZeroPadding2D(Layer):
    """Zeros around the spatial axes: ``padding`` an int, (rows, cols) or ((top, bottom), (left, right))."""

    _keras_name = "zero_padding2d"

    def __init__(self, padding: Any = (1, 1), name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        _channels_last_only(kwargs)
        self.padding = _zero_padding(padding)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(padding=[list(self.padding[0]), list(self.padding[1])])
        return cfg

    def core_config(self) -> Dict[str, Any]:
        (t, b), (l, r) = self.padding
        return dict(class_name="ZeroPadding2D", padding=[t, b, l, r])


def _rescaling_values(value: Any, name: str) -> Union[float, List[float]]:
    """A finite number, or a 1-D sequence of them (one per channel)."""
    arr = np.asarray(value) if not isinstance(value, (str, bytes)) else None
    msg = (f"Rescaling: Invalid value for argument `{name}`. Expected a finite number or one per channel. "
           f"Received: {name}={value!r}")
    if arr is None or arr.dtype.kind not in "iuf" or arr.ndim > 1 or arr.size == 0 or not np.isfinite(arr).all():
        raise ValueError(msg)
    if arr.ndim == 0:
        return float(arr)
    return [float(v) for v in arr]


class Rescaling(Layer):
    """``Rescaling(scale, offset=0.0)``: y = x * scale + offset; each a number or one per channel
    (e.g. ``Rescaling(1 / 255)`` as a model's first layer)."""

    _keras_name = "rescaling"

    def __init__(self, scale: Any, offset: Any = 0.0, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.scale = _rescaling_values(scale, "scale")
        self.offset = _rescaling_values(offset, "offset")
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(scale=self.scale, offset=self.offset)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="Rescaling", scale=self.scale, offset=self.offset)


def _default_initializer(value: Any, default: str) -> bool:
    return value is None or value == default


class BatchNormalization(Layer):
    """Keras' ``BatchNormalization`` over the channels (the last axis, NHWC).

    In ``fit`` the layer normalizes each batch with the batch's mean and (biased) variance and,
    once the step is taken, moves ``moving_mean`` and ``moving_variance`` toward them:
    ``moving = moving * momentum + batch * (1 - momentum)``. In ``evaluate``/``predict`` it
    normalizes with the moving statistics: ``gamma * (x - moving_mean) / sqrt(moving_variance +
    epsilon) + beta``. With ``trainable = False`` it runs in inference mode during ``fit`` too, and
    nothing of it changes (Keras' rule for BatchNormalization). Weights, in Keras' order: gamma
    (``scale=True``), beta (``center=True``), moving_mean, moving_variance; the moving statistics
    are non-trainable weights (never touched by the optimizer, saved and loaded with the model).
    With data-parallel training each replica normalizes with the statistics of its own part of the
    batch, as Keras does without ``synchronized=True`` (which hpcnn does not offer). On a GPU the
    normalization is cuDNN's. A ReLU right after the layer is fused into it.
    """

    _keras_name = "batch_normalization"

    def __init__(self, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3, center: bool = True,
                 scale: bool = True, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        for key, default in (("beta_initializer", "zeros"), ("gamma_initializer", "ones"),
                             ("moving_mean_initializer", "zeros"), ("moving_variance_initializer", "ones")):
            if key in kwargs and not _default_initializer(kwargs.pop(key), default):
                raise ValueError(f"BatchNormalization: only Keras' default {key}='{default}' is supported")
        _keras_defaults_only(kwargs, "BatchNormalization", {
            "beta_regularizer": _is_none, "gamma_regularizer": _is_none, "beta_constraint": _is_none,
            "gamma_constraint": _is_none, "synchronized": lambda v: v is False,
            # Keras 2's arguments, at their defaults only
            "renorm": lambda v: v is False, "renorm_clipping": _is_none, "renorm_momentum": lambda v: v == 0.99,
            "virtual_batch_size": _is_none, "adjustment": _is_none, "fused": lambda v: v in (None, True, False)})
        if not validation.is_integer(axis) or isinstance(axis, bool):
            raise ValueError(f"BatchNormalization: Invalid value for argument `axis`. Expected an integer. "
                             f"Received: axis={axis!r}")
        self.axis = validation.integer(axis, "axis", "BatchNormalization", minimum=-1)
        if self.axis == 0:
            raise ValueError("BatchNormalization: axis=0 is the batch axis; hpcnn normalizes the channels (axis=-1)")
        self.momentum = validation.number(momentum, "momentum", "BatchNormalization", low=0.0, high=1.0)
        self.epsilon = validation.number(epsilon, "epsilon", "BatchNormalization", low=0.0, low_open=True)
        self.center = validation.boolean(center, "center", "BatchNormalization")
        self.scale = validation.boolean(scale, "scale", "BatchNormalization")
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(axis=self.axis, momentum=self.momentum, epsilon=self.epsilon, center=self.center,
                   scale=self.scale)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="BatchNormalization", axis=self.axis, momentum=self.momentum, epsilon=self.epsilon,
                    center=self.center, scale=self.scale)


# ---------------------------------------------------------------------- augmentation
def _no_layer_seed(seed: Any, cls: str) -> None:
    if seed is not None:
        raise ValueError(f"{cls}: seed= is not supported: augmentation draws come from the model's seed "
                         "(Sequential(..., seed=N) or hpcnn.utils.set_random_seed(N)), per step and per sample")


_FACTOR_ERROR = "The `factor` argument should be a number (or a list of two numbers) in the range [-1.0, 1.0]. "


def _factor_range(factor: Any, name: str, cls: str) -> Tuple[float, float]:
    """Keras 3's factor: a number f (the range [-|f|, |f|]) or two numbers (sorted), all in [-1, 1]."""
    def one(v: Any) -> float:
        ok = (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
              and np.isfinite(v) and -1.0 <= float(v) <= 1.0)
        if not ok:
            raise ValueError(f"{cls}: {_FACTOR_ERROR}Received: {name}={factor!r}")
        return float(v)

    if isinstance(factor, (tuple, list)):
        if len(factor) != 2:
            raise ValueError(f"{cls}: {_FACTOR_ERROR}Received: {name}={factor!r}")
        lo, hi = sorted((one(factor[0]), one(factor[1])))
        return lo, hi
    f = abs(one(factor))
    return -f, f


class _Augmentation(Layer):
    """Base of the augmentation layers: active in ``fit`` only (``evaluate``/``predict``: the
    identity; RandomCrop: the centre), no weights. See RandomFlip for where they run and how they
    draw."""


class RandomFlip(_Augmentation):
    """``RandomFlip(mode="horizontal_and_vertical")``: in training, each image is flipped with
    probability 1/2 (Keras 3: "horizontal_and_vertical" flips the chosen images along both axes).

    The augmentation layers (RandomFlip, RandomTranslation, RandomCrop) change the images during
    ``fit`` only; ``evaluate`` and ``predict`` see them unchanged (RandomCrop: its centre). At the
    start of a model (a ZeroPadding2D right before a RandomCrop included) they run in the native
    batch pipeline, not as model ops: on the CPU while the batch's rows are gathered and decoded,
    on a GPU on the device after the upload. Placed after other layers without weights (such as
    Rescaling) they run as ops of the step; after a layer with weights they are an error. The
    draws are per image, keyed by the model's seed, the training step and the image's row in the
    global batch (not by threads, devices or replicas): the same seed gives the same images on any
    thread count, on the CPU and the GPU, and in a resumed or data-parallel run. There is no
    per-layer ``seed``.
    """

    _keras_name = "random_flip"
    _MODES = ("horizontal", "vertical", "horizontal_and_vertical")

    def __init__(self, mode: str = "horizontal_and_vertical", seed: Optional[int] = None,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        _channels_last_only(kwargs)
        _no_layer_seed(seed, "RandomFlip")
        if not isinstance(mode, str) or mode not in self._MODES:
            raise ValueError(f"RandomFlip layer {name or 'random_flip'} received an unknown mode argument {mode!r}: "
                             f"use one of {', '.join(repr(m) for m in self._MODES)}")
        self.mode = mode
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(mode=self.mode)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="RandomFlip", mode=self.mode)


class RandomTranslation(_Augmentation):
    """``RandomTranslation(height_factor, width_factor, fill_mode="reflect", interpolation="bilinear",
    fill_value=0.0)``, Keras 3's: in training each image is shifted by a fraction of its height and
    of its width, each drawn uniformly from the factor's range (a number f: [-f, f]; a pair: its
    range; all in [-1, 1]); positive moves the image down / right. Pixels from outside the image
    are filled by ``fill_mode``: 'constant' (``fill_value``), 'reflect' (d c b a | a b c d | d c b
    a), 'wrap' (a b c d | a b c d) or 'nearest' (a a a a | a b c d | d d d d); ``interpolation``
    'bilinear' (fractional shifts blend neighbours) or 'nearest' (whole pixels). See RandomFlip
    for when and where augmentation runs."""

    _keras_name = "random_translation"
    _FILL_MODES = ("reflect", "wrap", "constant", "nearest")
    _INTERPOLATIONS = ("nearest", "bilinear")

    def __init__(self, height_factor: Any, width_factor: Any, fill_mode: str = "reflect",
                 interpolation: str = "bilinear", seed: Optional[int] = None, fill_value: float = 0.0,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        _channels_last_only(kwargs)
        _no_layer_seed(seed, "RandomTranslation")
        self.height_lower, self.height_upper = _factor_range(height_factor, "height_factor", "RandomTranslation")
        self.width_lower, self.width_upper = _factor_range(width_factor, "width_factor", "RandomTranslation")
        if not isinstance(fill_mode, str) or fill_mode not in self._FILL_MODES:
            raise ValueError(f"RandomTranslation: Unknown `fill_mode` {fill_mode!r}. Expected one of "
                             f"{self._FILL_MODES}.")
        if not isinstance(interpolation, str) or interpolation not in self._INTERPOLATIONS:
            raise ValueError(f"RandomTranslation: Unknown `interpolation` {interpolation!r}. Expected one of "
                             f"{self._INTERPOLATIONS}.")
        # As given (a number or a pair, in config order), as plain floats: configs are JSON.
        self.height_factor = ([float(v) for v in height_factor] if isinstance(height_factor, (tuple, list))
                              else float(height_factor))
        self.width_factor = ([float(v) for v in width_factor] if isinstance(width_factor, (tuple, list))
                             else float(width_factor))
        self.fill_mode = fill_mode
        self.interpolation = interpolation
        self.fill_value = validation.number(fill_value, "fill_value", "RandomTranslation")
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(height_factor=self.height_factor, width_factor=self.width_factor, fill_mode=self.fill_mode,
                   interpolation=self.interpolation, fill_value=self.fill_value)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="RandomTranslation", height_lo=self.height_lower, height_hi=self.height_upper,
                    width_lo=self.width_lower, width_hi=self.width_upper, fill_mode=self.fill_mode,
                    fill_value=self.fill_value, interpolation=self.interpolation)


class RandomCrop(_Augmentation):
    """``RandomCrop(height, width)``: in training a (height, width) window at a random position of
    each image (drawn per image; Keras 3 draws one position per batch); in ``evaluate``/``predict``
    the centre window (Keras resizes there instead; hpcnn crops, so an input smaller than the crop
    is an error). The CIFAR recipe "pad by 4, crop 32 at random" is ``ZeroPadding2D(4)`` followed by
    ``RandomCrop(32, 32)`` at the model's start: the batch pipeline then crops from the padded
    image in one pass (the padding is never materialized), and inference sees the original image.
    See RandomFlip for when and where augmentation runs."""

    _keras_name = "random_crop"

    def __init__(self, height: int, width: int, seed: Optional[int] = None, name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        _channels_last_only(kwargs)
        _no_layer_seed(seed, "RandomCrop")
        self.height = validation.integer(height, "height", "RandomCrop")
        self.width = validation.integer(width, "width", "RandomCrop")
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(height=self.height, width=self.width)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="RandomCrop", height=self.height, width=self.width)


# ------------------------------------------------------------------ merging layers (several inputs)
class _Merge(Layer):
    """A layer called on a list of at least two tensors."""

    _merges_inputs = True

    def __init__(self, name: Optional[str] = None, **kwargs: Any) -> None:
        if kwargs.get("input_shape") is not None:
            raise ValueError(f"{type(self).__name__}: input_shape= is not taken: the layer is called on tensors")
        kwargs.pop("input_shape", None)
        super().__init__(name=name, **kwargs)


class Add(_Merge):
    """``Add()([a, b, ...])``: the element-wise sum of tensors of one shape (a residual
    connection). Its backward passes the gradient to every input unchanged."""

    _keras_name = "add"

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="Add")


class Concatenate(_Merge):
    """``Concatenate(axis=-1)([a, b, ...])``: tensors side by side along ``axis`` (Keras counts the
    batch axis: -1, the default, is the channels of NHWC images); every other axis must agree."""

    _keras_name = "concatenate"

    def __init__(self, axis: int = -1, name: Optional[str] = None, **kwargs: Any) -> None:
        if not validation.is_integer(axis):
            raise ValueError(f"Invalid value for argument `axis`. Expected an integer. Received: axis={axis!r}")
        if axis == 0:
            raise ValueError("Invalid value for argument `axis`. Expected a per-sample axis (0 is the batch axis). "
                             "Received: axis=0")
        self.axis = int(axis)
        super().__init__(name=name, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(axis=self.axis)
        return cfg

    def core_config(self) -> Dict[str, Any]:
        return dict(class_name="Concatenate", axis=self.axis)


_REGISTRY = {c.__name__: c for c in (InputLayer, Conv2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D,
                                      GlobalMaxPooling2D, ZeroPadding2D, Flatten, Dense, Dropout, Activation, ReLU,
                                      LeakyReLU, ELU, Softmax, Rescaling, BatchNormalization, RandomFlip,
                                      RandomTranslation, RandomCrop, Add, Concatenate)}


def deserialize(config: Dict[str, Any]) -> Layer:
    """A layer from ``{'class_name': ..., 'config': {...}}`` (Keras' serialization shape). Anything
    else (not a dict, an unknown class, arguments the class does not take) is a ValueError."""
    if not isinstance(config, dict):
        raise ValueError(f"a layer config must be a dict with 'class_name' and 'config', got {config!r:.200}")
    name = config.get("class_name")
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown layer class {name!r:.100}: hpcnn has {sorted(_REGISTRY)}")
    cfg = config.get("config", {})
    if not isinstance(cfg, dict):
        raise ValueError(f"the config of a {name} layer must be a dict, got {cfg!r:.200}")
    try:
        return _REGISTRY[name].from_config(dict(cfg))
    except TypeError as e:  # an argument the class does not take
        raise ValueError(f"{name}: {e}") from None


def serialize(layer: Layer) -> Dict[str, Any]:
    return {"class_name": type(layer).__name__, "config": layer.get_config()}


__all__ = ["Layer", "InputLayer", "Input", "Conv2D", "MaxPooling2D", "MaxPool2D", "AveragePooling2D", "AvgPool2D",
           "GlobalAveragePooling2D", "GlobalAvgPool2D", "GlobalMaxPooling2D", "GlobalMaxPool2D", "ZeroPadding2D",
           "Flatten", "Dense", "Dropout", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "Rescaling",
           "BatchNormalization", "RandomFlip", "RandomTranslation", "RandomCrop", "Add", "Concatenate", "KerasTensor",
           "serialize", "deserialize"]
