"""``Model``, Keras' functional model: a graph of layers trained by the C++ core (one call per
batch, GIL released). ``Sequential`` (sequential.py) is the special case of a chain: both build
the same C++ model (csrc/nn/model.h), and everything below ``Model`` is shared.

This module holds the model's structure (layers, the graph, build), weights and device moves, and
the public methods whose work lives elsewhere: compile, fit, evaluate and predict in
hpcnn.training, the summary table in summary.py, Keras' config and the files in
model_serialization.py (hpcnn.formats), the weight lists in model_weights.py, ``export`` (ONNX,
OpenVINO) in model_export.py (hpcnn.export).

    x = hpcnn.Input(shape=(32, 32, 3))
    y = Conv2D(16, 3, padding='same', activation='relu')(x)
    y = Add()([Conv2D(16, 3, padding='same')(y), x])
    y = Dense(10, activation='softmax')(Flatten()(y))
    model = hpcnn.Model(inputs=x, outputs=y)
    model.compile(optimizer='adam', loss='categorical_crossentropy', metrics=['accuracy'])
    history = model.fit(x, y, batch_size=250, epochs=10, validation_data=(xv, yv))

What hpcnn's own modules (training, callbacks, formats, distribute) use of a model is public
here: ``core`` (the C++ model), ``compile_settings``, ``require_compiled``, ``weight_names``,
``layer_outputs``, ``graph_nodes``, ``sample_shape``, ``seed``, ``distribute_strategy``, and for
nested models (models/nesting.py) ``top_level_nodes``, ``top_level_spans`` and ``flat_graph``.
A model is callable (``model(x)`` on data: models/model_call.py; on a symbolic tensor it becomes
a layer of another model: models/nesting.py).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core, devices, distribute, optimizers, training, utils, validation
from ..callbacks import Callback, History
from ..layers import KerasTensor, Layer, graph, weight_home
from ..layers.weight_home import CoreWeights
from . import model_call, nesting
from .model_export import ModelExport
from .model_serialization import ModelSerialization
from .model_weights import ModelWeights
from .summary import print_summary

ArrayLike = Any

# A position of the model's graph: a layer and the positions it reads (-1: the model's input).
_Node = Tuple[Layer, List[int]]


class Model(ModelWeights, ModelSerialization, ModelExport):
    """A model whose layers form a graph: Keras' functional ``Model(inputs, outputs)``.

    ``inputs`` is the tensor of ``hpcnn.Input(shape=...)``, ``outputs`` the tensor that layers
    called on it produce (a list of one of each is accepted; several inputs are not supported
    yet). Several outputs (a list or dict of tensors: feature extractors) make a model for predict
    only (multi_output.py). The model holds every layer between them, in Keras' order (``model.layers``
    starts with the InputLayer), and names unnamed layers as Keras does ('conv2d', 'conv2d_1').
    Compile, fit, evaluate, predict, weights, config, save and summary work as for ``Sequential``.
    ``seed`` (hpcnn's) fixes the initial weights and the dropout masks.
    """

    is_sequential = False  # Sequential: a chain built with add(), whose config lists only layers
    # Model(inputs, [several outputs]) makes one of these (multi_output.py registers it).
    several_outputs_class: Any = None

    def __new__(cls, *args: Any, **kwargs: Any) -> "Model":
        outputs = kwargs.get("outputs", args[1] if len(args) > 1 else None)
        if cls is Model and cls.several_outputs_class is not None and several_outputs(outputs):
            return super().__new__(cls.several_outputs_class)
        return super().__new__(cls)

    # Read where a model stands among another model's layers (models/nesting.py): never the input,
    # one input.
    is_input = False
    merges_inputs = False

    @property
    def name_prefix(self) -> str:
        """The base of Keras' default name: 'sequential' or 'functional'."""
        return "sequential" if self.is_sequential else "functional"

    def __init__(self, inputs: Any = None, outputs: Any = None, name: Optional[str] = None,
                 seed: Optional[int] = None, trainable: bool = True, **kwargs: Any) -> None:
        validation.no_other_arguments(kwargs, "Model")
        if inputs is None or outputs is None:
            raise NotImplementedError("hpcnn.Model(inputs, outputs) builds a model from tensors (the functional API); "
                                      "subclassing Model with a call() method is not supported: use the functional "
                                      "API or Sequential")
        inp = graph.single(inputs, "inputs")
        out = graph.single(outputs, "outputs")
        if not inp.layer.is_input:
            raise ValueError(f"Model: inputs must be the tensor of hpcnn.Input(shape=...), got {inp!r} (the output "
                             f"of layer {graph.layer_label(inp.layer)})")
        if out is inp:
            raise ValueError("Model: the output is the input itself: the model has no layers")
        self._setup(name, "functional", seed, trainable)
        ordered = graph.ordered_layers(inp, out)
        nesting.check_called_once([(item, []) for item in ordered])
        assign_names(ordered)
        # Keras' model.layers: a nested model (a NestedCall in the graph) as one element.
        self.layers: List[Layer] = [item.model if isinstance(item, nesting.NestedCall) else item for item in ordered]
        self._input_shape = inp.layer.input_shape
        self._input_tensor, self._output_tensor = inp, out
        index = {id(layer): i for i, layer in enumerate(ordered[1:])}
        # The top-level positions: each a layer or a NestedCall, and the positions it reads.
        self._nodes: List[_Node] = [(layer, [-1 if t is inp else index[id(t.layer)] for t in layer.inbound_tensors or []])
                                    for layer in ordered[1:]]
        nesting.check_called_once(self._nodes)
        weight_home.model_sharing([layer for layer, _ in self.graph_nodes()], self)

    def _setup(self, name: Any, default_name: str, seed: Any, trainable: Any) -> None:
        """What every model has: name, seed, trainable, the core model (built lazily), compile state."""
        self.name = validation.name(name, type(self).__name__) or default_name
        self._seed = validation.integer(seed, "seed", type(self).__name__, minimum=0, maximum=2**64 - 1,
                                        allow_none=True)
        self._trainable = validation.boolean(trainable, "trainable", type(self).__name__)
        self._input_shape: Optional[Tuple[int, ...]] = None
        self._core: Optional[_core.Model] = None
        self._weights: Optional[CoreWeights] = None  # the core's weights per position, shared (weight_home.py)
        self.compile_settings: Optional[Dict[str, Any]] = None
        self.optimizer: Optional[optimizers.Optimizer] = None
        self.stop_training = False
        self.history: Optional[History] = None
        # Data parallelism: the strategy whose scope() the model was created in (compile in a
        # scope also sets it); its replicas are made at compile.
        self.distribute_strategy: Optional[distribute.Strategy] = distribute.current_strategy()
        self.seed_drawn = False  # the seed was drawn at random (no seed, no set_random_seed)

    # ------------------------------------------------------------------ structure
    def top_level_nodes(self) -> List[_Node]:
        """Keras' positions of the model: each a layer, or a nested model (a NestedCall for one
        called in a functional graph), and the top-level positions it reads."""
        return self._nodes

    def flat_graph(self) -> List[nesting.FlatNode]:
        """The core's positions with the flags nested models give them (models/nesting.py)."""
        return nesting.flat_nodes(self.top_level_nodes())

    def top_level_spans(self) -> List[Tuple[Any, int, int]]:
        """Per Keras layer (``model.layers`` without the InputLayer): the layer or nested model and
        its [begin, end) of the core's positions (what hpcnn.formats writes per layer)."""
        nodes = self.top_level_nodes()
        return [(item.model if isinstance(item, nesting.NestedCall) else item, b, e)
                for (item, _), (b, e) in zip(nodes, nesting.spans(nodes))]

    def graph_nodes(self) -> List[_Node]:
        """The core's positions in topological order: each a LEAF layer and the positions it reads
        (a nested model expanded into its layers, models/nesting.py)."""
        return [(node.layer, node.parents) for node in self.flat_graph()]

    def __call__(self, inputs: Any, training: Optional[bool] = None, mask: Any = None, **kwargs: Any) -> Any:
        """Keras' call. On data (NumPy arrays, lists: one batch of any size): the outputs, with
        ``training=False`` (the default) the inference forward (as predict), with ``training=True``
        one forward pass in training mode (Dropout active, BatchNormalization on the batch's
        statistics, updating its moving statistics) without any weight update (models/model_call.py).
        On a symbolic tensor: the model used as a layer of the graph being built
        (``base_model(inputs, training=False)``: its BatchNormalization and Dropout then stay in
        inference mode, in fit too), models/nesting.py."""
        if kwargs:
            raise TypeError(f"Unrecognized keyword arguments passed to {type(self).__name__}.__call__: {kwargs}")
        if mask is not None:
            raise NotImplementedError("Model.__call__: masks are not supported (hpcnn layers take no mask)")
        items = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        if any(isinstance(t, KerasTensor) for t in items):
            return nesting.call_symbolic(self, inputs, training)
        return model_call.call_on_data(self, inputs, training)

    def is_chain(self) -> bool:
        return all(parents == [i - 1] for i, (_, parents) in enumerate(self.graph_nodes()))

    @property
    def inputs(self) -> List[KerasTensor]:
        return [self._input_tensor]

    @property
    def outputs(self) -> List[KerasTensor]:
        return [self._output_tensor]

    @property
    def input(self) -> KerasTensor:
        return self._input_tensor

    @property
    def output(self) -> KerasTensor:
        return self._output_tensor

    def get_layer(self, name: Optional[str] = None, index: Optional[int] = None) -> Layer:
        """A layer by name or by index in ``model.layers`` (Keras' ``get_layer``)."""
        if (name is None) == (index is None):
            raise ValueError("get_layer: provide either a name or an index (not both)")
        if index is not None:
            validation.integer(index, "index", "get_layer", minimum=-len(self.layers))
            if index >= len(self.layers):
                raise ValueError(f"get_layer: was asked to retrieve layer at index {index} but model only has "
                                 f"{len(self.layers)} layers")
            return self.layers[index]
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(f"No such layer: {name}. Existing layers are: {[la.name for la in self.layers]}")

    @property
    def input_shape(self) -> Tuple[Optional[int], ...]:
        if self._input_shape is None:
            raise ValueError("the model has no input shape yet: start it with InputLayer(input_shape=...)")
        return (None,) + tuple(self._input_shape)

    def build(self, input_shape: Optional[Sequence[Optional[int]]] = None) -> None:
        """Create the weights (done automatically by compile/fit/summary). A functional model's
        input shape is its Input's; ``input_shape``, if given, must agree."""
        if input_shape is not None:
            shp = input_shape_argument(input_shape)
            if shp != self._input_shape:
                raise ValueError(f"build: input_shape {(None,) + shp} differs from the model's input "
                                 f"{self.input_shape}")
        self._build_core()

    def _build_core(self) -> None:
        if self._core is not None:
            return
        if self._input_shape is None:
            raise ValueError("the model has no input shape: add InputLayer(input_shape=(h, w, c)) first, "
                             "or pass input_shape= to the first layer")
        nodes = self.graph_nodes()
        if not nodes:
            raise ValueError("the model has no layers")
        # One config per position and the positions each reads: the core lowers them (fusions, the
        # softmax split) and reports shapes, weights and counts per position.
        # A layer inside a nested model called with training=False runs in inference mode always.
        flat = self.flat_graph()
        cfgs = [dict(node.layer.core_config(), **({"inference_only": True} if node.inference_only else {}))
                for node in flat]
        inputs = [list(node.parents) for node in flat]
        if self._seed is None:
            self.seed_drawn = not utils.seeded()
            self._seed = utils.next_model_seed()
        self._core = _core.Model(list(self._input_shape), cfgs, self._seed, inputs)
        # Keras 3's variable paths: a Sequential builds its layers in its own name scope.
        self._weights = CoreWeights(self._core, [layer for layer, _ in nodes],
                                    f"{self.name}/" if self.is_sequential else "")

    def drop_core(self) -> None:
        """Forgets the built core (a Sequential changed by add/pop, or rebuilt for another input
        shape): the next use builds a new one, which takes the layers' values from where they live
        (weight_home.py), so layers keep their weights as in Keras. Compile again."""
        self._core, self._weights, self.compile_settings = None, None, None

    @property
    def built(self) -> bool:
        return self._core is not None

    @property
    def core(self) -> _core.Model:
        """The C++ model (hpcnn._core.Model), built on first use: what hpcnn.training, the
        callbacks and hpcnn.formats step, read and restore."""
        self._build_core()
        assert self._core is not None and self._weights is not None
        self._weights.pull()  # the newest values of layers shared with other models (weight_home.py)
        return self._core

    def claim_weights(self) -> None:
        """Called before the model's core is written (fit, train_on_batch, set_weights,
        load_weights, a forward pass that updates BatchNormalization's statistics): it takes the
        newest values of the layers it shares and becomes their home (weight_home.py)."""
        self.core  # built and pulled
        assert self._weights is not None
        self._weights.claim()

    @property
    def seed(self) -> Optional[int]:
        """The model's seed: its initial weights and its dropout and augmentation draws."""
        return self._seed

    @seed.setter
    def seed(self, value: Optional[int]) -> None:
        """A seed for a model not built yet (a model read from a file gets the file's)."""
        if self._core is not None:
            raise ValueError("the seed of a built model is set with set_rng_state(seed, step)")
        self._seed = validation.integer(value, "seed", minimum=0, maximum=2**64 - 1, allow_none=True)

    def set_rng_state(self, seed: int, step: int) -> None:
        """The random state of a saved or backed-up model (its seed and its training step counter):
        its next training steps draw the dropout masks and augmentations of an uninterrupted run."""
        self._seed = int(seed)
        self.core.set_rng_state(int(seed), int(step))

    @property
    def sample_shape(self) -> Optional[Tuple[int, ...]]:
        """The per-sample input shape (``input_shape`` without the batch axis), or None before the
        model has one."""
        return None if self._input_shape is None else tuple(self._input_shape)

    @property
    def device(self) -> str:
        """Where the model lives: 'cpu' or 'gpu:N'."""
        return self.core.device

    def to(self, device: str) -> "Model":
        """Move the model (weights and optimizer state) to 'cpu' or 'gpu[:N]'."""
        self.core.to(devices.normalize(device))
        return self

    def layer_outputs(self) -> List[Tuple[Layer, Tuple[int, ...], int]]:
        """(layer, per-sample output shape, params) for each position of the graph (the core's reports)."""
        core = self.core
        return [(layer, tuple(shape), int(params)) for (layer, _), shape, params
                in zip(self.graph_nodes(), core.layer_output_shapes, core.layer_param_counts)]

    def count_params(self) -> int:
        return int(self.core.num_params)

    # ------------------------------------------------------------------ trainable
    @property
    def trainable(self) -> bool:
        """``model.trainable = False`` freezes every layer (Keras); takes effect at the next compile()."""
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = validation.boolean(value, "trainable", type(self).__name__)
        for layer in self.layers:
            layer.trainable = self._trainable

    def trainable_mask(self) -> List[bool]:
        """One flag per position: whether the optimizer updates it, from the layers' trainable now."""
        return [bool(self._trainable and node.owners_trainable and node.layer.trainable) for node in self.flat_graph()]

    def trainable_changed_since_compile(self) -> bool:
        return self.compile_settings is not None and self.compile_settings.get("trainable") != self.trainable_mask()

    @property
    def output_shape(self) -> Tuple[Optional[int], ...]:
        return (None,) + tuple(self.core.output_shapes[-1])

    def summary(self, print_fn=print, line_length: Optional[int] = None) -> None:
        """A Keras-style table: layer, output shape, parameters (and, for a graph that is not a
        chain, Keras' "Connected to" column: the layers each one reads); totals; device."""
        print_summary(self, print_fn, line_length)

    # ------------------------------------------------------------------ weights and config
    def get_weights(self) -> List[np.ndarray]:
        """Every weight in Keras order and layouts (Conv2D (kh, kw, in, out), Dense (in, out),
        BatchNormalization gamma, beta, moving_mean, moving_variance), trainable or not."""
        return [np.array(w, copy=True) for w in self.core.get_weights()]

    def set_weights(self, weights: Sequence[ArrayLike]) -> None:
        """Load weights given in Keras order and layouts (e.g. from a Keras model's get_weights()).
        Arrays of any real dtype are converted to float32."""
        if isinstance(weights, np.ndarray) or not isinstance(weights, (list, tuple)):
            raise ValueError(f"set_weights: expected a list of arrays (get_weights() order), got {type(weights).__name__}")
        names = self.weight_names()
        arrays = []
        for i, w in enumerate(weights):
            a = np.asarray(w)
            label = names[i] if i < len(names) else f"weight {i}"
            if a.dtype.kind not in "fiu":
                raise ValueError(f"set_weights: {label} has dtype {a.dtype}; expected real numbers")
            arrays.append(np.asarray(a, dtype=np.float32, order="C"))  # 0-d stays 0-d (a count)
        self.claim_weights()
        self.core.set_weights(arrays)

    def weight_names(self) -> List[str]:
        """'conv2d/kernel', 'conv2d/bias', 'batch_normalization/gamma', ...: the get_weights() order,
        named by the core's per-layer weights; a nested model's weights by their path in it, as
        Keras names them ('base/conv2d/kernel')."""
        return [f"{node.path}{node.layer.name}/{name}" for node, weights in zip(self.flat_graph(), self.core.layer_weights)
                for name, _, _ in weights]

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer: Union[str, optimizers.Optimizer] = "rmsprop", loss: Any = None,
                metrics: Optional[Sequence[Any]] = None, device: Optional[str] = None, **kwargs: Any) -> None:
        """Choose optimizer ('rmsprop', Keras' default; 'adam', 'adamw', 'sgd' or an instance), loss
        (a name: 'categorical_crossentropy', 'sparse_categorical_crossentropy', 'binary_crossentropy',
        'mse', 'mae'; or an hpcnn.losses object such as CategoricalCrossentropy(label_smoothing=0.1)),
        metrics (names such as ['accuracy', 'top_k_categorical_accuracy', 'mae'] or hpcnn.metrics
        objects; logged under Keras' names) and, optionally, the device ('cpu', 'gpu', 'gpu:N';
        default: the enclosing ``hpcnn.device`` block, else the CPU).
        A model created or compiled in a ``strategy.scope()`` (hpcnn.distribute) trains on the
        strategy's replicas instead.

        The layers' ``trainable`` flags are taken now (Keras' rule): changing them later takes
        effect at the next compile(). Keras' execution hints ``run_eagerly``, ``jit_compile`` and
        ``steps_per_execution`` are checked and have nothing to change (every batch is one C++
        call); ``loss_weights`` and ``weighted_metrics`` are not supported."""
        training.compile_model(self, optimizer, loss, metrics, device, kwargs)

    @property
    def compiled(self) -> bool:
        return self.compile_settings is not None

    def require_compiled(self, what: str) -> Dict[str, Any]:
        """The compile settings; RuntimeError naming `what` when the model is not compiled."""
        if self.compile_settings is None:
            raise RuntimeError(f"{what}: the model must be compiled first: call model.compile(optimizer, loss, ...)")
        return self.compile_settings

    # ------------------------------------------------------------------ training (hpcnn.training)
    def fit(self, x: Any = None, y: Any = None, batch_size: Optional[int] = None, epochs: int = 1,
            verbose: Union[int, str] = "auto", callbacks: Optional[Sequence[Callback]] = None,
            validation_split: float = 0.0, validation_data: Any = None, shuffle: bool = True,
            initial_epoch: int = 0, steps_per_epoch: Optional[int] = None, validation_batch_size: Optional[int] = None,
            validation_freq: int = 1, **kwargs: Any) -> History:
        """Train for ``epochs`` epochs on arrays ``(x, y)`` or a dataset: an hpcnn HDF5Dataset, an
        hpcnn.utils.PyDataset (keras.utils.Sequence-style) whose items are ``(x, y)`` or
        ``(x, y, sample_weight)`` batches, or a Python generator of such batches with
        ``steps_per_epoch``. ``sample_weight=`` (arrays) or ``class_weight={class: weight}`` weigh
        each sample's loss. Returns a History: ``.history`` has loss, the compiled metrics and their
        ``val_`` values per epoch (Keras' keys); ``.seconds`` and ``.images_per_second`` the timings.
        Ctrl-C stops at the next batch boundary and returns the History so far."""
        self.claim_weights()
        return training.fit(self, x=x, y=y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                            callbacks=callbacks, validation_split=validation_split,
                            validation_data=validation_data, shuffle=shuffle, initial_epoch=initial_epoch,
                            steps_per_epoch=steps_per_epoch, validation_batch_size=validation_batch_size,
                            validation_freq=validation_freq, kwargs=kwargs)

    # ------------------------------------------------------------------ evaluation and prediction (hpcnn.training)
    def evaluate(self, x: Any = None, y: Any = None, batch_size: Optional[int] = None,
                 verbose: Union[int, str] = "auto", return_dict: bool = False, **kwargs: Any):
        """``[loss, metrics...]`` in compile's order (``loss`` alone when compiled without metrics);
        ``sample_weight=`` (arrays) weighs each sample's loss."""
        return training.evaluate(self, x, y, batch_size, verbose, return_dict, kwargs)

    def predict(self, x: Any, batch_size: Optional[int] = None, verbose: Union[int, str] = 0,
                **kwargs: Any) -> np.ndarray:
        """Model outputs (class probabilities for a softmax model) as a NumPy array."""
        return training.predict(self, x, batch_size, verbose, kwargs)

    def predict_classes(self, x: Any, batch_size: Optional[int] = None) -> np.ndarray:
        """Class indices (``argmax`` of predict), the call Keras removed and the tutorial uses."""
        return np.argmax(self.predict(x, batch_size=batch_size), axis=-1)

    def train_on_batch(self, x: ArrayLike, y: ArrayLike, sample_weight: Any = None, class_weight: Any = None,
                       return_dict: bool = False):
        """One training step on one batch; returns the loss (and the metrics if compiled with them)."""
        self.claim_weights()
        return training.train_on_batch(self, x, y, sample_weight, class_weight, return_dict)

    def test_on_batch(self, x: ArrayLike, y: ArrayLike, sample_weight: Any = None, return_dict: bool = False):
        return training.test_on_batch(self, x, y, sample_weight, return_dict)

    def predict_on_batch(self, x: ArrayLike) -> np.ndarray:
        return training.predict_on_batch(self, x)

    def __repr__(self) -> str:
        return f"<hpcnn.Model {self.name!r}: {len(self.layers)} layers>"


def several_outputs(outputs: Any) -> bool:
    """Whether Model(inputs, outputs) names more than one output tensor (a list, tuple or dict)."""
    items = list(outputs.values()) if isinstance(outputs, dict) else outputs
    return isinstance(items, (list, tuple)) and len(items) > 1


nesting.MODEL_CLASSES.update(Functional=Model, Model=Model)


def input_shape_argument(input_shape: Any) -> Tuple[int, ...]:
    """build()'s input_shape: per sample, or Keras' (None, h, w, c) with the batch axis."""
    dims = list(input_shape) if isinstance(input_shape, (list, tuple)) else input_shape
    if isinstance(dims, list) and dims and dims[0] is None:
        dims = dims[1:]  # Keras' (None, h, w, c): the batch axis
    return validation.shape(dims, "input_shape", "build")


def assign_names(layers: List[Layer]) -> None:
    """Names for the unnamed layers of a graph, Keras-style and unique in it ('conv2d',
    'conv2d_1', ...), in the model's layer order; a name given twice is a ValueError."""
    taken: Dict[str, int] = {}
    for layer in layers:
        if layer.name is not None:
            taken[layer.name] = taken.get(layer.name, 0) + 1
    for name, count in taken.items():
        if count > 1:
            raise ValueError(f'The name "{name}" is used {count} times in the model. All layer names should be unique '
                             "(layers named by another model keep their names: pass name= to tell them apart)")
    for layer in layers:
        if layer.name is None:
            base, k = layer.name_prefix, 0
            while (base + (f"_{k}" if k else "")) in taken:
                k += 1
            layer.name = base + (f"_{k}" if k else "")
            taken[layer.name] = 1
