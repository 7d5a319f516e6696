"""``Sequential``: Keras' linear stack of layers, the special case of ``Model`` whose graph is a
chain (each layer reads the one before it).

Once its input shape is known (``Input``/``InputLayer`` first, ``input_shape=`` on the first layer,
or ``build(input_shape)``), the chain is also a symbolic graph, as Keras builds it: every layer has
its ``input`` and ``output`` tensor, and ``model.inputs`` / ``outputs`` / ``input`` / ``output``
start feature extractors such as ``Model(model.input, model.get_layer("conv1").output)``, which
share the layers' weights (hpcnn.layers.weight_home). ``add()`` and ``pop()`` keep the tensors
current. Keras 3.15 answers ``model.input`` / ``output`` of a Sequential with an AttributeError;
hpcnn gives the tensors (Keras 2 did, and tutorials use them)."""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from .. import validation
from ..layers import Input, KerasTensor, Layer, deserialize, graph, serialize, weight_home
from . import nesting
from .model import Model, input_shape_argument


class Sequential(Model):
    """A linear stack of layers (Keras' ``Sequential``): the graph in which each layer reads the
    one before it."""

    is_sequential = True

    def __init__(self, layers: Optional[Iterable[Any]] = None, name: Optional[str] = None,
                 seed: Optional[int] = None, trainable: bool = True) -> None:
        self._setup(name, "sequential", seed, trainable)
        self.layers: List[Layer] = []
        # The symbolic chain once the input shape is known: the input tensor and the layers whose
        # position (inbound tensors) this model set (a layer already called elsewhere keeps its own).
        self._input_tensor: Optional[KerasTensor] = None
        self._linked: List[Layer] = []
        for layer in validation.layer_list(layers, "Sequential: layers") or []:
            self.add(layer)

    def top_level_nodes(self) -> List[Tuple[Layer, List[int]]]:
        """The chain of Keras' layers (a nested model as one of them), each reading the one before."""
        return [(layer, [i - 1]) for i, layer in enumerate(self.layers)]

    # ------------------------------------------------------------------ the symbolic chain
    def _link(self) -> None:
        """Calls the layers on symbolic tensors along the chain (from the input tensor), as far
        as they can be: a layer called in another graph ends the chain's tensors there."""
        if self._input_shape is None:
            return
        if self._input_tensor is None or self._input_tensor.sample_shape != tuple(self._input_shape):
            self._unlink(0)
            self._input_tensor = Input(shape=self._input_shape, name="input_layer")
        t = self._input_tensor
        for i, layer in enumerate(self.layers):
            if i < len(self._linked) and self._linked[i] is layer:
                t = layer.output_tensor
                continue
            self._unlink(i)
            if not isinstance(layer, Layer) or layer.inbound_tensors is not None:
                # Called in another graph (its tensors there are not this chain's), or not a leaf
                # layer (a nested model): the chain's tensors end here.
                return
            t = layer(t)
            self._linked.append(layer)

    def _unlink(self, start: int) -> None:
        """Forgets the chain's tensors from layer `start` on (before pop, or a new input shape)."""
        for layer in self._linked[start:]:
            layer.inbound_tensors, layer.output_tensor = None, None
        del self._linked[start:]

    @property
    def inputs(self) -> List[KerasTensor]:
        if self._input_tensor is None:
            raise AttributeError(f"Sequential model '{self.name}' has no defined inputs yet: start it with "
                                 "hpcnn.Input(shape=...) or InputLayer, or pass input_shape= to its first layer")
        return [self._input_tensor]

    @property
    def outputs(self) -> List[KerasTensor]:
        if self._input_tensor is None:
            raise AttributeError(f"The layer {self.name} has never been called and thus has no defined output: give "
                                 "the Sequential an input shape (hpcnn.Input(shape=...) first)")
        if len(self._linked) < len(self.layers):
            self._link()  # raises the shape error of a layer that does not fit
        if len(self._linked) < len(self.layers):
            bad = self.layers[len(self._linked)]
            raise AttributeError(f"Sequential model '{self.name}': layer {graph.layer_label(bad)} was already called "
                                 "in another graph, so this chain has no symbolic output (a layer has one position; "
                                 "create a new layer for this model)")
        return [self._linked[-1].output_tensor if self._linked else self._input_tensor]

    @property
    def input(self) -> KerasTensor:
        return self.inputs[0]

    @property
    def output(self) -> KerasTensor:
        return self.outputs[0]

    # ------------------------------------------------------------------ structure
    def add(self, layer: Union[Layer, KerasTensor, Model]) -> None:
        """Append a layer (or start with ``hpcnn.Input(shape=...)``), or a model, which becomes one
        layer of this one (Keras' nesting: ``Sequential([base_model, Dense(10)])``, models/nesting.py).
        Adding to a model that was already built rebuilds it (compile again): the layers it had keep
        their weights, as in Keras; a new layer gets fresh ones."""
        if isinstance(layer, Model):
            self._add_model(layer)
            return
        if isinstance(layer, KerasTensor):
            if not layer.layer.is_input:
                raise TypeError("add() takes an hpcnn layer or the tensor of hpcnn.Input(); got the output of layer "
                                f"{graph.layer_label(layer.layer)}")
            layer = layer.layer
        if not isinstance(layer, Layer):
            raise TypeError(f"add() takes an hpcnn layer, got {type(layer).__name__}")
        if layer.is_input:
            if self.layers or self._input_shape is not None:
                raise ValueError("InputLayer must come first")
            self._input_shape = layer.input_shape
            self._input_tensor = layer.output
            return
        if layer.merges_inputs:
            raise ValueError(f"{type(layer).__name__} takes several inputs and cannot be part of a Sequential: "
                             "build the model with hpcnn.Input and hpcnn.Model")
        if layer.input_shape is not None:
            if self.layers or self._input_shape is not None:
                if self._input_shape != layer.input_shape or self.layers:
                    raise ValueError("input_shape= may only be given to the first layer")
            self._input_shape = layer.input_shape
        counts: Dict[str, int] = {}
        for existing in self.layers:
            counts[existing.name_prefix] = counts.get(existing.name_prefix, 0) + 1
        if layer.name is None:
            k = counts.get(layer.name_prefix, 0)
            layer.name = layer.name_prefix + (f"_{k}" if k else "")
        self.layers.append(layer)
        try:
            self._link()
        except (ValueError, TypeError, NotImplementedError):
            pass  # a layer that does not fit the chain's shapes: raised by build() (and by .output)
        if isinstance(layer, Layer):
            weight_home.model_sharing([layer], self)
        if self._core is not None:
            self.drop_core()

    def _add_model(self, model: Model) -> None:
        if model is self or any(item is model for item in self.layers):
            raise NotImplementedError(f"model {model.name!r} is already part of this Sequential: hpcnn keeps a layer at "
                                      "one position of a model (clone_model gives a second copy)")
        if model.sample_shape is not None:
            if not self.layers and self._input_shape is None:
                self._input_shape = tuple(model.sample_shape)
            elif not self.layers and self._input_shape != tuple(model.sample_shape):
                raise ValueError(f"model {model.name!r} takes inputs of shape {model.input_shape}, but this Sequential's "
                                 f"input is {(None,) + tuple(self._input_shape or ())}")
        elif not self.layers and self._input_shape is not None:
            model.build((None,) + tuple(self._input_shape))
        elif self.layers:
            raise ValueError(f"model {model.name!r} has no input shape: give it one (InputLayer or input_shape=) "
                             "before nesting it after other layers")
        names = {existing.name for existing in self.layers}
        if model.name in names:
            raise ValueError(f'The name "{model.name}" is used 2 times in the model. All layer names should be unique '
                             "(pass name= to the nested model)")
        self.layers.append(model)
        if self._core is not None:
            self.drop_core()

    def pop(self) -> Layer:
        """Removes the last layer; the others keep their weights (Keras)."""
        if not self.layers:
            raise TypeError("There are no layers in the model.")
        self._unlink(len(self.layers) - 1)
        layer = self.layers.pop()
        self.drop_core()
        return layer

    def build(self, input_shape: Optional[Sequence[Optional[int]]] = None) -> None:
        """Create the weights (done automatically by compile/fit/summary)."""
        if input_shape is not None:
            shp = input_shape_argument(input_shape)
            if self._input_shape is not None and shp != self._input_shape:
                self.drop_core()
            self._input_shape = shp
            self._link()
        self._build_core()

    # ------------------------------------------------------------------ config
    def get_config(self) -> Dict[str, Any]:
        cfg_layers = []
        if self._input_shape is not None:
            cfg_layers.append({"class_name": "InputLayer", "config": {"input_shape": list(self._input_shape)}})
        cfg_layers += [{"class_name": nesting.keras_class_name(layer), "config": layer.get_config()}
                       if nesting.is_model(layer) else serialize(layer) for layer in self.layers]
        cfg: Dict[str, Any] = {"name": self.name, "layers": cfg_layers}
        if not self._trainable:
            cfg["trainable"] = False
        return cfg

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Sequential":
        """The model get_config() described; ValueError for anything else."""
        if not isinstance(config, dict) or not isinstance(config.get("layers"), list):
            raise ValueError(f"a Sequential config is a dict with a 'layers' list, got {config!r:.200}")
        model = cls(name=config.get("name"),
                    trainable=validation.boolean(config.get("trainable", True), "trainable", "Sequential"))
        for lc in config["layers"]:
            nested = isinstance(lc, dict) and isinstance(lc.get("class_name"), str) and \
                lc["class_name"] in nesting.MODEL_CLASSES
            model.add(nesting.nested_from_config(lc) if nested else deserialize(lc))
        return model

    def __repr__(self) -> str:
        return f"<hpcnn.Sequential {self.name!r}: {len(self.layers)} layers>"



nesting.MODEL_CLASSES["Sequential"] = Sequential
