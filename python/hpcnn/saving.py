"""Models from files, the one place that builds a model from what a file says: ``load_model``
(hpcnn's files and Keras' ``.keras`` archives and legacy ``.h5`` model files) and
``model_from_json``. Writing a model, and weights both ways, is hpcnn.formats' (model_files.py);
the layouts are described there.

hpcnn reads its own description when a file has one (exactly what it saved, so that ``fit`` after
``load_model`` continues exactly where the saved model was), and otherwise builds the model from
Keras' config (with a fresh optimizer state). ``load_model`` tells the formats apart by content, not
by name. Files of earlier hpcnn versions still load: format_version 1 (``hpcnn_model_json`` and one
dataset per weight array, ``weight_000``, ... in ``get_weights()`` order; a fresh optimizer state)
and format_version 2 (the same plus the optimizer state and the step counter).
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import numpy as np

from . import validation
from .errors import FileProblem, UnsupportedConfig, reported_as_value_errors
from .formats.compile_config import compile_from_description, compile_or_warn
from .formats.config_json import read_config_json
from .formats.h5tree import H5Tree, file_kind
from .formats.hpcnn_files import (META_DATASET, WEIGHTS_IN_KERAS_LAYOUT, check_meta, file_path, read_meta,
                                  read_optimizer_buffers, read_weights, restore_optimizer_state, restore_rng_state)
from .formats.keras_archive import ARCHIVE_CONFIG, ARCHIVE_HPCNN, ARCHIVE_STATE, Archive
from .formats.keras_config import hpcnn_config_from_keras
from .formats.keras_weights import legacy_weights_root, read_keras3_weights, read_legacy_weights
from .models import Model, Sequential

# The classes a file may name (an explicit table: a name from a file is never looked up otherwise).
MODEL_CLASSES = {"Sequential": Sequential, "Functional": Model}


def model_from_keras(config: Any, weights_follow: bool, where: str) -> Model:
    """An hpcnn model (not built) from a Keras model config of either shape (``weights_follow``:
    weights are loaded next). UnsupportedConfig naming `where` for anything hpcnn cannot build."""
    class_name, cfg = hpcnn_config_from_keras(config, weights_follow, where)
    try:
        return MODEL_CLASSES[class_name].from_config(cfg)
    except ValueError as e:
        raise UnsupportedConfig(f"{where}: {e}") from None


def _built(model: Model, where: str, path: str) -> Model:
    """The model built (its weights allocated), a config whose layers do not fit together (a Dense
    on images) refused naming `where`; a model too large for memory a MemoryError naming the file."""
    try:
        model.build()
    except MemoryError as e:
        raise MemoryError(f"load_model: '{path}': the model it describes does not fit in memory ({e})") from None
    except ValueError as e:
        raise UnsupportedConfig(f"{where}: the model it describes cannot be built ({e})") from None
    return model


def _model_from_meta(meta: Dict[str, Any], path: str) -> Model:
    class_name = meta.get("class_name", "Sequential")  # files of hpcnn before graphs: Sequential
    if not isinstance(class_name, str) or class_name not in MODEL_CLASSES:
        raise FileProblem(f"its model class {class_name!r:.100} is not one hpcnn has ({sorted(MODEL_CLASSES)})")
    try:
        model = MODEL_CLASSES[class_name].from_config(meta["config"])
        seed = meta.get("seed")
        model.seed = seed
        model.build()
    except MemoryError as e:
        raise MemoryError(f"load_model: '{path}': the model it describes does not fit in memory ({e})") from None
    except (ValueError, NotImplementedError, TypeError) as e:
        raise FileProblem(f"its model description is not valid ({e})") from None
    return model


def _restore_hpcnn_state(model: Any, meta: Dict[str, Any], compile: bool,
                         read_buffers: Any) -> None:
    """After the weights: the random state (format_version >= 2), then, with `compile`, the compile
    settings and the optimizer state (`read_buffers(desc)` reads its buffers from the file)."""
    if meta.get("rng") is not None:  # the step counter that keys dropout
        restore_rng_state(model, meta["rng"])
    if not compile:
        return
    comp = meta.get("compile")
    compile_from_description(model, comp)
    desc = meta.get("optimizer_state")
    if comp and desc is not None:  # (no buffers before the first step: nothing to read)
        restore_optimizer_state(model, desc, read_buffers(desc) if desc.get("buffers") != [] else [])


def _compile_keras(model: Any, config: Any, path: str) -> None:
    compile_or_warn(model, config, f"load_model: '{path}'")


def _keras_json_attr(tree: "H5Tree", name: str) -> Any:
    text = tree.text("/", name)
    if text is None:
        return None
    return read_config_json(text, f"its '{name}' attribute")


def _load_hdf5(path: str, compile: bool) -> Any:
    try:
        tree = H5Tree.open(path)
    except ValueError as e:
        raise ValueError(f"load_model: {e}") from None
    with tree:
        if "/" + META_DATASET in tree.objects:  # written by hpcnn: its own description
            meta = read_meta(tree, "load_model")
            model = _model_from_meta(meta, path)
            if meta.get("weights") == WEIGHTS_IN_KERAS_LAYOUT:
                model.set_weights(read_legacy_weights(tree, model))
            else:
                model.set_weights(read_weights(tree, model))  # format_version 1 and 2: weight_000, ...
            _restore_hpcnn_state(model, meta, compile, lambda desc: read_optimizer_buffers(tree, model, desc))
            return model
        config = _keras_json_attr(tree, "model_config")
        if config is None:
            if legacy_weights_root(tree) is not None or tree.is_group("/layers"):
                raise ValueError(f"load_model: '{path}' is not an hpcnn model file: it holds weights only (a "
                                 "save_weights file), not a model: build the model and call model.load_weights()")
            raise ValueError(f"load_model: '{path}' is not an hpcnn model file, nor a Keras HDF5 model file (it has "
                             "no 'model_config' attribute)")
        model = _built(model_from_keras(config, weights_follow=True, where="its model_config"), "its model_config", path)
        model.set_weights(read_legacy_weights(tree, model))
        if compile:
            _compile_keras(model, _keras_json_attr(tree, "training_config"), path)
        return model


def _load_archive(path: str, compile: bool) -> Any:
    with Archive(path) as archive:
        meta_raw = archive.json(ARCHIVE_HPCNN)
        config = archive.json(ARCHIVE_CONFIG)
        if meta_raw is None and config is None:
            raise FileProblem("it has no 'config.json': not a Keras model archive")
        if meta_raw is not None:  # written by hpcnn
            with archive.weights(path) as tree:
                meta = check_meta(json.dumps(meta_raw).encode("utf-8"))
                model = _model_from_meta(meta, path)
                model.set_weights(read_keras3_weights(tree, model))

                def buffers(desc: Dict[str, Any]) -> List[np.ndarray]:
                    with archive.tree(ARCHIVE_STATE, path) as state:
                        return read_optimizer_buffers(state, model, desc)

                _restore_hpcnn_state(model, meta, compile, buffers)
                return model
        # Written by Keras: the model from its config first (a class hpcnn lacks is named before the
        # weights are read), then its weights.
        model = _built(model_from_keras(config, weights_follow=True, where="its config.json"), "its config.json", path)
        with archive.weights(path) as tree:
            model.set_weights(read_keras3_weights(tree, model))
    if compile and isinstance(config, dict):
        _compile_keras(model, config.get("compile_config"), path)
    return model


def load_model(filepath: Any, compile: bool = True, custom_objects: Optional[Dict[str, Any]] = None,
               safe_mode: bool = True) -> Any:
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
    message names the layer). ``custom_objects`` (custom layers) are not supported; ``safe_mode`` has nothing to guard:
    hpcnn never imports, evaluates or unpickles anything a file names (Lambda layers and custom
    objects are refused by name), and what it reads is bounded by formats/file_limits.py."""
    path = file_path(filepath, "load_model")
    compile = validation.boolean(compile, "compile", "load_model")
    validation.boolean(safe_mode, "safe_mode", "load_model")
    if custom_objects:
        raise NotImplementedError("load_model: custom_objects (custom layers, losses, ...) are not supported by hpcnn")
    kind = file_kind(path, "load_model")
    try:
        with reported_as_value_errors("load_model", path, mismatch="is damaged"):
            if kind == "zip":
                return _load_archive(path, compile)
            if kind == "hdf5":
                return _load_hdf5(path, compile)
        raise ValueError(f"load_model: '{path}' is not an hpcnn model file: neither HDF5 (.h5) nor a Keras archive "
                         "(.keras)")
    except NotImplementedError as e:  # a graph hpcnn cannot build yet (several inputs, a shared layer)
        raise NotImplementedError(f"load_model: '{path}': {e}") from None


def model_from_json(json_string: str, custom_objects: Optional[Dict[str, Any]] = None) -> Model:
    """A new model (fresh weights) from ``to_json()`` text, Keras 3's or Keras 2's
    ``model.to_json()``, or hpcnn's own ``get_config()`` as JSON. Compiled when the JSON holds
    compile settings hpcnn has (Keras 3 writes them when the model was compiled)."""
    if custom_objects:
        raise NotImplementedError("model_from_json: custom_objects (custom layers) are not supported by hpcnn")
    if not isinstance(json_string, (str, bytes)):
        raise ValueError(f"model_from_json: expected a JSON string, got {type(json_string).__name__}")
    try:
        config = read_config_json(json_string, "the JSON text")
        if isinstance(config, dict) and "class_name" not in config and isinstance(config.get("layers"), list):
            cls = Model if "input_layers" in config else Sequential
            try:
                return cls.from_config(config)  # hpcnn's own get_config()
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:  # a malformed hpcnn config
                raise FileProblem(f"the JSON text is not a valid hpcnn model config ({type(e).__name__}: "
                                  f"{str(e)[:300]})") from None
        model = model_from_keras(config, weights_follow=False, where="model_from_json")
    except FileProblem as e:
        message = str(e)
        raise ValueError(message if message.startswith("model_from_json") else f"model_from_json: {message}") from None
    except NotImplementedError as e:  # a graph hpcnn cannot build yet (several inputs, a shared layer)
        message = str(e)
        raise NotImplementedError(message if message.startswith("model_from_json") else
                                  f"model_from_json: {message}") from None
    if isinstance(config, dict) and config.get("compile_config") is not None:
        compile_or_warn(model, config["compile_config"], "model_from_json")
    return model


__all__ = ["load_model", "model_from_json", "model_from_keras"]
