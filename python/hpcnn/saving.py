"""Saving and loading whole models: ``Sequential.save`` and ``load_model``.

The file is HDF5: one dataset ``hpcnn_model_json`` (UTF-8 JSON bytes: format, version, the model's
config, seed, weight names and compile settings) and one dataset per weight array,
``weight_000``, ``weight_001``, ... in ``get_weights()`` order (Keras layouts).
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict

import numpy as np

from . import _core, data, losses, optimizers

if TYPE_CHECKING:  # models.py imports this module; load_model imports Sequential when called
    from .models import Sequential

FORMAT = "hpcnn-model"
FORMAT_VERSION = 1
META_DATASET = "hpcnn_model_json"


def weight_dataset(i: int) -> str:
    """The HDF5 dataset that holds the i-th array of get_weights()."""
    return f"weight_{i:03d}"


def save_model(model: "Sequential", filepath: str, overwrite: bool = True) -> None:
    """``Sequential.save``: architecture, weights and compile settings, written atomically by
    ``data.write_hdf5`` (a temporary file renamed into place). The optimizer's moments are not saved."""
    path = os.fspath(filepath)
    if not overwrite and os.path.exists(path):
        raise FileExistsError(f"save: '{path}' exists and overwrite=False")
    weights = model.get_weights()
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "hpcnn_version": _core.build_info()["version"],
            "config": model.get_config(), "seed": model._seed, "weight_names": model._weight_names(),
            "compile": None}
    if model._compiled is not None and model.optimizer is not None:
        meta["compile"] = {"optimizer": type(model.optimizer).__name__, "optimizer_config": model.optimizer.get_config(),
                           "loss": model._compiled["loss"], "from_logits": model._compiled.get("from_logits", False),
                           "metrics": ["accuracy"] if model._compiled["accuracy"] else []}
    arrays: Dict[str, np.ndarray] = {
        META_DATASET: np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)}
    for i, w in enumerate(weights):
        arrays[weight_dataset(i)] = w
    data.write_hdf5(path, arrays, compression="gzip", level=1)


def load_model(filepath: str, compile: bool = True) -> "Sequential":
    """A model saved by ``Sequential.save``: same layers and weights, compiled as it was (with a
    fresh optimizer state) unless ``compile=False``. The model is on the CPU."""
    from .models import Sequential
    path = os.fspath(filepath)
    try:
        raw = data.read_dataset(path, META_DATASET)
    except ValueError as e:
        raise ValueError(f"load_model: '{path}' is not an hpcnn model file ({e})") from e
    try:
        meta = json.loads(bytes(np.asarray(raw, dtype=np.uint8)).decode("utf-8"))
        assert meta.get("format") == FORMAT
    except (ValueError, AssertionError) as e:
        raise ValueError(f"load_model: '{path}' has a damaged model description") from e
    model = Sequential.from_config(meta["config"])
    model._seed = meta.get("seed")
    n = sum(len(per_layer) for per_layer in model._model().weight_shapes)
    model.set_weights([data.read_dataset(path, weight_dataset(i)) for i in range(n)])
    comp = meta.get("compile")
    if compile and comp:
        opt_cls = getattr(optimizers, comp["optimizer"])
        loss: Any = comp["loss"]
        if comp.get("from_logits"):
            loss = (losses.CategoricalCrossentropy if loss == "categorical_crossentropy"
                    else losses.SparseCategoricalCrossentropy)(from_logits=True)
        model.compile(opt_cls(**comp["optimizer_config"]), loss, comp["metrics"], device="cpu")
    return model
