"""A functional model from its config: Keras 3's (inbound nodes as ``{"args": [...], "kwargs":
{}}`` with ``__keras_tensor__`` records) or Keras 2's (``[[name, 0, 0, {}], ...]``), each layer
called on the tensors of the layers it reads, in any order the config lists them."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .. import validation
from ..layers import KerasTensor, Layer, deserialize
from .nesting import nested_from_config


def inbound_names(entry: Dict[str, Any], name: str) -> List[str]:
    """The names of the layers an entry of a functional config reads: Keras 3's
    ``[{"args": [tensor or [tensors]], "kwargs": {}}]`` or Keras 2's ``[[[name, 0, 0, {}], ...]]``."""
    nodes = entry.get("inbound_nodes", [])
    if not isinstance(nodes, list):
        raise ValueError(f"layer '{name}': inbound_nodes must be a list, got {nodes!r:.200}")
    if len(nodes) > 1:
        raise NotImplementedError(f"layer '{name}' is used at {len(nodes)} positions of the graph: hpcnn does not share "
                                  "a layer between positions")
    if not nodes:
        return []
    node = nodes[0]
    if isinstance(node, dict):  # Keras 3
        kwargs = node.get("kwargs", {})
        # Keras 3 records a layer's `training` default (Dropout's False) in every node; the call of
        # the outer model overrides it, so it changes nothing. A nested model's training=False is
        # kept (its layers in inference mode: call_training below).
        allowed = (lambda k, v: v is None or (k == "training" and isinstance(v, bool)))
        if not isinstance(kwargs, dict) or any(not allowed(k, v) for k, v in kwargs.items() if k in ("training", "mask")) \
                or set(kwargs) - {"training", "mask"}:
            raise ValueError(f"layer '{name}': call arguments {kwargs!r:.200} are not supported")
        args = node.get("args", [])
        if not isinstance(args, list) or len(args) != 1:
            raise ValueError(f"layer '{name}': an inbound node has one argument (a tensor or a list), got {args!r:.200}")
        arg = args[0]
        tensors = arg if isinstance(arg, list) else [arg]
        names = []
        for t in tensors:
            tcfg = t.get("config") if isinstance(t, dict) else None
            hist = tcfg.get("keras_history") if isinstance(tcfg, dict) else None
            if not (isinstance(hist, list) and hist and isinstance(hist[0], str)):
                raise ValueError(f"layer '{name}': an inbound tensor has no keras_history: {t!r:.200}")
            if hist[1:3] not in ([0, 0], []):
                raise NotImplementedError(f"layer '{name}' reads node {hist[1:3]} of '{hist[0]}': hpcnn layers have one "
                                          "node and one output")
            names.append(hist[0])
        return names
    if isinstance(node, list):  # Keras 2
        names = []
        for t in node:
            if not (isinstance(t, list) and t and isinstance(t[0], str)):
                raise ValueError(f"layer '{name}': an inbound tensor must be [name, node, index, kwargs], got {t!r:.200}")
            names.append(t[0])
        return names
    raise ValueError(f"layer '{name}': an inbound node must be a dict or a list, got {node!r:.200}")


def call_training(config: Dict[str, Any], name: str) -> Any:
    """The ``training`` argument a nested model's call has in a Keras 3 config (None: not given)."""
    for entry in config["layers"]:
        if entry.get("name") == name:
            nodes = entry.get("inbound_nodes") or []
            if nodes and isinstance(nodes[0], dict):
                return (nodes[0].get("kwargs") or {}).get("training")
            if nodes and isinstance(nodes[0], list) and nodes[0] and isinstance(nodes[0][0], list) \
                    and len(nodes[0][0]) > 3 and isinstance(nodes[0][0][3], dict):  # Keras 2: [name, 0, 0, kwargs]
                return nodes[0][0][3].get("training")
    return None


def functional_from_config(cls: type, config: Any) -> Any:
    if not isinstance(config, dict) or not isinstance(config.get("layers"), list):
        raise ValueError(f"a functional model's config is a dict with a 'layers' list, got {config!r:.200}")
    for key in ("input_layers", "output_layers"):
        if not isinstance(config.get(key), list) or not config[key]:
            raise ValueError(f"a functional model's config needs '{key}' (a Sequential's config goes to "
                             "Sequential.from_config)")
    entries: List[Tuple[str, Layer, List[str]]] = []
    seen = set()
    for entry in config["layers"]:
        if not isinstance(entry, dict):
            raise ValueError(f"a layer entry must be a dict, got {entry!r:.200}")
        layer = nested_from_config(entry) if entry.get("class_name") in ("Functional", "Sequential", "Model") \
            else deserialize(entry)
        name = entry.get("name", layer.name)
        if not isinstance(name, str) or not name:
            raise ValueError(f"a layer entry needs a name, got {name!r:.100}")
        if name in seen:
            raise ValueError(f'The name "{name}" is used 2 times in the model. All layer names should be unique.')
        seen.add(name)
        layer.name = name
        entries.append((name, layer, inbound_names(entry, name)))
    tensors: Dict[str, KerasTensor] = {}
    for name, layer, inbound in entries:
        if layer.is_input:
            tensors[name] = layer.output
    pending = [e for e in entries if not e[1].is_input]
    while pending:  # any order the config lists them in: each layer once its inputs exist
        ready = [e for e in pending if all(n in tensors for n in e[2])]
        if not ready:
            name, _, inbound = pending[0]
            missing = [n for n in inbound if n not in tensors]
            raise ValueError(f"layer '{name}' reads {missing}, which no layer of the config provides"
                             if missing or not inbound else f"layer '{name}' has no inbound node")
        for name, layer, inbound in ready:
            if not inbound:
                raise ValueError(f"layer '{name}' has no inbound node")
            args = [tensors[n] for n in inbound]
            if not getattr(layer, "merges_inputs", False) and len(args) != 1:
                raise ValueError(f"layer '{name}' ({type(layer).__name__}) takes one input; the config gives {len(args)}")
            if hasattr(layer, "graph_nodes"):  # a nested model, called as the config says
                tensors[name] = layer(args[0], training=call_training(config, name))
            else:
                tensors[name] = layer(args) if layer.merges_inputs else layer(args[0])
        pending = [e for e in pending if e not in ready]

    def endpoint(key: str) -> KerasTensor:
        spec = config[key]
        if len(spec) != 1:
            raise NotImplementedError(f"hpcnn models have one input and one output for now; '{key}' lists {len(spec)}")
        ref = spec[0]
        name = ref[0] if isinstance(ref, list) and ref else ref
        if not isinstance(name, str) or name not in tensors:
            raise ValueError(f"'{key}' names {name!r:.100}, which is not a layer of the config")
        return tensors[name]

    return cls(inputs=endpoint("input_layers"), outputs=endpoint("output_layers"), name=config.get("name"),
               trainable=validation.boolean(config.get("trainable", True), "trainable", "Model"))
