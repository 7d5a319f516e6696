"""Where a layer's weights live, and how models that share a layer share its values.

Keras layers own their variables; hpcnn keeps every weight of a model in its C++ core's one
parameter buffer (on the model's device, in that device's layout), so that a training step is one
C++ call. A layer is a position of one or more cores: the same ``Conv2D`` object is position 1 of
a trained Sequential's core and position 1 of the core of
``Model(model.input, model.get_layer("conv1").output)``, the feature extractor built from it.
This module makes those positions one set of values, as Keras' shared variables are:

- ``CoreWeights`` wraps one built core and knows, per position, its leaf layer (a nested model is
  flattened into its leaf layers: the core's positions, ``Model.graph_nodes()``).
- Each leaf layer has a **home**: ``layer.weight_home = (core_weights, position)``, the core that
  holds its newest values, and ``layer.weights_stamp``, a number that changes whenever someone
  writes them outside a training step. ``layer.get_weights()`` / ``set_weights()`` and its
  ``Variable`` objects read and write the home (``get_layer_weights`` / ``set_layer_weights`` of
  the core: one position, Keras' order and layouts, on whatever device the core lives, on every
  replica of a distribution strategy).
- Before a model reads or runs its core (``model.core``: predict, evaluate, get_weights, save,
  summary...), it **pulls**: for each of its positions whose layer's home is another core, it
  copies the layer's values in, unless it already holds them. "Already holds" is a key: the
  layer's stamp and the home core's training-step counter (a training step changes the values
  without a stamp). A core that shares nothing, or whose shared layers have not changed since its
  last pull, pulls in O(1).
- Before a model writes its core (fit, train_on_batch, set_weights, load_weights, and a forward
  pass in training mode that moves BatchNormalization's statistics), it **claims** its layers:
  pull, then it becomes their home, with a new stamp. The training steps themselves are C++
  calls on the home core: no Python work per step.

The cost is one copy of a shared layer's weights (device -> host -> device) when the model using
it changes, never per step. A core keeps the cores its layers' homes are in alive (the layers hold
them), so dropping a model, or a Sequential's rebuild after ``add()``/``pop()``, loses no values:
the new core pulls them from the old one.

A layer that is in no built core yet is built on demand: the model that holds it builds its core
(``layer.weights_model``), or a layer called on symbolic tensors alone gets a core of its own
(one position) as Keras builds a layer at its call. A layer with neither is not built: no weights,
as in Keras.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import _core, utils

# Every stamp ever handed out is unique and increasing; _homes_changed is the newest one given
# when some layer's home changed or was written, so a core can tell in O(1) that nothing did.
_stamps = itertools.count(1)
_homes_changed = 0


def new_stamp() -> int:
    global _homes_changed
    _homes_changed = next(_stamps)
    return _homes_changed


class CoreWeights:
    """One built core's weights, per position: its leaf layer, the specs of its weights, and
    which values it holds of layers whose home is elsewhere."""

    def __init__(self, core: Any, layers: Sequence[Any], path_prefix: str = "") -> None:
        self.core = core
        self.layers = list(layers)  # per position, the leaf layer
        # Per position, (name, shape, trainable) of each weight, Keras order.
        self.specs: List[List[Tuple[str, Tuple[int, ...], bool]]] = [
            [(str(n), tuple(int(d) for d in shape), bool(t)) for n, shape, t in per]
            for per in core.layer_weights]
        self.weighted = [p for p, s in enumerate(self.specs) if s]
        self.copied: Dict[int, Tuple[int, int]] = {}  # position -> key of the values copied in
        self.foreign: List[int] = []  # positions whose layer's home is another core
        self.checked = -1  # _homes_changed when `foreign` was last computed
        stamp = new_stamp()
        for p in self.weighted:
            layer = self.layers[p]
            if layer.weight_home is None:  # first built here: this core draws its values
                layer.weight_home, layer.weights_stamp = (self, p), stamp
                layer.weights_path = f"{path_prefix}{layer.name}/"

    def pull(self) -> None:
        """Copies in the newest values of the layers whose home is another core (only those that
        changed since the last copy)."""
        if self.checked == _homes_changed and not self.foreign:
            return
        if self.checked != _homes_changed:
            self.foreign = [p for p in self.weighted if self.layers[p].weight_home[0] is not self]
            self.checked = _homes_changed
        for p in self.foreign:
            layer = self.layers[p]
            home, q = layer.weight_home
            key = (layer.weights_stamp, int(home.core.step))
            if self.copied.get(p) == key:
                continue
            if [s[1] for s in home.specs[q]] != [s[1] for s in self.specs[p]]:
                # Another input shape (a Sequential rebuilt for another one): Keras would refuse; the
                # layer's values are this core's own from now on.
                layer.weight_home, layer.weights_stamp = (self, p), new_stamp()
                continue
            self.core.set_layer_weights(p, home.core.get_layer_weights(q))
            self.copied[p] = key

    def claim(self) -> None:
        """Before this core's weights are written: it holds the newest values and becomes the home
        of all its layers."""
        self.pull()
        stamp = new_stamp()
        for p in self.weighted:
            layer = self.layers[p]
            layer.weight_home, layer.weights_stamp = (self, p), stamp
        self.foreign, self.checked = [], stamp


def built_home(layer: Any) -> Optional[Tuple[CoreWeights, int]]:
    """The layer's home, building it when it can be built (module docstring); None: not built."""
    if layer.weight_home is not None:
        return layer.weight_home
    owner = layer.weights_model() if layer.weights_model is not None else None
    if owner is not None and owner.sample_shape is not None:
        owner.core  # builds the model's core: it becomes the home of the layers it holds
        if layer.weight_home is not None:
            return layer.weight_home
    inbound = layer.inbound_tensors
    if layer.is_input or layer.merges_inputs or not inbound:
        return None
    # Called on a symbolic tensor, in no built model: a core of its own, as Keras builds a layer
    # when it is called.
    core = _core.Model(list(inbound[0].sample_shape), [layer.core_config()], utils.next_model_seed())
    CoreWeights(core, [layer])
    return layer.weight_home


def is_built(layer: Any) -> bool:
    """Keras' ``layer.built``: it has its weights, or (a layer without weights) it is part of a
    model with an input shape or was called on a tensor."""
    if layer.is_input or built_home(layer) is not None:
        return True
    owner = layer.weights_model() if layer.weights_model is not None else None
    return (owner is not None and owner.sample_shape is not None) or bool(layer.inbound_tensors)


def read(layer: Any) -> List[np.ndarray]:
    """The layer's weights (Keras order and layouts), [] when it is not built."""
    home = built_home(layer)
    if home is None:
        return []
    cw, p = home
    return [np.array(w, copy=True) for w in cw.core.get_layer_weights(p)]


def specs(layer: Any) -> List[Tuple[str, Tuple[int, ...], bool]]:
    """(name, shape, trainable) of each of the layer's weights; [] when it is not built."""
    home = built_home(layer)
    return [] if home is None else home[0].specs[home[1]]


def write(layer: Any, weights: Sequence[Any]) -> None:
    """Replaces the layer's weights in its home (Keras' checks and messages; nothing changes on a
    mismatch). Every core sharing the layer sees them at its next pull."""
    if isinstance(weights, np.ndarray) or not isinstance(weights, (list, tuple)):
        raise ValueError(f"set_weights: expected a list of arrays (get_weights() order), got {type(weights).__name__}")
    expected = specs(layer)
    if len(weights) != len(expected):
        raise ValueError(f"You called `set_weights(weights)` on layer '{layer.name}' with a weight list of length "
                         f"{len(weights)}, but the layer was expecting {len(expected)} weights."
                         + (f" Expected: {[f'{n} {s}' for n, s, _ in expected]}" if expected else ""))
    arrays = []
    for w, (name, shape, _) in zip(weights, expected):
        a = np.asarray(w)
        if a.dtype.kind not in "fiub":
            raise ValueError(f"set_weights: layer '{layer.name}' weight {name} has dtype {a.dtype}; expected real "
                             "numbers")
        if tuple(a.shape) != shape:
            raise ValueError(f"Layer {layer.name} weight shape {shape} is not compatible with provided weight shape "
                             f"{tuple(a.shape)}.")
        arrays.append(np.asarray(a, dtype=np.float32, order="C"))  # 0-d stays 0-d (a count)
    if not arrays:
        return
    cw, p = layer.weight_home
    cw.core.set_layer_weights(p, arrays)
    layer.weights_stamp = new_stamp()


def model_sharing(layers: Sequence[Any], model: Any) -> None:
    """Records `model` as the model that builds these layers' weights on demand (built_home),
    unless a model that holds them already does (an extractor leaves the layers to their model)."""
    ref = weakref.ref(model)
    for layer in layers:
        if layer.weights_model is None or layer.weights_model() is None:
            layer.weights_model = ref
