"""The weights of a model in Keras' file layouts, both ways, with every array checked before anything
is set (present, the model's shape, a float type converted to float32, finite): a mismatch names the
layer, and the model keeps its weights.

- **Keras 3 weights** (``.weights.h5``, and ``model.weights.h5`` inside a ``.keras`` archive): one
  group per layer, ``layers/<class in snake_case>[_<k>]/vars/<i>`` (Keras names a layer's group by
  its class and position, not its name: ``conv2d``, ``conv2d_1``, ...), the i-th variable of the
  layer in Keras' order (kernel, bias, ...). Keras 2.13-2.15's ``_layer_checkpoint_dependencies``
  spelling is read too.
- **Legacy Keras HDF5** (Keras 2 / tf.keras ``save('x.h5')`` and ``save_weights('x.h5')``): a
  group per layer named by the layer, listed in order by the ``layer_names`` attribute, each with
  a ``weight_names`` attribute that names its datasets; a model file keeps the layer groups under
  ``model_weights``. Layers are matched in order of the layers that hold weights (Keras'
  topological loading) or, with ``by_name=True``, by name.

A model nested as a layer (hpcnn.models' nesting) is one layer here, as in Keras: in Keras 3's
layout its group (``layers/sequential``, ``layers/functional``) holds a ``vars`` group and its own
``layers/...`` groups, recursively; in the legacy layout its group (named by the model) lists all
its weights by their paths (``base/conv2d/kernel``), the trainable ones first (Keras'
``_legacy_weights`` order).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import FileProblem, WeightsMismatch
from .h5tree import H5Tree
from .keras_objects import KERAS_VERSION, snake_case


# ---------------------------------------------------------------------- the model's weights, per layer
def is_model(layer: Any) -> bool:
    """A model nested as a layer (it has positions of its own)."""
    return hasattr(layer, "top_level_spans")


def keras_class(layer: Any) -> str:
    """The class Keras names a layer by: a nested model's is 'Sequential' or 'Functional'."""
    if is_model(layer):
        return "Sequential" if layer.is_sequential else "Functional"
    return type(layer).__name__


class LayerWeights:
    """One layer of the model with its weights in Keras' order: kinds ('kernel', 'bias', ...) and
    shapes. ``key`` names it in the model's weight names (``f"{key}/{kind}"``): its name, or its
    path in nested models ('base/conv2d'); a nested model's kinds are its weights' paths in it."""

    def __init__(self, layer: Any, kinds: List[str], shapes: List[Tuple[int, ...]], key: Optional[str] = None) -> None:
        self.layer, self.kinds, self.shapes = layer, kinds, shapes
        self.key = key if key is not None else layer.name

    @property
    def name(self) -> str:
        return self.key

    @property
    def class_name(self) -> str:
        return keras_class(self.layer)

    def label(self, i: Optional[int] = None) -> str:
        base = f"layer '{self.name}' ({self.class_name})"
        return base if i is None else f"{base} {self.kinds[i]}"


def leaf_layout(model: Any) -> List[LayerWeights]:
    """Per position of the core (a leaf layer, nested models expanded), its weights, keyed by the
    layer's path ('conv2d', 'base/conv2d')."""
    names = model.weight_names()
    out, k = [], 0
    for (layer, _), weights in zip(model.graph_nodes(), model.core.layer_weights):
        kinds = [n for n, _, _ in weights]
        key = names[k].rsplit("/", 1)[0] if kinds else layer.name
        out.append(LayerWeights(layer, kinds, [tuple(int(d) for d in shape) for _, shape, _ in weights], key))
        k += len(kinds)
    return out


def weight_layout(model: Any, legacy: bool = False) -> List[LayerWeights]:
    """The model's layers (InputLayer excluded, as Keras' model.layers), each with its weights in
    get_weights() order; a nested model as one of them with all its weights (with ``legacy``:
    the trainable ones first, Keras' legacy HDF5 order). Built from the model's weight names, so
    any layer kind fits."""
    if any(is_model(layer) for layer in model.layers):
        leaves = leaf_layout(model)
        mask = model.trainable_mask()
        trainable_kind = [[bool(t) for _, _, t in weights] for weights in model.core.layer_weights]
        out = []
        for layer, b, e in model.top_level_spans():
            if not is_model(layer):
                out.append(leaves[b])
                continue
            entries = [(f"{leaves[p].key[len(layer.name) + 1:]}/{kind}", shape, mask[p] and trainable_kind[p][j])
                       for p in range(b, e) for j, (kind, shape) in enumerate(zip(leaves[p].kinds, leaves[p].shapes))]
            if legacy:
                entries = [x for x in entries if x[2]] + [x for x in entries if not x[2]]
            out.append(LayerWeights(layer, [x[0] for x in entries], [x[1] for x in entries], layer.name))
        return out
    names = model.weight_names()
    shapes = [tuple(int(d) for d in shape) for per_layer in model.core.weight_shapes for _, shape in per_layer]
    if len(names) != len(shapes):
        raise RuntimeError(f"hpcnn: {len(names)} weight names for {len(shapes)} weight arrays")
    per: Dict[str, Tuple[List[str], List[Tuple[int, ...]]]] = {}
    for n, s in zip(names, shapes):
        lname, kind = n.rsplit("/", 1)
        per.setdefault(lname, ([], []))
        per[lname][0].append(kind)
        per[lname][1].append(s)
    out = [LayerWeights(layer, *per.pop(layer.name, ([], []))) for layer in model.layers if not layer.is_input]
    if per:
        raise RuntimeError(f"hpcnn: weights of layers that are not in model.layers: {sorted(per)}")
    return out


def keras3_groups(model: Any) -> List[Tuple[str, Any, Optional[int]]]:
    """Every group of a Keras 3 weights file, in order: (path, layer or nested model, its core
    position for a leaf layer, else None). A functional model's InputLayer has a group; a nested
    model's group holds its own layers' groups."""
    out: List[Tuple[str, Any, Optional[int]]] = []
    position = [0]

    def walk(m: Any, prefix: str) -> None:
        first = m.layers[0] if m.layers else None
        if first is not None and first.is_input and not m.is_sequential:
            out.append((f"{prefix}/layers/{snake_case('InputLayer')}", first, None))
        items = [layer for layer in m.layers if not layer.is_input]
        paths = keras3_paths([LayerWeights(layer, [], []) for layer in items])
        for layer, path in zip(items, paths):
            group = f"{prefix}/{path}"
            if is_model(layer):
                out.append((group, layer, None))
                walk(layer, group)
            else:
                out.append((group, layer, position[0]))
                position[0] += 1

    walk(model, "")
    return out


def keras3_paths(layout: Sequence[LayerWeights]) -> List[str]:
    """Each layer's group in a Keras 3 weights file: 'layers/conv2d', 'layers/conv2d_1', ..."""
    used: Dict[str, int] = {}
    out = []
    for lw in layout:
        base = snake_case(lw.class_name)
        if base in used:
            used[base] += 1
            out.append(f"layers/{base}_{used[base]}")
        else:
            used[base] = 0
            out.append(f"layers/{base}")
    return out


def _flat_weights(model: Any, layout: Sequence[LayerWeights], per_layer: Sequence[List[np.ndarray]]) -> List[np.ndarray]:
    """Per-layer arrays back in get_weights() order."""
    by_name = {f"{lw.name}/{k}": a for lw, arrays in zip(layout, per_layer) for k, a in zip(lw.kinds, arrays)}
    return [by_name[n] for n in model.weight_names()]


def _fit_or_keep(lw: LayerWeights, read: Callable[[], List[np.ndarray]], skip_mismatch: bool,
                 current: Dict[str, np.ndarray]) -> List[np.ndarray]:
    """The layer's arrays, `read()` from the file; with skip_mismatch, a layer whose weights do not
    fit keeps its `current` ones, with a warning (Keras' rule, for both of its layouts)."""
    try:
        return read()
    except WeightsMismatch as e:
        if not skip_mismatch:
            raise
        # stacklevel: the user's model.load_weights (through read_*_weights, model_files, Model)
        warnings.warn(f"load_weights: skipping {lw.label()}: {e} (skip_mismatch=True keeps its current weights)",
                      UserWarning, stacklevel=5)
        return _current(lw, current)


def _current(lw: LayerWeights, current: Dict[str, np.ndarray]) -> List[np.ndarray]:
    return [current[f"{lw.name}/{k}"] for k in lw.kinds]


# ---------------------------------------------------------------------- Keras 3 weights (.weights.h5)
def keras3_weight_items(model: Any) -> List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]]:
    """The items of a Keras 3 weights file for the model (groups per layer, vars datasets)."""
    if any(is_model(layer) for layer in model.layers):
        return _nested_keras3_items(model)
    layout = weight_layout(model)
    weights = dict(zip(model.weight_names(), model.get_weights()))
    items: List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]] = [("/vars", None, {"name": model.name})]
    first = model.layers[0] if model.layers else None
    if first is not None and first.is_input and not model.is_sequential:
        # Keras 3's functional models list their InputLayer among their layers: a group without weights
        items.append((f"/layers/{snake_case('InputLayer')}/vars", None, {"name": first.name}))
    for lw, path in zip(layout, keras3_paths(layout)):
        items.append((f"/{path}/vars", None, {"name": lw.name}))
        for i, kind in enumerate(lw.kinds):
            items.append((f"/{path}/vars/{i}", weights[f"{lw.name}/{kind}"], {}))
    return items


def _nested_keras3_items(model: Any) -> List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]]:
    leaves = leaf_layout(model)
    weights = dict(zip(model.weight_names(), model.get_weights()))
    items: List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]] = [("/vars", None, {"name": model.name})]
    for group, layer, position in keras3_groups(model):
        items.append((f"{group}/vars", None, {"name": layer.name}))
        if position is not None:
            lw = leaves[position]
            for i, kind in enumerate(lw.kinds):
                items.append((f"{group}/vars/{i}", weights[f"{lw.name}/{kind}"], {}))
    return items


def _keras3_root(tree: H5Tree) -> str:
    if tree.is_group("/layers"):
        return "/layers"
    if tree.is_group("/_layer_checkpoint_dependencies"):  # Keras 2.13-2.15's spelling
        return "/_layer_checkpoint_dependencies"
    raise FileProblem("it has no 'layers' group: not a Keras 3 weights file")


def _keras3_layer(tree: H5Tree, lw: LayerWeights, group: str) -> List[np.ndarray]:
    present = [n for n in tree.children(group) if tree.objects[f"{group}/{n}"]["kind"] == "dataset"]
    if len(present) != len(lw.kinds):
        raise WeightsMismatch(f"{lw.label()} has {len(lw.kinds)} weight(s), the file has {len(present)} at '{group}'"
                              + ("" if tree.is_group(group) else " (no such group: another architecture?)"))
    return [tree.read_floats(f"{group}/{i}", shape, lw.label(i), exact_float32=False, integers=_integer(lw, i))
            for i, shape in enumerate(lw.shapes)]


def _integer(lw: LayerWeights, i: int) -> bool:
    """Whether Keras keeps weight i of the layer as an integer (Normalization's count)."""
    return lw.kinds[i] == "count"


def read_keras3_weights(tree: H5Tree, model: Any, skip_mismatch: bool = False) -> List[np.ndarray]:
    """get_weights()-ordered arrays for `model` from a Keras 3 weights file."""
    root = _keras3_root(tree)
    current = dict(zip(model.weight_names(), model.get_weights())) if skip_mismatch else {}
    used = set()
    per_layer = []
    if any(is_model(layer) for layer in model.layers):  # the leaves' groups, nested in their models'
        leaves = leaf_layout(model)
        layout = [leaves[p] for _, _, p in keras3_groups(model) if p is not None]
        paths = [g[1:] for g, _, p in keras3_groups(model) if p is not None]
    else:
        layout = weight_layout(model)
        paths = keras3_paths(layout)
    for lw, path in zip(layout, paths):
        group = f"{root}/{path.split('/', 1)[1]}/vars"
        used.add(group)
        per_layer.append(_fit_or_keep(lw, lambda: _keras3_layer(tree, lw, group), skip_mismatch, current))
    extra = [p for p, o in tree.objects.items() if o["kind"] == "dataset" and p.startswith(root + "/")
             and p.rsplit("/", 1)[0] not in used]
    if extra:
        holders = ", ".join(sorted({p.rsplit("/", 2)[0][len(root) + 1:] for p in extra}))[:300]
        if not skip_mismatch:
            raise WeightsMismatch(f"the file holds weights for layers this model does not have: {holders}")
        warnings.warn(f"load_weights: the file's weights of {holders} fit no layer of this model and are not loaded",
                      UserWarning, stacklevel=4)
    return _flat_weights(model, layout, per_layer)


# ---------------------------------------------------------------------- legacy Keras HDF5
def legacy_weight_items(model: Any, prefix: str) -> List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]]:
    """Layer groups of a legacy Keras HDF5 file under `prefix` ('' for a weights file, whose root
    holds them; '/model_weights' for a model file), as tf.keras writes them."""
    layout = weight_layout(model, legacy=True)
    names = [lw.name for lw in layout]
    if len(set(names)) != len(names):
        raise ValueError(f"the model has layers with the same name ({sorted(n for n in set(names) if names.count(n) > 1)}): "
                         "Keras' HDF5 layout needs unique layer names")
    weights = dict(zip(model.weight_names(), model.get_weights()))
    items: List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]] = [
        (prefix or "/", None, {"layer_names": names, "backend": "hpcnn", "keras_version": KERAS_VERSION})]
    for lw in layout:
        group = f"{prefix}/{lw.name}"
        weight_names = [f"{lw.name}/{k}:0" for k in lw.kinds]
        items.append((group, None, {"weight_names": weight_names if weight_names else np.zeros(0)}))
        for kind, wname in zip(lw.kinds, weight_names):
            items.append((f"{group}/{wname}", weights[f"{lw.name}/{kind}"], {}))
    return items


def legacy_weights_root(tree: H5Tree) -> Optional[str]:
    """The group holding the layer groups: the root of a weights file, 'model_weights' of a model
    file (None when the file has neither)."""
    if tree.text_list("/", "layer_names") is not None:
        return "/"
    if tree.is_group("/model_weights"):
        return "/model_weights"
    return None


def read_legacy_weights(tree: H5Tree, model: Any, by_name: bool = False, skip_mismatch: bool = False) -> List[np.ndarray]:
    """get_weights()-ordered arrays for `model` from a legacy Keras HDF5 file (weights or model)."""
    root = legacy_weights_root(tree)
    if root is None:
        raise FileProblem("it has neither a 'layer_names' attribute nor a 'model_weights' group: not a Keras HDF5 "
                          "weights or model file")
    version = tree.text(root, "keras_version") or tree.text("/", "keras_version") or ""
    backend = tree.text(root, "backend") or ""
    # Keras 1 with the TensorFlow backend stored kernels as Keras 2 and 3 do ((kh, kw, in, out): the
    # applications' "tf_dim_ordering_tf_kernels" files; Keras 3 loads them unchanged, so does hpcnn);
    # Theano's kernels are flipped, and Keras 1's other layouts are transposed.
    if backend == "theano" or ((version == "1" or version.startswith("1.")) and backend != "tensorflow"):
        raise FileProblem(f"it was written by Keras {version or '1'} (backend {backend or '?'}), whose convolution "
                          "kernels are laid out differently: load it in Keras 2 and save it again")
    layer_names = tree.text_list(root, "layer_names") or []
    file_layers = []
    for name in layer_names:
        group = f"{root.rstrip('/')}/{name}"
        if not tree.is_group(group):
            raise FileProblem(f"layer '{name}' is listed in 'layer_names' but its group '{group}' is missing")
        wnames = tree.text_list(group, "weight_names") or []
        file_layers.append((name, group, wnames))
    layout = weight_layout(model, legacy=True)
    current = dict(zip(model.weight_names(), model.get_weights())) if (skip_mismatch or by_name) else {}
    if by_name:
        by = {name: (group, wnames) for name, group, wnames in file_layers}
        pairs = [(lw, by.get(lw.name)) for lw in layout]
    else:
        with_weights = [lw for lw in layout if lw.kinds]
        stored = [(g, w) for _, g, w in file_layers if w]
        if len(stored) != len(with_weights):
            raise WeightsMismatch(f"the file holds weights for {len(stored)} layer(s), the model has {len(with_weights)} layer(s) "
                                  f"with weights ({_layer_difference([n for n, _, w in file_layers if w], [lw.name for lw in with_weights])})")
        it = iter(stored)
        pairs = [(lw, next(it) if lw.kinds else None) for lw in layout]
    per_layer = []
    for lw, found in pairs:
        if not lw.kinds:
            per_layer.append([])
        elif found is None:  # by_name: a layer the file does not have keeps its weights (Keras' rule)
            per_layer.append(_current(lw, current))
        else:
            per_layer.append(_fit_or_keep(lw, lambda: _legacy_layer(tree, lw, *found), skip_mismatch, current))
    return _flat_weights(model, layout, per_layer)


def _layer_difference(in_file: List[str], in_model: List[str], most: int = 5) -> str:
    """What tells two lists of layer names apart, for a count mismatch: the layers only one side
    has (a top the other lacks), or both lists' starts when they share no name (another model)."""
    only_file = [n for n in in_file if n not in set(in_model)]
    only_model = [n for n in in_model if n not in set(in_file)]

    def some(names: List[str]) -> str:
        return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")

    if len(only_file) == len(in_file) and in_file and in_model:
        return f"no layer name in common: another architecture? file: {some(in_file)}; model: {some(in_model)}"
    parts = []
    if only_file:
        parts.append(f"only in the file: {some(only_file)}")
    if only_model:
        parts.append(f"only in the model: {some(only_model)}")
    return "; ".join(parts) or "the same names, some repeated"


def _legacy_layer(tree: H5Tree, lw: LayerWeights, group: str, wnames: List[str]) -> List[np.ndarray]:
    if len(wnames) != len(lw.kinds):
        raise WeightsMismatch(f"{lw.label()} has {len(lw.kinds)} weight(s), the file's layer '{group}' has {len(wnames)}")
    return [tree.read_floats(f"{group}/{w}", shape, lw.label(i), exact_float32=False, integers=_integer(lw, i))
            for i, (w, shape) in enumerate(zip(wnames, lw.shapes))]
