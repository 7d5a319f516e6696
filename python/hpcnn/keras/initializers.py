"""``keras.initializers``: hpcnn initializes kernels with Glorot-uniform and biases with zeros,
Keras' defaults, and takes no initializer objects in this version."""
from __future__ import annotations

from ._compat import install

install(__name__, "initializers",
        default_advice="hpcnn initializes kernels with glorot_uniform and biases with zeros (Keras' defaults): leave "
                       "kernel_initializer / bias_initializer unset, or give the strings 'glorot_uniform' / 'zeros'; set other values with model.set_weights()")
