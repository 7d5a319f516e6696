"""Saving and loading models and weights: ``Sequential.save`` / ``load_model`` and
``Sequential.save_weights`` / ``load_weights``, in Keras' file formats (keras_files.py holds the
layouts; keras_config.py the configs).

``save(path)`` writes, by the name's ending:

- ``.keras``: a Keras 3 archive (config.json, metadata.json, model.weights.h5) that
  ``keras.models.load_model`` opens, plus ``hpcnn.json``, hpcnn's own description;
- anything else (``.h5``, ``.hdf5``, ...): a legacy Keras HDF5 model file (the ``model_config`` and
  ``training_config`` attributes, the weights under ``model_weights``: what ``tf.keras`` 2 wrote and
  what Keras 2 and 3 open) plus one dataset Keras does not read, ``hpcnn_model_json`` (UTF-8 JSON
  bytes: format, version, hpcnn's config, seed, weight names and compile settings).

hpcnn reads its own description when a file has one (exactly what it saved), and otherwise
builds the model from Keras' config. Files of hpcnn before the Keras layout (format_version 1:
``hpcnn_model_json`` with one dataset per weight array, ``weight_000``, ... in ``get_weights()``
order) still load. ``load_model`` tells the formats apart by content, not by name.

``save_weights(path)``: ``*.weights.h5`` in Keras 3's layout, any other name in the legacy
Keras HDF5 weights layout (tf.keras 2's ``save_weights('x.h5')``). ``load_weights`` reads both,
``.keras`` archives, and hpcnn's model files.
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import numpy as np

from . import _core, data, keras_config, keras_files, losses, optimizers, validation

if TYPE_CHECKING:  # models.py imports this module; load_model imports Sequential when called
    from .models import Sequential

FORMAT = "hpcnn-model"
FORMAT_VERSION = 2  # 2: the weights in Keras' layout beside Keras' config; 1 (weight_000, ...) still loads
META_DATASET = "hpcnn_model_json"
WEIGHTS_IN_KERAS_LAYOUT = "keras"  # meta["weights"]: the weights are in Keras' layout, not weight_000, ...
MAX_META_BYTES = 64 << 20


def weight_dataset(i: int) -> str:
    """The HDF5 dataset that holds the i-th array of get_weights() (format_version 1 files)."""
    return f"weight_{i:03d}"


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


def compile_description(model: "Sequential") -> Optional[Dict[str, Any]]:
    """The compile settings as hpcnn's description holds them (None when the model is not compiled)."""
    if model._compiled is None or model.optimizer is None:
        return None
    comp = {"optimizer": type(model.optimizer).__name__, "optimizer_config": model.optimizer.get_config(),
            "loss": model._compiled["loss"], "from_logits": model._compiled.get("from_logits", False),
            "metrics": ["accuracy"] if model._compiled["accuracy"] else []}
    if model.optimizer._exclude_names:  # not in Keras' optimizer config: kept beside it
        comp["exclude_from_weight_decay"] = list(model.optimizer._exclude_names)
    return comp


def description(model: "Sequential") -> Dict[str, Any]:
    """hpcnn's own description of a model, saved beside Keras' layout."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "hpcnn_version": _core.build_info()["version"],
            "config": model.get_config(), "seed": model._seed, "weight_names": model._weight_names(),
            "compile": compile_description(model), "weights": WEIGHTS_IN_KERAS_LAYOUT}


def _rename_error(e: ValueError, caller: str) -> ValueError:
    text = str(e)
    for prefix in ("write_hdf5: ", "write_h5_tree: "):
        text = text.replace(prefix, f"{caller}: ", 1)
    return ValueError(text)


def save_model(model: "Sequential", filepath: Any, overwrite: bool = True, save_format: Optional[str] = None) -> None:
    """``Sequential.save``: architecture, weights and compile settings in Keras' format for the
    name (``.keras``: a Keras 3 archive; anything else: a legacy Keras HDF5 model file; or
    ``save_format='h5'`` / ``'keras'``), with hpcnn's own description beside them. Written
    atomically: a temporary file renamed into place. The optimizer's moments are not saved.

    The target must be a new name or an existing writable regular file: a symbolic link (never
    followed or replaced), a directory, a FIFO or device, or a read-only file is refused with a
    ValueError and left untouched. A temporary file left by a killed earlier save to the same name
    is removed."""
    path = check_target(filepath, overwrite, "save")
    if save_format not in (None, "h5", "keras"):
        if save_format == "tf":
            raise NotImplementedError("save: save_format='tf' (TensorFlow's SavedModel) is not supported: save to a "
                                      "'.keras' or '.h5' file")
        raise ValueError(f"save: save_format must be 'h5', 'keras' or None, got {save_format!r}")
    archive = save_format == "keras" or (save_format is None and path.endswith(".keras"))
    meta = description(model)
    model.build()
    try:
        if archive:
            keras_files.write_archive(path, model, meta, "save")
            return
        root: Dict[str, Any] = {"keras_version": keras_config.KERAS_VERSION, "backend": "hpcnn"}
        try:
            root["model_config"] = json.dumps(keras_config.model_to_keras(model, legacy=True))
        except NotImplementedError:
            pass  # a model Keras' config cannot describe yet: hpcnn's description still does
        if model._compiled is not None:
            root["training_config"] = json.dumps(keras_config.compile_to_keras(model, legacy=True))
        items = [("/", None, root)] + keras_files.legacy_weight_items(model, "/model_weights")
        items.append(("/" + META_DATASET, json_bytes(meta), {}))
        _core.data.write_h5_tree(path, items, "save")
    except ValueError as e:
        raise _rename_error(e, "save") from None


def json_bytes(meta: Dict[str, Any]) -> np.ndarray:
    """A JSON description as the uint8 dataset files hold."""
    return np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)


class _Damaged(ValueError):
    """A problem with the file's contents; load_model adds the file name."""


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
    try:
        meta = json.loads(raw.decode("utf-8"))
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
    if meta.get("weights", WEIGHTS_IN_KERAS_LAYOUT if version >= 2 else None) not in (WEIGHTS_IN_KERAS_LAYOUT, None):
        raise _Damaged(f"its model description names an unknown weights layout {meta.get('weights')!r:.60}")
    return meta


def _read_weights(path: str, model: "Sequential") -> List[np.ndarray]:
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


def _compile_from(model: "Sequential", comp: Dict[str, Any]) -> None:
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


def _model_from_meta(meta: Dict[str, Any], path: str) -> "Sequential":
    from .models import Sequential
    try:
        model = Sequential.from_config(meta["config"])
        seed = meta.get("seed")
        model._seed = validation.integer(seed, "seed", minimum=0, maximum=2**64 - 1, allow_none=True)
        model.build()
    except MemoryError as e:
        raise MemoryError(f"load_model: '{path}': the model it describes does not fit in memory ({e})") from None
    except ValueError as e:
        raise _Damaged(f"its model description is not valid ({e})") from None
    return model


def _compile_hpcnn(model: "Sequential", comp: Optional[Dict[str, Any]]) -> None:
    if comp:
        try:
            _compile_from(model, comp)
        except _Damaged:
            raise
        except (ValueError, TypeError) as e:
            raise _Damaged(f"its compile settings are not valid ({e})") from None


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


def _load_hdf5(path: str, compile: bool) -> "Sequential":
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
                model.set_weights(_read_weights(path, model))  # format_version 1: weight_000, ...
            if compile:
                _compile_hpcnn(model, meta.get("compile"))
            return model
        config = _keras_json_attr(tree, "model_config")
        if config is None:
            if keras_files.legacy_weights_root(tree) is not None or tree.is_group("/layers"):
                raise ValueError(f"load_model: '{path}' holds weights only (a save_weights file), not a model: build "
                                 "the model and call model.load_weights()")
            raise ValueError(f"load_model: '{path}' is not an hpcnn model file, nor a Keras HDF5 model file (it has "
                             "no 'model_config' attribute)")
        model = keras_config.model_from_keras(config, weights_follow=True, where="its model_config")
        model.build()
        model.set_weights(keras_files.read_legacy_weights(tree, model))
        if compile:
            _compile_keras(model, _keras_json_attr(tree, "training_config"), path)
        return model


def _load_archive(path: str, compile: bool) -> "Sequential":
    with keras_files.Archive(path) as archive:
        meta_raw = archive.json(keras_files.ARCHIVE_HPCNN)
        config = archive.json(keras_files.ARCHIVE_CONFIG)
        if meta_raw is None and config is None:
            raise _Damaged("it has no 'config.json': not a Keras model archive")
        with archive.weights(path) as tree:
            if meta_raw is not None:  # written by hpcnn
                meta = _check_meta(json.dumps(meta_raw).encode("utf-8"))
                model = _model_from_meta(meta, path)
                model.set_weights(keras_files.read_keras3_weights(tree, model))
                if compile:
                    _compile_hpcnn(model, meta.get("compile"))
                return model
            model = keras_config.model_from_keras(config, weights_follow=True, where="its config.json")
            model.build()
            model.set_weights(keras_files.read_keras3_weights(tree, model))
    if compile and isinstance(config, dict):
        _compile_keras(model, config.get("compile_config"), path)
    return model


def load_model(filepath: Any, compile: bool = True, custom_objects: Optional[Dict[str, Any]] = None,
               safe_mode: bool = True) -> "Sequential":
    """A model from a file: saved by hpcnn (same layers, weights and seed, compiled as it was,
    with a fresh optimizer state), or by Keras: a ``.keras`` archive (Keras 3) or a legacy HDF5
    model file (``model.save('x.h5')`` of Keras 2 / tf.keras or Keras 3), whose layers hpcnn has.
    The format is told from the contents, not the name. ``compile=False`` skips the compile
    settings. The model is on the CPU.

    A Keras model that uses layer classes hpcnn lacks is a ValueError listing them. Keras compile
    settings hpcnn lacks (a loss or metric) leave the model uncompiled, with a warning. A damaged
    or foreign file is a ValueError that names the file and what is wrong: malformed JSON, an
    unknown layer class or optimizer, missing or extra weight arrays, weights of the wrong shape
    or type. Weights holding NaN or inf are refused (the message names the layer).
    ``custom_objects`` (custom layers) are not supported; ``safe_mode`` has nothing to guard
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


# ---------------------------------------------------------------------- weights files
def save_weights(model: "Sequential", filepath: Any, overwrite: bool = True,
                 max_shard_size: Optional[float] = None) -> None:
    """``Sequential.save_weights``: ``*.weights.h5`` in Keras 3's layout (what Keras 3's
    ``load_weights`` reads), any other name in the legacy Keras HDF5 weights layout (tf.keras 2's
    ``save_weights('x.h5')``, which Keras 2 and 3 read). Written atomically."""
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


def load_weights(model: "Sequential", filepath: Any, skip_mismatch: bool = False, by_name: bool = False) -> None:
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
                elif "/" + META_DATASET in tree.objects:  # an hpcnn model file of format_version 1
                    weights = _read_weights(path, model)
                else:
                    raise ValueError(f"load_weights: '{path}' holds no weights hpcnn recognizes (neither Keras' "
                                     "layouts nor an hpcnn model file)")
        else:
            raise ValueError(f"load_weights: '{path}' is neither an HDF5 weights file nor a Keras archive (.keras)")
    except keras_files.Mismatch as e:
        raise ValueError(f"load_weights: '{path}' does not fit this model: {e}") from None
    except (_Damaged, keras_files.FileProblem) as e:
        raise ValueError(f"load_weights: '{path}' is damaged: {e}") from None
    model.set_weights(weights)
