"""Models used as layers (Keras' nesting): ``base_model(inputs, training=False)`` inside a
functional graph, ``Sequential([base_model, Dense(10)])`` and ``Sequential.add(model)``.

What the user sees is Keras' structure: ``model.layers`` holds a nested model as one element, and
summary(), get_config() and the files show it as one layer of class ``Functional`` or
``Sequential``. What the C++ core builds is the flat graph of leaf layers: ``flat_nodes`` expands
every nested model, recursively, into its leaf layers at the place where it is called (its block
of positions is contiguous and in its own order, so ``get_weights()`` lists the weights in Keras'
order: the nested model's weights where it stands in the outer model's layers). That flat list is
``model.graph_nodes()``, the core's positions.

Each flat position also carries two flags from the nested models around it:
  ``owners_trainable``  every enclosing nested model is trainable (``base_model.trainable = False``
                        freezes all of it, whatever its layers say; taken at compile, as always);
  ``inference_only``    some enclosing call had ``training=False``: the layer runs in inference
                        mode in every step, fit's included (Dropout the identity,
                        BatchNormalization on its moving statistics: what Keras' transfer-learning
                        guide says the call does); the core takes it in the position's config
                        ("inference_only"). Keras 3.15 itself lets the outer call's training
                        (fit's True, model(x, training=True)) override it (keras-team/keras#20285),
                        so there a trainable BatchNormalization inside trains on batch statistics;
                        hpcnn keeps the guide's meaning.

A nested model is called once per graph (a second call in the same graph would need its layers at
two positions: refused); it may be nested in several models, each building its own core from
the same leaf layers (their values shared per leaf layer: hpcnn.models' weight sharing).
"""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple

from ..layers import KerasTensor

# A position of a model's graph: (layer, the positions it reads; -1 is the model's input).
Node = Tuple[Any, List[int]]


class FlatNode(NamedTuple):
    """One leaf layer at one position of the core's flat graph."""
    layer: Any
    parents: List[int]
    owners_trainable: bool  # every nested model around it is trainable
    inference_only: bool    # a call around it had training=False
    path: str = ""          # the nested models around it, 'base/' (Keras' variable paths: 'base/conv1/kernel')


def is_model(item: Any) -> bool:
    """Whether `item` is a model (used as a layer), not a leaf layer."""
    return hasattr(item, "graph_nodes") and hasattr(item, "top_level_nodes")


class NestedCall:
    """A model called on a symbolic tensor inside another graph: the graph's record of that call
    (the tensor it read, its output, ``training``). The outer model lists the model itself in
    its ``layers``; this record only stands in the graph walk (hpcnn.layers.graph reads
    ``inbound_tensors``, ``is_input``, ``merges_inputs``, ``name``)."""

    is_input = False
    merges_inputs = False
    input_shape = None

    def __init__(self, model: Any, training: Optional[bool]) -> None:
        self.model = model
        self.training = training
        self.inbound_tensors: Optional[List[KerasTensor]] = None
        self.output_tensor: Optional[KerasTensor] = None

    @property
    def name(self) -> str:
        return self.model.name

    @name.setter
    def name(self, value: str) -> None:
        self.model.name = value

    @property
    def name_prefix(self) -> str:
        return "sequential" if self.model.is_sequential else "functional"

    def __repr__(self) -> str:
        return f"<call of model {self.model.name!r}, training={self.training}>"


# The model classes by the class name a config gives a nested model ('Functional', 'Model',
# 'Sequential'): each registers itself where it is defined (model.py, sequential.py).
MODEL_CLASSES: dict = {}


def nested_from_config(entry: dict) -> Any:
    """A nested model's entry of a config (``{"class_name": "Functional" or "Sequential",
    "config": {...}}``): the model it describes, named as the entry says."""
    model = MODEL_CLASSES[entry["class_name"]].from_config(entry.get("config", {}))
    if isinstance(entry.get("name"), str):
        model.name = entry["name"]
    return model


def keras_class_name(item: Any) -> str:
    """The class Keras shows and writes for a layer or a nested model: 'Functional' for a
    functional model (hpcnn's ``Model``), 'Sequential', or the layer's class."""
    if is_model(item):
        return "Sequential" if item.is_sequential else "Functional"
    return type(item).__name__


def call_symbolic(model: Any, inputs: Any, training: Optional[bool]) -> KerasTensor:
    """``model(tensor, training=...)``: the model as one layer of the graph being built."""
    tensors = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if len(tensors) != 1 or not isinstance(tensors[0], KerasTensor):
        raise ValueError(f"model {model.name!r} takes one tensor (hpcnn models have one input), got "
                         f"{inputs!r:.200}")
    x = tensors[0]
    if training is True:
        raise NotImplementedError(
            f"model {model.name!r} called with training=True inside a graph: hpcnn runs it as the outer model runs "
            "(training in fit, inference in evaluate and predict) or, with training=False, always in inference "
            "mode; leave training unset for the former")
    if training not in (None, False):
        raise ValueError(f"model {model.name!r}: training must be None, True or False, got {training!r}")
    if training is False:
        # Keras' augmentation layers are the Random* classes (RandomFlip, RandomCrop, ...).
        augmenting = [node.layer for node in model.flat_graph() if type(node.layer).__name__.startswith("Random")]
        if augmenting:
            raise NotImplementedError(
                f"model {model.name!r} called with training=False holds augmentation layers "
                f"({', '.join(type(la).__name__ for la in augmenting)}), which would then never change the images: "
                "hpcnn runs augmentation in fit only and does not switch it off per call; apply the augmentation "
                "in the outer model (x = data_augmentation(inputs); x = base_model(x, training=False)), or call "
                "the model without training=False")
    if model.sample_shape is None:
        model.build((None,) + x.sample_shape)  # a Sequential without an input shape takes the tensor's
    if tuple(model.sample_shape) != x.sample_shape:
        raise ValueError(f"Input 0 of model {model.name!r} is incompatible with the tensor it is called on: expected "
                         f"shape {model.input_shape}, got {x.shape}")
    call = NestedCall(model, training)
    out = KerasTensor(tuple(model.output_shape[1:]), call)
    call.inbound_tensors = [x]
    call.output_tensor = out
    return out


def flat_nodes(items: List[Node]) -> List[FlatNode]:
    """The flat graph of a model whose top-level positions are `items` (a leaf layer, a nested
    model or a NestedCall, and the top-level positions each reads): every nested model expanded
    into its own flat nodes, in place."""
    out: List[FlatNode] = []
    last: List[int] = []  # per top-level position, the flat position of its output
    for item, parents in items:
        reads = [-1 if p < 0 else last[p] for p in parents]
        model = item.model if isinstance(item, NestedCall) else item if is_model(item) else None
        if model is None:
            out.append(FlatNode(item, reads, True, False, ""))
        else:
            training = item.training if isinstance(item, NestedCall) else None
            base = len(out)
            for node in model.flat_graph():
                inner = [reads[0] if q < 0 else base + q for q in node.parents]
                out.append(FlatNode(node.layer, inner, node.owners_trainable and model.trainable,
                                    node.inference_only or training is False, f"{model.name}/{node.path}"))
        last.append(len(out) - 1)
    return out


def spans(items: List[Node]) -> List[Tuple[int, int]]:
    """Per top-level position, its [begin, end) of flat positions."""
    out, k = [], 0
    for item, _ in items:
        model = item.model if isinstance(item, NestedCall) else item if is_model(item) else None
        n = 1 if model is None else len(model.flat_graph())
        out.append((k, k + n))
        k += n
    return out


def nested_models(items: List[Node]) -> List[Tuple[Any, int, int]]:
    """The nested models among the top-level positions, each with its [begin, end) flat span."""
    out = []
    for (item, _), (b, e) in zip(items, spans(items)):
        model = item.model if isinstance(item, NestedCall) else item if is_model(item) else None
        if model is not None:
            out.append((model, b, e))
    return out


def check_called_once(items: List[Node]) -> None:
    """A model nested twice in one graph would need its layers at two positions: refused."""
    seen = set()
    for item, _ in items:
        model = item.model if isinstance(item, NestedCall) else item if is_model(item) else None
        if model is None:
            continue
        if id(model) in seen:
            raise NotImplementedError(
                f"model {model.name!r} is used twice in one model: hpcnn keeps a layer at one position of a model's "
                "graph; build a second model from the same config (hpcnn.models.clone_model) for the second use")
        seen.add(id(model))
