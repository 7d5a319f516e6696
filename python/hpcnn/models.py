"""``Model`` (Keras' functional model) and ``Sequential`` with Keras' API, trained by the C++ core
(one call per batch, GIL released).

This module holds the models' structure (layers, the graph, build, summary), weights, config,
compile and device moves. A ``Sequential`` is the special case of a chain: both build the same C++
model (csrc/nn/model.h), and everything below ``Model`` is shared. The rest lives beside it, and
every public name stays importable from here: functional.py (symbolic tensors, the graph walk),
training.py (the fit / evaluate / predict loops, which the methods below call), saving.py (save,
``load_model``) and applications.py (``tutorial_cnn``, ``deep_mnist``).

    x = hpcnn.Input(shape=(32, 32, 3))
    y = Conv2D(16, 3, padding='same', activation='relu')(x)
    y = Add()([Conv2D(16, 3, padding='same')(y), x])
    y = Dense(10, activation='softmax')(Flatten()(y))
    model = hpcnn.Model(inputs=x, outputs=y)

    model = hpcnn.Sequential()
    model.add(InputLayer(input_shape=[32, 32, 3]))
    model.add(Conv2D(32, 3, padding='same', activation='relu'))
    ...
    model.compile(optimizer='adam', loss='categorical_crossentropy', metrics=['accuracy'])
    history = model.fit(x, y, batch_size=250, epochs=10, validation_data=(xv, yv))
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import (_core, devices, distribute, functional, keras_config, layers as layers_mod, losses, metrics as metrics_mod,
               optimizers, saving, training, utils, validation)
from .callbacks import Callback, History
from .functional import KerasTensor
from .utils import next_model_seed

ArrayLike = Any

# A position of the model's graph: a layer and the positions it reads (-1: the model's input).
_Node = Tuple[layers_mod.Layer, List[int]]


class Model:
    """A model whose layers form a graph: Keras' functional ``Model(inputs, outputs)``.

    ``inputs`` is the tensor of ``hpcnn.Input(shape=...)``, ``outputs`` the tensor that layers
    called on it produce (a list of one of each is accepted; several inputs or outputs are not
    supported yet). The model holds every layer between them, in Keras' order (``model.layers``
    starts with the InputLayer), and names unnamed layers as Keras does ('conv2d', 'conv2d_1').
    Compile, fit, evaluate, predict, weights, config, save and summary work as for ``Sequential``.
    ``seed`` (hpcnn's) fixes the initial weights and the dropout masks.
    """

    def __init__(self, inputs: Any = None, outputs: Any = None, name: Optional[str] = None,
                 seed: Optional[int] = None, trainable: bool = True, **kwargs: Any) -> None:
        validation.no_other_arguments(kwargs, "Model")
        if inputs is None or outputs is None:
            raise NotImplementedError("hpcnn.Model(inputs, outputs) builds a model from tensors (the functional API); "
                                      "subclassing Model with a call() method is not supported: use the functional "
                                      "API or Sequential")
        inp = functional.single(inputs, "inputs")
        out = functional.single(outputs, "outputs")
        if not isinstance(inp._layer, layers_mod.InputLayer):
            raise ValueError(f"Model: inputs must be the tensor of hpcnn.Input(shape=...), got {inp!r} (the output "
                             f"of layer {functional.layer_label(inp._layer)})")
        if out is inp:
            raise ValueError("Model: the output is the input itself: the model has no layers")
        self._setup(name, "functional", seed, trainable)
        ordered = functional.ordered_layers(inp, out)
        _assign_names(ordered)
        self.layers: List[layers_mod.Layer] = ordered
        self._input_shape = inp._layer.input_shape
        self._input_tensor, self._output_tensor = inp, out
        index = {id(layer): i for i, layer in enumerate(ordered[1:])}
        self._nodes: List[_Node] = [(layer, [-1 if t is inp else index[id(t._layer)] for t in layer._inbound or []])
                                    for layer in ordered[1:]]

    def _setup(self, name: Any, default_name: str, seed: Any, trainable: Any) -> None:
        """What every model has: name, seed, trainable, the core model (built lazily), compile state."""
        self.name = validation.name(name, type(self).__name__) or default_name
        self._seed = validation.integer(seed, "seed", type(self).__name__, minimum=0, maximum=2**64 - 1,
                                        allow_none=True)
        self._trainable = validation.boolean(trainable, "trainable", type(self).__name__)
        self._input_shape: Optional[Tuple[int, ...]] = None
        self._core: Optional[_core.Model] = None
        self._compiled: Optional[Dict[str, Any]] = None
        self.optimizer: Optional[optimizers.Optimizer] = None
        self.stop_training = False
        self.history: Optional[History] = None
        # Data parallelism: the strategy whose scope() the model was created in (compile in a
        # scope also sets it); its replicas are made at compile.
        self._strategy: Optional[distribute.Strategy] = distribute.current_strategy()
        self._seed_drawn = False  # the seed was drawn at random (no seed, no set_random_seed)

    # ------------------------------------------------------------------ structure
    def _graph_nodes(self) -> List[_Node]:
        """The model's positions in topological order: each a layer and the positions it reads."""
        return self._nodes

    def _is_chain(self) -> bool:
        return all(parents == [i - 1] for i, (_, parents) in enumerate(self._graph_nodes()))

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

    def get_layer(self, name: Optional[str] = None, index: Optional[int] = None) -> layers_mod.Layer:
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
            shp = _input_shape_arg(input_shape)
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
        nodes = self._graph_nodes()
        if not nodes:
            raise ValueError("the model has no layers")
        # One config per position and the positions each reads: the core lowers them (fusions, the
        # softmax split) and reports shapes, weights and counts per position.
        cfgs = [layer.core_config() for layer, _ in nodes]
        inputs = [list(parents) for _, parents in nodes]
        if self._seed is None:
            self._seed_drawn = not utils.seeded()
            self._seed = next_model_seed()
        self._core = _core.Model(list(self._input_shape), cfgs, self._seed, inputs)

    @property
    def built(self) -> bool:
        return self._core is not None

    def _model(self) -> _core.Model:
        self._build_core()
        assert self._core is not None
        return self._core

    @property
    def seed(self) -> Optional[int]:
        return self._seed

    @property
    def device(self) -> str:
        """Where the model lives: 'cpu' or 'gpu:N'."""
        return self._model().device

    def to(self, device: str) -> "Model":
        """Move the model (weights and optimizer state) to 'cpu' or 'gpu[:N]'."""
        self._model().to(devices.normalize(device))
        return self

    def _layer_outputs(self) -> List[Tuple[layers_mod.Layer, Tuple[int, ...], int]]:
        """(layer, per-sample output shape, params) for each position of the graph (the core's reports)."""
        core = self._model()
        return [(layer, tuple(shape), int(params)) for (layer, _), shape, params
                in zip(self._graph_nodes(), core.layer_output_shapes, core.layer_param_counts)]

    def count_params(self) -> int:
        return int(self._model().num_params)

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

    def _trainable_mask(self) -> List[bool]:
        """One flag per position: whether the optimizer updates it, from the layers' trainable now."""
        return [bool(self._trainable and layer.trainable) for layer, _ in self._graph_nodes()]

    def _trainable_changed_since_compile(self) -> bool:
        return self._compiled is not None and self._compiled.get("trainable") != self._trainable_mask()

    @property
    def output_shape(self) -> Tuple[Optional[int], ...]:
        return (None,) + tuple(self._model().output_shapes[-1])

    def summary(self, print_fn=print, line_length: Optional[int] = None) -> None:
        """A Keras-style table: layer, output shape, parameters (and, for a graph that is not a
        chain, Keras' "Connected to" column: the layers each one reads); totals; device."""
        rows = self._layer_outputs()
        labels = [f" {layer.name} ({type(layer).__name__})" for layer, _, _ in rows]
        if not isinstance(self, Sequential):
            labels.append(f" {self.layers[0].name} ({type(self.layers[0]).__name__})")
        # The first column fits the longest " name (Type)" label (Keras' long class names).
        c1 = max([34] + [len(label) + 2 for label in labels])
        c2 = 26
        wide = not self._is_chain()  # Keras shows "Connected to" when the layers are not a chain
        line_length = max(line_length or (106 if wide else 76), c1 + c2 + (30 if wide else 12))
        sep = "_" * line_length
        print_fn(f'Model: "{self.name}"')
        print_fn(sep)
        table: List[Tuple[str, str, int, List[str]]] = []
        if not isinstance(self, Sequential):
            inp = self.layers[0]
            table.append((f" {inp.name} ({type(inp).__name__})", str(self.input_shape), 0, ["-"]))
        for (layer, parents), (_, shape, params) in zip(self._graph_nodes(), rows):
            sources = [f"{(self.layers[0] if p < 0 else self._graph_nodes()[p][0]).name}[0][0]" for p in parents]
            table.append((f" {layer.name} ({type(layer).__name__})", str((None,) + shape), params, sources))
        if wide:
            c3 = 12
            print_fn(f"{' Layer (type)':<{c1}}{'Output Shape':<{c2}}{'Param #':<{c3}}Connected to")
            print_fn("=" * line_length)
            for label, shape, params, sources in table:
                print_fn(f"{label:<{c1}}{shape:<{c2}}{params:<{c3},}{sources[0] if sources else ''}".rstrip())
                for src in sources[1:]:
                    print_fn(" " * (c1 + c2 + c3) + src)
        else:
            print_fn(f"{' Layer (type)':<{c1}}{'Output Shape':<{c2}}Param #")
            print_fn("=" * line_length)
            for label, shape, params, _ in table:
                print_fn(f"{label:<{c1}}{shape:<{c2}}{params:,}")
        print_fn("=" * line_length)
        total = self.count_params()
        # Non-trainable: the weights of frozen layers, and the non-trainable weights by nature
        # (BatchNormalization's moving statistics) of every layer.
        per_layer = zip(self._trainable_mask(), self._model().layer_weights)
        trainable = sum(int(np.prod(shape)) for on, weights in per_layer if on for _, shape, kind in weights if kind)
        print_fn(f"Total params: {total:,} ({total * 4 / 1024**2:.2f} MB)")
        print_fn(f"Trainable params: {trainable:,} ({trainable * 4 / 1024**2:.2f} MB)")
        print_fn(f"Non-trainable params: {total - trainable:,} ({(total - trainable) * 4 / 1024**2:.2f} MB)")
        if self._trainable_changed_since_compile():
            print_fn("Note: `trainable` was changed after compile(); call compile() again for fit to use it")
        dev = self.device
        if dev == "cpu":
            info = _core.build_info()
            where = f"cpu ({_core.get_num_threads()} threads, {info['blas_vendor']})"
        else:
            idx = int(dev.split(":")[1])
            gpus = {d.index: d for d in _core.cuda_devices(with_free_memory=False)}
            name = gpus[idx].name if idx in gpus else "?"
            tf32 = getattr(_core, "cuda_get_tf32", None)
            where = f"{dev} ({name}" + (f", TF32 {'on' if tf32() else 'off'}" if tf32 else "") + ")"
        print_fn(f"Device: {where}")
        if self._compiled:
            print_fn(f"Optimizer: {self.optimizer!r}; loss: {self._compiled['loss']}")
        print_fn(sep)

    # ------------------------------------------------------------------ weights and config
    def get_weights(self) -> List[np.ndarray]:
        """Every weight in Keras order and layouts (Conv2D (kh, kw, in, out), Dense (in, out),
        BatchNormalization gamma, beta, moving_mean, moving_variance), trainable or not."""
        return [np.array(w, copy=True) for w in self._model().get_weights()]

    def set_weights(self, weights: Sequence[ArrayLike]) -> None:
        """Load weights given in Keras order and layouts (e.g. from a Keras model's get_weights()).
        Arrays of any real dtype are converted to float32."""
        if isinstance(weights, np.ndarray) or not isinstance(weights, (list, tuple)):
            raise ValueError(f"set_weights: expected a list of arrays (get_weights() order), got {type(weights).__name__}")
        names = self._weight_names()
        arrays = []
        for i, w in enumerate(weights):
            a = np.asarray(w)
            label = names[i] if i < len(names) else f"weight {i}"
            if a.dtype.kind not in "fiu":
                raise ValueError(f"set_weights: {label} has dtype {a.dtype}; expected real numbers")
            arrays.append(np.ascontiguousarray(a, dtype=np.float32))
        self._model().set_weights(arrays)

    def get_config(self) -> Dict[str, Any]:
        """Keras' functional config: the layers (class, name, own config, inbound nodes: the
        tensors each is called on, as ``{"args": [...], "kwargs": {}}`` with Keras'
        ``__keras_tensor__`` records) and the input and output layers."""
        def tensor(t: KerasTensor) -> Dict[str, Any]:
            return {"class_name": "__keras_tensor__",
                    "config": {"shape": list(t.shape), "dtype": t.dtype, "keras_history": [t._layer.name, 0, 0]}}

        cfg_layers = []
        for layer in self.layers:
            inbound: List[Dict[str, Any]] = []
            if not isinstance(layer, layers_mod.InputLayer):
                ts = [tensor(t) for t in layer._inbound or []]
                inbound = [{"args": [ts if layer._merges_inputs else ts[0]], "kwargs": {}}]
            cfg_layers.append({"class_name": type(layer).__name__, "name": layer.name, "config": layer.get_config(),
                               "inbound_nodes": inbound})
        return {"name": self.name, "trainable": self._trainable, "layers": cfg_layers,
                "input_layers": [[self.layers[0].name, 0, 0]],
                "output_layers": [[self._output_tensor._layer.name, 0, 0]]}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Model":
        """The model get_config() described (also Keras 2's inbound-node lists); ValueError for
        anything else, naming what is wrong."""
        return _functional_from_config(cls, config)

    def _weight_names(self) -> List[str]:
        """'conv2d/kernel', 'conv2d/bias', 'batch_normalization/gamma', ...: the get_weights() order,
        named by the core's weight specs."""
        return [f"{layer.name}/{name}" for (layer, _), weights in zip(self._graph_nodes(), self._model().layer_weights)
                for name, _, _ in weights]

    def save(self, filepath: str, overwrite: bool = True, include_optimizer: bool = True,
             save_format: Optional[str] = None) -> None:
        """Save the model (architecture, weights, compile settings, step counter and, with
        ``include_optimizer`` (Keras' default), the optimizer's state: moments, step count,
        learning rate) in Keras' format for the file's name: ``.keras`` a Keras 3 archive, anything
        else (``.h5``) a legacy Keras HDF5 model file; both open in Keras
        (``keras.models.load_model``) and in hpcnn, whose ``load_model`` then gives a model whose
        ``fit`` continues exactly as this one's would. Written atomically (a temporary file flushed
        and renamed into place: never a half-written model)."""
        saving.save_model(self, filepath, overwrite, include_optimizer, save_format)

    def save_weights(self, filepath: str, overwrite: bool = True, max_shard_size: Optional[float] = None) -> None:
        """Save the weights: ``*.weights.h5`` in Keras 3's layout, any other name (``.h5``) in the
        legacy Keras HDF5 layout; Keras' ``load_weights`` and hpcnn's read both. Written atomically."""
        saving.save_weights(self, filepath, overwrite, max_shard_size)

    def load_weights(self, filepath: str, skip_mismatch: bool = False, by_name: bool = False) -> None:
        """Load weights saved by Keras or hpcnn (``.weights.h5``, legacy ``.h5``, ``.keras``, hpcnn
        model files). Each array is checked first: a file that does not fit raises ValueError and
        the model keeps its weights (``skip_mismatch=True``: layers that do not fit keep theirs,
        with a warning). ``by_name=True`` (legacy ``.h5``): match layers by name."""
        saving.load_weights(self, filepath, skip_mismatch, by_name)

    def to_json(self, **kwargs: Any) -> str:
        """The model's config as Keras 3's JSON (``keras.models.model_from_json`` and
        ``hpcnn.models.model_from_json`` read it); ``json.dumps`` arguments pass through."""
        return keras_config.to_json(self, **kwargs)

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
        for k in ("loss_weights", "weighted_metrics"):
            if kwargs.pop(k, None) is not None:
                raise ValueError(f"compile: {k} is not supported")
        if "run_eagerly" in kwargs:
            validation.boolean(kwargs.pop("run_eagerly"), "run_eagerly", "compile")
        if "jit_compile" in kwargs:
            jit = kwargs.pop("jit_compile")
            if jit != "auto":
                validation.boolean(jit, "jit_compile", "compile")
        if "steps_per_execution" in kwargs:
            validation.integer(kwargs.pop("steps_per_execution"), "steps_per_execution", "compile")
        validation.no_other_arguments(kwargs, "compile")
        if loss is None:
            raise ValueError("compile: a loss is required ('categorical_crossentropy', "
                             "'sparse_categorical_crossentropy', 'binary_crossentropy', 'mse' or 'mae')")
        opt = optimizers.get(optimizer)
        spec = losses.resolve(loss)
        core = self._model()
        units = int(core.output_shapes[-1][-1])
        metric_objs = metrics_mod.resolve(metrics, spec["loss"], units)
        core_metrics, where = metrics_mod.core_specs(metric_objs, spec["loss"])
        strategy = distribute.current_strategy() or self._strategy
        if strategy is not None and device is not None:
            raise ValueError("compile: device= cannot be combined with a distribution strategy: the model's devices "
                             f"are the strategy's ({strategy.local_devices})")
        target = device if device is not None else devices.current_scope()
        if target is not None and strategy is None:
            core.to(devices.normalize(target))
        mask = self._trainable_mask()
        core.compile(opt._core_config(self._weight_names()), spec["loss"], spec["from_logits"],
                     spec["label_smoothing"])
        core.set_metrics(core_metrics)
        core.set_trainable(mask)
        self.optimizer = opt
        opt._attach(self)  # optimizer.learning_rate / iterations read this model's core from now on
        # "accuracy": whether any metric is reported (files written before metrics objects read it)
        self._compiled = {"loss": spec["loss"], "accuracy": bool(metric_objs), "from_logits": spec["from_logits"],
                          "label_smoothing": spec["label_smoothing"], "loss_object": spec["object"],
                          "metrics": [m.name for m in metric_objs], "metric_sources": where,
                          "metrics_given": [metrics_mod.serialize(m) for m in (metrics or [])],
                          "trainable": mask}
        self._strategy = None
        if strategy is not None:
            try:
                strategy._distribute(self)  # this process's replicas, rank 0's weights everywhere
            except BaseException:
                self._compiled = None  # not half distributed: compile again
                raise

    @property
    def compiled(self) -> bool:
        return self._compiled is not None

    def _require_compiled(self, what: str) -> Dict[str, Any]:
        if self._compiled is None:
            raise RuntimeError(f"{what}: the model must be compiled first: call model.compile(optimizer, loss, ...)")
        return self._compiled

    def _follow_device_scope(self) -> None:
        scope = devices.current_scope()
        if scope is not None and scope != self._model().device:
            self._model().to(scope)

    def _sync_learning_rate(self) -> None:
        """A float rate set on the optimizer reaches the core (also when the optimizer was given to
        another model's compile since); a schedule is evaluated by the core itself."""
        opt = self.optimizer
        if opt is not None and self._core is not None and self._compiled is not None:
            if not isinstance(opt._learning_rate, optimizers.LearningRateSchedule):
                if self._core.learning_rate != opt._learning_rate:
                    self._core.learning_rate = opt._learning_rate


    # ------------------------------------------------------------------ training (training.py)
    def fit(self, x: Any = None, y: Any = None, batch_size: Optional[int] = None, epochs: int = 1,
            verbose: Union[int, str] = "auto", callbacks: Optional[Sequence[Callback]] = None,
            validation_split: float = 0.0, validation_data: Any = None, shuffle: bool = True,
            initial_epoch: int = 0, steps_per_epoch: Optional[int] = None, validation_batch_size: Optional[int] = None,
            validation_freq: int = 1, **kwargs: Any) -> History:
        """Train for ``epochs`` epochs on arrays ``(x, y)`` or a dataset: an hpcnn HDF5Dataset, an
        hpcnn.utils.PyDataset (keras.utils.Sequence-style) whose items are ``(x, y)`` or
        ``(x, y, sample_weight)`` batches, or a Python generator of such batches with
        ``steps_per_epoch``. ``sample_weight=`` (arrays) or ``class_weight={class: weight}`` weigh
        each sample's loss. Returns a History with loss, the compiled metrics, their ``val_``
        values, seconds and images_per_second per epoch.
        Ctrl-C stops at the next batch boundary and returns the History so far."""
        return training.fit(self, x=x, y=y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                            callbacks=callbacks, validation_split=validation_split,
                            validation_data=validation_data, shuffle=shuffle, initial_epoch=initial_epoch,
                            steps_per_epoch=steps_per_epoch, validation_batch_size=validation_batch_size,
                            validation_freq=validation_freq, kwargs=kwargs)

    # ------------------------------------------------------------------ evaluation and prediction (training.py)
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
        return training.train_on_batch(self, x, y, sample_weight, class_weight, return_dict)

    def test_on_batch(self, x: ArrayLike, y: ArrayLike, sample_weight: Any = None, return_dict: bool = False):
        return training.test_on_batch(self, x, y, sample_weight, return_dict)

    def predict_on_batch(self, x: ArrayLike) -> np.ndarray:
        return training.predict_on_batch(self, x)

    def __repr__(self) -> str:
        return f"<hpcnn.Model {self.name!r}: {len(self.layers)} layers>"


class Sequential(Model):
    """A linear stack of layers (Keras' ``Sequential``): the graph in which each layer reads the
    one before it."""

    def __init__(self, layers: Optional[Iterable[Any]] = None, name: Optional[str] = None,
                 seed: Optional[int] = None, trainable: bool = True) -> None:
        self._setup(name, "sequential", seed, trainable)
        self.layers: List[layers_mod.Layer] = []
        for layer in validation.layer_list(layers, "Sequential: layers") or []:
            self.add(layer)

    def _graph_nodes(self) -> List[_Node]:
        return [(layer, [i - 1]) for i, layer in enumerate(self.layers)]

    @property
    def inputs(self) -> List[KerasTensor]:
        raise AttributeError("a Sequential model has no symbolic inputs; build a graph with hpcnn.Input and hpcnn.Model")

    @property
    def outputs(self) -> List[KerasTensor]:
        raise AttributeError("a Sequential model has no symbolic outputs; build a graph with hpcnn.Input and hpcnn.Model")

    input = inputs  # type: ignore[assignment]
    output = outputs  # type: ignore[assignment]

    # ------------------------------------------------------------------ structure
    def add(self, layer: Union[layers_mod.Layer, KerasTensor]) -> None:
        """Append a layer (or start with ``hpcnn.Input(shape=...)``). Adding to a model that was
        already built rebuilds it with fresh weights."""
        if isinstance(layer, KerasTensor):
            if not isinstance(layer._layer, layers_mod.InputLayer):
                raise TypeError("add() takes an hpcnn layer or the tensor of hpcnn.Input(); got the output of layer "
                                f"{functional.layer_label(layer._layer)}")
            layer = layer._layer
        if not isinstance(layer, layers_mod.Layer):
            raise TypeError(f"add() takes an hpcnn layer, got {type(layer).__name__}")
        if isinstance(layer, layers_mod.InputLayer):
            if self.layers or self._input_shape is not None:
                raise ValueError("InputLayer must come first")
            self._input_shape = layer.input_shape
            return
        if layer._merges_inputs:
            raise ValueError(f"{type(layer).__name__} takes several inputs and cannot be part of a Sequential: "
                             "build the model with hpcnn.Input and hpcnn.Model")
        if layer.input_shape is not None:
            if self.layers or self._input_shape is not None:
                if self._input_shape != layer.input_shape or self.layers:
                    raise ValueError("input_shape= may only be given to the first layer")
            self._input_shape = layer.input_shape
        counts: Dict[str, int] = {}
        for existing in self.layers:
            counts[existing._keras_name] = counts.get(existing._keras_name, 0) + 1
        if layer.name is None:
            k = counts.get(layer._keras_name, 0)
            layer.name = layer._keras_name + (f"_{k}" if k else "")
        self.layers.append(layer)
        if self._core is not None:
            self._core = None
            self._compiled = None

    def pop(self) -> layers_mod.Layer:
        layer = self.layers.pop()
        self._core, self._compiled = None, None
        return layer

    def build(self, input_shape: Optional[Sequence[Optional[int]]] = None) -> None:
        """Create the weights (done automatically by compile/fit/summary)."""
        if input_shape is not None:
            shp = _input_shape_arg(input_shape)
            if self._input_shape is not None and shp != self._input_shape:
                self._core, self._compiled = None, None
            self._input_shape = shp
        self._build_core()

    # ------------------------------------------------------------------ config
    def get_config(self) -> Dict[str, Any]:
        cfg_layers = []
        if self._input_shape is not None:
            cfg_layers.append({"class_name": "InputLayer", "config": {"input_shape": list(self._input_shape)}})
        cfg_layers += [layers_mod.serialize(layer) for layer in self.layers]
        cfg: Dict[str, Any] = {"name": self.name, "layers": cfg_layers}
        if not self._trainable:
            cfg["trainable"] = False
        return cfg

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Sequential":
        """The model get_config() described; ValueError for anything else."""
        if not isinstance(config, dict) or not isinstance(config.get("layers"), list):
            raise ValueError(f"a Sequential config is a dict with a 'layers' list, got {config!r:.200}")
        model = cls(name=config.get("name"))
        for lc in config["layers"]:
            model.add(layers_mod.deserialize(lc))
        if config.get("trainable", True) is not True:
            model._trainable = validation.boolean(config["trainable"], "trainable", "Sequential")
        return model

    def __repr__(self) -> str:
        return f"<hpcnn.Sequential {self.name!r}: {len(self.layers)} layers>"


def _input_shape_arg(input_shape: Any) -> Tuple[int, ...]:
    """build()'s input_shape: per sample, or Keras' (None, h, w, c) with the batch axis."""
    dims = list(input_shape) if isinstance(input_shape, (list, tuple)) else input_shape
    if isinstance(dims, list) and dims and dims[0] is None:
        dims = dims[1:]  # Keras' (None, h, w, c): the batch axis
    return validation.shape(dims, "input_shape", "build")


def _assign_names(layers: List[layers_mod.Layer]) -> None:
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
            base, k = layer._keras_name, 0
            while (base + (f"_{k}" if k else "")) in taken:
                k += 1
            layer.name = base + (f"_{k}" if k else "")
            taken[layer.name] = 1


def _inbound_names(entry: Dict[str, Any], name: str) -> List[str]:
    """The names of the layers an entry of a functional config reads: Keras 3's
    ``[{"args": [tensor or [tensors]], "kwargs": {}}]`` or Keras 2's ``[[[name, 0, 0, {}], ...]]``."""
    nodes = entry.get("inbound_nodes", [])
    if not isinstance(nodes, list):
        raise ValueError(f"layer '{name}': inbound_nodes must be a list, got {nodes!r:.200}")
    if len(nodes) > 1:
        raise NotImplementedError(f"layer '{name}' is used at {len(nodes)} positions of the graph: hpcnn does not share "
                                  "a layer between positions")
    if not nodes:
        return []
    node = nodes[0]
    if isinstance(node, dict):  # Keras 3
        kwargs = node.get("kwargs", {})
        if not isinstance(kwargs, dict) or any(v is not None for k, v in kwargs.items() if k in ("training", "mask")) \
                or set(kwargs) - {"training", "mask"}:
            raise ValueError(f"layer '{name}': call arguments {kwargs!r:.200} are not supported")
        args = node.get("args", [])
        if not isinstance(args, list) or len(args) != 1:
            raise ValueError(f"layer '{name}': an inbound node has one argument (a tensor or a list), got {args!r:.200}")
        arg = args[0]
        tensors = arg if isinstance(arg, list) else [arg]
        names = []
        for t in tensors:
            hist = t.get("config", {}).get("keras_history") if isinstance(t, dict) else None
            if not (isinstance(hist, list) and hist and isinstance(hist[0], str)):
                raise ValueError(f"layer '{name}': an inbound tensor has no keras_history: {t!r:.200}")
            if hist[1:3] not in ([0, 0], []):
                raise NotImplementedError(f"layer '{name}' reads node {hist[1:3]} of '{hist[0]}': hpcnn layers have one "
                                          "node and one output")
            names.append(hist[0])
        return names
    if isinstance(node, list):  # Keras 2
        names = []
        for t in node:
            if not (isinstance(t, list) and t and isinstance(t[0], str)):
                raise ValueError(f"layer '{name}': an inbound tensor must be [name, node, index, kwargs], got {t!r:.200}")
            names.append(t[0])
        return names
    raise ValueError(f"layer '{name}': an inbound node must be a dict or a list, got {node!r:.200}")


def _functional_from_config(cls: type, config: Any) -> Model:
    if not isinstance(config, dict) or not isinstance(config.get("layers"), list):
        raise ValueError(f"a functional model's config is a dict with a 'layers' list, got {config!r:.200}")
    for key in ("input_layers", "output_layers"):
        if not isinstance(config.get(key), list) or not config[key]:
            raise ValueError(f"a functional model's config needs '{key}' (a Sequential's config goes to "
                             "Sequential.from_config)")
    entries: List[Tuple[str, layers_mod.Layer, List[str]]] = []
    seen = set()
    for entry in config["layers"]:
        if not isinstance(entry, dict):
            raise ValueError(f"a layer entry must be a dict, got {entry!r:.200}")
        layer = layers_mod.deserialize(entry)
        name = entry.get("name", layer.name)
        if not isinstance(name, str) or not name:
            raise ValueError(f"a layer entry needs a name, got {name!r:.100}")
        if name in seen:
            raise ValueError(f'The name "{name}" is used 2 times in the model. All layer names should be unique.')
        seen.add(name)
        layer.name = name
        entries.append((name, layer, _inbound_names(entry, name)))
    tensors: Dict[str, KerasTensor] = {}
    for name, layer, inbound in entries:
        if isinstance(layer, layers_mod.InputLayer):
            tensors[name] = layer.output
    pending = [e for e in entries if not isinstance(e[1], layers_mod.InputLayer)]
    while pending:  # any order the config lists them in: each layer once its inputs exist
        ready = [e for e in pending if all(n in tensors for n in e[2])]
        if not ready:
            name, _, inbound = pending[0]
            missing = [n for n in inbound if n not in tensors]
            raise ValueError(f"layer '{name}' reads {missing}, which no layer of the config provides"
                             if missing or not inbound else f"layer '{name}' has no inbound node")
        for name, layer, inbound in ready:
            if not inbound:
                raise ValueError(f"layer '{name}' has no inbound node")
            args = [tensors[n] for n in inbound]
            if not layer._merges_inputs and len(args) != 1:
                raise ValueError(f"layer '{name}' ({type(layer).__name__}) takes one input; the config gives {len(args)}")
            tensors[name] = layer(args) if layer._merges_inputs else layer(args[0])
        pending = [e for e in pending if e not in ready]

    def endpoint(key: str) -> KerasTensor:
        spec = config[key]
        if len(spec) != 1:
            raise NotImplementedError(f"hpcnn models have one input and one output for now; '{key}' lists {len(spec)}")
        ref = spec[0]
        name = ref[0] if isinstance(ref, list) and ref else ref
        if not isinstance(name, str) or name not in tensors:
            raise ValueError(f"'{key}' names {name!r:.100}, which is not a layer of the config")
        return tensors[name]

    model = cls(inputs=endpoint("input_layers"), outputs=endpoint("output_layers"), name=config.get("name"))
    if config.get("trainable", True) is not True:
        model._trainable = validation.boolean(config["trainable"], "trainable", "Model")
    return model


def clone_model(model: Model) -> Model:
    """A new model with the same layers (new layer objects) and fresh weights (Keras'
    clone_model); compile it again."""
    return type(model).from_config(model.get_config())


# Re-exported so that hpcnn.models.load_model / tutorial_cnn / deep_mnist keep working. Imported
# here, after Sequential exists, because both modules use Sequential.
from .saving import load_model  # noqa: E402
from .keras_config import model_from_json  # noqa: E402
from .applications import deep_mnist, tutorial_cnn  # noqa: E402

__all__ = ["Model", "Sequential", "clone_model", "load_model", "model_from_json", "tutorial_cnn", "deep_mnist"]
