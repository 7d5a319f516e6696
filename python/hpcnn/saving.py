"""Saving and loading models and weights: ``Model.save`` / ``load_model`` and
``Model.save_weights`` / ``load_weights`` (a ``Sequential`` is a ``Model``), in Keras' file formats (keras_files.py holds the
layouts; keras_config.py the configs) with hpcnn's own description and state beside them.

``save(path)`` writes, by the name's ending (or ``save_format``):

- ``.keras``: a Keras 3 archive (config.json, metadata.json, model.weights.h5) that
  ``keras.models.load_model`` opens, plus two members Keras does not read: ``hpcnn.json``,
  hpcnn's own description, and ``hpcnn_state.h5``, the optimizer state buffers;
- anything else (``.h5``, ``.hdf5``, ...): a legacy Keras HDF5 model file (the ``model_config`` and
  ``training_config`` attributes, the weights under ``model_weights``: what ``tf.keras`` 2 wrote and
  what Keras 2 and 3 open) plus datasets Keras does not read: ``hpcnn_model_json`` (UTF-8 JSON
  bytes: format, version, hpcnn's config, seed and step counter, weight names, compile settings and
  the optimizer state's description) and, with ``include_optimizer=True`` (the default), one per
  optimizer state buffer, ``optimizer_000``, ... (each flat over all parameters, in Keras' layout:
  the concatenation of get_weights' arrays, flattened).

hpcnn reads its own description when a file has one (exactly what it saved, so that ``fit`` after
``load_model`` continues exactly where the saved model was), and otherwise builds the model from
Keras' config (with a fresh optimizer state). ``load_model`` tells the formats apart by content, not
by name. Files of earlier hpcnn versions still load: format_version 1 (``hpcnn_model_json`` and one
dataset per weight array, ``weight_000``, ... in ``get_weights()`` order; a fresh optimizer state)
and format_version 2 (the same plus the optimizer state and the step counter).

``save_weights(path)``: ``*.weights.h5`` in Keras 3's layout, any other name in the legacy Keras
HDF5 weights layout (tf.keras 2's ``save_weights('x.h5')``). ``load_weights`` reads both,
``.keras`` archives, hpcnn's model files and the weights files of earlier hpcnn versions
(``hpcnn_weights_json``, format ``hpcnn-weights``, and ``weight_000``, ...).

The same pieces (weights, optimizer state, random state) make the backups of
``callbacks.BackupAndRestore`` (checkpoints.py), which keep hpcnn's own layout.
"""
from __future__ import annotations

import json
import math
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import _core, data, distribute, keras_config, keras_files, losses, metrics as metrics_mod, optimizers, validation

if TYPE_CHECKING:  # models.py imports this module; load_model imports the model classes when called
    from .models import Model

FORMAT = "hpcnn-model"
# 1: weight_000, ...; 2: + the optimizer state and the step counter; 3: the weights in Keras' layout
# beside Keras' config (meta["weights"] == "keras"). All three load.
FORMAT_VERSION = 3
META_DATASET = "hpcnn_model_json"
WEIGHTS_IN_KERAS_LAYOUT = "keras"  # meta["weights"]: the weights are in Keras' layout, not weight_000, ...
MAX_META_BYTES = 64 << 20
# The weights files of hpcnn before the Keras layouts (read by load_weights, no longer written).
WEIGHTS_FORMAT = "hpcnn-weights"
WEIGHTS_FORMAT_VERSION = 1
WEIGHTS_META_DATASET = "hpcnn_weights_json"


def weight_dataset(i: int) -> str:
    """The HDF5 dataset that holds the i-th array of get_weights() (format_version 1 and 2 files,
    BackupAndRestore's backups)."""
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
            "metrics": list(model._compiled.get("metrics_given", ["accuracy"] if model._compiled["accuracy"] else []))}
    if model._compiled.get("label_smoothing"):
        comp["label_smoothing"] = model._compiled["label_smoothing"]
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


def _checked_float_arrays(names: List[str], shapes: List[Tuple[int, ...]], labels: List[str],
                          info: Callable[[str], Optional[Tuple[str, Tuple[int, ...]]]],
                          read: Callable[[str], Any]) -> List[np.ndarray]:
    """Datasets `names`, each checked before it is read: float32, the given shape, finite values
    (the errors name `labels`). `info(name)` is (dtype, shape), or None for a missing dataset;
    `read(name)` its values."""
    out = []
    for ds, shape, label in zip(names, shapes, labels):
        found = info(ds)
        if found is None:
            raise _Damaged(f"'{ds}' ({label}) is missing")
        dtype, have = found
        if dtype != "float32":
            raise _Damaged(f"'{ds}' ({label}) has dtype {dtype}; hpcnn files hold float32")
        if tuple(have) != shape:
            raise _Damaged(f"'{ds}' ({label}) has shape {tuple(have)}, the model needs {shape}")
        a = np.asarray(read(ds))
        if a.dtype != np.float32 or a.shape != shape:
            raise _Damaged(f"'{ds}' ({label}) reads as {a.dtype} {a.shape}, the model needs float32 {shape}")
        if not np.isfinite(a).all():
            bad = int(np.count_nonzero(~np.isfinite(a)))
            raise _Damaged(f"'{ds}' ({label}) holds {bad} NaN/inf value(s): the file is damaged or training had "
                           "diverged when it was written")
        out.append(a)
    return out


def read_float_arrays(path: str, names: List[str], shapes: List[Tuple[int, ...]], labels: List[str]) -> List[np.ndarray]:
    """Datasets `names` of the file at `path`, checked as _checked_float_arrays says."""
    def info(ds: str) -> Optional[Tuple[str, Tuple[int, ...]]]:
        try:
            i = data.dataset_info(path, ds)
        except ValueError:
            return None
        return i["dtype"], tuple(i["shape"])

    return _checked_float_arrays(names, shapes, labels, info, lambda ds: data.read_dataset(path, ds))


def _optimizer_buffer_names(model: "Model", desc: Dict[str, Any]) -> Tuple[List[str], List[Tuple[int, ...]], List[str]]:
    """The datasets, shapes and labels of the optimizer state that `desc` describes."""
    names = desc.get("buffers")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _Damaged(f"its optimizer state names {names!r:.200} are not a list of names")
    n = int(model._model().num_params)
    return ([optimizer_dataset(i) for i in range(len(names))], [(n,)] * len(names),
            [f"optimizer state '{name}'" for name in names])


def read_optimizer_buffers(path: str, model: "Model", desc: Dict[str, Any]) -> List[np.ndarray]:
    return read_float_arrays(path, *_optimizer_buffer_names(model, desc))


def read_optimizer_buffers_tree(tree: "keras_files.H5Tree", model: "Model", desc: Dict[str, Any]) -> List[np.ndarray]:
    """read_optimizer_buffers for an opened HDF5 tree (a model file, or an archive's hpcnn_state.h5):
    the same checks and messages."""
    def info(ds: str) -> Optional[Tuple[str, Tuple[int, ...]]]:
        o = tree.objects.get("/" + ds)
        return None if o is None or o["kind"] != "dataset" else (o["dtype"], tuple(o["shape"]))

    return _checked_float_arrays(*_optimizer_buffer_names(model, desc), info, lambda ds: tree.reader.read("/" + ds))


# ---------------------------------------------------------------------- model files
def description(model: "Model", include_optimizer: bool = True) -> Tuple[Dict[str, Any], List[np.ndarray]]:
    """hpcnn's own description of a model, saved beside Keras' layout, and the optimizer state
    buffers it describes (none with include_optimizer=False or before the first step). Its
    ``class_name`` ("Sequential", or "Functional" for ``hpcnn.Model``; files without it are
    Sequential) says which class ``load_model`` builds."""
    from .models import Sequential
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "hpcnn_version": _core.build_info()["version"],
            "class_name": "Sequential" if isinstance(model, Sequential) else "Functional",
            "config": model.get_config(), "seed": model._seed, "weight_names": model._weight_names(),
            "compile": compile_description(model), "rng": rng_state(model), "optimizer_state": None,
            "weights": WEIGHTS_IN_KERAS_LAYOUT}
    buffers: List[np.ndarray] = []
    if include_optimizer:
        meta["optimizer_state"], buffers = optimizer_state(model)
    return meta, buffers


def _rename_error(e: ValueError, caller: str) -> ValueError:
    text = str(e)
    for prefix in ("write_hdf5: ", "write_h5_tree: "):
        text = text.replace(prefix, f"{caller}: ", 1)
    return ValueError(text)


def save_model(model: "Model", filepath: Any, overwrite: bool = True, include_optimizer: bool = True,
               save_format: Optional[str] = None) -> None:
    """``Sequential.save``: architecture, weights and compile settings in Keras' format for the
    name (``.keras``: a Keras 3 archive; anything else: a legacy Keras HDF5 model file; or
    ``save_format='h5'`` / ``'keras'``), with hpcnn's own description beside them: the step counter
    and (with ``include_optimizer``, the default) the optimizer's state (moments, step count,
    learning rate), so that fit after load_model continues exactly where this model is. Written
    atomically: a temporary file flushed to disk and renamed into place.

    ``overwrite=False`` refuses an existing file (FileExistsError). With a multi-process strategy
    only the chief (rank 0) writes; the other ranks return at once."""
    if not distribute.writes_files(model):
        return
    path = check_target(filepath, overwrite, "save")
    include_optimizer = validation.boolean(include_optimizer, "include_optimizer", "save")
    if save_format not in (None, "h5", "keras"):
        if save_format == "tf":
            raise NotImplementedError("save: save_format='tf' (TensorFlow's SavedModel) is not supported: save to a "
                                      "'.keras' or '.h5' file")
        raise ValueError(f"save: save_format must be 'h5', 'keras' or None, got {save_format!r}")
    archive = save_format == "keras" or (save_format is None and path.endswith(".keras"))
    model.build()
    meta, buffers = description(model, include_optimizer)
    state_items = [(f"/{optimizer_dataset(i)}", b, {}) for i, b in enumerate(buffers)]
    try:
        if archive:
            keras_files.write_archive(path, model, meta, "save", state_items)
            return
        root: Dict[str, Any] = {"keras_version": keras_config.KERAS_VERSION, "backend": "hpcnn"}
        root["model_config"] = json.dumps(keras_config.model_to_keras(model, legacy=True))
        if model._compiled is not None:
            root["training_config"] = json.dumps(keras_config.compile_to_keras(model, legacy=True))
        items = [("/", None, root)] + keras_files.legacy_weight_items(model, "/model_weights")
        items.append(("/" + META_DATASET, json_bytes(meta), {}))
        items += state_items
        _core.data.write_h5_tree(path, items, "save")
    except ValueError as e:
        raise _rename_error(e, "save") from None


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
    return _parse_description(raw.tobytes(), fmt, max_version, what)


def _parse_description(raw: bytes, fmt: str, max_version: int, what: str) -> Dict[str, Any]:
    """UTF-8 JSON bytes -> a dict of format `fmt` with a format_version in 1..max_version (else _Damaged)."""
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _Damaged(f"its {what} description is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        raise _Damaged(f"its {what} description is not an '{fmt}' description")
    version = meta.get("format_version")
    if not (isinstance(version, int) and 1 <= version <= max_version):
        raise _Damaged(f"format_version {version!r} is not one this hpcnn reads (1..{max_version}): "
                       "written by a newer hpcnn?")
    return meta


def _read_meta(tree: "keras_files.H5Tree", path: str) -> Dict[str, Any]:
    """hpcnn's description in an HDF5 model file, checked (its size before it is read)."""
    obj = tree.objects.get("/" + META_DATASET)
    if obj is None or obj["kind"] != "dataset":
        raise ValueError(f"load_model: '{path}' is not an hpcnn model file (no '{META_DATASET}')")
    if obj["dtype"] != "uint8" or len(obj["shape"]) != 1:
        raise _Damaged(f"its model description '{META_DATASET}' is {obj['dtype']} {tuple(obj['shape'])}, not UTF-8 bytes")
    if obj["shape"][0] > MAX_META_BYTES:
        raise _Damaged(f"its model description is {obj['shape'][0]} bytes (more than hpcnn reads: {MAX_META_BYTES})")
    raw = np.asarray(tree.reader.read("/" + META_DATASET)).astype(np.uint8)
    return _check_meta(raw.tobytes())


def _check_meta(raw: bytes) -> Dict[str, Any]:
    meta = _parse_description(raw, FORMAT, FORMAT_VERSION, "model")
    for key, kind in (("config", dict), ("compile", (dict, type(None))), ("rng", (dict, type(None))),
                      ("optimizer_state", (dict, type(None)))):
        if not isinstance(meta.get(key), kind):
            raise _Damaged(f"its model description has no valid '{key}'")
    # Absent: weight_000, ... (format_version 1 and 2); "keras": Keras' layout (format_version 3).
    if meta.get("weights") not in (WEIGHTS_IN_KERAS_LAYOUT, None):
        raise _Damaged(f"its model description names an unknown weights layout {meta.get('weights')!r:.60}")
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
    if not isinstance(loss, str) or loss not in ("categorical_crossentropy", "sparse_categorical_crossentropy",
                                                 "binary_crossentropy", "mean_squared_error", "mean_absolute_error"):
        raise _Damaged(f"unknown loss {loss!r:.100}")
    metrics = comp.get("metrics", [])
    if not isinstance(metrics, list):
        raise _Damaged(f"metrics is not a list: {metrics!r:.200}")
    try:
        metrics = [metrics_mod.deserialize(m) for m in metrics]
        loss_cls = type(losses.get(loss))
        loss_args: Dict[str, Any] = {}
        if comp.get("from_logits"):
            loss_args["from_logits"] = True
        if comp.get("label_smoothing"):
            loss_args["label_smoothing"] = float(comp["label_smoothing"])
        loss = loss_cls(**loss_args) if loss_args else loss
    except (ValueError, TypeError) as e:
        raise _Damaged(f"the compile settings are not valid ({e})") from None
    try:
        opt = optimizers.REGISTRY[name].from_config(opt_cfg)  # a serialized schedule as learning_rate too
    except TypeError as e:
        raise _Damaged(f"the {name} optimizer's config is not valid ({e})") from None
    excluded = comp.get("exclude_from_weight_decay")
    if excluded is not None:
        opt.exclude_from_weight_decay(var_names=excluded)
    model.compile(opt, loss, metrics, device="cpu")


def _model_from_meta(meta: Dict[str, Any], path: str) -> "Model":
    from .models import Model, Sequential
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
    return model


def _compile_hpcnn(model: "Model", comp: Optional[Dict[str, Any]]) -> None:
    if comp:
        try:
            _compile_from(model, comp)
        except _Damaged:
            raise
        except (ValueError, TypeError) as e:
            raise _Damaged(f"its compile settings are not valid ({e})") from None


def _restore_hpcnn_state(model: "Model", meta: Dict[str, Any], compile: bool,
                         read_buffers: Any) -> None:
    """After the weights: the random state (format_version >= 2), then, with `compile`, the compile
    settings and the optimizer state (`read_buffers(desc)` reads its buffers from the file)."""
    if meta.get("rng") is not None:  # the step counter that keys dropout
        restore_rng_state(model, meta["rng"])
    if not compile:
        return
    comp = meta.get("compile")
    _compile_hpcnn(model, comp)
    desc = meta.get("optimizer_state")
    if comp and desc is not None:  # (no buffers before the first step: nothing to read)
        restore_optimizer_state(model, desc, read_buffers(desc) if desc.get("buffers") != [] else [])


def _compile_keras(model: Any, config: Any, path: str) -> None:
    keras_config.compile_or_warn(model, config, f"load_model: '{path}'")


def _keras_json_attr(tree: "keras_files.H5Tree", name: str) -> Any:
    text = tree.text("/", name)
    if text is None:
        return None
    if len(text) > MAX_META_BYTES:
        raise _Damaged(f"its '{name}' attribute is {len(text)} bytes long")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise _Damaged(f"its '{name}' attribute is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None


def _load_hdf5(path: str, compile: bool) -> "Model":
    try:
        tree = keras_files.H5Tree.open(path)
    except ValueError as e:
        raise ValueError(f"load_model: {e}") from None
    with tree:
        if "/" + META_DATASET in tree.objects:  # written by hpcnn: its own description
            meta = _read_meta(tree, path)
            model = _model_from_meta(meta, path)
            if meta.get("weights") == WEIGHTS_IN_KERAS_LAYOUT:
                model.set_weights(keras_files.read_legacy_weights(tree, model))
            else:
                model.set_weights(_read_weights(path, model))  # format_version 1 and 2: weight_000, ...
            _restore_hpcnn_state(model, meta, compile, lambda desc: read_optimizer_buffers_tree(tree, model, desc))
            return model
        config = _keras_json_attr(tree, "model_config")
        if config is None:
            if keras_files.legacy_weights_root(tree) is not None or tree.is_group("/layers"):
                raise ValueError(f"load_model: '{path}' is not an hpcnn model file: it holds weights only (a "
                                 "save_weights file), not a model: build the model and call model.load_weights()")
            raise ValueError(f"load_model: '{path}' is not an hpcnn model file, nor a Keras HDF5 model file (it has "
                             "no 'model_config' attribute)")
        model = keras_config.model_from_keras(config, weights_follow=True, where="its model_config")
        model.build()
        model.set_weights(keras_files.read_legacy_weights(tree, model))
        if compile:
            _compile_keras(model, _keras_json_attr(tree, "training_config"), path)
        return model


def _load_archive(path: str, compile: bool) -> "Model":
    with keras_files.Archive(path) as archive:
        meta_raw = archive.json(keras_files.ARCHIVE_HPCNN)
        config = archive.json(keras_files.ARCHIVE_CONFIG)
        if meta_raw is None and config is None:
            raise _Damaged("it has no 'config.json': not a Keras model archive")
        if meta_raw is not None:  # written by hpcnn
            with archive.weights(path) as tree:
                meta = _check_meta(json.dumps(meta_raw).encode("utf-8"))
                model = _model_from_meta(meta, path)
                model.set_weights(keras_files.read_keras3_weights(tree, model))

                def buffers(desc: Dict[str, Any]) -> List[np.ndarray]:
                    with archive.tree(keras_files.ARCHIVE_STATE, path) as state:
                        return read_optimizer_buffers_tree(state, model, desc)

                _restore_hpcnn_state(model, meta, compile, buffers)
                return model
        # Written by Keras: the model from its config first (a class hpcnn lacks is named before the
        # weights are read), then its weights.
        model = keras_config.model_from_keras(config, weights_follow=True, where="its config.json")
        model.build()
        with archive.weights(path) as tree:
            model.set_weights(keras_files.read_keras3_weights(tree, model))
    if compile and isinstance(config, dict):
        _compile_keras(model, config.get("compile_config"), path)
    return model


def load_model(filepath: Any, compile: bool = True, custom_objects: Optional[Dict[str, Any]] = None,
               safe_mode: bool = True) -> "Model":
    """A model from a file: saved by hpcnn (same layers, weights, seed and step counter, compiled
    as it was with the optimizer state it had: moments, step count, learning rate; so ``fit``
    continues exactly as the saved model would have), or by Keras: a ``.keras`` archive (Keras 3)
    or a legacy HDF5 model file (``model.save('x.h5')`` of Keras 2 / tf.keras or Keras 3), whose
    layers hpcnn has (compiled as Keras' compile settings say, with a fresh optimizer state).
    Files saved with ``include_optimizer=False``, and files of hpcnn before the optimizer state
    was saved (format_version 1), compile with a fresh optimizer state. The format is told from
    the contents, not the name. ``compile=False`` skips the compile settings. The model is on the
    CPU.

    A Keras model that uses layer classes hpcnn lacks is a ValueError listing them. Keras compile
    settings hpcnn lacks (a loss or metric) leave the model uncompiled, with a warning. A damaged
    or foreign file is a ValueError that names the file and what is wrong: malformed JSON, an
    unknown layer class or optimizer, missing or extra weight arrays, weights of the wrong shape
    or type, an optimizer state that does not fit. Weights holding NaN or inf are refused (the
    message names the layer). ``custom_objects`` (custom layers) are not supported; ``safe_mode`` has nothing to guard
    (hpcnn never runs code from a file)."""
    path = file_path(filepath, "load_model")
    compile = validation.boolean(compile, "compile", "load_model")
    validation.boolean(safe_mode, "safe_mode", "load_model")
    if custom_objects:
        raise NotImplementedError("load_model: custom_objects (custom layers, losses, ...) are not supported by hpcnn")
    kind = keras_files.file_kind(path, "load_model")
    try:
        if kind == "zip":
            return _load_archive(path, compile)
        if kind == "hdf5":
            return _load_hdf5(path, compile)
        raise ValueError(f"load_model: '{path}' is not an hpcnn model file: neither HDF5 (.h5) nor a Keras archive "
                         "(.keras)")
    except (_Damaged, keras_files.FileProblem) as e:
        raise ValueError(f"load_model: '{path}' is damaged: {e}") from None
    except keras_config.KerasConfigError as e:
        raise ValueError(f"load_model: '{path}': {e}") from None
    except NotImplementedError as e:  # a graph hpcnn cannot build yet (several inputs, a shared layer)
        raise NotImplementedError(f"load_model: '{path}': {e}") from None


# ---------------------------------------------------------------------- weights files
def save_weights(model: "Model", filepath: Any, overwrite: bool = True,
                 max_shard_size: Optional[float] = None) -> None:
    """``Sequential.save_weights``: ``*.weights.h5`` in Keras 3's layout (what Keras 3's
    ``load_weights`` reads), any other name in the legacy Keras HDF5 weights layout (tf.keras 2's
    ``save_weights('x.h5')``, which Keras 2 and 3 read). Written atomically. Only the chief writes
    under a multi-process strategy."""
    if not distribute.writes_files(model):
        return
    path = check_target(filepath, overwrite, "save_weights")
    if max_shard_size is not None:
        raise NotImplementedError("save_weights: max_shard_size (sharded weights files) is not supported by hpcnn")
    if path.endswith(".keras"):
        raise ValueError(f"save_weights: '{path}' names a .keras archive, which holds a whole model: use "
                         "model.save() for it, or a name ending in '.weights.h5'")
    model.build()
    try:
        if path.endswith(".weights.h5"):
            items = keras_files.keras3_weight_items(model)
        else:
            items = keras_files.legacy_weight_items(model, "")
        _core.data.write_h5_tree(path, items, "save_weights")
    except ValueError as e:
        raise _rename_error(e, "save_weights") from None


def load_weights(model: "Model", filepath: Any, skip_mismatch: bool = False, by_name: bool = False) -> None:
    """``Sequential.load_weights``: from a Keras 3 weights file (``.weights.h5``), a legacy Keras
    HDF5 weights or model file (``.h5``: by the order of the layers that hold weights, or with
    ``by_name=True`` by layer name), a ``.keras`` archive, or an hpcnn model file; told apart by
    content. Every array is checked before anything is set (present, the model's shape, floats,
    finite): a file that does not fit is a ValueError naming the layer, and the model keeps its
    weights. ``skip_mismatch=True`` keeps the current weights of the layers that do not fit, with
    a warning for each, as Keras does."""
    path = file_path(filepath, "load_weights")
    skip_mismatch = validation.boolean(skip_mismatch, "skip_mismatch", "load_weights")
    by_name = validation.boolean(by_name, "by_name", "load_weights")
    kind = keras_files.file_kind(path, "load_weights")
    model.build()
    try:
        if kind == "zip":
            if by_name:
                raise ValueError("load_weights: `by_name` only supports loading legacy '.h5' or '.hdf5' files")
            with keras_files.Archive(path) as archive, archive.weights(path) as tree:
                weights = keras_files.read_keras3_weights(tree, model, skip_mismatch)
        elif kind == "hdf5":
            try:
                tree = keras_files.H5Tree.open(path)
            except ValueError as e:
                raise ValueError(f"load_weights: {e}") from None
            with tree:
                if keras_files.legacy_weights_root(tree) is not None:
                    weights = keras_files.read_legacy_weights(tree, model, by_name, skip_mismatch)
                elif tree.is_group("/layers") or tree.is_group("/_layer_checkpoint_dependencies"):
                    if by_name:
                        raise ValueError("load_weights: `by_name` only supports loading legacy '.h5' or '.hdf5' files")
                    weights = keras_files.read_keras3_weights(tree, model, skip_mismatch)
                elif "/" + META_DATASET in tree.objects:  # an hpcnn model file of format_version 1 or 2
                    _read_meta(tree, path)
                    weights = _read_weights(path, model)
                elif "/" + WEIGHTS_META_DATASET in tree.objects:  # an hpcnn weights file before Keras' layouts
                    read_description(path, WEIGHTS_META_DATASET, WEIGHTS_FORMAT, WEIGHTS_FORMAT_VERSION,
                                     "load_weights", "weights")
                    weights = _read_weights(path, model)
                else:
                    raise ValueError(f"load_weights: '{path}' holds no weights hpcnn recognizes (neither Keras' "
                                     "layouts nor an hpcnn model or weights file)")
        else:
            raise ValueError(f"load_weights: '{path}' is neither an hpcnn weights file nor a Keras weights or model "
                             "file (HDF5 '.h5', or a '.keras' archive)")
    except keras_files.Mismatch as e:
        raise ValueError(f"load_weights: '{path}' does not fit this model: {e}") from None
    except (_Damaged, keras_files.FileProblem) as e:
        raise ValueError(f"load_weights: '{path}' is damaged: {e}") from None
    model.set_weights(weights)
