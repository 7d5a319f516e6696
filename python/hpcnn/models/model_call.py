"""``model(x)`` on data: Keras 3's eager call of a model, one batch of any size.

    y = model(x)                   # training=False (the default): the inference forward, as predict;
                                   # a model of augmentation layers only augments (Keras 3's default)
    y = model(x, training=True)    # Dropout draws masks, BatchNormalization normalizes with the
                                   # batch's statistics and moves its moving statistics toward them

``training=True`` is one forward pass in training mode in the C++ core, with no loss, backward pass
or optimizer step (``core.call_training``); the model need not be compiled. Its random draws have
a stream of their own (a call counter), so two calls draw different dropout masks and a later
``fit`` draws exactly what it would have drawn without the calls. A layer that is frozen
(``trainable = False``, taken at compile) or inside a nested model called with ``training=False``
stays in inference mode, as in Keras.

The result is a ``CallOutput``: a NumPy array (an ``ndarray`` subclass, so every NumPy use works
and ``np.array(y)`` gives a plain array) that also has Keras' tensor method ``numpy()``, so the
common ``model(x).numpy()`` runs unchanged. Keras returns a backend tensor instead; hpcnn has no
tensor type of its own.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import validation
from ..layers.eager_call import CallOutput
from ..training.compile import follow_device_scope
from ..training.data_adapters import prepare_inputs


def only_augmentation(model: Any) -> bool:
    """A model of augmentation layers (and Rescaling) only, as the tutorials' ``data_augmentation``:
    called on data without ``training`` it augments, as Keras 3's augmentation layers (training=True
    by default) do. A model with other layers keeps the inference forward: hpcnn runs a call in one
    mode, and Keras would augment there while its Dropout and BatchNormalization stay in inference."""
    layers = list(getattr(model, "layers", []))
    # The class attribute (layers/layer.py): a nested model has none; an instance lookup of a
    # missing name would go through Layer.__getattr__, slow in a serving loop.
    augments = [getattr(type(l), "augments", False) for l in layers]
    return any(augments) and all(a or type(l).__name__ == "Rescaling" for a, l in zip(augments, layers))


def call_on_data(model: Any, x: Any, training: Optional[bool]) -> CallOutput:
    """``model(x, training=...)`` on arrays (NumPy, lists, anything ``np.asarray`` takes)."""
    if training is None:
        training = only_augmentation(model)
    training = bool(validation.boolean(training, "training", "Model.__call__"))
    arr = prepare_inputs(x)
    if model.sample_shape is None and arr.ndim >= 2:
        model.build((None,) + tuple(arr.shape[1:]))  # Keras builds a model without an input shape at its first call
    if arr.ndim != len(model.input_shape):
        raise ValueError(f"model {model.name!r} expects inputs of shape {model.input_shape} (a batch), got an array of "
                         f"shape {arr.shape}; add the batch axis (x[None]) for one sample")
    if tuple(arr.shape[1:]) != tuple(model.input_shape[1:]):
        raise ValueError(f"Input 0 of model {model.name!r} is incompatible: expected shape {model.input_shape}, got "
                         f"{arr.shape}")
    follow_device_scope(model)
    if training:
        model.claim_weights()  # the call moves BatchNormalization's statistics: shared layers see them (weight_home.py)
        out = model.core.call_training((arr,))
    else:
        out = model.core.predict_step((arr,))
    return np.asarray(out).view(CallOutput)
