"""Keras' namespace over hpcnn: a script written for ``tensorflow.keras`` or Keras 3 runs on hpcnn
after one import line changes::

    from hpcnn import keras                 # was: from tensorflow import keras / import keras
    from hpcnn.keras.layers import Conv2D   # was: from tensorflow.keras.layers import Conv2D

``keras.layers``, ``models``, ``optimizers`` (and ``optimizers.schedules``), ``callbacks``,
``losses``, ``metrics``, ``utils``, ``regularizers``, ``initializers``, ``datasets``,
``activations``, ``applications``, ``saving``, ``backend``, ``config``, ``preprocessing``, and
``keras.Sequential``, ``keras.Model``, ``keras.Input`` are hpcnn's own objects under Keras'
names. A name Keras has and hpcnn does not raises ``NotImplementedError`` naming it and the
nearest hpcnn alternative (never ``AttributeError``); a name Keras does not have either raises
``AttributeError`` as usual. ``docs/keras.md`` is the table of what is supported, partly
supported, or not yet.

``import hpcnn as tf`` gives ``tf.keras``, ``tf.config.list_physical_devices`` and ``tf.device``
too, for scripts that reach Keras through TensorFlow.
"""
from __future__ import annotations

from .. import _core, devices
from . import (activations, applications, backend, callbacks, config, datasets, initializers, layers, losses, metrics,
               models, optimizers, preprocessing, regularizers, saving, utils)
from ._compat import KERAS_VERSION, install

#: hpcnn's version (this is not Keras: ``keras.version()`` says the same).
__version__: str = _core.build_info()["version"]


def version() -> str:
    """hpcnn's version (Keras' ``keras.version()``)."""
    return __version__


def device(device_name: str):
    """``with keras.device('gpu:0'):`` places the models compiled or trained inside on that
    device (``hpcnn.device``)."""
    return devices.device(device_name)


_ADVICE = {
    "Layer": "custom layers (subclasses of Layer) are not supported: hpcnn's layers run in C++; build models from "
             "hpcnn.keras.layers",
    "Model": "the functional API (Model(inputs, outputs)) is not in this hpcnn yet: use Sequential for a stack of "
             "layers",
    "Variable": "hpcnn has no standalone variables: a layer's weights are Variable objects that live in its model (layer.kernel, layer.weights, model.weights; get_weights() / set_weights())",
    "KerasTensor": "hpcnn has no symbolic tensors in this version",
    "Loss": "custom losses are not supported: compile(loss='categorical_crossentropy' or "
            "'sparse_categorical_crossentropy')",
    "Metric": "custom metrics are not supported: compile(metrics=['accuracy'])",
    "Initializer": "hpcnn initializes kernels with glorot_uniform and biases with zeros (Keras' defaults)",
    "ops": "keras.ops (backend tensor operations) is not in hpcnn: hpcnn's layers compute in C++; use NumPy on "
           "the arrays predict() returns",
    "random": "use numpy.random; hpcnn.utils.set_random_seed seeds hpcnn",
    "mixed_precision": "hpcnn computes in float32 (TF32 on GPUs: hpcnn.config.set_tf32)",
    "distribution": "multi-GPU training is not in this hpcnn version",
    "constraints": "weight constraints are not supported",
    "preprocessing": "preprocessing layers and ImageDataGenerator are not supported: prepare arrays with NumPy, or "
                     "an HDF5 file for hpcnn.data.HDF5Dataset",
    "visualization": "model.summary() prints the model; hpcnn.plot draws training curves",
}
install(__name__, "", sources=["hpcnn.models", "hpcnn.layers", "hpcnn.optimizers", "hpcnn.regularizers"],
        advice=_ADVICE, default_advice="not part of hpcnn's Keras API", keras_only=True)

__all__ = ["activations", "applications", "backend", "callbacks", "config", "datasets", "initializers", "layers",
           "losses", "metrics", "models", "optimizers", "preprocessing", "regularizers", "saving", "utils",
           "Sequential", "Model", "Input", "Optimizer", "Regularizer", "device", "version", "KERAS_VERSION"]
