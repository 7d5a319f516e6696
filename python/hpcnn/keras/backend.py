"""``keras.backend`` on hpcnn: the settings scripts query (hpcnn is float32 and channels-last) and
``clear_session`` (nothing to clear: hpcnn keeps no global graph)."""
from __future__ import annotations

import gc

from ._compat import install

_EPSILON = [1e-7]


def backend() -> str:
    """'hpcnn'."""
    return "hpcnn"


def clear_session(free_memory: bool = True) -> None:
    """Keras resets its global state here; hpcnn keeps none. Runs the garbage collector so that
    models nobody references release their memory (host and GPU) now."""
    if free_memory:
        gc.collect()


def floatx() -> str:
    return "float32"


def set_floatx(value: str) -> None:
    if value != "float32":
        raise NotImplementedError(f"set_floatx({value!r}): hpcnn computes in float32 only: keep 'float32' and give "
                                  "float32 arrays (x.astype('float32'))")


def image_data_format() -> str:
    return "channels_last"


def set_image_data_format(data_format: str) -> None:
    if data_format != "channels_last":
        raise NotImplementedError(f"set_image_data_format({data_format!r}): hpcnn is NHWC (channels_last) only: "
                                  "transpose channels-first arrays with x.transpose(0, 2, 3, 1)")


def epsilon() -> float:
    """The fuzz factor Keras' losses use (hpcnn's losses are log-sum-exp stable and need none)."""
    return _EPSILON[0]


def set_epsilon(value: float) -> None:
    _EPSILON[0] = float(value)


_ARRAYS = ("hpcnn has no tensor backend: weights are NumPy arrays (model.get_weights() / set_weights()) and "
           "outputs come from model.predict()")
_DTYPES = "use NumPy's dtypes (numpy.issubdtype); hpcnn computes in float32"
_ADVICE = {"eval": _ARRAYS, "get_value": _ARRAYS, "set_value": _ARRAYS, "variable": _ARRAYS, "placeholder": _ARRAYS,
           "function": _ARRAYS,
           "learning_phase": "model.fit trains (dropout on), model.evaluate and model.predict infer: there is no "
                             "phase to set",
           "set_learning_phase": "model.fit trains (dropout on), model.evaluate and model.predict infer: there is "
                                 "no phase to set",
           "get_session": "no sessions: models run as they are called (model.fit, model.predict)",
           "set_session": "no sessions: models run as they are called (model.fit, model.predict)",
           "get_uid": "layer names are unique in a model: model.get_layer(name)",
           "is_keras_tensor": "isinstance(x, hpcnn.layers.KerasTensor)",
           "is_float_dtype": _DTYPES, "is_int_dtype": _DTYPES, "result_type": _DTYPES, "standardize_dtype": _DTYPES}
install(__name__, "backend", advice=_ADVICE, default_advice=_ARRAYS)

__all__ = ["backend", "clear_session", "floatx", "set_floatx", "image_data_format", "set_image_data_format",
           "epsilon", "set_epsilon"]
