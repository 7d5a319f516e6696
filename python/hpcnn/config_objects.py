"""What the small values Keras describes by a config share (learning-rate schedules in
``optimizers/schedules.py``, weight regularizers in ``regularizers.py``): equality and hashing
by class and config, ``from_config``, and Keras' serialized shape ``{'class_name', 'config'}``
with its checked inverse."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Type, TypeVar

T = TypeVar("T", bound="ConfigObject")


class ConfigObject:
    """A value defined by its class and ``get_config()``; ``cls.from_config(config)`` rebuilds it."""

    def get_config(self) -> Dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_config(cls: Type[T], config: Dict[str, Any]) -> T:
        return cls(**config)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.get_config() == self.get_config()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))


def serialize(obj: ConfigObject) -> Dict[str, Any]:
    """``{'class_name': ..., 'config': {...}}``, Keras' serialized shape."""
    return {"class_name": type(obj).__name__, "config": obj.get_config()}


def deserialize(config: Any, registry: Mapping[str, Type[ConfigObject]], what: str, known: str) -> Any:
    """The object ``serialize`` described, built by the class ``registry`` has under its
    ``class_name``; ValueError naming `what` (e.g. 'regularizer') for anything else (`known`: the
    names hpcnn has, for the message)."""
    if not isinstance(config, dict) or not isinstance(config.get("config", {}), dict):
        raise ValueError(f"a {what} config is a dict with 'class_name' and 'config', got {config!r:.200}")
    name = config.get("class_name")
    if not isinstance(name, str) or name not in registry:
        raise ValueError(f"unknown {what} {name!r:.100}: hpcnn has {known}")
    try:
        return registry[name].from_config(dict(config.get("config", {})))
    except TypeError as e:  # an argument the class does not take
        raise ValueError(f"{name}: {e}") from None
