"""Keras' models: ``Model`` (the functional API: a graph of layers) and ``Sequential`` (a chain),
trained by the C++ core, and ``clone_model``. ``load_model``, ``model_from_json``,
``tutorial_cnn`` and ``deep_mnist`` are offered here too, as Keras offers them (from
hpcnn.saving and hpcnn.applications, looked up on first use: hpcnn.aliases)."""
from __future__ import annotations

from typing import Any, List

from .. import aliases
from .model import Model
from .multi_output import MultiOutputModel  # noqa: F401  (Model(inputs, [several outputs]) makes one)
from .sequential import Sequential


def clone_model(model: Model) -> Model:
    """A new model with the same layers (new layer objects) and fresh weights (Keras'
    clone_model); compile it again."""
    return type(model).from_config(model.get_config())


def __getattr__(name: str) -> Any:
    return aliases.resolve(__name__, name)


def __dir__() -> List[str]:
    return sorted(list(globals()) + list(aliases.names(__name__)))


__all__ = ["Model", "Sequential", "clone_model", *aliases.names(__name__)]
