"""``Sequential`` with Keras' API, trained by the C++ core (one call per batch, GIL released).

    model = hpcnn.Sequential()
    model.add(InputLayer(input_shape=[32, 32, 3]))
    model.add(Conv2D(32, 3, padding='same', activation='relu'))
    ...
    model.compile(optimizer='adam', loss='categorical_crossentropy', metrics=['accuracy'])
    history = model.fit(x, y, batch_size=250, epochs=10, validation_data=(xv, yv))
"""
from __future__ import annotations

import time
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core, devices, layers as layers_mod, losses, optimizers, progress
from .callbacks import Callback, History
from .utils import next_model_seed

ArrayLike = Any
_ACCURACY_NAMES = ("accuracy", "acc", "categorical_accuracy", "sparse_categorical_accuracy")


def _is_dataset(obj: Any) -> bool:
    """A batch source: a native hpcnn dataset or a keras.utils.Sequence-style generator."""
    return hasattr(obj, "epoch_batches") or (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")
                                              and not isinstance(obj, (np.ndarray, list, tuple)))


class Sequential:
    """A linear stack of layers (Keras' ``Sequential``)."""

    def __init__(self, layers: Optional[Iterable[layers_mod.Layer]] = None, name: Optional[str] = None,
                 seed: Optional[int] = None) -> None:
        self.name = name or "sequential"
        self.layers: List[layers_mod.Layer] = []
        self._input_shape: Optional[Tuple[int, ...]] = None
        self._seed = int(seed) if seed is not None else None
        self._core: Optional[_core.Model] = None
        self._compiled: Optional[Dict[str, Any]] = None
        self.optimizer: Optional[optimizers.Optimizer] = None
        self.stop_training = False
        self.history: Optional[History] = None
        for layer in layers or []:
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
            shp = tuple(int(d) for d in input_shape if d is not None)
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
        for layer in self.layers:
            cfgs.extend(layer._core_configs())
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

    @property
    def output_shape(self) -> Tuple[Optional[int], ...]:
        return (None,) + tuple(self._model().output_shapes[-1])

    def summary(self, print_fn=print, line_length: int = 76) -> None:
        """A Keras-style table: layer, output shape, parameters; totals; device."""
        rows = self._layer_outputs()
        c1, c2 = 34, 26
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
        print_fn(f"Total params: {total:,} ({total * 4 / 1024**2:.2f} MB)")
        print_fn(f"Trainable params: {total:,}")
        print_fn("Non-trainable params: 0")
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
        """Kernels and biases in Keras order and layouts (Conv2D (kh, kw, in, out), Dense (in, out))."""
        return [np.array(w, copy=True) for w in self._model().get_weights()]

    def set_weights(self, weights: Sequence[ArrayLike]) -> None:
        """Load weights given in Keras order and layouts (e.g. from a Keras model's get_weights())."""
        self._model().set_weights([np.ascontiguousarray(w, dtype=np.float32) for w in weights])

    def get_config(self) -> Dict[str, Any]:
        cfg_layers = []
        if self._input_shape is not None:
            cfg_layers.append({"class_name": "InputLayer", "config": {"input_shape": list(self._input_shape)}})
        cfg_layers += [layers_mod.serialize(layer) for layer in self.layers]
        return {"name": self.name, "layers": cfg_layers}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Sequential":
        model = cls(name=config.get("name"))
        for lc in config["layers"]:
            model.add(layers_mod.deserialize(lc))
        return model

    def _weight_names(self) -> List[str]:
        """'conv2d/kernel', 'conv2d/bias', ...: the get_weights() order (Conv2D and Dense hold weights)."""
        return [f"{layer.name}/{kind}" for layer in self.layers
                if isinstance(layer, (layers_mod.Conv2D, layers_mod.Dense)) for kind in ("kernel", "bias")]

    def save(self, filepath: str, overwrite: bool = True) -> None:
        """Save the model (architecture, weights, compile settings) to an HDF5 file, atomically
        (a temporary file renamed into place: never a half-written model). The optimizer's
        moments are not saved: training resumes with a fresh optimizer state."""
        import json
        import os
        from . import data
        path = os.fspath(filepath)
        if not overwrite and os.path.exists(path):
            raise FileExistsError(f"save: '{path}' exists and overwrite=False")
        weights = self.get_weights()
        meta = {"format": "hpcnn-model", "format_version": 1, "hpcnn_version": _core.build_info()["version"],
                "config": self.get_config(), "seed": self._seed, "weight_names": self._weight_names(),
                "compile": None}
        if self._compiled is not None and self.optimizer is not None:
            meta["compile"] = {"optimizer": type(self.optimizer).__name__, "optimizer_config": self.optimizer.get_config(),
                               "loss": self._compiled["loss"], "from_logits": self._compiled.get("from_logits", False),
                               "metrics": ["accuracy"] if self._compiled["accuracy"] else []}
        arrays: Dict[str, np.ndarray] = {
            "hpcnn_model_json": np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)}
        for i, w in enumerate(weights):
            arrays[f"weight_{i:03d}"] = w
        data.write_hdf5(path, arrays, compression="gzip", level=1)

    # ------------------------------------------------------------------ compile
    def compile(self, optimizer: Union[str, optimizers.Optimizer] = "rmsprop", loss: Any = None,
                metrics: Optional[Sequence[str]] = None, device: Optional[str] = None, **kwargs: Any) -> None:
        """Choose optimizer ('adam', 'sgd' or an instance), loss ('categorical_crossentropy' or
        'sparse_categorical_crossentropy'), metrics (['accuracy']) and, optionally, the device
        ('cpu', 'gpu', 'gpu:N'; default: the enclosing ``hpcnn.device`` block, else the CPU)."""
        for k in ("loss_weights", "weighted_metrics", "run_eagerly", "steps_per_execution", "jit_compile"):
            kwargs.pop(k, None)
        if kwargs:
            raise TypeError(f"compile: unexpected arguments {sorted(kwargs)}")
        if optimizer == "rmsprop":
            raise ValueError("compile: hpcnn has Adam and SGD; pass optimizer='adam' or 'sgd'")
        if loss is None:
            raise ValueError("compile: a loss is required ('categorical_crossentropy' or "
                             "'sparse_categorical_crossentropy')")
        opt = optimizers.get(optimizer)
        loss_name, from_logits = losses.resolve(loss)
        metrics = list(metrics or [])
        for m in metrics:
            if m not in _ACCURACY_NAMES:
                raise ValueError(f"compile: unknown metric {m!r}; hpcnn reports 'accuracy'")
        target = device if device is not None else devices.current_scope()
        core = self._model()
        if target is not None:
            core.to(devices.normalize(target))
        core.compile(opt._core_config(), loss_name, from_logits)
        self.optimizer = opt
        self._compiled = {"loss": loss_name, "accuracy": bool(metrics), "from_logits": from_logits}

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
        if self.optimizer is not None and self._core is not None:
            if abs(self._core.learning_rate - self.optimizer.learning_rate) > 0:
                self._core.learning_rate = self.optimizer.learning_rate

    # ------------------------------------------------------------------ data plumbing
    def _prepare_targets(self, y: ArrayLike) -> np.ndarray:
        comp = self._require_compiled("fit")
        y = np.asarray(y)
        if comp["loss"] == "categorical_crossentropy":
            return np.ascontiguousarray(y, dtype=np.float32)
        if y.dtype.kind == "f":
            if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
                raise ValueError("sparse_categorical_crossentropy needs whole-number class indices")
        elif y.dtype.kind not in "iub":
            raise ValueError(f"targets have dtype {y.dtype}; expected integers")
        return np.ascontiguousarray(y, dtype=np.int32)

    @staticmethod
    def _prepare_inputs(x: ArrayLike) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype == np.uint8 or x.dtype == np.float32:
            return np.ascontiguousarray(x)
        if x.dtype.kind not in "fiub":
            raise ValueError(f"inputs have dtype {x.dtype}; expected numbers")
        return np.ascontiguousarray(x, dtype=np.float32)

    def _array_batches(self, x: np.ndarray, y: Optional[np.ndarray], batch_size: int, shuffle: bool,
                       epoch: int) -> Iterator[Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]]:
        """(x, y, rows) per batch: contiguous slices, or the full arrays plus row indices that the
        core gathers (no NumPy copy) when shuffling."""
        n = len(x)
        if shuffle:
            order = np.random.default_rng([self._seed or 0, epoch]).permutation(n)
            for b in range(0, n, batch_size):
                yield x, y, order[b:b + batch_size]
        else:
            for b in range(0, n, batch_size):
                yield x[b:b + batch_size], (y[b:b + batch_size] if y is not None else None), None

    def _dataset_batches(self, ds: Any, epoch: int, shuffle: bool) -> Iterator[Tuple[Any, Any, None]]:
        if hasattr(ds, "epoch_batches"):
            for xb, yb in ds.epoch_batches(epoch, device=self._model().device):
                yield xb, yb, None
            return
        order = np.arange(len(ds))
        if shuffle:
            order = np.random.default_rng([self._seed or 0, epoch, 1]).permutation(len(ds))
        for i in order:
            item = ds[int(i)]
            if not isinstance(item, tuple) or len(item) < 2:
                raise ValueError(f"the dataset's item {i} is not an (x, y) tuple")
            yield item[0], item[1], None
        if hasattr(ds, "on_epoch_end"):
            ds.on_epoch_end()

    # fit stages batch b+1 with core.prefetch while step b runs (see fit). Costs nothing measurable
    # on the CPU (the staging work moves from train_batch to prefetch), so it is always on; the
    # tests switch it off to compare.
    _prefetch = True

    def _fetch_batch(self, it: Iterator[Any], is_ds: bool) -> Optional[Tuple[str, Any]]:
        """The next batch of `it` for fit: ("ok", (x, y, rows)) prepared for the core, None at the
        end, or the exception that fetching ("next_error") or preparing ("prepare_error") raised."""
        try:
            xb, yb, rows = next(it)
        except StopIteration:
            return None
        except Exception as err:  # Ctrl-C (KeyboardInterrupt) is not caught: it stops fit as before
            return ("next_error", err)
        if is_ds:
            try:
                xb = self._prepare_inputs(xb)
                yb = self._prepare_targets(yb)
            except Exception as err:  # raised (and a ValueError numbered) at the batch's turn
                return ("prepare_error", err)
        return ("ok", (xb, yb, rows))

    # ------------------------------------------------------------------ training
    def fit(self, x: Any = None, y: Any = None, batch_size: Optional[int] = None, epochs: int = 1,
            verbose: Union[int, str] = "auto", callbacks: Optional[Sequence[Callback]] = None,
            validation_split: float = 0.0, validation_data: Any = None, shuffle: bool = True,
            initial_epoch: int = 0, steps_per_epoch: Optional[int] = None, validation_batch_size: Optional[int] = None,
            validation_freq: int = 1, **kwargs: Any) -> History:
        """Train for ``epochs`` epochs on arrays ``(x, y)`` or a dataset (an hpcnn HDF5Dataset, or a
        keras.utils.Sequence-style object whose items are ``(x, y)`` batches). Returns a History with
        loss, accuracy, val_loss, val_accuracy, seconds and images_per_second per epoch.
        Ctrl-C stops at the next batch boundary and returns the History so far."""
        for k in ("class_weight", "sample_weight", "workers", "use_multiprocessing", "max_queue_size"):
            v = kwargs.pop(k, None)
            if k in ("class_weight", "sample_weight") and v is not None:
                raise ValueError(f"fit: {k} is not supported")
        if kwargs:
            raise TypeError(f"fit: unexpected arguments {sorted(kwargs)}")
        comp = self._require_compiled("fit")
        self._follow_device_scope()
        core = self._model()
        verbose = progress.resolve_verbose(verbose)
        if epochs < initial_epoch:
            raise ValueError(f"fit: epochs ({epochs}) must be >= initial_epoch ({initial_epoch})")

        if x is None:
            raise ValueError("fit: no training data (x)")
        is_ds = _is_dataset(x)
        if is_ds:
            if y is not None:
                raise ValueError("fit: y must be None when x is a dataset (it yields (x, y) batches)")
            steps = len(x)
        else:
            if y is None:
                raise ValueError("fit: targets y are required with array inputs")
            x = self._prepare_inputs(x)
            y = self._prepare_targets(y)
            if len(x) != len(y):
                raise ValueError(f"fit: x has {len(x)} rows but y has {len(y)}")
            if len(x) == 0:
                raise ValueError("fit: x is empty")
            if validation_split and validation_data is None:
                if not 0.0 < validation_split < 1.0:
                    raise ValueError("fit: validation_split must be in (0, 1)")
                cut = int(len(x) * (1.0 - validation_split))
                validation_data = (x[cut:], y[cut:])
                x, y = x[:cut], y[:cut]
            batch_size = int(batch_size or 32)
            if batch_size <= 0:
                raise ValueError(f"fit: batch_size must be positive, got {batch_size}")
            steps = (len(x) + batch_size - 1) // batch_size
        if steps_per_epoch is not None:
            steps = min(steps, int(steps_per_epoch))
        if steps == 0:
            raise ValueError("fit: the training data has no batches")

        history = History()
        cbs: List[Callback] = list(callbacks or []) + [history]
        params = {"epochs": epochs, "steps": steps, "verbose": verbose, "batch_size": batch_size}
        for cb in cbs:
            cb.set_model(self)
            cb.set_params(params)
        self.stop_training = False
        if verbose:
            print(f"Training on {core.device} ({_core.get_num_threads()} CPU threads)" if core.device == "cpu"
                  else f"Training on {core.device}", flush=True)
        for cb in cbs:
            cb.on_train_begin()
        want_acc = comp["accuracy"]
        try:
            for epoch in range(initial_epoch, epochs):
                if verbose:
                    print(f"Epoch {epoch + 1}/{epochs}", flush=True)
                for cb in cbs:
                    cb.on_epoch_begin(epoch)
                self._sync_learning_rate()
                bar = progress.ProgressBar(steps, verbose)
                loss_sum = correct = 0.0
                seen = 0
                t0 = time.perf_counter()
                batches = (self._dataset_batches(x, epoch, shuffle) if is_ds
                           else self._array_batches(x, y, batch_size, shuffle, epoch))
                logs: Dict[str, float] = {}
                try:
                    # One batch ahead: batch b+1 is fetched (and prepared) right after train_batch(b)
                    # returns and handed to core.prefetch, which on a GPU uploads it on the copy
                    # stream while step b's backward pass still runs. Fetch errors are kept and
                    # raised at that batch's turn, where the loop would have raised them itself.
                    it = iter(batches)
                    ahead = self._fetch_batch(it, is_ds)
                    b = 0
                    while ahead is not None:
                        kind, item = ahead
                        if kind == "next_error":
                            raise item
                        if b >= steps:
                            break
                        for cb in cbs:
                            cb.on_train_batch_begin(b)
                        try:
                            if kind == "prepare_error":
                                raise item
                            ls, c, n = core.train_batch(*item)
                        except ValueError as err:
                            raise ValueError(f"epoch {epoch + 1}, batch {b + 1}: {err}") from err
                        ahead = self._fetch_batch(it, is_ds)
                        if ahead is not None and ahead[0] == "ok" and b + 1 < steps and self._prefetch:
                            try:
                                core.prefetch(*ahead[1])
                            except Exception:
                                pass  # train_batch stages it again and reports the error with its batch number
                        loss_sum += ls
                        correct += c
                        seen += n
                        logs = {"loss": loss_sum / seen}
                        if want_acc:
                            logs["accuracy"] = correct / seen
                        bar.update(b + 1, logs)
                        for cb in cbs:
                            cb.on_train_batch_end(b, logs)
                        if self.stop_training:
                            break
                        b += 1
                finally:
                    if hasattr(batches, "close"):
                        batches.close()  # stops a dataset's producer when we leave early
                seconds = time.perf_counter() - t0
                logs = {"loss": loss_sum / max(seen, 1)}
                if want_acc:
                    logs["accuracy"] = correct / max(seen, 1)
                if validation_data is not None and (epoch + 1 - initial_epoch) % validation_freq == 0:
                    vx, vy = (validation_data, None) if _is_dataset(validation_data) else validation_data[:2]
                    vres = self._evaluate(vx, vy, validation_batch_size or batch_size or 32)
                    logs["val_loss"] = vres[0]
                    if want_acc:
                        logs["val_accuracy"] = vres[1]
                logs["seconds"] = seconds
                logs["images_per_second"] = seen / seconds if seconds > 0 else 0.0
                bar.finish(logs)
                for cb in cbs:
                    cb.on_epoch_end(epoch, logs)
                if self.stop_training:
                    break
        except KeyboardInterrupt:
            history.interrupted = True
            print("\nTraining interrupted (Ctrl-C): the model keeps the weights of the last completed batch; "
                  f"history has {len(history.epoch)} complete epoch(s).", flush=True)
        for cb in cbs:
            cb.on_train_end()
        self.history = history
        return history

    # ------------------------------------------------------------------ evaluation and prediction
    def _evaluate(self, x: Any, y: Any, batch_size: int, verbose: int = 0) -> Tuple[float, float]:
        core = self._model()
        self._require_compiled("evaluate")
        loss_sum = correct = 0.0
        seen = 0
        if _is_dataset(x):
            if y is not None:
                raise ValueError("evaluate: y must be None when x is a dataset")
            batches = self._dataset_batches(x, 0, False)
            total = len(x)
        else:
            if y is None:
                raise ValueError("evaluate: targets y are required with array inputs")
            x = self._prepare_inputs(x)
            y = self._prepare_targets(y)
            if len(x) != len(y):
                raise ValueError(f"evaluate: x has {len(x)} rows but y has {len(y)}")
            if len(x) == 0:
                raise ValueError("evaluate: x is empty")
            batches = self._array_batches(x, y, batch_size, False, 0)
            total = (len(x) + batch_size - 1) // batch_size
        bar = progress.ProgressBar(total, verbose)
        for b, (xb, yb, rows) in enumerate(batches):
            if _is_dataset(x):
                xb, yb = self._prepare_inputs(xb), self._prepare_targets(yb)
            ls, c, n = core.test_batch(xb, yb, rows)
            loss_sum, correct, seen = loss_sum + ls, correct + c, seen + n
            bar.update(b + 1, {"loss": loss_sum / seen})
        if seen == 0:
            raise ValueError("evaluate: no data")
        result = (loss_sum / seen, correct / seen)
        bar.finish({"loss": result[0], "accuracy": result[1]})
        return result

    def evaluate(self, x: Any = None, y: Any = None, batch_size: Optional[int] = None,
                 verbose: Union[int, str] = "auto", return_dict: bool = False, **kwargs: Any):
        """``[loss, accuracy]`` (or ``loss`` alone when compiled without metrics)."""
        kwargs.pop("steps", None)
        kwargs.pop("callbacks", None)
        self._follow_device_scope()
        comp = self._require_compiled("evaluate")
        loss, acc = self._evaluate(x, y, int(batch_size or 32), progress.resolve_verbose(verbose))
        if return_dict:
            return {"loss": loss, "accuracy": acc} if comp["accuracy"] else {"loss": loss}
        return [loss, acc] if comp["accuracy"] else loss

    def predict(self, x: Any, batch_size: Optional[int] = None, verbose: Union[int, str] = 0,
                **kwargs: Any) -> np.ndarray:
        """Model outputs (class probabilities for a softmax model) as a NumPy array."""
        kwargs.pop("steps", None)
        kwargs.pop("callbacks", None)
        self._follow_device_scope()
        core = self._model()
        bs = int(batch_size or 32)
        outs: List[np.ndarray] = []
        if _is_dataset(x):
            if hasattr(x, "epoch_batches") and getattr(x, "shuffle", False):
                # Its batches come in a shuffled order: predictions would not line up with the rows.
                raise ValueError("predict: this dataset shuffles its rows, so the predictions would come back in a "
                                 "shuffled order; create it with shuffle=False for prediction")
            for xb, _, _ in self._dataset_batches(x, 0, False):
                outs.append(core.predict_batch(self._prepare_inputs(xb), None))
        else:
            x = self._prepare_inputs(x)
            if len(x) == 0:
                raise ValueError("predict: x is empty")
            for b in range(0, len(x), bs):
                outs.append(core.predict_batch(x[b:b + bs], None))
        return np.concatenate(outs, axis=0)

    def predict_classes(self, x: Any, batch_size: Optional[int] = None) -> np.ndarray:
        """Class indices (``argmax`` of predict), the call Keras removed and the tutorial uses."""
        return np.argmax(self.predict(x, batch_size=batch_size), axis=-1)

    def train_on_batch(self, x: ArrayLike, y: ArrayLike, return_dict: bool = False):
        """One training step on one batch; returns loss (and accuracy if compiled with it)."""
        comp = self._require_compiled("train_on_batch")
        self._follow_device_scope()
        self._sync_learning_rate()
        ls, c, n = self._model().train_batch(self._prepare_inputs(x), self._prepare_targets(y), None)
        return self._result(ls / n, c / n, comp, return_dict)

    def test_on_batch(self, x: ArrayLike, y: ArrayLike, return_dict: bool = False):
        comp = self._require_compiled("test_on_batch")
        self._follow_device_scope()
        ls, c, n = self._model().test_batch(self._prepare_inputs(x), self._prepare_targets(y), None)
        return self._result(ls / n, c / n, comp, return_dict)

    def predict_on_batch(self, x: ArrayLike) -> np.ndarray:
        self._follow_device_scope()
        return self._model().predict_batch(self._prepare_inputs(x), None)

    @staticmethod
    def _result(loss: float, acc: float, comp: Dict[str, Any], return_dict: bool):
        if return_dict:
            return {"loss": loss, "accuracy": acc} if comp["accuracy"] else {"loss": loss}
        return [loss, acc] if comp["accuracy"] else loss

    def __repr__(self) -> str:
        return f"<hpcnn.Sequential {self.name!r}: {len(self.layers)} layers>"


def load_model(filepath: str, compile: bool = True) -> Sequential:
    """A model saved by ``Sequential.save``: same layers and weights, compiled as it was (with a
    fresh optimizer state) unless ``compile=False``. The model is on the CPU."""
    import json
    import os
    from . import data
    path = os.fspath(filepath)
    try:
        raw = data.read_dataset(path, "hpcnn_model_json")
    except ValueError as e:
        raise ValueError(f"load_model: '{path}' is not an hpcnn model file ({e})") from e
    try:
        meta = json.loads(bytes(np.asarray(raw, dtype=np.uint8)).decode("utf-8"))
        assert meta.get("format") == "hpcnn-model"
    except (ValueError, AssertionError) as e:
        raise ValueError(f"load_model: '{path}' has a damaged model description") from e
    model = Sequential.from_config(meta["config"])
    model._seed = meta.get("seed")
    n = sum(len(per_layer) for per_layer in model._model().weight_shapes)
    model.set_weights([data.read_dataset(path, f"weight_{i:03d}") for i in range(n)])
    comp = meta.get("compile")
    if compile and comp:
        opt_cls = getattr(optimizers, comp["optimizer"])
        loss: Any = comp["loss"]
        if comp.get("from_logits"):
            loss = (losses.CategoricalCrossentropy if loss == "categorical_crossentropy"
                    else losses.SparseCategoricalCrossentropy)(from_logits=True)
        model.compile(opt_cls(**comp["optimizer_config"]), loss, comp["metrics"], device="cpu")
    return model


def clone_model(model: Sequential) -> Sequential:
    """A new model with the same layers and fresh weights (Keras' clone_model); compile it again."""
    return Sequential.from_config(model.get_config())


def tutorial_cnn(seed: Optional[int] = None) -> Sequential:
    """The CIFAR-10 tutorial CNN (input 32x32x3, 787,530 parameters)."""
    from .layers import Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D
    m = Sequential(name="tutorial_cnn", seed=seed)
    m.add(InputLayer(input_shape=[32, 32, 3]))
    for f in (32, 64, 128, 256):
        m.add(Conv2D(filters=f, kernel_size=3, padding="same", activation="relu"))
        m.add(MaxPooling2D(pool_size=[2, 2], strides=[2, 2], padding="same"))
    m.add(Flatten())
    m.add(Dense(256, activation="relu"))
    m.add(Dropout(0.2))
    m.add(Dense(512, activation="relu"))
    m.add(Dropout(0.2))
    m.add(Dense(10, activation="softmax"))
    return m


def deep_mnist(seed: Optional[int] = None) -> Sequential:
    """DeepMNIST (input 28x28x1, 3,274,634 parameters)."""
    from .layers import Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D
    m = Sequential(name="deep_mnist", seed=seed)
    m.add(InputLayer(input_shape=[28, 28, 1]))
    m.add(Conv2D(32, 5, padding="same", activation="relu"))
    m.add(MaxPooling2D(2))
    m.add(Conv2D(64, 5, padding="same", activation="relu"))
    m.add(MaxPooling2D(2))
    m.add(Flatten())
    m.add(Dense(1024, activation="relu"))
    m.add(Dropout(0.5))
    m.add(Dense(10, activation="softmax"))
    return m


__all__ = ["Sequential", "clone_model", "load_model", "tutorial_cnn", "deep_mnist"]
