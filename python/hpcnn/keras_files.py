"""Keras' file layouts, read and written with hpcnn's own HDF5 code (``_core.data.H5Reader``,
``write_h5_tree``): no h5py, no Keras needed.

- **Keras 3 weights** (``.weights.h5``, and ``model.weights.h5`` inside a ``.keras`` archive): one
  group per layer, ``layers/<class in snake_case>[_<k>]/vars/<i>`` (Keras names a layer's group by
  its class and position, not its name: ``conv2d``, ``conv2d_1``, ...), the i-th variable of the
  layer in Keras' order (kernel, bias, ...). Keras 2.13-2.15's ``_layer_checkpoint_dependencies``
  spelling is read too.
- **Legacy Keras HDF5** (Keras 2 / tf.keras ``save('x.h5')`` and ``save_weights('x.h5')``): a
  group per layer named by the layer, listed in order by the ``layer_names`` attribute, each with
  a ``weight_names`` attribute that names its datasets; a model file adds the ``model_config`` and
  ``training_config`` attributes and keeps the layer groups under ``model_weights``. Layers are
  matched in order of the layers that hold weights (Keras' topological loading) or, with
  ``by_name=True``, by name.
- **Keras archives** (``.keras``): a zip of ``config.json``, ``metadata.json`` and
  ``model.weights.h5``.

Files hpcnn writes in these layouts also carry hpcnn's own description (``hpcnn_model_json``, a
dataset Keras does not look at; ``hpcnn.json`` in an archive) and the optimizer state
(``optimizer_000``, ... datasets; in an archive, in its own member ``hpcnn_state.h5``), so that
hpcnn reads back exactly what it wrote (its config, seed, step counter, compile settings and
optimizer state) while Keras reads the same file as its own.

Weights are checked before anything is set: every array present, of the model's shape, a float
type (converted to float32), finite; a mismatch is a ValueError naming the layer and the file,
and the model keeps its weights.
"""
from __future__ import annotations

import io
import json
import os
import stat
import time
import warnings
import zipfile
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import _core, keras_config

_C = _core.data
#: Groups and datasets hpcnn lists in one file at most (a hostile file is refused, not walked).
MAX_OBJECTS = 1_000_000
#: Bounds on a .keras archive's members (its config, and the weights' inflated size per stored byte).
MAX_CONFIG_BYTES = 64 << 20
MAX_INFLATION = 1000

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ZIP_SIGNATURE = b"PK\x03\x04"
ARCHIVE_CONFIG, ARCHIVE_METADATA, ARCHIVE_WEIGHTS, ARCHIVE_HPCNN, ARCHIVE_STATE = (
    "config.json", "metadata.json", "model.weights.h5", "hpcnn.json", "hpcnn_state.h5")
HPCNN_DATASET = "hpcnn_model_json"  # saving.META_DATASET: hpcnn's description beside Keras' layout


class FileProblem(ValueError):
    """What is wrong with a file's contents (the caller adds its name and the file's)."""


class Mismatch(FileProblem):
    """The file is sound but does not fit the model (another architecture, other shapes)."""


# ---------------------------------------------------------------------- what a file is
def file_kind(path: str, caller: str) -> str:
    """'zip', 'hdf5' or 'other', from the file's first bytes; ValueError for a path that is not a
    regular file (a directory, a FIFO: opening one would block)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{caller}: '{path}' does not exist") from None
    except OSError as e:
        raise ValueError(f"{caller}: '{path}' cannot be read ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{caller}: '{path}' is a directory, not a model or weights file")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{caller}: '{path}' is not a regular file")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(ZIP_SIGNATURE):
        return "zip"
    if head == HDF5_SIGNATURE:
        return "hdf5"
    return "other"


class H5Tree:
    """An HDF5 file's listing (path -> group or dataset) and its reader."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.objects: Dict[str, Dict[str, Any]] = {o["path"]: o for o in reader.list(MAX_OBJECTS)}

    @classmethod
    def open(cls, path: str) -> "H5Tree":
        return cls(_C.H5Reader(path))

    @classmethod
    def from_bytes(cls, data: bytes, label: str) -> "H5Tree":
        return cls(_C.H5Reader.from_bytes(data, label))

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> "H5Tree":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def is_group(self, path: str) -> bool:
        o = self.objects.get(path)
        return o is not None and o["kind"] == "group"

    def attrs(self, path: str) -> Dict[str, Any]:
        o = self.objects.get(path)
        return o["attrs"] if o is not None else {}

    def children(self, path: str) -> List[str]:
        """Names directly under group `path`."""
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.objects if p.startswith(prefix) and "/" not in p[len(prefix):]
                      and p != prefix)

    def text_list(self, path: str, name: str) -> Optional[List[str]]:
        """A list-of-texts attribute, also when Keras split it into ``name0``, ``name1``, ...
        (attributes past HDF5's 64 KiB header limit); [] for Keras' empty float64 array, None when
        absent. FileProblem when it holds something else."""
        attrs = self.attrs(path)
        if name in attrs:
            parts = [attrs[name]]
        else:
            parts, k = [], 0
            while f"{name}{k}" in attrs:
                parts.append(attrs[f"{name}{k}"])
                k += 1
            if not parts:
                return None
        out: List[str] = []
        for value in parts:
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                out.extend(value)
            elif isinstance(value, np.ndarray) and value.size == 0:
                continue
            else:
                raise FileProblem(f"attribute '{name}' of '{path}' is not a list of names ({str(value)[:80]})")
        return out

    def text(self, path: str, name: str) -> Optional[str]:
        value = self.attrs(path).get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise FileProblem(f"attribute '{name}' of '{path}' is not a text ({str(value)[:80]})")
        return value

    def read_weight(self, path: str, shape: Tuple[int, ...], label: str) -> np.ndarray:
        """The float dataset at `path`, checked against `shape` before it is read, as float32,
        finite. `label` names the weight in messages ("layer 'dense' (Dense) kernel")."""
        o = self.objects.get(path)
        if o is None or o["kind"] != "dataset":
            raise Mismatch(f"{label}: '{path}' is missing")
        if not str(o["dtype"]).startswith("float"):
            raise FileProblem(f"{label}: '{path}' holds {o['dtype']} values, not floats")
        if tuple(o["shape"]) != tuple(shape):
            raise Mismatch(f"{label} has shape {tuple(o['shape'])} in the file, the model needs {tuple(shape)}")
        a = np.asarray(self.reader.read(path), dtype=np.float32)
        if not np.isfinite(a).all():
            # Refused rather than loaded: a model with NaN/inf weights predicts NaN for every input.
            bad = int(np.count_nonzero(~np.isfinite(a)))
            raise FileProblem(f"{label} ('{path}') holds {bad} NaN/inf value(s) (a float64 value beyond float32's "
                              "range reads as inf): the file is damaged or the model had diverged when it was saved")
        return a


# ---------------------------------------------------------------------- the model's weights, per layer
class LayerWeights:
    """One layer of the model with its weights in Keras' order: kinds ('kernel', 'bias', ...) and shapes."""

    def __init__(self, layer: Any, kinds: List[str], shapes: List[Tuple[int, ...]]) -> None:
        self.layer, self.kinds, self.shapes = layer, kinds, shapes

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def class_name(self) -> str:
        return type(self.layer).__name__

    def label(self, i: Optional[int] = None) -> str:
        base = f"layer '{self.name}' ({self.class_name})"
        return base if i is None else f"{base} {self.kinds[i]}"


def weight_layout(model: Any) -> List[LayerWeights]:
    """The model's layers (InputLayer excluded, as Keras' model.layers), each with its weights in
    get_weights() order. Built from the model's weight names, so any layer kind fits."""
    names = model._weight_names()
    shapes = [tuple(int(d) for d in shape) for per_layer in model._model().weight_shapes for _, shape in per_layer]
    if len(names) != len(shapes):
        raise RuntimeError(f"hpcnn: {len(names)} weight names for {len(shapes)} weight arrays")
    per: Dict[str, Tuple[List[str], List[Tuple[int, ...]]]] = {}
    for n, s in zip(names, shapes):
        lname, kind = n.rsplit("/", 1)
        per.setdefault(lname, ([], []))
        per[lname][0].append(kind)
        per[lname][1].append(s)
    out = [LayerWeights(layer, *per.pop(layer.name, ([], []))) for layer in model.layers
           if type(layer).__name__ != "InputLayer"]
    if per:
        raise RuntimeError(f"hpcnn: weights of layers that are not in model.layers: {sorted(per)}")
    return out


def keras3_paths(layout: Sequence[LayerWeights]) -> List[str]:
    """Each layer's group in a Keras 3 weights file: 'layers/conv2d', 'layers/conv2d_1', ..."""
    used: Dict[str, int] = {}
    out = []
    for lw in layout:
        base = keras_config.snake_case(lw.class_name)
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
    return [by_name[n] for n in model._weight_names()]


def _warn_skip(label: str, why: str) -> None:
    warnings.warn(f"load_weights: skipping {label}: {why} (skip_mismatch=True keeps its current weights)",
                  UserWarning, stacklevel=4)


# ---------------------------------------------------------------------- Keras 3 weights (.weights.h5)
def keras3_weight_items(model: Any) -> List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]]:
    """The items of a Keras 3 weights file for the model (groups per layer, vars datasets)."""
    layout = weight_layout(model)
    weights = dict(zip(model._weight_names(), model.get_weights()))
    items: List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]] = [("/vars", None, {"name": model.name})]
    from .models import Sequential
    first = model.layers[0] if model.layers else None
    if type(first).__name__ == "InputLayer" and not isinstance(model, Sequential):
        # Keras 3's functional models list their InputLayer among their layers: a group without weights
        items.append((f"/layers/{keras_config.snake_case('InputLayer')}/vars", None, {"name": first.name}))
    for lw, path in zip(layout, keras3_paths(layout)):
        items.append((f"/{path}/vars", None, {"name": lw.name}))
        for i, kind in enumerate(lw.kinds):
            items.append((f"/{path}/vars/{i}", weights[f"{lw.name}/{kind}"], {}))
    return items


def _keras3_root(tree: H5Tree) -> str:
    if tree.is_group("/layers"):
        return "/layers"
    if tree.is_group("/_layer_checkpoint_dependencies"):  # Keras 2.13-2.15's spelling
        return "/_layer_checkpoint_dependencies"
    raise FileProblem("it has no 'layers' group: not a Keras 3 weights file")


def read_keras3_weights(tree: H5Tree, model: Any, skip_mismatch: bool = False) -> List[np.ndarray]:
    """get_weights()-ordered arrays for `model` from a Keras 3 weights file."""
    layout = weight_layout(model)
    root = _keras3_root(tree)
    current = dict(zip(model._weight_names(), model.get_weights())) if skip_mismatch else {}
    used = set()
    per_layer = []
    for lw, path in zip(layout, keras3_paths(layout)):
        group = f"{root}/{path.split('/', 1)[1]}/vars"
        used.add(group)
        present = [n for n in tree.children(group) if tree.objects[f"{group}/{n}"]["kind"] == "dataset"]
        try:
            if len(present) != len(lw.kinds):
                raise Mismatch(f"{lw.label()} has {len(lw.kinds)} weight(s), the file has {len(present)} at '{group}'"
                               + ("" if tree.is_group(group) else " (no such group: another architecture?)"))
            per_layer.append([tree.read_weight(f"{group}/{i}", shape, lw.label(i)) for i, shape in enumerate(lw.shapes)])
        except Mismatch as e:
            if not skip_mismatch:
                raise
            _warn_skip(lw.label(), str(e))
            per_layer.append([current[f"{lw.name}/{k}"] for k in lw.kinds])
    extra = [p for p, o in tree.objects.items() if o["kind"] == "dataset" and p.startswith(root + "/")
             and p.rsplit("/", 1)[0] not in used]
    if extra:
        holders = ", ".join(sorted({p.rsplit("/", 2)[0][len(root) + 1:] for p in extra}))[:300]
        if not skip_mismatch:
            raise Mismatch(f"the file holds weights for layers this model does not have: {holders}")
        warnings.warn(f"load_weights: the file's weights of {holders} fit no layer of this model and are not loaded",
                      UserWarning, stacklevel=3)
    return _flat_weights(model, layout, per_layer)


# ---------------------------------------------------------------------- legacy Keras HDF5
def legacy_weight_items(model: Any, prefix: str) -> List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]]:
    """Layer groups of a legacy Keras HDF5 file under `prefix` ('' for a weights file, whose root
    holds them; '/model_weights' for a model file), as tf.keras writes them."""
    layout = weight_layout(model)
    names = [lw.name for lw in layout]
    if len(set(names)) != len(names):
        raise ValueError(f"the model has layers with the same name ({sorted(n for n in set(names) if names.count(n) > 1)}): "
                         "Keras' HDF5 layout needs unique layer names")
    weights = dict(zip(model._weight_names(), model.get_weights()))
    items: List[Tuple[str, Optional[np.ndarray], Dict[str, Any]]] = [
        (prefix or "/", None, {"layer_names": names, "backend": "hpcnn", "keras_version": keras_config.KERAS_VERSION})]
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
    if version == "1" or version.startswith("1.") or backend == "theano":
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
    layout = weight_layout(model)
    current = dict(zip(model._weight_names(), model.get_weights())) if (skip_mismatch or by_name) else {}
    if by_name:
        by = {name: (group, wnames) for name, group, wnames in file_layers}
        pairs = [(lw, by.get(lw.name)) for lw in layout]
    else:
        with_weights = [lw for lw in layout if lw.kinds]
        stored = [(g, w) for _, g, w in file_layers if w]
        if len(stored) != len(with_weights):
            raise Mismatch(f"the file holds weights for {len(stored)} layer(s), the model has {len(with_weights)} layer(s) "
                           f"with weights (file: {', '.join(n for n, _, w in file_layers if w)[:200]}; model: "
                           f"{', '.join(lw.name for lw in with_weights)[:200]})")
        it = iter(stored)
        pairs = [(lw, next(it) if lw.kinds else None) for lw in layout]
    per_layer = []
    for lw, found in pairs:
        try:
            if not lw.kinds:
                per_layer.append([])
                continue
            if found is None:  # by_name: a layer the file does not have keeps its weights (Keras' rule)
                per_layer.append([current[f"{lw.name}/{k}"] for k in lw.kinds])
                continue
            group, wnames = found
            if len(wnames) != len(lw.kinds):
                raise Mismatch(f"{lw.label()} has {len(lw.kinds)} weight(s), the file's layer '{group}' has {len(wnames)}")
            per_layer.append([tree.read_weight(f"{group}/{w}", shape, lw.label(i))
                              for i, (w, shape) in enumerate(zip(wnames, lw.shapes))])
        except Mismatch as e:
            if not skip_mismatch:
                raise
            _warn_skip(lw.label(), str(e))
            per_layer.append([current[f"{lw.name}/{k}"] for k in lw.kinds])
    return _flat_weights(model, layout, per_layer)


# ---------------------------------------------------------------------- .keras archives
def write_archive(path: str, model: Any, hpcnn_meta: Dict[str, Any], caller: str,
                  state_items: Sequence[Tuple[str, Optional[np.ndarray], Dict[str, Any]]] = ()) -> None:
    """A Keras 3 archive (config.json, metadata.json, model.weights.h5) plus hpcnn.json and, when
    `state_items` (the optimizer state's datasets) are given, hpcnn_state.h5; written atomically."""
    config = keras_config.model_to_keras(model, legacy=False)
    metadata = {"keras_version": keras_config.KERAS_VERSION, "date_saved": time.strftime("%Y-%m-%d@%H:%M:%S"),
                "hpcnn_version": hpcnn_meta.get("hpcnn_version")}
    weights = _C.h5_tree_image(keras3_weight_items(model), caller)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:  # stored, not deflated, as Keras writes them
        zf.writestr(ARCHIVE_METADATA, json.dumps(metadata))
        zf.writestr(ARCHIVE_CONFIG, json.dumps(config))
        zf.writestr(ARCHIVE_WEIGHTS, weights)
        zf.writestr(ARCHIVE_HPCNN, json.dumps(hpcnn_meta))
        if state_items:
            zf.writestr(ARCHIVE_STATE, _C.h5_tree_image(list(state_items), caller))
    _C.write_file_atomically(path, buf.getvalue(), caller)


class Archive:
    """A .keras archive opened for reading: its config, hpcnn's description (None when Keras wrote
    it) and its weights file (an H5Tree in memory)."""

    def __init__(self, path: str) -> None:
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError) as e:
            raise FileProblem(f"it is not a valid zip archive ({e})") from None

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _member(self, name: str, limit: Optional[int] = None) -> Optional[bytes]:
        try:
            info = self._zip.getinfo(name)
        except KeyError:
            return None
        if limit is not None and info.file_size > limit:
            raise FileProblem(f"its '{name}' is {info.file_size} bytes (more than hpcnn reads: {limit})")
        if info.compress_type != zipfile.ZIP_STORED and info.file_size > MAX_INFLATION * max(info.compress_size, 1) + (1 << 20):
            raise FileProblem(f"its '{name}' inflates {info.file_size // max(info.compress_size, 1)}-fold: a zip bomb?")
        try:
            return self._zip.read(name)
        except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError, ValueError) as e:
            raise FileProblem(f"its '{name}' cannot be read ({type(e).__name__}: {e})") from None

    def json(self, name: str) -> Optional[Any]:
        raw = self._member(name, MAX_CONFIG_BYTES)
        if raw is None:
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise FileProblem(f"its '{name}' is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None

    def weights(self, label: str) -> H5Tree:
        if ARCHIVE_WEIGHTS not in self._zip.namelist() and "model.weights.npz" in self._zip.namelist():
            raise FileProblem("its weights are in the npz format (weights_format='npz'), which hpcnn does not read")
        return self.tree(ARCHIVE_WEIGHTS, label)

    def tree(self, member: str, label: str) -> H5Tree:
        """The archive's HDF5 member `member`, opened in memory (FileProblem when it is missing)."""
        raw = self._member(member)
        if raw is None:
            raise FileProblem(f"it has no '{member}' (members: {', '.join(self._zip.namelist())[:200]})")
        try:
            return H5Tree.from_bytes(raw, f"{label}/{member}")
        except ValueError as e:
            raise FileProblem(str(e)) from None


__all__ = ["file_kind", "H5Tree", "weight_layout", "keras3_paths", "keras3_weight_items", "read_keras3_weights",
           "legacy_weight_items", "legacy_weights_root", "read_legacy_weights", "write_archive", "Archive",
           "FileProblem", "Mismatch"]
