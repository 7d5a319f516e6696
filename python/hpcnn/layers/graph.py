"""The symbolic graph at the bottom of the layers: the functional API's symbolic side (Keras' names): ``KerasTensor``, what ``hpcnn.Input()``
returns and what a layer called on one returns; the record of which layer made each tensor from
which inputs; and the walk that turns a model's (input, output) into its layers in Keras' order.

    x = hpcnn.Input(shape=(32, 32, 3))
    y = Conv2D(16, 3, padding="same", activation="relu")(x)
    y = Add()([Conv2D(16, 3, padding="same")(y), x])    # shapes are checked here, at the call
    model = hpcnn.Model(inputs=x, outputs=y)

A layer is used at one position of a graph: calling it a second time (Keras' shared layers) is a
NotImplementedError, because hpcnn keeps a layer's weights per position in the model's one
parameter buffer. The tensors are configuration only; the model (models.Model) builds the C++
graph from them. A layer's weights live in the core of a model that holds it, and models built
from the same tensors (a feature extractor of a trained model) share them (weight_home.py).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import _core

# The layers (layer.py) are above this module: here a layer is anything with the attributes the
# graph reads and writes (name, is_input, merges_inputs, input_shape, inbound_tensors,
# output_tensor, core_config()), named ``Layer`` in the annotations.
Layer = Any


class KerasTensor:
    """A symbolic batch: the shape (``(None, *per_sample)``) and dtype of what a layer outputs,
    and where it comes from. It holds no data; build a ``hpcnn.Model`` from it and call
    ``predict`` to compute."""

    def __init__(self, shape: Sequence[int], layer: Layer, dtype: str = "float32") -> None:
        self.sample_shape: Tuple[int, ...] = tuple(int(d) for d in shape)  # per sample
        self.layer = layer  # the layer that outputs it; what it read is layer.inbound_tensors
        self.dtype = dtype

    @property
    def shape(self) -> Tuple[Optional[int], ...]:
        """``(None, *per_sample_shape)``: the batch axis is not fixed."""
        return (None,) + self.sample_shape

    @property
    def ndim(self) -> int:
        return len(self.sample_shape) + 1

    @property
    def name(self) -> str:
        """The name of the layer that outputs this tensor (set when a model is built, if not given)."""
        return layer_label(self.layer, quoted=False)

    @property
    def _keras_history(self) -> Tuple[Layer, int, int]:
        """(layer, node index, tensor index), as Keras records it: one node and one output per layer."""
        return (self.layer, 0, 0)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self!r} is symbolic and holds no values: build hpcnn.Model(inputs, outputs) "
                        "and call predict() to compute")

    def __repr__(self) -> str:
        return f"<KerasTensor shape={self.shape}, dtype={self.dtype}, name={self.name}>"


def layer_label(layer: Layer, quoted: bool = True) -> str:
    """How messages name a layer: its name ('conv2d_1'), or its class before it has one."""
    if layer.name:
        return f"'{layer.name}'" if quoted else layer.name
    return type(layer).__name__


def _describe(t: KerasTensor) -> str:
    return f"{layer_label(t.layer)} {t.shape}"


def call_layer(layer: Layer, inputs: Any, kwargs: Dict[str, Any]) -> KerasTensor:
    """``layer(inputs)`` on symbolic tensors: checks the call, computes the output shape with the
    C++ shape rules (a mismatch is a ValueError here, as in Keras), records the layer's position."""
    cls = type(layer).__name__
    training = kwargs.pop("training", None)
    if "mask" in kwargs and kwargs["mask"] is None:
        del kwargs["mask"]  # Keras' default: no mask
    if kwargs:
        raise TypeError(f"Unrecognized keyword arguments passed to {cls}.__call__: {kwargs}")
    if training is not None:
        raise ValueError(f"{cls}: training={training!r} is not supported: hpcnn runs layers in training mode in "
                         "fit() and in inference mode in evaluate() and predict()")
    if layer.is_input:
        raise TypeError("an InputLayer is not called: use hpcnn.Input(shape=...) for a model's input")
    if layer.merges_inputs:
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"{cls} layer should be called on a list of at least 2 inputs. Received: "
                             f"inputs={inputs!r:.200}")
        tensors = list(inputs)
        if len(tensors) < 2:
            raise ValueError(f"{cls} layer should be called on a list of at least 2 inputs. Received "
                             f"{len(tensors)} input")
    else:
        if isinstance(inputs, (list, tuple)):
            raise ValueError(f"{cls} takes one tensor, got a {type(inputs).__name__} of {len(inputs)}: "
                             "only merging layers (Add, Concatenate) take several")
        tensors = [inputs]
    for t in tensors:
        if not isinstance(t, KerasTensor):
            if hasattr(t, "_keras_history") or type(t).__module__.split(".")[0] in ("keras", "tensorflow"):
                raise TypeError(f"{cls} was called on {type(t).__name__} from another library; hpcnn layers take "
                                "the tensors of hpcnn.Input() and of other hpcnn layers")
            raise TypeError(f"{cls} was called on {type(t).__name__}: hpcnn layers are called on symbolic tensors "
                            "(x = hpcnn.Input(shape=...); y = layer(x)) to build a model, or on a NumPy array (a batch) to "
                            "compute it now: np.asarray(...) the data first")
    if getattr(layer, "inbound_tensors", None) is not None:
        raise NotImplementedError(
            f"layer {layer_label(layer)} ({cls}) is already used at another position of a graph: hpcnn does not "
            f"share a layer (and its weights) between positions; create a new {cls}(...) for this call")
    if not layer.merges_inputs and layer.input_shape is not None and tuple(layer.input_shape) != tensors[0].sample_shape:
        raise ValueError(f"{cls}: input_shape={tuple(layer.input_shape)} does not match the tensor it is called on, "
                         f"{_describe(tensors[0])}")
    try:
        shape = _core.layer_output_shape(layer.core_config(), [list(t.sample_shape) for t in tensors])
    except ValueError as e:
        where = f"layer {layer_label(layer)}: " if layer.name else ""
        raise ValueError(f"{where}{e} (called on {', '.join(_describe(t) for t in tensors)})") from None
    out = KerasTensor(shape, layer)
    layer.inbound_tensors = tensors
    layer.output_tensor = out
    return out


def single(value: Any, what: str) -> KerasTensor:
    """The one tensor of Model(inputs=..., outputs=...): a KerasTensor, or a list/tuple/dict of one."""
    items = list(value.values()) if isinstance(value, dict) else value
    if isinstance(items, (list, tuple)):
        if len(items) != 1:
            if len(items) == 0:
                raise ValueError(f"Model: {what} is empty")
            raise NotImplementedError(f"Model: hpcnn models have one input and one output for now; got "
                                      f"{len(items)} {what}")
        items = items[0]
    if not isinstance(items, KerasTensor):
        raise TypeError(f"Model: {what} must be hpcnn tensors (from hpcnn.Input() and layer calls), got "
                        f"{type(items).__name__}")
    return items


def ordered_layers(model_input: KerasTensor, output: KerasTensor) -> List[Layer]:
    """The layers between the model's input and its output, the InputLayer first, in Keras'
    order: by decreasing depth (the longest path to the output), ties in the order a depth-first
    walk from the output meets them. That is a topological order, and the order of Keras'
    ``model.layers`` and ``get_weights()`` for the same graph, so weights move between the two.

    ValueError for a graph that reaches an input other than the model's ('Graph disconnected'),
    an output that does not depend on the input, or a cycle."""
    visit_index: Dict[int, int] = {}
    in_progress, finished = set(), set()
    post_order: List[Layer] = []
    stack: List[Tuple[KerasTensor, bool]] = [(output, False)]
    while stack:  # iterative: a deep network must not hit Python's recursion limit
        t, done = stack.pop()
        layer = t.layer
        if done:
            in_progress.discard(id(layer))
            finished.add(id(layer))
            post_order.append(layer)
            continue
        if id(layer) in finished:
            continue
        if id(layer) in in_progress:
            raise ValueError(f"the tensor {t!r} from layer {layer_label(layer)} is part of a cycle")
        if layer.is_input and t is not model_input:
            raise ValueError(
                f"Graph disconnected: the output {output!r} depends on the input {t!r}, which is not the model's "
                f"input {model_input!r}: pass that input as inputs=, or build the graph from the model's input")
        visit_index.setdefault(id(layer), len(visit_index))
        in_progress.add(id(layer))
        stack.append((t, True))
        if t is not model_input:
            for parent in reversed(layer.inbound_tensors or []):
                stack.append((parent, False))
    if id(model_input.layer) not in finished:
        raise ValueError(f"the output {output!r} does not depend on the model's input {model_input!r}")
    depth: Dict[int, int] = {}
    for layer in reversed(post_order):  # consumers before the layers they read
        d = depth.setdefault(id(layer), 0)
        if layer is model_input.layer:
            continue
        for parent in layer.inbound_tensors or []:
            p = id(parent.layer)
            depth[p] = max(depth.get(p, 0), d + 1)
    return sorted(post_order, key=lambda lay: (-depth[id(lay)], visit_index[id(lay)]))


__all__ = ["KerasTensor"]
