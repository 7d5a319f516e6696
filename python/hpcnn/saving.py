"""Saving and loading whole models: ``Model.save`` / ``Sequential.save`` and ``load_model``.

The file is HDF5: one dataset ``hpcnn_model_json`` (UTF-8 JSON bytes: format, version, the model's
class ("Sequential", or "Functional" for ``hpcnn.Model``; files without it are Sequential), its
config, seed, weight names and compile settings) and one dataset per weight array,
``weight_000``, ``weight_001``, ... in ``get_weights()`` order (Keras layouts).
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, List

import numpy as np

from . import _core, data, losses, optimizers, validation

if TYPE_CHECKING:  # models.py imports this module; load_model imports the model classes when called
    from .models import Model

FORMAT = "hpcnn-model"
FORMAT_VERSION = 1
META_DATASET = "hpcnn_model_json"


def weight_dataset(i: int) -> str:
    """The HDF5 dataset that holds the i-th array of get_weights()."""
    return f"weight_{i:03d}"


def save_model(model: "Model", filepath: str, overwrite: bool = True) -> None:
    """``Model.save``: architecture, weights and compile settings, written atomically by
    ``data.write_hdf5`` (a temporary file renamed into place). The optimizer's moments are not saved.

    The target must be a new name or an existing writable regular file: a symbolic link (never
    followed or replaced), a directory, a FIFO or device, or a read-only file is refused with a
    ValueError and left untouched. A temporary file left by a killed earlier save to the same name
    is removed."""
    path = os.fspath(filepath)
    if not isinstance(path, str):
        raise ValueError(f"save: the file path must be a string, got {filepath!r}")
    overwrite = validation.boolean(overwrite, "overwrite", "save")
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(f"save: '{path}' exists and overwrite=False")
    weights = model.get_weights()
    from .models import Sequential
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "hpcnn_version": _core.build_info()["version"],
            "class_name": "Sequential" if isinstance(model, Sequential) else "Functional",
            "config": model.get_config(), "seed": model._seed, "weight_names": model._weight_names(),
            "compile": None}
    if model._compiled is not None and model.optimizer is not None:
        meta["compile"] = {"optimizer": type(model.optimizer).__name__, "optimizer_config": model.optimizer.get_config(),
                           "loss": model._compiled["loss"], "from_logits": model._compiled.get("from_logits", False),
                           "metrics": ["accuracy"] if model._compiled["accuracy"] else []}
        if model.optimizer._exclude_names:  # not in Keras' optimizer config: kept beside it
            meta["compile"]["exclude_from_weight_decay"] = list(model.optimizer._exclude_names)
    arrays: Dict[str, np.ndarray] = {
        META_DATASET: np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)}
    for i, w in enumerate(weights):
        arrays[weight_dataset(i)] = w
    try:
        data.write_hdf5(path, arrays, compression="gzip", level=1)
    except ValueError as e:
        raise ValueError(str(e).replace("write_hdf5: ", "save: ", 1)) from None


class _Damaged(ValueError):
    """A problem with the file's contents; load_model adds the file name."""


def _read_meta(path: str) -> Dict[str, Any]:
    try:
        raw = data.read_dataset(path, META_DATASET)
    except ValueError as e:
        raise ValueError(f"load_model: '{path}' is not an hpcnn model file ({e})") from None
    raw = np.asarray(raw)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise _Damaged(f"its model description '{META_DATASET}' is {raw.dtype} {raw.shape}, not UTF-8 bytes")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _Damaged(f"its model description is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _Damaged(f"its model description is not an '{FORMAT}' description")
    version = meta.get("format_version")
    if not (isinstance(version, int) and 1 <= version <= FORMAT_VERSION):
        raise _Damaged(f"format_version {version!r} is not one this hpcnn reads (1..{FORMAT_VERSION}): "
                       "written by a newer hpcnn?")
    for key, kind in (("config", dict), ("compile", (dict, type(None)))):
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
    """A model saved by ``save`` (a ``Sequential`` or a functional ``Model``): same layers and weights, compiled as it was (with a
    fresh optimizer state) unless ``compile=False``. The model is on the CPU.

    A damaged or foreign file is a ValueError that names the file and what is wrong: malformed
    JSON, an unknown layer class or optimizer, missing or extra weight arrays, weights of the
    wrong shape or dtype. Weights holding NaN or inf are refused (the message names the layer)."""
    from .models import Model, Sequential
    path = os.fspath(filepath)
    if not isinstance(path, str):
        raise ValueError(f"load_model: the file path must be a string, got {filepath!r}")
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
        comp = meta.get("compile")
        if compile and comp:
            try:
                _compile_from(model, comp)
            except _Damaged:
                raise
            except (ValueError, TypeError) as e:
                raise _Damaged(f"its compile settings are not valid ({e})") from None
    except _Damaged as e:
        raise ValueError(f"load_model: '{path}' is damaged: {e}") from None
    return model
