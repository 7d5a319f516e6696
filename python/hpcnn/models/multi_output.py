"""Models with several outputs, for predict: feature extractors such as

    extractor = keras.Model(model.inputs, [layer.output for layer in model.layers])
    maps = extractor.predict(x)          # a list of arrays, in the outputs' order (a dict for a dict)

``keras.Model(inputs, outputs)`` with a list (or dict) of several output tensors makes one of
these. hpcnn's core computes one output per model, so this model holds one functional model per
distinct output (``parts``), each running the layers its output needs; they all share the layers'
weights with each other and with the model the layers came from (hpcnn.layers.weight_home), so
the maps are those of the trained weights. The cost is honest: predict runs each part over the
data, so a layer that several outputs need is computed once per such output (for an extractor of
every layer of an n-layer chain about n / 2 times the work of one predict); memory is one core per
output. Training with several outputs (compile, fit, evaluate) is refused with what works instead.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .. import validation
from ..layers import KerasTensor, Layer, graph
from . import model_call
from .model import Model, assign_names


def refused(what: str, n: int) -> NotImplementedError:
    return NotImplementedError(
        f"{what}: this model has {n} outputs, and hpcnn trains, evaluates and saves models with one output. "
        "predict() works (it returns one array per output, in the outputs' order). To train, build a model with "
        "one output from the same layers, e.g. hpcnn.Model(inputs, outputs[-1]): the layers and their weights "
        "are shared, so this model's outputs follow its training.")


class MultiOutputModel(Model):
    """``Model(inputs, [out_1, out_2, ...])`` (or a dict of outputs): predict only (module
    docstring). ``layers`` is every layer any output needs, InputLayer first."""

    def __init__(self, inputs: Any = None, outputs: Any = None, name: Optional[str] = None,
                 seed: Optional[int] = None, trainable: bool = True, **kwargs: Any) -> None:
        validation.no_other_arguments(kwargs, "Model")
        inp = graph.single(inputs, "inputs")
        self._output_keys: Optional[List[str]] = list(outputs) if isinstance(outputs, dict) else None
        outs = list(outputs.values()) if isinstance(outputs, dict) else list(outputs)
        for t in outs:
            if not isinstance(t, KerasTensor):
                raise TypeError(f"Model: outputs must be hpcnn tensors (from hpcnn.Input() and layer calls), got "
                                f"{type(t).__name__}")
        if not inp.layer.is_input:
            raise ValueError(f"Model: inputs must be the tensor of hpcnn.Input(shape=...), got {inp!r}")
        self._setup(name, "functional", seed, trainable)
        # Every layer some output needs, in a topological order (each output's Keras order, merged).
        union: List[Layer] = [inp.layer]
        for t in outs:
            if t is inp:
                raise ValueError("Model: an output is the input itself; hpcnn models compute outputs of layers")
            for layer in graph.ordered_layers(inp, t):
                if all(layer is not seen for seen in union):
                    union.append(layer)
        assign_names(union)
        self.layers: List[Layer] = union
        self._input_shape = inp.layer.input_shape
        self._input_tensor = inp
        self._output_tensors: List[KerasTensor] = outs
        # One model per distinct output tensor; they share the layers (weight_home.py).
        self.parts: List[Model] = []
        self._part_of: List[int] = []  # per output, its part
        for t in outs:
            for j, part in enumerate(self.parts):
                if part.output is t:
                    self._part_of.append(j)
                    break
            else:
                self._part_of.append(len(self.parts))
                self.parts.append(Model(inp, t, name=f"{self.name}_output_{len(self.parts)}", seed=seed))

    # ------------------------------------------------------------------ structure
    @property
    def outputs(self) -> List[KerasTensor]:
        return list(self._output_tensors)

    @property
    def output(self) -> Any:  # Keras: the list of outputs for a model with several
        return self.outputs

    def graph_nodes(self) -> List[Any]:
        raise refused("graph_nodes", len(self._output_tensors))

    def _build_core(self) -> None:
        for part in self.parts:
            part.core  # built and pulled

    @property
    def built(self) -> bool:
        return all(part.built for part in self.parts)

    @property
    def core(self) -> Any:
        raise refused("the core model", len(self._output_tensors))

    def built_for_weights(self) -> bool:
        self._build_core()
        return True

    @property
    def device(self) -> str:
        return self.parts[0].device

    def to(self, device: str) -> "Model":
        for part in self.parts:
            part.to(device)
        return self

    def count_params(self) -> int:
        self._build_core()
        return sum(layer.count_params() for layer in self.layers[1:])

    @property
    def output_shape(self) -> Any:
        return [t.shape for t in self._output_tensors]

    def summary(self, print_fn=print, line_length: Optional[int] = None) -> None:
        """The table of the part that holds every layer (an extractor of a chain), else each part's."""
        print_fn(f'Model: "{self.name}", {len(self._output_tensors)} outputs: '
                 + ", ".join(f"{t.name} {t.shape}" for t in self._output_tensors))
        whole = [p for p in self.parts if len(p.layers) == len(self.layers)]
        for part in whole[:1] or self.parts:
            part.summary(print_fn, line_length)

    # ------------------------------------------------------------------ weights: the layers' own
    def get_weights(self) -> List[np.ndarray]:
        self._build_core()
        return [w for layer in self.layers for w in layer.get_weights()]

    def set_weights(self, weights: Sequence[Any]) -> None:
        self._build_core()
        if isinstance(weights, np.ndarray) or not isinstance(weights, (list, tuple)):
            raise ValueError(f"set_weights: expected a list of arrays (get_weights() order), got {type(weights).__name__}")
        counts = [len(layer.weights) for layer in self.layers]
        if len(weights) != sum(counts):
            raise ValueError(f"set_weights: the model has {sum(counts)} weight arrays, got {len(weights)}")
        k = 0
        for layer, c in zip(self.layers, counts):
            if c:
                layer.set_weights(list(weights[k:k + c]))
            k += c

    # ------------------------------------------------------------------ predict
    def predict(self, x: Any, batch_size: Optional[int] = None, verbose: Any = 0, **kwargs: Any) -> Any:
        """One array per output, in the outputs' order (a dict keyed as the outputs were)."""
        maps = [part.predict(x, batch_size=batch_size, verbose=verbose, **kwargs) for part in self.parts]
        return self._arrange(maps)

    def predict_on_batch(self, x: Any) -> Any:
        return self._arrange([part.predict_on_batch(x) for part in self.parts])

    def __call__(self, inputs: Any, training: Optional[bool] = None, mask: Any = None, **kwargs: Any) -> Any:
        """``model(x)`` on arrays: one array per output (a dict for a dict of outputs), each with
        Keras' ``numpy()``, as Keras' call returns them. ``training=True`` (which would move
        BatchNormalization's statistics once per output) and a call on symbolic tensors (this model
        as a layer of another) are refused."""
        n = len(self._output_tensors)
        if kwargs:
            raise TypeError(f"Unrecognized keyword arguments passed to Model.__call__: {kwargs}")
        if mask is not None:
            raise NotImplementedError("Model.__call__: masks are not supported (hpcnn layers take no mask)")
        if training:
            raise refused("model(x, training=True)", n)
        items = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        if any(isinstance(t, KerasTensor) for t in items):
            raise refused("using it as a layer of another model", n)
        return self._arrange([model_call.call_on_data(part, inputs, False) for part in self.parts])

    def _arrange(self, maps: List[np.ndarray]) -> Any:
        out = [maps[j] for j in self._part_of]
        if self._output_keys is not None:
            return dict(zip(self._output_keys, out))
        return out

    # ------------------------------------------------------------------ refused
    def compile(self, *args: Any, **kwargs: Any) -> None:
        raise refused("compile", len(self._output_tensors))

    def fit(self, *args: Any, **kwargs: Any) -> Any:
        raise refused("fit", len(self._output_tensors))

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        raise refused("evaluate", len(self._output_tensors))

    def train_on_batch(self, *args: Any, **kwargs: Any) -> Any:
        raise refused("train_on_batch", len(self._output_tensors))

    def test_on_batch(self, *args: Any, **kwargs: Any) -> Any:
        raise refused("test_on_batch", len(self._output_tensors))

    def save(self, *args: Any, **kwargs: Any) -> None:
        raise refused("save", len(self._output_tensors))

    def save_weights(self, *args: Any, **kwargs: Any) -> None:
        raise refused("save_weights", len(self._output_tensors))

    def export(self, *args: Any, **kwargs: Any) -> None:
        raise refused("export", len(self._output_tensors))

    def load_weights(self, *args: Any, **kwargs: Any) -> None:
        raise refused("load_weights", len(self._output_tensors))

    def get_config(self) -> Dict[str, Any]:
        raise refused("get_config", len(self._output_tensors))

    def to_json(self, **kwargs: Any) -> str:
        raise refused("to_json", len(self._output_tensors))

    def __repr__(self) -> str:
        return f"<hpcnn.Model {self.name!r}: {len(self.layers)} layers, {len(self._output_tensors)} outputs>"


Model.several_outputs_class = MultiOutputModel
