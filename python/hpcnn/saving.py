"""Saving and loading models and weights: ``Model.save`` / ``load_model`` and
``Model.save_weights`` / ``load_weights`` (a ``Sequential`` is a ``Model``).

A model file is HDF5: one dataset ``hpcnn_model_json`` (UTF-8 JSON bytes: format, version, the
model's class ("Sequential", or "Functional" for ``hpcnn.Model``; files without it are
Sequential), its config, seed and step counter, weight names, compile settings and the optimizer
state's description) and one dataset per weight array, ``weight_000``, ``weight_001``, ... in
``get_weights()`` order (Keras layouts), plus, with ``include_optimizer=True`` (the default), one
per optimizer state buffer, ``optimizer_000``, ... (each flat over all parameters, in Keras'
layout: the concatenation of get_weights' arrays, flattened). format_version 1 files (hpcnn before
the optimizer state was saved) load with a fresh optimizer state and step counter 0.

A weights file (``save_weights``) is the same without config and compile settings:
``hpcnn_weights_json`` (format ``hpcnn-weights``, weight names and shapes) and the weight arrays.
``load_weights`` reads weights files and model files.

The same pieces (weights, optimizer state, random state) make the backups of
``callbacks.BackupAndRestore`` (checkpoints.py).
"""
from __future__ import annotations

import json
import math
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np

from . import _core, data, losses, optimizers, validation

if TYPE_CHECKING:  # models.py imports this module; load_model imports the model classes when called
    from .models import Model

FORMAT = "hpcnn-model"
FORMAT_VERSION = 2  # 2: the optimizer state (include_optimizer) and the step counter; 1 still loads
META_DATASET = "hpcnn_model_json"
WEIGHTS_FORMAT = "hpcnn-weights"
WEIGHTS_FORMAT_VERSION = 1
WEIGHTS_META_DATASET = "hpcnn_weights_json"


def weight_dataset(i: int) -> str:
    """The HDF5 dataset that holds the i-th array of get_weights()."""
    return f"weight_{i:03d}"


def optimizer_dataset(i: int) -> str:
    """The HDF5 dataset that holds the i-th optimizer state buffer (state_names order)."""
    return f"optimizer_{i:03d}"


def json_bytes(meta: Dict[str, Any]) -> np.ndarray:
    """A JSON description as the uint8 dataset files hold. Floats are written by repr, so they read
    back bit for bit (inf and NaN as JSON's usual extensions)."""
    return np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)


def file_path(value: Any, caller: str) -> str:
    """A file name given as a string or a path-like object (ValueError for anything else)."""
    try:
        path = os.fspath(value)
    except TypeError:
        path = None
    if not isinstance(path, str):
        raise ValueError(f"{caller}: the file path must be a string, got {value!r}")
    return path


def check_target(value: Any, overwrite: Any, caller: str) -> str:
    """The path of a file to write, checked: a string; not existing when overwrite=False."""
    path = file_path(value, caller)
    overwrite = validation.boolean(overwrite, "overwrite", caller)
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(f"{caller}: '{path}' exists and overwrite=False")
    return path


def write_file(path: str, arrays: Dict[str, np.ndarray], caller: str, compression: Optional[str] = "gzip") -> None:
    """Writes the datasets atomically (``data.write_hdf5``: a temporary file flushed to disk and
    renamed into place; refuses links, directories, special and read-only files; removes a killed
    earlier writer's temporary file)."""
    try:
        data.write_hdf5(path, arrays, compression=compression, level=1)
    except ValueError as e:
        raise ValueError(str(e).replace("write_hdf5: ", f"{caller}: ", 1)) from None


# ---------------------------------------------------------------------- the pieces of a model's state
def compile_description(model: "Model") -> Optional[Dict[str, Any]]:
    """The compile settings as files hold them (None when the model is not compiled)."""
    if model._compiled is None or model.optimizer is None:
        return None
    comp = {"optimizer": type(model.optimizer).__name__, "optimizer_config": model.optimizer.get_config(),
            "loss": model._compiled["loss"], "from_logits": model._compiled.get("from_logits", False),
            "metrics": ["accuracy"] if model._compiled["accuracy"] else []}
    if model.optimizer._exclude_names:  # not in Keras' optimizer config: kept beside it
        comp["exclude_from_weight_decay"] = list(model.optimizer._exclude_names)
    return comp


def fixed_rate(optimizer: Any) -> bool:
    """Whether the optimizer's learning rate is a float (settable) rather than a schedule, which is a
    function of the step count and so needs nothing restored."""
    return not isinstance(getattr(optimizer, "_learning_rate", None), optimizers.LearningRateSchedule)


def optimizer_state(model: "Model") -> Tuple[Optional[Dict[str, Any]], List[np.ndarray]]:
    """(description, buffers) of the compiled model's optimizer: its class, step count, learning
    rate and the names of its state buffers, and the buffers (flat, Keras' layout, in that order;
    none before the first step). (None, []) when the model is not compiled."""
    if model._compiled is None or model.optimizer is None:
        return None, []
    core = model._model()
    buffers = core.optimizer_state(keras_layout=True)
    fixed = fixed_rate(model.optimizer)
    desc = {"class": type(model.optimizer).__name__, "iterations": int(core.iterations),
            "learning_rate": float(model.optimizer._learning_rate) if fixed else None,
            "core_learning_rate": float(core.learning_rate) if fixed else None, "buffers": list(buffers)}
    return desc, [np.asarray(b) for b in buffers.values()]


def restore_optimizer_state(model: "Model", desc: Dict[str, Any], buffers: List[np.ndarray]) -> None:
    """Puts back what optimizer_state returned into the compiled model (same optimizer class):
    buffers, step count, learning rate. ValueError (_Damaged) when they do not fit it."""
    core = model._model()
    if desc.get("class") != type(model.optimizer).__name__:
        raise _Damaged(f"its optimizer state is {desc.get('class')!r}'s but the model is compiled with "
                       f"{type(model.optimizer).__name__}")
    names = desc.get("buffers")
    iterations = desc.get("iterations")
    if not isinstance(names, list) or len(names) != len(buffers):
        raise _Damaged(f"its optimizer state names {names!r:.200} do not match its {len(buffers)} buffer(s)")
    if names and names != list(core.optimizer_state_names):
        raise _Damaged(f"its optimizer state buffers are {names!r:.200}; {type(model.optimizer).__name__} keeps "
                       f"{list(core.optimizer_state_names)}")
    if not validation.is_integer(iterations) or isinstance(iterations, bool) or not 0 <= iterations < 2**62:
        raise _Damaged(f"its optimizer iterations {iterations!r:.100} are not a step count")
    lr, core_lr = desc.get("learning_rate"), desc.get("core_learning_rate")
    for name, value in (("learning_rate", lr), ("core_learning_rate", core_lr)):
        if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                      and math.isfinite(value) and value > 0):
            raise _Damaged(f"its optimizer {name} {value!r:.100} is not a positive number")
    try:
        core.set_optimizer_state(dict(zip(names, buffers)), int(iterations))
    except ValueError as e:
        raise _Damaged(f"its optimizer state does not fit the model ({e})") from None
    if fixed_rate(model.optimizer):  # (a schedule's rate follows from the restored step count)
        if lr is not None:
            model.optimizer.learning_rate = lr
        if core_lr is not None:
            core.learning_rate = core_lr


def rng_state(model: "Model") -> Dict[str, int]:
    """The model's random state: its seed and its step counter (dropout's key)."""
    core = model._model()
    return {"seed": int(core.seed), "step": int(core.step)}


def restore_rng_state(model: "Model", state: Dict[str, Any]) -> None:
    seed, step = state.get("seed"), state.get("step")
    for name, v in (("seed", seed), ("step", step)):
        if not validation.is_integer(v) or isinstance(v, bool) or not 0 <= v < 2**64:
            raise _Damaged(f"its random state's {name} {v!r:.100} is not an unsigned 64-bit integer")
    model._seed = int(seed)
    model._model().set_rng_state(int(seed), int(step))


def read_float_arrays(path: str, names: List[str], shapes: List[Tuple[int, ...]], labels: List[str]) -> List[np.ndarray]:
    """Datasets `names` of the file, each checked before it is read: float32, the given shape,
    finite values (the errors name `labels`)."""
    out = []
    for ds, shape, label in zip(names, shapes, labels):
        try:
            info = data.dataset_info(path, ds)
        except ValueError:
            raise _Damaged(f"'{ds}' ({label}) is missing") from None
        if info["dtype"] != "float32":
            raise _Damaged(f"'{ds}' ({label}) has dtype {info['dtype']}; hpcnn files hold float32")
        if tuple(info["shape"]) != shape:
            raise _Damaged(f"'{ds}' ({label}) has shape {tuple(info['shape'])}, the model needs {shape}")
        a = np.asarray(data.read_dataset(path, ds))
        if a.dtype != np.float32 or a.shape != shape:
            raise _Damaged(f"'{ds}' ({label}) reads as {a.dtype} {a.shape}, the model needs float32 {shape}")
        if not np.isfinite(a).all():
            bad = int(np.count_nonzero(~np.isfinite(a)))
            raise _Damaged(f"'{ds}' ({label}) holds {bad} NaN/inf value(s): the file is damaged or training had "
                           "diverged when it was written")
        out.append(a)
    return out


def read_optimizer_buffers(path: str, model: "Model", desc: Dict[str, Any]) -> List[np.ndarray]:
    names = desc.get("buffers")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _Damaged(f"its optimizer state names {names!r:.200} are not a list of names")
    n = int(model._model().num_params)
    return read_float_arrays(path, [optimizer_dataset(i) for i in range(len(names))], [(n,)] * len(names),
                             [f"optimizer state '{name}'" for name in names])


# ---------------------------------------------------------------------- model files
def save_model(model: "Model", filepath: str, overwrite: bool = True, include_optimizer: bool = True) -> None:
    """``Model.save``: architecture, weights, compile settings, the step counter and (with
    ``include_optimizer``, the default) the optimizer's state (moments, step count, learning rate),
    so that fit after load_model continues exactly where this model is. Written atomically by
    ``data.write_hdf5`` (a temporary file flushed to disk and renamed into place).

    The target must be a new name or an existing writable regular file: a symbolic link (never
    followed or replaced), a directory, a FIFO or device, or a read-only file is refused with a
    ValueError and left untouched. A temporary file left by a killed earlier save to the same name
    is removed."""
    path = check_target(filepath, overwrite, "save")
    include_optimizer = validation.boolean(include_optimizer, "include_optimizer", "save")
    weights = model.get_weights()
    from .models import Sequential
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "hpcnn_version": _core.build_info()["version"],
            "class_name": "Sequential" if isinstance(model, Sequential) else "Functional",
            "config": model.get_config(), "seed": model._seed, "weight_names": model._weight_names(),
            "compile": compile_description(model), "rng": rng_state(model), "optimizer_state": None}
    arrays: Dict[str, np.ndarray] = {}
    for i, w in enumerate(weights):
        arrays[weight_dataset(i)] = w
    if include_optimizer:
        desc, buffers = optimizer_state(model)
        meta["optimizer_state"] = desc
        for i, b in enumerate(buffers):
            arrays[optimizer_dataset(i)] = b
    arrays[META_DATASET] = json_bytes(meta)
    write_file(path, arrays, "save")


class _Damaged(ValueError):
    """A problem with the file's contents; load_model adds the file name."""


def read_description(path: str, dataset: str, fmt: str, max_version: int, caller: str, what: str) -> Dict[str, Any]:
    """The JSON description of an hpcnn file (model, weights or backup), checked to be a dict of
    format `fmt` with a format_version in 1..max_version. ValueError naming the file when it is not
    an hpcnn file of that kind at all; _Damaged for a malformed description."""
    try:
        raw = data.read_dataset(path, dataset)
    except ValueError as e:
        raise ValueError(f"{caller}: '{path}' is not an hpcnn {what} file ({e})") from None
    raw = np.asarray(raw)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise _Damaged(f"its {what} description '{dataset}' is {raw.dtype} {raw.shape}, not UTF-8 bytes")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _Damaged(f"its {what} description is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        raise _Damaged(f"its {what} description is not an '{fmt}' description")
    version = meta.get("format_version")
    if not (isinstance(version, int) and 1 <= version <= max_version):
        raise _Damaged(f"format_version {version!r} is not one this hpcnn reads (1..{max_version}): "
                       "written by a newer hpcnn?")
    return meta


def _read_meta(path: str) -> Dict[str, Any]:
    meta = read_description(path, META_DATASET, FORMAT, FORMAT_VERSION, "load_model", "model")
    for key, kind in (("config", dict), ("compile", (dict, type(None))), ("rng", (dict, type(None))),
                      ("optimizer_state", (dict, type(None)))):
        if not isinstance(meta.get(key), kind):
            raise _Damaged(f"its model description has no valid '{key}'")
    return meta


def _read_weights(path: str, model: "Model") -> List[np.ndarray]:
    """The weight arrays, each checked against the model before it is read: float32, the model's
    shape, finite values; exactly as many as the model has."""
    names = model._weight_names()
    shapes = [tuple(shape) for per_layer in model._model().weight_shapes for _, shape in per_layer]
    out = []
    for i, (name, shape) in enumerate(zip(names, shapes)):
        ds = weight_dataset(i)
        try:
            info = data.dataset_info(path, ds)
        except ValueError:
            raise _Damaged(f"weight '{ds}' ({name}) is missing: the model needs {len(shapes)} weight arrays") from None
        if info["dtype"] != "float32":
            raise _Damaged(f"weight '{ds}' ({name}) has dtype {info['dtype']}; hpcnn model files hold float32 weights")
        if tuple(info["shape"]) != shape:
            raise _Damaged(f"weight '{ds}' ({name}) has shape {tuple(info['shape'])}, the model needs {shape}")
        w = np.asarray(data.read_dataset(path, ds))
        if w.dtype != np.float32 or w.shape != shape:
            raise _Damaged(f"weight '{ds}' ({name}) reads as {w.dtype} {w.shape}, the model needs float32 {shape}")
        if not np.isfinite(w).all():
            # Refused rather than loaded: a model with NaN/inf weights predicts NaN for every input.
            bad = int(np.count_nonzero(~np.isfinite(w)))
            raise _Damaged(f"weight '{ds}' ({name}, layer '{name.split('/')[0]}') holds {bad} NaN/inf value(s): "
                           "the file is damaged or the model had diverged when it was saved")
        out.append(w)
    try:
        data.dataset_info(path, weight_dataset(len(shapes)))
    except ValueError:
        return out  # no extra weight arrays: as expected
    raise _Damaged(f"it holds more weight arrays than the model's {len(shapes)} (found '{weight_dataset(len(shapes))}')")


def _compile_from(model: "Model", comp: Dict[str, Any]) -> None:
    name = comp.get("optimizer")
    if not isinstance(name, str) or name not in optimizers.REGISTRY:  # an explicit registry, never getattr
        raise _Damaged(f"unknown optimizer {name!r:.100}: hpcnn has {sorted(optimizers.REGISTRY)}")
    opt_cfg = comp.get("optimizer_config", {})
    if not isinstance(opt_cfg, dict):
        raise _Damaged(f"the optimizer config is not a dict: {opt_cfg!r:.200}")
    loss: Any = comp.get("loss")
    if loss not in (losses.CategoricalCrossentropy.name, losses.SparseCategoricalCrossentropy.name):
        raise _Damaged(f"unknown loss {loss!r:.100}")
    metrics = comp.get("metrics", [])
    if not isinstance(metrics, list):
        raise _Damaged(f"metrics is not a list: {metrics!r:.200}")
    if comp.get("from_logits"):
        loss = (losses.CategoricalCrossentropy if loss == "categorical_crossentropy"
                else losses.SparseCategoricalCrossentropy)(from_logits=True)
    try:
        opt = optimizers.REGISTRY[name].from_config(opt_cfg)  # a serialized schedule as learning_rate too
    except TypeError as e:
        raise _Damaged(f"the {name} optimizer's config is not valid ({e})") from None
    excluded = comp.get("exclude_from_weight_decay")
    if excluded is not None:
        opt.exclude_from_weight_decay(var_names=excluded)
    model.compile(opt, loss, metrics, device="cpu")


def load_model(filepath: str, compile: bool = True) -> "Model":
    """A model saved by ``save`` (a ``Sequential`` or a functional ``Model``): same layers, weights
    and step counter, compiled as it was with the optimizer state it had (moments, step count, learning rate), so that ``fit``
    continues exactly as the saved model would have, unless ``compile=False``. Files saved with
    ``include_optimizer=False``, and files of hpcnn before the optimizer state was saved
    (format_version 1), compile with a fresh optimizer state. The model is on the CPU.

    A damaged or foreign file is a ValueError that names the file and what is wrong: malformed
    JSON, an unknown layer class or optimizer, missing or extra weight arrays, weights or optimizer
    state of the wrong shape or dtype. Weights holding NaN or inf are refused (the message names
    the layer)."""
    from .models import Model, Sequential
    path = file_path(filepath, "load_model")
    compile = validation.boolean(compile, "compile", "load_model")
    try:
        meta = _read_meta(path)
        classes = {"Sequential": Sequential, "Functional": Model}
        class_name = meta.get("class_name", "Sequential")  # files of hpcnn before graphs: Sequential
        if not isinstance(class_name, str) or class_name not in classes:
            raise _Damaged(f"its model class {class_name!r:.100} is not one hpcnn has ({sorted(classes)})")
        try:
            model = classes[class_name].from_config(meta["config"])
            seed = meta.get("seed")
            model._seed = validation.integer(seed, "seed", minimum=0, maximum=2**64 - 1, allow_none=True)
            model.build()
        except MemoryError as e:
            raise MemoryError(f"load_model: '{path}': the model it describes does not fit in memory ({e})") from None
        except (ValueError, NotImplementedError, TypeError) as e:
            raise _Damaged(f"its model description is not valid ({e})") from None
        model.set_weights(_read_weights(path, model))
        if meta.get("rng") is not None:  # format_version 2: the step counter that keys dropout
            restore_rng_state(model, meta["rng"])
        comp = meta.get("compile")
        if compile and comp:
            try:
                _compile_from(model, comp)
            except _Damaged:
                raise
            except (ValueError, TypeError) as e:
                raise _Damaged(f"its compile settings are not valid ({e})") from None
            desc = meta.get("optimizer_state")
            if desc is not None:
                restore_optimizer_state(model, desc, read_optimizer_buffers(path, model, desc))
    except _Damaged as e:
        raise ValueError(f"load_model: '{path}' is damaged: {e}") from None
    return model


# ---------------------------------------------------------------------- weights files
def save_weights(model: "Model", filepath: str, overwrite: bool = True) -> None:
    """``Model.save_weights``: the weight arrays (Keras order and layouts) with their names and
    shapes, written atomically as save() writes; read back by load_weights."""
    path = check_target(filepath, overwrite, "save_weights")
    weights = model.get_weights()
    meta = {"format": WEIGHTS_FORMAT, "format_version": WEIGHTS_FORMAT_VERSION,
            "hpcnn_version": _core.build_info()["version"], "weight_names": model._weight_names(),
            "weight_shapes": [list(w.shape) for w in weights]}
    arrays: Dict[str, np.ndarray] = {WEIGHTS_META_DATASET: json_bytes(meta)}
    for i, w in enumerate(weights):
        arrays[weight_dataset(i)] = w
    write_file(path, arrays, "save_weights")


def load_weights(model: "Model", filepath: str) -> None:
    """``Model.load_weights``: the weights of a file written by save_weights, or of a model
    file (save), into this model; matched by position, as Keras matches HDF5 weights. Each array
    is checked before anything is set (count, shape, float32, finite): a file that does not fit
    is a ValueError naming it, and the model keeps its weights."""
    path = file_path(filepath, "load_weights")
    try:
        try:
            read_description(path, WEIGHTS_META_DATASET, WEIGHTS_FORMAT, WEIGHTS_FORMAT_VERSION, "load_weights",
                             "weights")
        except ValueError as not_weights:
            if isinstance(not_weights, _Damaged):
                raise
            try:  # a model file holds weights too
                read_description(path, META_DATASET, FORMAT, FORMAT_VERSION, "load_weights", "model")
            except _Damaged:
                raise
            except ValueError:
                raise ValueError(f"load_weights: '{path}' is neither an hpcnn weights file (save_weights) nor an "
                                 "hpcnn model file (save)") from None
        model.set_weights(_read_weights(path, model))
    except _Damaged as e:
        raise ValueError(f"load_weights: '{path}' does not fit this model: {e}") from None
