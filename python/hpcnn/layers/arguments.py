"""The checks and conversions of Keras layer arguments that several layers share (activation
names, padding modes, Keras arguments accepted at their defaults only, kernel/bias regularizers)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import regularizers, validation

IntPair = Union[int, Sequence[int]]

# Keras' activation names hpcnn computes (csrc/ops/activation.h has the formulas).
ACTIVATIONS = ("relu", "softmax", "linear", "relu6", "leaky_relu", "elu", "selu", "gelu", "gelu_approximate",
                "tanh", "sigmoid", "hard_sigmoid", "swish", "silu", "softplus", "softsign", "mish", "hard_silu",
               "hard_swish")


def activation_name(a: Any) -> str:
    """An activation name from a string, None ('linear') or a function named like one (for
    example ``keras.activations.tanh`` or ``hpcnn.activations.tanh``)."""
    if a is None:
        return "linear"
    if callable(a) and getattr(a, "__name__", None) in ACTIVATIONS:
        return a.__name__
    if not isinstance(a, str) or a.lower() not in ACTIVATIONS:
        raise ValueError(f"unknown activation {a!r}: use one of {', '.join(repr(n) for n in ACTIVATIONS)} or None")
    return a.lower()


def padding_mode(p: str) -> str:
    if not isinstance(p, str) or p.lower() not in ("same", "valid"):
        raise ValueError(f"The `padding` argument must be one of 'valid' or 'same'. Received: padding={p!r}")
    return p.lower()


def is_float32(dtype: Any, also: Tuple[str, ...] = ()) -> bool:
    try:
        return np.dtype(dtype).name in ("float32",) + also
    except TypeError:
        return False


def keras_defaults_only(kwargs: Dict[str, Any], caller: str, accepted: Dict[str, Callable[[Any], bool]]) -> None:
    """Pops Keras arguments that hpcnn supports only at their default value; any other value is a
    ValueError naming it (never ignored)."""
    for key, is_default in accepted.items():
        if key in kwargs:
            v = kwargs.pop(key)
            if not is_default(v):
                raise ValueError(f"{caller}: {key}={v!r} is not supported (hpcnn supports only Keras' default)")


def is_none(v: Any) -> bool:
    return v is None


def is_one_pair(v: Any) -> bool:
    return v == 1 or (isinstance(v, (tuple, list)) and list(v) == [1, 1])


# Keras' activity regularizer and weight constraints: hpcnn has none, so only None is accepted.
NO_REGULARIZERS = {k: is_none for k in ("activity_regularizer", "kernel_constraint", "bias_constraint")}


class WeightRegularizers:
    """kernel_regularizer / bias_regularizer of a layer with a kernel and a bias (Conv2D, Dense):
    taken by the constructor, in get_config when set (Keras' serialized form), and sent to the
    core as the factors kernel_l1, kernel_l2, bias_l1, bias_l2 (nn/regularization.h)."""

    def _take_kernel_arguments(self, kwargs: Dict[str, Any], use_bias: Any, caller: str,
                               at_default: Dict[str, Callable[[Any], bool]]) -> None:
        """use_bias, the regularizers, and the Keras arguments hpcnn takes at their defaults only
        (`at_default`, beside the activity regularizer and constraints)."""
        keras_defaults_only(kwargs, caller, dict(NO_REGULARIZERS, **at_default))
        self.kernel_regularizer = regularizers.get(kwargs.pop("kernel_regularizer", None), "kernel_regularizer")
        self.bias_regularizer = regularizers.get(kwargs.pop("bias_regularizer", None), "bias_regularizer")
        self.use_bias = validation.boolean(use_bias, "use_bias", caller)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()  # type: ignore[misc]
        cfg.update({k: regularizers.serialize(r) for k, r in (("kernel_regularizer", self.kernel_regularizer),
                                                               ("bias_regularizer", self.bias_regularizer))
                    if r is not None})
        return cfg

    def core_config(self) -> Dict[str, Any]:
        cfg = super().core_config()  # type: ignore[misc]
        for param, r in (("kernel", self.kernel_regularizer), ("bias", self.bias_regularizer)):
            if param == "bias" and not getattr(self, "use_bias", True):
                continue  # no bias, nothing to regularize (Keras ignores bias_regularizer then too)
            if r is not None:
                cfg[f"{param}_l1"], cfg[f"{param}_l2"] = r.l1, r.l2
        return cfg


def non_negative_slope(value: Any, caller: str) -> float:
    """Keras' check of a leaky ReLU slope (a number >= 0)."""
    ok = (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
          and np.isfinite(value) and value >= 0)
    if not ok:
        raise ValueError(f"{caller}: The negative_slope value of a Leaky ReLU layer cannot be None or negative "
                         f"value. Expected a float. Received: negative_slope={value!r}")
    return float(value)


def channels_last_only(kwargs: Dict[str, Any]) -> None:
    if kwargs.pop("data_format", None) not in (None, "channels_last"):
        raise ValueError("hpcnn is NHWC only: data_format must be 'channels_last'")


def zero_padding(padding: Any) -> Tuple[Tuple[int, int], Tuple[int, int]]:
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


def rescaling_values(value: Any, name: str) -> Union[float, List[float]]:
    """A finite number, or a 1-D sequence of them (one per channel)."""
    arr = np.asarray(value) if not isinstance(value, (str, bytes)) else None
    msg = (f"Rescaling: Invalid value for argument `{name}`. Expected a finite number or one per channel. "
           f"Received: {name}={value!r}")
    if arr is None or arr.dtype.kind not in "iuf" or arr.ndim > 1 or arr.size == 0 or not np.isfinite(arr).all():
        raise ValueError(msg)
    if arr.ndim == 0:
        return float(arr)
    return [float(v) for v in arr]


def default_initializer(value: Any, default: str) -> bool:
    return value is None or value == default


# ---------------------------------------------------------------------- augmentation
def layer_seed(seed: Any, cls: str) -> Optional[int]:
    """An augmentation layer's ``seed`` (Keras': the layer draws from its own seed, whatever the
    model's): None or an integer in [0, 2**64)."""
    return validation.integer(seed, "seed", cls, minimum=0, maximum=2**64 - 1, allow_none=True)


def core_seed(seed: Optional[int]) -> Dict[str, Any]:
    """A layer seed as the core's config takes it: absent for None, else the same 64 bits as a
    signed integer (the core's integers are 64-bit signed)."""
    if seed is None:
        return {}
    return {"seed": seed - 2**64 if seed >= 2**63 else seed}


def rotation_factor(factor: Any, cls: str = "RandomRotation") -> Tuple[float, float]:
    """Keras 3's RandomRotation factor (its base layer's rule): a number f in [-1, 1] (the range
    [-|f|, |f|]) or two numbers, sorted, refused only when the range misses [-1, 1] altogether."""
    msg = f"{cls}: {FACTOR_ERROR}Received: factor={factor!r}"

    def one(v: Any) -> float:
        if not (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
                and np.isfinite(v)):
            raise ValueError(msg)
        return float(v)

    if isinstance(factor, (tuple, list)):
        if len(factor) != 2:
            raise ValueError(msg)
        a, b = one(factor[0]), one(factor[1])
        if a > 1.0 or b < -1.0:
            raise ValueError(msg)
        lo, hi = sorted((a, b))
        return lo, hi
    f = one(factor)
    if not -1.0 <= f <= 1.0:
        raise ValueError(msg)
    return -abs(f), abs(f)


ZOOM_ERROR = ("The `height_factor` and `width_factor` arguments should be a number (or a list of two numbers) in "
              "the range (-1.0, 1.0]. ")


def zoom_factor(factor: Any, name: str, cls: str = "RandomZoom") -> Tuple[float, float]:
    """Keras 3's RandomZoom factor: a number f in (-1, 1] (the range [-|f|, |f|]) or two numbers
    in (-1, 1], sorted. 1 + factor is the scale: positive zooms out, negative zooms in."""
    def one(v: Any) -> float:
        ok = (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
              and np.isfinite(v) and -1.0 < float(v) <= 1.0)
        if not ok:
            raise ValueError(f"{cls}: {ZOOM_ERROR}Received: {name}={factor!r}")
        return float(v)

    if isinstance(factor, (tuple, list)):
        if len(factor) != 2:
            raise ValueError(f"{cls}: {ZOOM_ERROR}Received: {name}={factor!r}")
        lo, hi = sorted((one(factor[0]), one(factor[1])))
        return lo, hi
    f = abs(one(factor))
    return -f, f


FACTOR_ERROR = "The `factor` argument should be a number (or a list of two numbers) in the range [-1.0, 1.0]. "


def factor_range(factor: Any, name: str, cls: str) -> Tuple[float, float]:
    """Keras 3's factor: a number f (the range [-|f|, |f|]) or two numbers (sorted), all in [-1, 1]."""
    def one(v: Any) -> float:
        ok = (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
              and np.isfinite(v) and -1.0 <= float(v) <= 1.0)
        if not ok:
            raise ValueError(f"{cls}: {FACTOR_ERROR}Received: {name}={factor!r}")
        return float(v)

    if isinstance(factor, (tuple, list)):
        if len(factor) != 2:
            raise ValueError(f"{cls}: {FACTOR_ERROR}Received: {name}={factor!r}")
        lo, hi = sorted((one(factor[0]), one(factor[1])))
        return lo, hi
    f = abs(one(factor))
    return -f, f
