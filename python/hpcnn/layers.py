"""Keras-named layers. Each is a configuration; the C++ core does the work.

Input is NHWC (batch, height, width, channels), as in Keras. ``Conv2D`` kernels are
(kh, kw, in, out) and ``Dense`` kernels (in, out), so ``get_weights``/``set_weights`` move
weights to and from Keras unchanged; ``Flatten`` flattens in (H, W, C) order as Keras does.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

IntPair = Union[int, Sequence[int]]

_ACTIVATIONS = ("relu", "softmax", "linear")


def _pair(v: IntPair, what: str) -> Tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    t = tuple(int(a) for a in v)
    if len(t) != 2:
        raise ValueError(f"{what} must be an int or a pair of ints, got {v!r}")
    return t  # type: ignore[return-value]


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
        raise ValueError(f"padding must be 'same' or 'valid', got {p!r}")
    return p.lower()


class Layer:
    """Base class: a named piece of configuration that knows its output shape."""

    _keras_name = "layer"

    def __init__(self, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(kwargs)}")
        self.name = name
        self.input_shape = tuple(int(d) for d in input_shape) if input_shape is not None else None

    # The layer's own config (Keras' get_config), without the class name.
    def get_config(self) -> Dict[str, Any]:
        cfg: Dict[str, Any] = {"name": self.name}
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
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name" and v is not None)
        return f"{type(self).__name__}({args})"


class InputLayer(Layer):
    """Declares the per-sample input shape, e.g. ``InputLayer(input_shape=[32, 32, 3])``."""

    _keras_name = "input_layer"

    def __init__(self, input_shape: Optional[Sequence[int]] = None, shape: Optional[Sequence[int]] = None,
                 name: Optional[str] = None, **kwargs: Any) -> None:
        kwargs.pop("dtype", None)
        kwargs.pop("batch_size", None)
        shp = input_shape if input_shape is not None else shape
        if shp is None:
            raise ValueError("InputLayer needs input_shape=(height, width, channels) (or shape=...)")
        super().__init__(name=name, input_shape=shp, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "input_shape": list(self.input_shape or ())}


def Input(shape: Sequence[int], name: Optional[str] = None, **kwargs: Any) -> InputLayer:
    """``hpcnn.layers.Input(shape=(32, 32, 3))`` (Keras' spelling for an input in a Sequential)."""
    return InputLayer(shape=shape, name=name, **kwargs)


class Conv2D(Layer):
    """2-D convolution, NHWC, Keras semantics for ``padding`` and ``strides``; bias always on."""

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
        if not use_bias:
            raise ValueError("Conv2D(use_bias=False) is not supported")
        super().__init__(name=name, input_shape=input_shape, **kwargs)
        if int(filters) <= 0:
            raise ValueError(f"Conv2D: filters must be positive, got {filters}")
        self.filters = int(filters)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.strides = _pair(strides, "strides")
        self.padding = _padding(padding)
        self.activation = _activation(activation)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(filters=self.filters, kernel_size=list(self.kernel_size), strides=list(self.strides),
                   padding=self.padding, activation=self.activation)
        return cfg

    def _core_configs(self) -> List[Dict[str, Any]]:
        conv = dict(class_name="Conv2D", filters=self.filters, kernel_size=list(self.kernel_size),
                    strides=list(self.strides), padding=self.padding,
                    activation="relu" if self.activation == "relu" else "linear")
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
        super().__init__(name=name, input_shape=input_shape, **kwargs)
        self.pool_size = _pair(pool_size, "pool_size")
        self.strides = _pair(strides, "strides") if strides is not None else self.pool_size
        self.padding = _padding(padding)

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


class Dense(Layer):
    """Fully connected: ``x @ kernel + bias``, kernel (in, out)."""

    _keras_name = "dense"

    def __init__(self, units: int, activation: Optional[str] = None, use_bias: bool = True,
                 name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        for k in ("kernel_initializer", "bias_initializer"):
            v = kwargs.pop(k, None)
            if v not in (None, "glorot_uniform", "zeros"):
                raise ValueError(f"Dense: only Keras' default initializers are supported ({k}={v!r})")
        if not use_bias:
            raise ValueError("Dense(use_bias=False) is not supported")
        super().__init__(name=name, input_shape=input_shape, **kwargs)
        if int(units) <= 0:
            raise ValueError(f"Dense: units must be positive, got {units}")
        self.units = int(units)
        self.activation = _activation(activation)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(units=self.units, activation=self.activation)
        return cfg

    def _core_configs(self) -> List[Dict[str, Any]]:
        dense = dict(class_name="Dense", units=self.units, activation="relu" if self.activation == "relu" else "linear")
        if self.activation == "softmax":
            return [dense, dict(class_name="Activation", activation="softmax")]
        return [dense]

    def count_params(self, input_shape: Tuple[int, ...]) -> int:
        return input_shape[-1] * self.units + self.units


class Dropout(Layer):
    """Inverted dropout while training (seeded, counter-based masks); identity at inference."""

    _keras_name = "dropout"

    def __init__(self, rate: float, name: Optional[str] = None, seed: Optional[int] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        super().__init__(name=name, input_shape=input_shape, **kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate}")
        self.rate = float(rate)

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
        super().__init__(name=name, input_shape=input_shape, **kwargs)
        self.activation = _activation(activation)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        cfg.update(activation=self.activation)
        return cfg

    def _core_configs(self) -> List[Dict[str, Any]]:
        return [dict(class_name="Activation", activation=self.activation)]


class ReLU(Activation):
    """``ReLU()``: the same as ``Activation('relu')``."""

    _keras_name = "re_lu"

    def __init__(self, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        super().__init__("relu", name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = Layer.get_config(self)
        return cfg


_REGISTRY = {c.__name__: c for c in (InputLayer, Conv2D, MaxPooling2D, Flatten, Dense, Dropout, Activation, ReLU)}


def deserialize(config: Dict[str, Any]) -> Layer:
    """A layer from ``{'class_name': ..., 'config': {...}}`` (Keras' serialization shape)."""
    name = config.get("class_name")
    if name not in _REGISTRY:
        raise ValueError(f"unknown layer class {name!r}")
    return _REGISTRY[name].from_config(dict(config.get("config", {})))


def serialize(layer: Layer) -> Dict[str, Any]:
    return {"class_name": type(layer).__name__, "config": layer.get_config()}


__all__ = ["Layer", "InputLayer", "Input", "Conv2D", "MaxPooling2D", "MaxPool2D", "Flatten", "Dense", "Dropout",
           "Activation", "ReLU", "serialize", "deserialize"]
