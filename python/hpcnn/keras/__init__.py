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


_FLOAT32 = "hpcnn computes in float32 (TF32 on GPUs: hpcnn.config.set_tf32)"
_BUILD = ("hpcnn has no symbolic operations to script: build models from hpcnn.keras.layers (Sequential, or "
          "Model(inputs, outputs) on Input tensors)")
_ADVICE = {
    "Layer": "custom layers (subclasses of Layer with a Python call()) are not supported: hpcnn's layers run in "
             "C++; compose hpcnn.keras.layers in a Sequential or a functional Model(inputs, outputs)",
    "Variable": ("hpcnn has no standalone variables: a layer's weights are Variable objects that live in its model "
                 "(layer.kernel, layer.weights, model.weights; get_weights() / set_weights())"),
    "Loss": "custom losses are not supported (losses run in the C++ core): compile(loss=...) with one of "
            "hpcnn.keras.losses (CategoricalCrossentropy, SparseCategoricalCrossentropy, BinaryCrossentropy, "
            "MeanSquaredError, MeanAbsoluteError)",
    "Metric": "custom metrics are not supported (metrics run in the C++ core): compile(metrics=[...]) with "
              "hpcnn.keras.metrics ('accuracy', TopKCategoricalAccuracy, 'mse', 'mae', ...), or compute one with "
              "NumPy on what predict() returns",
    "Initializer": "hpcnn initializes kernels with glorot_uniform and biases with zeros (Keras' defaults); set "
                   "other values with model.set_weights()",
    "ops": "keras.ops (backend tensor operations) is not in hpcnn: hpcnn's layers compute in C++; use NumPy on "
           "the arrays predict() returns",
    "random": "use numpy.random; hpcnn.utils.set_random_seed seeds hpcnn",
    "mixed_precision": _FLOAT32, "dtype_policies": _FLOAT32, "DTypePolicy": _FLOAT32, "FloatDTypePolicy": _FLOAT32,
    "Quantizer": _FLOAT32, "quantizers": _FLOAT32,
    "distribution": "data-parallel training is hpcnn.distribute.MirroredStrategy (the GPUs of a node, or "
                    "processes with MPI) used as strategy.scope()",
    "constraints": "weight constraints are not supported: keep weights small with "
                   "kernel_regularizer=regularizers.l2(0.01) on Conv2D and Dense",
    "preprocessing": "prepare arrays with NumPy, or an HDF5 file for hpcnn.data.HDF5Dataset",
    "visualization": "model.summary() prints the model; hpcnn.plot draws training curves",
    "export": "save with model.save('m.keras') or model.save('m.h5'), which Keras loads",
    "distillation": "train the student with fit on the teacher's predict() outputs as targets "
                    "(loss='categorical_crossentropy' takes soft targets)",
    "wrappers": "call model.fit / model.predict from your own scikit-learn estimator class",
    "legacy": "Keras 2's legacy names: hpcnn.keras has the current ones (keras.optimizers.Adam, ...)",
    "InputSpec": "hpcnn checks shapes itself: declare the input with Input(shape) or InputLayer(input_shape=...)",
    "Function": _BUILD, "Operation": _BUILD, "StatelessScope": _BUILD, "SymbolicScope": _BUILD, "name_scope": _BUILD,
    "tree": _BUILD, "remat": _BUILD, "RematScope": _BUILD,
}
install(__name__, "", sources=["hpcnn.models", "hpcnn.layers", "hpcnn.optimizers", "hpcnn.regularizers"],
        advice=_ADVICE, default_advice="not part of hpcnn's Keras API", keras_only=True)

__all__ = ["activations", "applications", "backend", "callbacks", "config", "datasets", "initializers", "layers",
           "losses", "metrics", "models", "optimizers", "preprocessing", "regularizers", "saving", "utils",
           "Sequential", "Model", "Input", "Optimizer", "Regularizer", "device", "version", "KERAS_VERSION"]
