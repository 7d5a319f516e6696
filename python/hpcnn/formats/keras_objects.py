"""Keras' serialized objects: the version whose shapes hpcnn writes, the wrapping of an object
(``{'class_name', 'config'}``, plus ``module`` and ``registered_name`` in Keras 3) and its removal,
dtype policies, and Keras' snake_case names."""
from __future__ import annotations

import re
from typing import Any, Dict

#: The Keras version whose shapes this module writes (and that the tests compare against).
KERAS_VERSION = "3.15.1"


def policy(legacy: bool) -> Any:
    if legacy:
        return "float32"
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": None}


def wrap(kind: str, class_name: str, config: Dict[str, Any], legacy: bool) -> Dict[str, Any]:
    """Keras' serialized object: {'class_name', 'config'} (+ module and registered_name for Keras 3)."""
    if legacy:
        return {"class_name": class_name, "config": config}
    return {"module": kind, "class_name": class_name, "config": config, "registered_name": None}


def snake_case(name: str) -> str:
    """Keras' naming.to_snake_case (how Keras 3 names a layer's group in a weights file)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def plain(value: Any) -> Any:
    """A serialized Keras object without Keras 3's wrapping keys."""
    if isinstance(value, dict) and "class_name" in value:
        return {"class_name": value["class_name"], "config": value.get("config", {})}
    return value
