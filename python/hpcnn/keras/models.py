"""``keras.models`` on hpcnn: Sequential, Model (the functional API, when hpcnn has it),
load_model (hpcnn's and Keras' files), save_model, model_from_json, clone_model."""
from __future__ import annotations

import json
from typing import Any

from ..saving import model_from_json
from ._compat import install


def save_model(model: Any, filepath: Any, overwrite: bool = True, **kwargs: Any) -> None:
    """``keras.models.save_model(model, filepath)``: the same as ``model.save(filepath)``."""
    model.save(filepath, overwrite=overwrite, **kwargs)


def model_from_config(config: Any, custom_objects: Any = None) -> Any:
    """A new model from a Keras model config (a dict: ``{'class_name': 'Sequential', 'config': ...}``)."""
    return model_from_json(json.dumps(config), custom_objects)


_ADVICE = {"model_from_yaml": "Keras removed YAML configs: use model.to_json() / model_from_json()",
          "experimental": "hpcnn has none of Keras' experimental model tools: hpcnn.keras.models has Sequential, "
                          "Model, clone_model, load_model, save_model and model_from_json"}
install(__name__, "models", sources=["hpcnn.models"], advice=_ADVICE)
