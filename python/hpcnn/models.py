"""``Sequential`` with Keras' API, trained by the C++ core (one call per batch, GIL released).

This module holds the model's structure (layers, build, summary), weights, config, compile and
device moves. The rest lives beside it, and every public name stays importable from here:
training.py (the fit / evaluate / predict loops, which the methods below call), saving.py (save,
``load_model``) and applications.py (``tutorial_cnn``, ``deep_mnist``).

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

from . import _core, devices, layers as layers_mod, losses, optimizers, saving, training, validation
from .callbacks import Callback, History
from .utils import next_model_seed

ArrayLike = Any
_ACCURACY_NAMES = ("accuracy", "acc", "categorical_accuracy", "sparse_categorical_accuracy")


class Sequential:
    """A linear stack of layers (Keras' ``Sequential``)."""

    def __init__(self, layers: Optional[Iterable[layers_mod.Layer]] = None, name: Optional[str] = None,
                 seed: Optional[int] = None, trainable: bool = True) -> None:
        self.name = validation.name(name, "Sequential") or "sequential"
        self.layers: List[layers_mod.Layer] = []
        self._input_shape: Optional[Tuple[int, ...]] = None
        self._seed = validation.integer(seed, "seed", "Sequential", minimum=0, maximum=2**64 - 1, allow_none=True)
        self._trainable = validation.boolean(trainable, "trainable", "Sequential")
        self._core: Optional[_core.Model] = None
        self._compiled: Optional[Dict[str, Any]] = None
        self.optimizer: Optional[optimizers.Optimizer] = None
        self.stop_training = False
        self.history: Optional[History] = None
        for layer in validation.layer_list(layers, "Sequential: layers") or []:
            self.add(layer)

    # ------------------------------------------------------------------ structure
    def add(self, layer: layers_mod.Layer) -> None:
        """Append a layer. Adding to a model that was already built rebuilds it with fresh weights."""
        if not isinstance(layer, layers_mod.Layer):
            raise TypeError(f"add() takes an hpcnn layer, got {type(layer).__name__}")
        if isinstance(layer, layers_mod.InputLayer):
            if self.layers or self._input_shape is not None:
                raise ValueError("InputLayer must come first")
            self._input_shape = layer.input_shape
            return
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

    @property
    def input_shape(self) -> Tuple[Optional[int], ...]:
        if self._input_shape is None:
            raise ValueError("the model has no input shape yet: start it with InputLayer(input_shape=...)")
        return (None,) + tuple(self._input_shape)

    def build(self, input_shape: Optional[Sequence[Optional[int]]] = None) -> None:
        """Create the weights (done automatically by compile/fit/summary)."""
        if input_shape is not None:
            dims = list(input_shape) if isinstance(input_shape, (list, tuple)) else input_shape
            if isinstance(dims, list) and dims and dims[0] is None:
                dims = dims[1:]  # Keras' (None, h, w, c): the batch axis
            shp = validation.shape(dims, "input_shape", "build")
            if self._input_shape is not None and shp != self._input_shape:
                self._core, self._compiled = None, None
            self._input_shape = shp
        if self._core is not None:
            return
        if self._input_shape is None:
            raise ValueError("the model has no input shape: add InputLayer(input_shape=(h, w, c)) first, "
                             "or pass input_shape= to the first layer")
        if not self.layers:
            raise ValueError("the model has no layers")
        cfgs: List[Dict[str, Any]] = []
        for per_layer in layers_mod.core_configs(self.layers):  # with BatchNormalization+ReLU fused
            cfgs.extend(per_layer)
        if self._seed is None:
            self._seed = next_model_seed()
        self._core = _core.Model(list(self._input_shape), cfgs, self._seed)

    @property
    def built(self) -> bool:
        return self._core is not None

    def _model(self) -> _core.Model:
        self.build()
        assert self._core is not None
        return self._core

    @property
    def seed(self) -> Optional[int]:
        return self._seed

    @property
    def device(self) -> str:
        """Where the model lives: 'cpu' or 'gpu:N'."""
        return self._model().device

    def to(self, device: str) -> "Sequential":
        """Move the model (weights and optimizer state) to 'cpu' or 'gpu[:N]'."""
        self._model().to(devices.normalize(device))
        return self

    def _layer_outputs(self) -> List[Tuple[layers_mod.Layer, Tuple[int, ...], int]]:
        """(layer, per-sample output shape, params) for each Keras-level layer."""
        shapes = self._model().output_shapes
        out, k = [], 0
        cur: Tuple[int, ...] = tuple(self._input_shape or ())
        for layer in self.layers:
            n = len(layer._core_configs())
            shape = tuple(shapes[k + n - 1])
            out.append((layer, shape, layer.count_params(cur)))
            cur, k = shape, k + n
        return out

    def count_params(self) -> int:
        return int(self._model().num_params)

    # ------------------------------------------------------------------ trainable
    @property
    def trainable(self) -> bool:
        """``model.trainable = False`` freezes every layer (Keras); takes effect at the next compile()."""
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = validation.boolean(value, "trainable", "Sequential")
        for layer in self.layers:
            layer.trainable = self._trainable

    def _trainable_mask(self) -> List[bool]:
        """One flag per core layer: whether the optimizer updates it, from the layers' trainable now."""
        mask: List[bool] = []
        for layer in self.layers:
            mask += [bool(self._trainable and layer.trainable)] * len(layer._core_configs())
        return mask

    def _trainable_changed_since_compile(self) -> bool:
        return self._compiled is not None and self._compiled.get("trainable") != self._trainable_mask()

    @property
    def output_shape(self) -> Tuple[Optional[int], ...]:
        return (None,) + tuple(self._model().output_shapes[-1])

    def summary(self, print_fn=print, line_length: int = 76) -> None:
        """A Keras-style table: layer, output shape, parameters; totals; device."""
        rows = self._layer_outputs()
        # The first column fits the longest " name (Type)" label (Keras' long class names).
        c1 = max([34] + [len(f" {layer.name} ({type(layer).__name__})") + 2 for layer, _, _ in rows])
        c2 = 26
        line_length = max(line_length, c1 + c2 + 12)
        sep = "_" * line_length
        print_fn(f'Model: "{self.name}"')
        print_fn(sep)
        print_fn(f"{' Layer (type)':<{c1}}{'Output Shape':<{c2}}Param #")
        print_fn("=" * line_length)
        for layer, shape, params in rows:
            label = f" {layer.name} ({type(layer).__name__})"
            print_fn(f"{label:<{c1}}{str((None,) + shape):<{c2}}{params:,}")
        print_fn("=" * line_length)
        total = self.count_params()
        # Non-trainable: the weights of frozen layers, and the non-trainable weights by nature
        # (BatchNormalization's moving statistics) of every layer.
        trainable, cur = 0, tuple(self._input_shape or ())
        for layer, shape, params in rows:
            if self._trainable and layer.trainable:
                trainable += params - layer._non_trainable_count(cur)
            cur = shape
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

    def _weight_names(self) -> List[str]:
        """'conv2d/kernel', 'conv2d/bias', 'batch_normalization/gamma', ...: the get_weights() order,
        named by the core's weight specs."""
        per_core = self._model().weight_shapes
        names, k = [], 0
        for layer in self.layers:
            n = len(layer._core_configs())
            names += [f"{layer.name}/{w}" for specs in per_core[k:k + n] for w, _ in specs]
            k += n
        return names

    def save(self, filepath: str, overwrite: bool = True, include_optimizer: bool = True) -> None:
        """Save the model (architecture, weights, compile settings, step counter and, with
        ``include_optimizer`` (Keras' default), the optimizer's state: moments, step count,
        learning rate) to an HDF5 file, atomically (a temporary file flushed and renamed into
        place: never a half-written model). ``load_model`` then gives a model whose ``fit``
        continues exactly as this one's would."""
        saving.save_model(self, filepath, overwrite, include_optimizer)

    def save_weights(self, filepath: str, overwrite: bool = True) -> None:
        """Save the weights only (Keras order and layouts, with their names and shapes) to an
        hpcnn HDF5 weights file, atomically; ``load_weights`` reads it back."""
        saving.save_weights(self, filepath, overwrite)

    def load_weights(self, filepath: str) -> None:
        """Load weights saved by ``save_weights`` (or the weights of a model file written by
        ``save``) into this model, by position; every array is checked first, so a file that does
        not fit raises ValueError and leaves the weights as they were."""
        saving.load_weights(self, filepath)

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer: Union[str, optimizers.Optimizer] = "rmsprop", loss: Any = None,
                metrics: Optional[Sequence[str]] = None, device: Optional[str] = None, **kwargs: Any) -> None:
        """Choose optimizer ('rmsprop', Keras' default; 'adam', 'adamw', 'sgd' or an instance), loss
        ('categorical_crossentropy' or 'sparse_categorical_crossentropy'), metrics (['accuracy']) and,
        optionally, the device
        ('cpu', 'gpu', 'gpu:N'; default: the enclosing ``hpcnn.device`` block, else the CPU).

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
            raise ValueError("compile: a loss is required ('categorical_crossentropy' or "
                             "'sparse_categorical_crossentropy')")
        opt = optimizers.get(optimizer)
        loss_name, from_logits = losses.resolve(loss)
        if metrics is not None and (isinstance(metrics, (str, bytes)) or not isinstance(metrics, (list, tuple))):
            raise ValueError(f"compile: metrics must be a list such as ['accuracy'], got {metrics!r}")
        metrics = list(metrics or [])
        for m in metrics:
            if not isinstance(m, str) or m not in _ACCURACY_NAMES:
                raise ValueError(f"compile: unknown metric {m!r}; hpcnn reports 'accuracy'")
        target = device if device is not None else devices.current_scope()
        core = self._model()
        if target is not None:
            core.to(devices.normalize(target))
        mask = self._trainable_mask()
        core.compile(opt._core_config(self._weight_names()), loss_name, from_logits)
        core.set_trainable(mask)
        self.optimizer = opt
        opt._attach(self)  # optimizer.learning_rate / iterations read this model's core from now on
        self._compiled = {"loss": loss_name, "accuracy": bool(metrics), "from_logits": from_logits,
                          "trainable": mask}

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
        """Train for ``epochs`` epochs on arrays ``(x, y)`` or a dataset (an hpcnn HDF5Dataset, or a
        keras.utils.Sequence-style object whose items are ``(x, y)`` batches). Returns a History with
        loss, accuracy, val_loss, val_accuracy, seconds and images_per_second per epoch.
        Ctrl-C stops at the next batch boundary and returns the History so far."""
        return training.fit(self, x=x, y=y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                            callbacks=callbacks, validation_split=validation_split,
                            validation_data=validation_data, shuffle=shuffle, initial_epoch=initial_epoch,
                            steps_per_epoch=steps_per_epoch, validation_batch_size=validation_batch_size,
                            validation_freq=validation_freq, kwargs=kwargs)

    # ------------------------------------------------------------------ evaluation and prediction (training.py)
    def evaluate(self, x: Any = None, y: Any = None, batch_size: Optional[int] = None,
                 verbose: Union[int, str] = "auto", return_dict: bool = False, **kwargs: Any):
        """``[loss, accuracy]`` (or ``loss`` alone when compiled without metrics)."""
        return training.evaluate(self, x, y, batch_size, verbose, return_dict, kwargs)

    def predict(self, x: Any, batch_size: Optional[int] = None, verbose: Union[int, str] = 0,
                **kwargs: Any) -> np.ndarray:
        """Model outputs (class probabilities for a softmax model) as a NumPy array."""
        return training.predict(self, x, batch_size, verbose, kwargs)

    def predict_classes(self, x: Any, batch_size: Optional[int] = None) -> np.ndarray:
        """Class indices (``argmax`` of predict), the call Keras removed and the tutorial uses."""
        return np.argmax(self.predict(x, batch_size=batch_size), axis=-1)

    def train_on_batch(self, x: ArrayLike, y: ArrayLike, return_dict: bool = False):
        """One training step on one batch; returns loss (and accuracy if compiled with it)."""
        return training.train_on_batch(self, x, y, return_dict)

    def test_on_batch(self, x: ArrayLike, y: ArrayLike, return_dict: bool = False):
        return training.test_on_batch(self, x, y, return_dict)

    def predict_on_batch(self, x: ArrayLike) -> np.ndarray:
        return training.predict_on_batch(self, x)

    def __repr__(self) -> str:
        return f"<hpcnn.Sequential {self.name!r}: {len(self.layers)} layers>"


def clone_model(model: Sequential) -> Sequential:
    """A new model with the same layers and fresh weights (Keras' clone_model); compile it again."""
    return Sequential.from_config(model.get_config())


# Re-exported so that hpcnn.models.load_model / tutorial_cnn / deep_mnist keep working. Imported
# here, after Sequential exists, because both modules use Sequential.
from .saving import load_model  # noqa: E402
from .applications import deep_mnist, tutorial_cnn  # noqa: E402

__all__ = ["Sequential", "clone_model", "load_model", "tutorial_cnn", "deep_mnist"]
