"""``layer(x)`` on data: Keras' eager call of one layer on a batch of arrays.

    feature_batch_average = layers.GlobalAveragePooling2D()(feature_batch)   # (32, 1280)
    prediction_batch = layers.Dense(1, activation="sigmoid")(feature_batch_average)

The layer runs in a C++ core of its own (one position, the input shape of the batch), the very
forward pass a model runs, never a NumPy copy of its math. Its weights follow Keras: a layer not
built yet is built by the call (this core draws its initial values and becomes its home, so a
model built later from the same layer starts from them, as Keras' model shares the variables the
eager call created); a built layer (in a trained model, or called before) computes with its
current values, pulled from its home (weight_home.py). The core is kept per input shape, so
calling a layer on many batches of one shape builds it once.

``training``: None (the default) augments for the augmentation layers (Keras 3's RandomFlip,
RandomRotation... default to training=True) and is the inference forward for all others (Dropout
passes through, BatchNormalization uses its moving statistics); ``training=True`` runs the layer
in training mode, with no weight update.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from .. import _core, utils, validation
from .weight_home import CoreWeights


class CallOutput(np.ndarray):
    """What ``layer(x)`` and ``model(x)`` return on data: a NumPy array with Keras' ``numpy()``."""

    def numpy(self) -> np.ndarray:
        """The values as a plain NumPy array (Keras' ``tensor.numpy()``)."""
        return np.asarray(self).view(np.ndarray)


def is_data(inputs: Any) -> bool:
    """A batch of data (a NumPy array, or an array type of hpcnn's) rather than a symbolic tensor."""
    return isinstance(inputs, np.ndarray)


def _batch(layer: Any, x: np.ndarray) -> np.ndarray:
    """The batch as the core takes it: contiguous uint8 or float32, with a batch axis."""
    cls = type(layer).__name__
    if x.dtype.kind not in "fiub":
        raise ValueError(f"{cls} was called on an array of dtype {x.dtype}; expected numbers")
    if x.ndim < 2:
        raise ValueError(f"{cls} was called on an array of shape {x.shape}: layers take a batch (its first axis the "
                         "samples); add the batch axis (x[None]) for one sample")
    if x.shape[0] == 0:
        raise ValueError(f"{cls} was called on an empty batch (shape {x.shape})")
    if layer.input_shape is not None and tuple(layer.input_shape) != tuple(x.shape[1:]):
        raise ValueError(f"Input 0 of layer {layer.name or cls!r} is incompatible: expected shape "
                         f"{(None,) + tuple(layer.input_shape)}, got {x.shape}")
    if x.dtype == np.uint8 or x.dtype == np.float32:
        return np.ascontiguousarray(x)
    return np.ascontiguousarray(x, dtype=np.float32)


def _core_for(layer: Any, sample_shape: Tuple[int, ...]) -> CoreWeights:
    """The layer's own one-position core for this input shape, built at the first call with it."""
    cores = layer.eager_cores
    cw = cores.get(sample_shape)
    if cw is not None:
        return cw
    try:
        core = _core.Model(list(sample_shape), [layer.core_config()], utils.next_model_seed())
    except ValueError as e:
        raise ValueError(f"layer {layer.name or type(layer).__name__!r}: {e} (called on a batch of shape "
                         f"(batch,) + {sample_shape})") from None
    cw = CoreWeights(core, [layer])
    cls = type(layer).__name__
    home = layer.weight_home
    if home is not None and home[0] is not cw and [s[1] for s in home[0].specs[home[1]]] != [s[1] for s in cw.specs[0]]:
        built = [s[1] for s in home[0].specs[home[1]]]
        raise ValueError(f"layer {layer.name or cls!r} was built for other inputs (its weights have shapes {built}) and "
                         f"cannot be called on a batch of shape (batch,) + {sample_shape}")
    cores[sample_shape] = cw
    return cw


def call_on_data(layer: Any, inputs: np.ndarray, training: Optional[bool]) -> CallOutput:
    """``layer(x, training=...)`` on one batch: its output, Keras' shape, float32."""
    cls = type(layer).__name__
    if layer.is_input:
        raise TypeError("an InputLayer is not called: use hpcnn.Input(shape=...) for a model's input")
    if layer.merges_inputs:
        raise NotImplementedError(f"{cls} on arrays is not supported: it merges several inputs; build "
                                  "hpcnn.Model(inputs, outputs) with it and call the model, or use NumPy")
    if training is None:
        training = bool(getattr(layer, "augments", False))
    training = bool(validation.boolean(training, "training", f"{cls}.__call__"))
    x = _batch(layer, inputs)
    cw = _core_for(layer, tuple(int(d) for d in x.shape[1:]))
    if training:
        cw.claim()  # a training-mode pass moves BatchNormalization's statistics: the layer's newest values
        out = cw.core.call_training((x,))
    else:
        cw.pull()
        out = cw.core.predict_step((x,))
    return np.asarray(out).view(CallOutput)
