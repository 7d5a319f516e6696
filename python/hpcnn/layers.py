"""Keras-named layers. Each is a configuration; the C++ core does the work.

Input is NHWC (batch, height, width, channels), as in Keras. ``Conv2D`` kernels are
(kh, kw, in, out) and ``Dense`` kernels (in, out), so ``get_weights``/``set_weights`` move
weights to and from Keras unchanged; ``Flatten`` flattens in (H, W, C) order as Keras does.

Layers go into a ``Sequential`` model, or are called on symbolic tensors to build a graph for
``hpcnn.Model`` (the functional API, functional.py): ``y = Conv2D(8, 3)(hpcnn.Input((32, 32, 3)))``.
``Add`` and ``Concatenate`` take a list of tensors.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import regularizers, validation
from .functional import KerasTensor, call_layer, layer_label

IntPair = Union[int, Sequence[int]]

_ACTIVATIONS = ("relu", "softmax", "linear")


def _activation(a: Optional[str]) -> str:
    if a is None:
        return "linear"
    if callable(a) and getattr(a, "__name__", None) in _ACTIVATIONS:
        return a.__name__
    if not isinstance(a, str) or a.lower() not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {a!r}: use 'relu', 'softmax', 'linear' or None")
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

    # What the C++ core builds for this layer (one or two core layers).
    def _core_configs(self) -> List[Dict[str, Any]]:
        raise NotImplementedError

    def count_params(self, input_shape: Tuple[int, ...]) -> int:
        return 0

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
    """2-D convolution, NHWC, Keras semantics for ``padding`` and ``strides``; bias always on.
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
        if not validation.boolean(use_bias, "use_bias", "Conv2D"):
            raise ValueError("Conv2D(use_bias=False) is not supported")
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
                   padding=self.padding, activation=self.activation)
        cfg.update(self._regularizer_config())
        return cfg

    def _core_configs(self) -> List[Dict[str, Any]]:
        conv = dict(class_name="Conv2D", filters=self.filters, kernel_size=list(self.kernel_size),
                    strides=list(self.strides), padding=self.padding,
                    activation="relu" if self.activation == "relu" else "linear")
        conv.update(self._regularizer_core_config())
        if self.activation == "softmax":
            return [conv, dict(class_name="Activation", activation="softmax")]
        return [conv]

    def count_params(self, input_shape: Tuple[int, ...]) -> int:
        kh, kw = self.kernel_size
        return kh * kw * input_shape[-1] * self.filters + self.filters


class MaxPooling2D(Layer):
    """Max pooling, NHWC; ``strides`` default to ``pool_size`` (Keras)."""

    _keras_name = "max_pooling2d"

    def __init__(self, pool_size: IntPair = (2, 2), strides: Optional[IntPair] = None, padding: str = "valid",
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        if kwargs.pop("data_format", None) not in (None, "channels_last"):
            raise ValueError("hpcnn is NHWC only: data_format must be 'channels_last'")
        self.pool_size = validation.int_tuple(pool_size, 2, "pool_size")
        self.strides = validation.int_tuple(strides, 2, "strides") if strides is not None else self.pool_size
        self.padding = _padding(padding)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(pool_size=list(self.pool_size), strides=list(self.strides), padding=self.padding)
        return cfg

    def _core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name="MaxPooling2D", pool_size=list(self.pool_size), strides=list(self.strides),
                     padding=self.padding)]


MaxPool2D = MaxPooling2D


class Flatten(Layer):
    """(H, W, C) -> (H*W*C,), in Keras' (H, W, C) order; no copy."""

    _keras_name = "flatten"

    def __init__(self, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        if kwargs.pop("data_format", None) not in (None, "channels_last"):
            raise ValueError("hpcnn is NHWC only: data_format must be 'channels_last'")
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def _core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name="Flatten")]


class Dense(_WeightRegularizers, Layer):
    """Fully connected: ``x @ kernel + bias``, kernel (in, out). ``kernel_regularizer`` /
    ``bias_regularizer``: hpcnn.regularizers (L1, L2, L1L2)."""

    _keras_name = "dense"

    def __init__(self, units: int, activation: Optional[str] = None, use_bias: bool = True,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        for k in ("kernel_initializer", "bias_initializer"):
            v = kwargs.pop(k, None)
            if v not in (None, "glorot_uniform", "zeros"):
                raise ValueError(f"Dense: only Keras' default initializers are supported ({k}={v!r})")
        _keras_defaults_only(kwargs, "Dense", _NO_REGULARIZERS)
        self._take_regularizers(kwargs)
        if not validation.boolean(use_bias, "use_bias", "Dense"):
            raise ValueError("Dense(use_bias=False) is not supported")
        if not validation.is_integer(units) or not 0 < units <= validation.INT32_MAX:
            raise ValueError("Received an invalid value for `units`, expected a positive integer "
                             f"(at most {validation.INT32_MAX}). Received: units={units!r}")
        self.units = int(units)
        self.activation = _activation(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(units=self.units, activation=self.activation)
        cfg.update(self._regularizer_config())
        return cfg

    def _core_configs(self) -> List[Dict[str, Any]]:
        dense = dict(class_name="Dense", units=self.units, activation="relu" if self.activation == "relu" else "linear")
        dense.update(self._regularizer_core_config())
        if self.activation == "softmax":
            return [dense, dict(class_name="Activation", activation="softmax")]
        return [dense]

    def count_params(self, input_shape: Tuple[int, ...]) -> int:
        return input_shape[-1] * self.units + self.units


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

    def _core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name="Dropout", rate=self.rate)]


class Activation(Layer):
    """``Activation('relu' | 'softmax' | 'linear')``."""

    _keras_name = "activation"

    def __init__(self, activation: Optional[str], name: Optional[str] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.activation = _activation(activation)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(activation=self.activation)
        return cfg

    def _core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name="Activation", activation=self.activation)]


class ReLU(Activation):
    """``ReLU()``: the same as ``Activation('relu')`` (Keras' max_value, negative_slope and
    threshold only at their defaults)."""

    _keras_name = "re_lu"

    def __init__(self, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        _keras_defaults_only(kwargs, "ReLU", {"max_value": _is_none, "negative_slope": lambda v: v == 0,
                                              "threshold": lambda v: v == 0})
        super().__init__("relu", name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = Layer.get_config(self)
        return cfg


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

    def _core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name="Add")]


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

    def _core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name="Concatenate", axis=self.axis)]


_REGISTRY = {c.__name__: c for c in (InputLayer, Conv2D, MaxPooling2D, Flatten, Dense, Dropout, Activation, ReLU,
                                     Add, Concatenate)}


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


__all__ = ["Layer", "InputLayer", "Input", "Conv2D", "MaxPooling2D", "MaxPool2D", "Flatten", "Dense", "Dropout",
           "Activation", "ReLU", "Add", "Concatenate", "KerasTensor", "serialize", "deserialize"]
