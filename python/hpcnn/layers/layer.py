"""The base ``Layer``, ``InputLayer`` and ``Input()``."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core, validation
from . import eager_call, weight_home
from .arguments import is_float32
from .graph import KerasTensor, call_layer, layer_label
from .variable import Variable


def _plain(value: Any) -> Any:
    """A config value as JSON holds it: tuples (nested too) as lists."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


class Layer:
    """Base class: a named piece of configuration that knows its output shape.

    ``trainable`` (Keras' attribute): a layer with ``trainable = False`` keeps its weights fixed in
    ``fit`` / ``train_on_batch`` (no optimizer step touches them, nor Adam's moments for them) and
    is counted as non-trainable by ``summary()``. As in Keras, a change takes effect at the next
    ``compile()``: the model trains with the setting it was compiled with.

    Weights as Keras': ``get_weights()`` / ``set_weights()``, ``weights``, ``trainable_weights``,
    ``non_trainable_weights`` (``Variable`` objects, variable.py), the weights by Keras' attribute
    names (``kernel``, ``bias``; BatchNormalization's ``gamma``, ``beta``, ``moving_mean``,
    ``moving_variance``) and ``count_params()``. They live in the core of the model that holds
    the layer (on its device) and are shared by every model the layer belongs to
    (weight_home.py). A layer that is not built yet (no input shape known) has none, as in Keras.
    """

    # The base of the names Keras gives unnamed layers ('conv2d', 'conv2d_1', ...).
    name_prefix = "layer"
    merges_inputs = False  # takes a list of tensors (Add, Concatenate)
    is_input = False  # the InputLayer: the graph's start (the graph finds inputs by this flag)
    # An augmentation layer (preprocessing.py sets it): called on data without ``training`` it
    # augments. A class attribute here so that model(x)'s check of every layer finds it without
    # __getattr__ (that lookup was 15 % of the tutorial CNN's model(x) at batch 1).
    augments = False
    # Keras' attribute names of the layer's weights (``layer.kernel``), in get_weights' order.
    weight_attributes: Tuple[str, ...] = ()

    def __init__(self, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 trainable: bool = True, dtype: Any = None, **kwargs: Any) -> None:
        cls = type(self).__name__
        validation.no_other_arguments(kwargs, cls)
        if dtype is not None and not is_float32(dtype):
            raise ValueError(f"{cls}: hpcnn layers compute in float32; dtype={dtype!r} is not supported")
        self.name = validation.name(name, cls)
        self.input_shape = validation.shape(input_shape, "input_shape", cls) if input_shape is not None else None
        self.trainable = trainable
        # Its one position in a graph (graph.py records them at the call): the tensors it was
        # called on, and its output.
        self.inbound_tensors: Optional[List[KerasTensor]] = None
        self.output_tensor: Optional[KerasTensor] = None
        # Where its weights live (weight_home.py): the home core and position, a stamp that changes
        # with every write outside training, Keras' path prefix, and the model that builds them.
        self.weight_home: Optional[Tuple[Any, int]] = None
        self.weights_stamp = 0
        self.weights_path = ""
        self.weights_model: Any = None
        # Its own one-position cores for calls on data, per input shape (eager_call.py).
        self.eager_cores: Dict[Tuple[int, ...], Any] = {}

    def __call__(self, inputs: Any, **kwargs: Any) -> Any:
        """On a symbolic tensor (a list of them for ``Add``/``Concatenate``): the layer's place in
        the graph being built, its output tensor (shapes checked now; a layer is called once, one
        position per layer). On a NumPy array (a batch): the layer computed now, as Keras' eager
        call, in a C++ core of its own with the layer's weights (built by this call if it had
        none), an array of Keras' output shape (eager_call.py); ``training`` as Keras'."""
        if eager_call.is_data(inputs):
            training = kwargs.pop("training", None)
            if "mask" in kwargs and kwargs["mask"] is None:
                del kwargs["mask"]
            if kwargs:
                raise TypeError(f"Unrecognized keyword arguments passed to {type(self).__name__}.__call__: {kwargs}")
            return eager_call.call_on_data(self, inputs, training)
        return call_layer(self, inputs, kwargs)

    @property
    def output(self) -> KerasTensor:
        """The tensor this layer output when called (Keras' ``layer.output``)."""
        if self.output_tensor is None:
            raise AttributeError(f"layer {layer_label(self)} has never been called and thus has no defined output")
        return self.output_tensor  # type: ignore[return-value]

    @property
    def input(self) -> Union[KerasTensor, List[KerasTensor]]:
        """The tensor (a list for a merging layer) this layer was called on (Keras' ``layer.input``)."""
        inbound = self.inbound_tensors
        if inbound is None or self.is_input:
            if self.is_input:
                return self.output
            raise AttributeError(f"layer {layer_label(self)} is not connected, no input to return")
        return list(inbound) if self.merges_inputs else inbound[0]

    @property
    def trainable(self) -> bool:
        """Whether fit updates this layer's weights (takes effect at the next compile())."""
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = validation.boolean(value, "trainable", type(self).__name__)

    # The layer's own arguments, each kept in the attribute of its name: what get_config adds to
    # name, trainable and input_shape, and what core_config gives the C++ core.
    config_keys: Tuple[str, ...] = ()

    def arguments(self) -> Dict[str, Any]:
        """The layer's own arguments (``config_keys``), as plain JSON values (tuples as lists)."""
        return {k: _plain(getattr(self, k)) for k in self.config_keys}

    def get_config(self) -> Dict[str, Any]:
        """Keras' layer config: name, trainable, input_shape when given, and the layer's arguments."""
        cfg: Dict[str, Any] = {"name": self.name, "trainable": self.trainable}
        if self.input_shape is not None:
            cfg["input_shape"] = list(self.input_shape)
        cfg.update(self.arguments())
        return cfg

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Layer":
        return cls(**config)

    def core_config(self) -> Dict[str, Any]:
        """What the C++ core is given for this layer: one dict, ``class_name`` the Keras class and
        the layer's arguments. The core lowers it to its own layers (fusions, the softmax split:
        csrc/nn/lowering.h) and reports shapes, weights and counts per Keras layer."""
        return {"class_name": type(self).__name__, **self.arguments()}

    def count_params(self, input_shape: Optional[Tuple[int, ...]] = None) -> int:
        """The number of weights (trainable and not): of the built layer (Keras' form, ValueError
        when it is not built), or for a per-sample input shape, as the core counts them."""
        if input_shape is None:
            if not self.built:
                raise ValueError(f"You tried to call `count_params` on layer '{self.name}', but the layer isn't "
                                 "built. Build the model that holds it (model.build(), or give it an input shape), "
                                 "or pass the per-sample input shape: count_params((h, w, c))")
            return sum(int(np.prod(shape)) for _, shape, _ in weight_home.specs(self))
        return sum(int(np.prod(shape)) for _, shape, _ in
                   _core.layer_weight_shapes(self.core_config(), [list(input_shape)]))

    # ------------------------------------------------------------------ weights (weight_home.py)
    @property
    def built(self) -> bool:
        """Whether the layer has its weights (it is part of a built model, or was called on a
        tensor); building a model that holds it builds it."""
        return weight_home.is_built(self)

    def get_weights(self) -> List[np.ndarray]:
        """The layer's weights as NumPy arrays, Keras order and layouts ([] when not built)."""
        return weight_home.read(self)

    def set_weights(self, weights: Sequence[Any]) -> None:
        """Replaces the layer's weights (Keras order and layouts): every model holding the layer
        uses them. ValueError naming the layer and the expected shapes on a mismatch (nothing
        changes then)."""
        weight_home.write(self, weights)

    @property
    def weights(self) -> List[Variable]:
        """Every weight of the layer, trainable ones first as Keras lists them."""
        return [Variable(self, i) for i in range(len(weight_home.specs(self)))]

    @property
    def variables(self) -> List[Variable]:
        return self.weights

    @property
    def trainable_weights(self) -> List[Variable]:
        """The weights fit updates: none when ``trainable`` is False (Keras)."""
        return [v for v in self.weights if v.trainable] if self.trainable else []

    @property
    def non_trainable_weights(self) -> List[Variable]:
        return [v for v in self.weights if not v.trainable] if self.trainable else self.weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights

    def __getattr__(self, name: str) -> Any:
        # Only for names normal lookup did not find: the weights by Keras' attribute names. A
        # property that raised AttributeError lands here too: run it again for its own message.
        prop = getattr(type(self), name, None)
        if isinstance(prop, property) and prop.fget is not None:
            return prop.fget(self)
        if not name.startswith("_") and name in type(self).weight_attributes:
            if not self.built:
                raise AttributeError(f"You must build the layer before accessing `{name}` (layer {layer_label(self)} "
                                     "has no input shape yet: build the model that holds it)")
            for i, (wname, _, _) in enumerate(weight_home.specs(self)):
                if wname == name:
                    return Variable(self, i)
            return None  # a weight the configuration leaves out (use_bias=False: bias is None)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items()
                         if k != "name" and v is not None and not (k == "trainable" and v))
        return f"{type(self).__name__}({args})"


class InputLayer(Layer):
    """Declares the per-sample input shape, e.g. ``InputLayer(input_shape=[32, 32, 3])``.

    ``batch_size`` is accepted for Keras compatibility and checked, but batches are sized by
    ``fit``/``evaluate``/``predict``; ``dtype`` may be float32 or uint8 (both are taken as input
    either way)."""

    name_prefix = "input_layer"
    is_input = True

    def __init__(self, input_shape: Optional[Sequence[int]] = None, shape: Optional[Sequence[int]] = None,
                 name: Optional[str] = None, batch_size: Optional[int] = None, dtype: Any = None,
                 batch_shape: Optional[Sequence[Optional[int]]] = None, sparse: Optional[bool] = None,
                 **kwargs: Any) -> None:
        validation.integer(batch_size, "batch_size", "InputLayer", allow_none=True)
        if dtype is not None and not is_float32(dtype, ("uint8",)):
            raise ValueError(f"InputLayer: dtype must be float32 or uint8, got {dtype!r}")
        if sparse:
            raise ValueError("InputLayer: sparse inputs are not supported")
        given = [s for s in (input_shape, shape) if s is not None]
        if batch_shape is not None:
            if isinstance(batch_shape, (str, bytes)) or not isinstance(batch_shape, Sequence) or len(batch_shape) < 2:
                raise ValueError(f"InputLayer: batch_shape must be (batch, *shape), got {batch_shape!r}")
            validation.integer(batch_shape[0], "batch_shape[0]", "InputLayer", allow_none=True)
            given.append(batch_shape[1:])
        if not given:
            raise ValueError("InputLayer needs input_shape=(height, width, channels) (or shape=...)")
        shp = validation.shape(given[0], "input_shape" if input_shape is not None else "shape", "InputLayer")
        for other in given[1:]:
            if validation.shape(other, "shape", "InputLayer") != shp:
                raise ValueError(f"InputLayer: input_shape, shape and batch_shape disagree: {given}")
        super().__init__(name=name, input_shape=shp, **kwargs)
        self.inbound_tensors = []
        self.output_tensor = KerasTensor(shp, self, dtype="uint8" if is_float32(dtype, ("uint8",)) and
                                   np.dtype(dtype).name == "uint8" else "float32")

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "input_shape": list(self.input_shape or ())}

    def count_params(self, input_shape: Tuple[int, ...] = ()) -> int:
        return 0  # the model's input: no weights, and nothing for the core to build


def Input(shape: Optional[Sequence[int]] = None, batch_size: Optional[int] = None, dtype: Any = None,
          sparse: Optional[bool] = None, batch_shape: Optional[Sequence[Optional[int]]] = None,
          name: Optional[str] = None, **kwargs: Any) -> KerasTensor:
    """``x = hpcnn.Input(shape=(32, 32, 3))``: the symbolic input of a functional model (Keras'
    ``keras.Input``), per-sample shape without the batch axis. It may also start a Sequential
    (``Sequential([hpcnn.Input((32, 32, 3)), ...])``). Arguments as ``InputLayer``."""
    for k in ("tensor", "optional"):  # Keras' arguments, supported at their defaults only
        v = kwargs.pop(k, None)
        if v is not None and v is not False:
            raise ValueError(f"Input: {k}={v!r:.100} is not supported")
    return InputLayer(shape=shape, batch_size=batch_size, dtype=dtype, sparse=sparse, batch_shape=batch_shape,
                      name=name, **kwargs).output
