"""How each module of hpcnn.keras answers for a name: hpcnn's object when hpcnn has it, a
NotImplementedError naming the nearest hpcnn alternative when Keras has the name and hpcnn does
not, and Python's usual AttributeError for a name Keras does not have either (a typo).

Names are looked up when used, in the ``__all__`` of hpcnn's own modules, so what the rest of hpcnn
gains (a new layer, the functional API's ``Model``) appears here without an edit.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Dict, List, Sequence

from ._keras_names import KERAS_VERSION, NAMES

DOCS = "docs/keras.md lists what hpcnn supports"


def _source_names(source: str) -> Dict[str, Any]:
    try:
        module = importlib.import_module(source)
    except ModuleNotFoundError as e:  # an hpcnn module another part of hpcnn has not added yet
        if e.name != source:
            raise
        return {}
    return {name: getattr(module, name) for name in getattr(module, "__all__", ())}


def message(keras_module: str, name: str, advice: str = "") -> str:
    where = f"keras.{keras_module}.{name}" if keras_module else f"keras.{name}"
    return f"{where} is not available in hpcnn" + (f": {advice}" if advice else "") + f" ({DOCS})"


def placeholder(keras_module: str, name: str, advice: str) -> Any:
    """A stand-in for a Keras class or function hpcnn lacks, for names that scripts import without
    using (the tutorial's ``from keras.layers.merge import Concatenate``): importing it works,
    calling or instantiating it raises NotImplementedError naming it and the alternative."""
    text = message(keras_module, name, advice)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(text)

    return type(name, (), {"__init__": __init__, "__doc__": text, "__module__": f"hpcnn.keras.{keras_module}",
                           "_hpcnn_not_implemented": text})


def install(module_name: str, keras_module: str, sources: Sequence[str] = (), advice: Dict[str, str] = {},
            default_advice: str = "", exclude: Sequence[str] = (), keras_only: bool = False,
            placeholders: Sequence[str] = ()) -> None:
    """Gives module `module_name` (hpcnn.keras.<keras_module>) Keras' names: its own attributes
    first, then the public names of `sources` (hpcnn modules, looked up at each use), then
    NotImplementedError for Keras' other names (`advice` says what to use instead). With
    `keras_only`, only Keras' own names of that module are taken from the sources. Names in
    `placeholders` that the sources lack import as placeholder() stand-ins instead."""
    module = sys.modules[module_name]
    keras_names = set(NAMES.get(keras_module, ())) | set(advice)
    excluded = set(exclude)
    stand_ins: Dict[str, Any] = {}

    def lookup(name: str) -> Any:
        for source in sources:
            names = _source_names(source)
            if name in names and name not in excluded and (not keras_only or name in keras_names):
                return names[name]
        raise KeyError(name)

    def __getattr__(name: str) -> Any:
        if not name.startswith("__"):
            try:
                return lookup(name)
            except KeyError:
                pass
            if name in placeholders:
                if name not in stand_ins:
                    stand_ins[name] = placeholder(keras_module, name, advice.get(name, default_advice))
                return stand_ins[name]
            if name in keras_names:
                raise NotImplementedError(message(keras_module, name, advice.get(name, default_advice)))
        raise AttributeError(f"module '{module_name}' has no attribute '{name}'")

    def __dir__() -> List[str]:
        names = {n for n, v in vars(module).items() if not n.startswith("_") and n != "annotations"}
        for source in sources:
            names |= {n for n in _source_names(source) if n not in excluded and (not keras_only or n in keras_names)}
        return sorted(names)

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]
    module.__dir__ = __dir__  # type: ignore[attr-defined]


def available(module: Any, keras_module: str) -> List[str]:
    """The Keras names of `keras_module` that `module` answers with an object (for tests and docs)."""
    out = []
    for name in NAMES.get(keras_module, ()):
        try:
            value = getattr(module, name)
        except NotImplementedError:
            continue
        if not hasattr(value, "_hpcnn_not_implemented"):
            out.append(name)
    return out


__all__ = ["install", "message", "placeholder", "available", "KERAS_VERSION", "NAMES"]
