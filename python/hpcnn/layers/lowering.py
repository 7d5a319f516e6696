"""Keras layers as the core's layers, position by position (what the C++ core builds)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from .activations import ReLU
from .core import Activation
from .layer import Layer
from .normalization import BatchNormalization


def is_plain_relu(layer: Layer) -> bool:
    return ((isinstance(layer, Activation) and layer.activation == "relu")
            or (isinstance(layer, ReLU) and layer.max_value is None and layer.negative_slope == 0))


def core_configs(layers: Sequence[Layer], inputs: Optional[Sequence[Sequence[int]]] = None
                 ) -> List[List[Dict[str, Any]]]:
    """The core layers of each position of a model (layers[i] reads the positions inputs[i], -1
    being the model's input; None: a chain, as a Sequential stack), with one fusion: a
    BatchNormalization whose output only a plain ReLU reads computes the ReLU itself (one pass over
    the activations instead of two, forward and backward), and the ReLU becomes an identity view.
    Each position keeps its count of core layers, so shapes, weights and trainable flags map as
    without the fusion."""
    if inputs is None:
        inputs = [[i - 1] for i in range(len(layers))]
    readers: List[List[int]] = [[] for _ in layers]
    for j, parents in enumerate(inputs):
        for p in parents:
            if p >= 0:
                readers[p].append(j)
    out = [layer.core_configs() for layer in layers]
    for i, layer in enumerate(layers):
        if isinstance(layer, BatchNormalization) and len(readers[i]) == 1:
            j = readers[i][0]
            if is_plain_relu(layers[j]) and list(inputs[j]) == [i]:
                out[i] = layer.core_configs(fused_relu=True)
                out[j] = [dict(class_name="Activation", activation="linear")]
    return out
