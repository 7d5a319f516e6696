"""The one table of public names that a package offers from a floor above it (the floors:
tests/rules/test_import_rules.py, quoted in docs/architecture.md): ``hpcnn.models.load_model`` is ``hpcnn.saving.load_model``, as in Keras, but
``models`` sits below ``saving`` (which builds models), so the name is looked up when first used
(PEP 562 ``__getattr__``) instead of imported, and no import circle forms.

A package that offers such names ends with::

    def __getattr__(name):
        return aliases.resolve(__name__, name)
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, Tuple

# package -> {public name: (module that defines it, its name there)}
ALIASES: Dict[str, Dict[str, Tuple[str, str]]] = {
    "hpcnn.models": {
        "load_model": ("hpcnn.saving", "load_model"),
        "model_from_json": ("hpcnn.saving", "model_from_json"),
        "tutorial_cnn": ("hpcnn.applications", "tutorial_cnn"),
        "deep_mnist": ("hpcnn.applications", "deep_mnist"),
    },
}


def names(package: str) -> Tuple[str, ...]:
    """The alias names `package` offers (for its ``__all__`` and ``dir()``)."""
    return tuple(ALIASES.get(package, {}))


def resolve(package: str, name: str) -> Any:
    """`package`'s public name `name` from the module that defines it; AttributeError as Python
    gives for a missing attribute otherwise."""
    target = ALIASES.get(package, {}).get(name)
    if target is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module, attribute = target
    return getattr(importlib.import_module(module), attribute)
