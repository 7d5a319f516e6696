"""hpcnn's own layout beside Keras' in the files it writes, and the layouts of its earlier
versions: the JSON description (``hpcnn_model_json``: format, version, config, seed and step
counter, weight names, compile settings, the optimizer state's description), the optimizer state
buffers (``optimizer_000``, ...: each flat over all parameters, in Keras' layout), and the weight
arrays of format_version 1 and 2 files and of backups (``weight_000``, ... in get_weights() order).
Every array is checked before it is read (dtype, shape, finite values); a problem is a
FileProblem that the caller completes with the file's name."""
from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .. import _core, data, validation
from ..errors import FileProblem
from .compile_config import describe
from .h5tree import MAX_CONFIG_BYTES, H5Tree

FORMAT = "hpcnn-model"
# 1: weight_000, ...; 2: + the optimizer state and the step counter; 3: the weights in Keras' layout
# beside Keras' config (meta["weights"] == "keras"). All three load.
FORMAT_VERSION = 3
META_DATASET = "hpcnn_model_json"
WEIGHTS_IN_KERAS_LAYOUT = "keras"  # meta["weights"]: the weights are in Keras' layout, not weight_000, ...
# The weights files of hpcnn before the Keras layouts (read by load_weights, no longer written).
WEIGHTS_FORMAT = "hpcnn-weights"
WEIGHTS_FORMAT_VERSION = 1
WEIGHTS_META_DATASET = "hpcnn_weights_json"


def weight_dataset(i: int) -> str:
    """The HDF5 dataset that holds the i-th array of get_weights() (format_version 1 and 2 files,
    BackupAndRestore's backups)."""
    return f"weight_{i:03d}"


def optimizer_dataset(i: int) -> str:
    """The HDF5 dataset that holds the i-th optimizer state buffer (state_names order)."""
    return f"optimizer_{i:03d}"


def json_bytes(meta: Dict[str, Any]) -> np.ndarray:
    """A JSON description as the uint8 dataset files hold. Floats are written by repr, so they read
    back bit for bit (inf and NaN as JSON's usual extensions)."""
    return np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)


def file_path(value: Any, caller: str) -> str:
    """A file name given as a string or a path-like object (ValueError for anything else)."""
    try:
        path = os.fspath(value)
    except TypeError:
        path = None
    if not isinstance(path, str):
        raise ValueError(f"{caller}: the file path must be a string, got {value!r}")
    return path


def check_target(value: Any, overwrite: Any, caller: str) -> str:
    """The path of a file to write, checked: a string; not existing when overwrite=False."""
    path = file_path(value, caller)
    overwrite = validation.boolean(overwrite, "overwrite", caller)
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(f"{caller}: '{path}' exists and overwrite=False")
    return path


def write_file(path: str, arrays: Dict[str, np.ndarray], caller: str, compression: Optional[str] = "gzip") -> None:
    """Writes the datasets atomically (``data.write_hdf5``: a temporary file flushed to disk and
    renamed into place; refuses links, directories, special and read-only files; removes a killed
    earlier writer's temporary file)."""
    try:
        data.write_hdf5(path, arrays, compression=compression, level=1)
    except ValueError as e:
        raise ValueError(str(e).replace("write_hdf5: ", f"{caller}: ", 1)) from None


# ---------------------------------------------------------------------- the pieces of a model's state
def optimizer_state(model: Any) -> Tuple[Optional[Dict[str, Any]], List[np.ndarray]]:
    """(description, buffers) of the compiled model's optimizer: its class, step count, learning
    rate and the names of its state buffers, and the buffers (flat, Keras' layout, in that order;
    none before the first step). (None, []) when the model is not compiled."""
    if model.compile_settings is None or model.optimizer is None:
        return None, []
    core = model.core
    buffers = core.optimizer_state(keras_layout=True)
    fixed = model.optimizer.fixed_learning_rate is not None
    desc = {"class": type(model.optimizer).__name__, "iterations": int(core.iterations),
            "learning_rate": float(model.optimizer.fixed_learning_rate) if fixed else None,
            "core_learning_rate": float(core.learning_rate) if fixed else None, "buffers": list(buffers)}
    return desc, [np.asarray(b) for b in buffers.values()]


def restore_optimizer_state(model: Any, desc: Dict[str, Any], buffers: List[np.ndarray]) -> None:
    """Puts back what optimizer_state returned into the compiled model (same optimizer class):
    buffers, step count, learning rate. ValueError (FileProblem) when they do not fit it."""
    core = model.core
    if desc.get("class") != type(model.optimizer).__name__:
        raise FileProblem(f"its optimizer state is {desc.get('class')!r}'s but the model is compiled with "
                       f"{type(model.optimizer).__name__}")
    names = desc.get("buffers")
    iterations = desc.get("iterations")
    if not isinstance(names, list) or len(names) != len(buffers):
        raise FileProblem(f"its optimizer state names {names!r:.200} do not match its {len(buffers)} buffer(s)")
    if names and names != list(core.optimizer_state_names):
        raise FileProblem(f"its optimizer state buffers are {names!r:.200}; {type(model.optimizer).__name__} keeps "
                       f"{list(core.optimizer_state_names)}")
    if not validation.is_integer(iterations) or isinstance(iterations, bool) or not 0 <= iterations < 2**62:
        raise FileProblem(f"its optimizer iterations {iterations!r:.100} are not a step count")
    lr, core_lr = desc.get("learning_rate"), desc.get("core_learning_rate")
    for name, value in (("learning_rate", lr), ("core_learning_rate", core_lr)):
        if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                      and math.isfinite(value) and value > 0):
            raise FileProblem(f"its optimizer {name} {value!r:.100} is not a positive number")
    try:
        core.set_optimizer_state(dict(zip(names, buffers)), int(iterations))
    except ValueError as e:
        raise FileProblem(f"its optimizer state does not fit the model ({e})") from None
    if model.optimizer.fixed_learning_rate is not None:  # (a schedule's rate follows from the restored step count)
        if lr is not None:
            model.optimizer.learning_rate = lr
        if core_lr is not None:
            core.learning_rate = core_lr


def rng_state(model: Any) -> Dict[str, int]:
    """The model's random state: its seed and its step counter (dropout's key)."""
    core = model.core
    return {"seed": int(core.seed), "step": int(core.step)}


def restore_rng_state(model: Any, state: Dict[str, Any]) -> None:
    seed, step = state.get("seed"), state.get("step")
    for name, v in (("seed", seed), ("step", step)):
        if not validation.is_integer(v) or isinstance(v, bool) or not 0 <= v < 2**64:
            raise FileProblem(f"its random state's {name} {v!r:.100} is not an unsigned 64-bit integer")
    model.set_rng_state(int(seed), int(step))


def check_float_arrays(names: List[str], shapes: List[Tuple[int, ...]], labels: List[str],
                          info: Callable[[str], Optional[Tuple[str, Tuple[int, ...]]]],
                          read: Callable[[str], Any]) -> List[np.ndarray]:
    """Datasets `names`, each checked before it is read: float32, the given shape, finite values
    (the errors name `labels`). `info(name)` is (dtype, shape), or None for a missing dataset;
    `read(name)` its values."""
    out = []
    for ds, shape, label in zip(names, shapes, labels):
        found = info(ds)
        if found is None:
            raise FileProblem(f"'{ds}' ({label}) is missing")
        dtype, have = found
        if dtype != "float32":
            raise FileProblem(f"'{ds}' ({label}) has dtype {dtype}; hpcnn files hold float32")
        if tuple(have) != shape:
            raise FileProblem(f"'{ds}' ({label}) has shape {tuple(have)}, the model needs {shape}")
        a = np.asarray(read(ds))
        if a.dtype != np.float32 or a.shape != shape:
            raise FileProblem(f"'{ds}' ({label}) reads as {a.dtype} {a.shape}, the model needs float32 {shape}")
        if not np.isfinite(a).all():
            bad = int(np.count_nonzero(~np.isfinite(a)))
            raise FileProblem(f"'{ds}' ({label}) holds {bad} NaN/inf value(s): the file is damaged or training had "
                           "diverged when it was written")
        out.append(a)
    return out


def read_float_arrays(path: str, names: List[str], shapes: List[Tuple[int, ...]], labels: List[str]) -> List[np.ndarray]:
    """Datasets `names` of the file at `path`, checked as _checked_float_arrays says."""
    def info(ds: str) -> Optional[Tuple[str, Tuple[int, ...]]]:
        try:
            i = data.dataset_info(path, ds)
        except ValueError:
            return None
        return i["dtype"], tuple(i["shape"])

    return check_float_arrays(names, shapes, labels, info, lambda ds: data.read_dataset(path, ds))


def optimizer_buffer_names(model: Any, desc: Dict[str, Any]) -> Tuple[List[str], List[Tuple[int, ...]], List[str]]:
    """The datasets, shapes and labels of the optimizer state that `desc` describes."""
    names = desc.get("buffers")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise FileProblem(f"its optimizer state names {names!r:.200} are not a list of names")
    n = int(model.core.num_params)
    return ([optimizer_dataset(i) for i in range(len(names))], [(n,)] * len(names),
            [f"optimizer state '{name}'" for name in names])


def read_optimizer_buffers(path: str, model: Any, desc: Dict[str, Any]) -> List[np.ndarray]:
    return read_float_arrays(path, *optimizer_buffer_names(model, desc))


def read_optimizer_buffers_tree(tree: H5Tree, model: Any, desc: Dict[str, Any]) -> List[np.ndarray]:
    """read_optimizer_buffers for an opened HDF5 tree (a model file, or an archive's hpcnn_state.h5):
    the same checks and messages."""
    def info(ds: str) -> Optional[Tuple[str, Tuple[int, ...]]]:
        o = tree.objects.get("/" + ds)
        return None if o is None or o["kind"] != "dataset" else (o["dtype"], tuple(o["shape"]))

    return check_float_arrays(*optimizer_buffer_names(model, desc), info, lambda ds: tree.reader.read("/" + ds))


# ---------------------------------------------------------------------- hpcnn's description
def description(model: Any, include_optimizer: bool = True) -> Tuple[Dict[str, Any], List[np.ndarray]]:
    """hpcnn's own description of a model, saved beside Keras' layout, and the optimizer state
    buffers it describes (none with include_optimizer=False or before the first step). Its
    ``class_name`` ("Sequential", or "Functional" for ``hpcnn.Model``; files without it are
    Sequential) says which class ``load_model`` builds."""
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "hpcnn_version": _core.build_info()["version"],
            "class_name": "Sequential" if model.is_sequential else "Functional",
            "config": model.get_config(), "seed": model.seed, "weight_names": model.weight_names(),
            "compile": describe(model), "rng": rng_state(model), "optimizer_state": None,
            "weights": WEIGHTS_IN_KERAS_LAYOUT}
    buffers: List[np.ndarray] = []
    if include_optimizer:
        meta["optimizer_state"], buffers = optimizer_state(model)
    return meta, buffers


def rename_error(e: ValueError, caller: str) -> ValueError:
    text = str(e)
    for prefix in ("write_hdf5: ", "write_h5_tree: "):
        text = text.replace(prefix, f"{caller}: ", 1)
    return ValueError(text)


def read_description(path: str, dataset: str, fmt: str, max_version: int, caller: str, what: str) -> Dict[str, Any]:
    """The JSON description of an hpcnn file (model, weights or backup), checked to be a dict of
    format `fmt` with a format_version in 1..max_version. ValueError naming the file when it is not
    an hpcnn file of that kind at all; FileProblem for a malformed description."""
    try:
        raw = data.read_dataset(path, dataset)
    except ValueError as e:
        raise ValueError(f"{caller}: '{path}' is not an hpcnn {what} file ({e})") from None
    raw = np.asarray(raw)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise FileProblem(f"its {what} description '{dataset}' is {raw.dtype} {raw.shape}, not UTF-8 bytes")
    return parse_description(raw.tobytes(), fmt, max_version, what)


def parse_description(raw: bytes, fmt: str, max_version: int, what: str) -> Dict[str, Any]:
    """UTF-8 JSON bytes -> a dict of format `fmt` with a format_version in 1..max_version (else FileProblem)."""
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise FileProblem(f"its {what} description is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        raise FileProblem(f"its {what} description is not an '{fmt}' description")
    version = meta.get("format_version")
    if not (isinstance(version, int) and 1 <= version <= max_version):
        raise FileProblem(f"format_version {version!r} is not one this hpcnn reads (1..{max_version}): "
                       "written by a newer hpcnn?")
    return meta


def read_meta(tree: H5Tree, path: str) -> Dict[str, Any]:
    """hpcnn's description in an HDF5 model file, checked (its size before it is read)."""
    obj = tree.objects.get("/" + META_DATASET)
    if obj is None or obj["kind"] != "dataset":
        raise ValueError(f"load_model: '{path}' is not an hpcnn model file (no '{META_DATASET}')")
    if obj["dtype"] != "uint8" or len(obj["shape"]) != 1:
        raise FileProblem(f"its model description '{META_DATASET}' is {obj['dtype']} {tuple(obj['shape'])}, not UTF-8 bytes")
    if obj["shape"][0] > MAX_CONFIG_BYTES:
        raise FileProblem(f"its model description is {obj['shape'][0]} bytes (more than hpcnn reads: {MAX_CONFIG_BYTES})")
    raw = np.asarray(tree.reader.read("/" + META_DATASET)).astype(np.uint8)
    return check_meta(raw.tobytes())


def check_meta(raw: bytes) -> Dict[str, Any]:
    meta = parse_description(raw, FORMAT, FORMAT_VERSION, "model")
    for key, kind in (("config", dict), ("compile", (dict, type(None))), ("rng", (dict, type(None))),
                      ("optimizer_state", (dict, type(None)))):
        if not isinstance(meta.get(key), kind):
            raise FileProblem(f"its model description has no valid '{key}'")
    # Absent: weight_000, ... (format_version 1 and 2); "keras": Keras' layout (format_version 3).
    if meta.get("weights") not in (WEIGHTS_IN_KERAS_LAYOUT, None):
        raise FileProblem(f"its model description names an unknown weights layout {meta.get('weights')!r:.60}")
    return meta


def read_weights(path: str, model: Any) -> List[np.ndarray]:
    """The weight arrays, each checked against the model before it is read: float32, the model's
    shape, finite values; exactly as many as the model has."""
    names = model.weight_names()
    shapes = [tuple(shape) for per_layer in model.core.weight_shapes for _, shape in per_layer]
    out = []
    for i, (name, shape) in enumerate(zip(names, shapes)):
        ds = weight_dataset(i)
        try:
            info = data.dataset_info(path, ds)
        except ValueError:
            raise FileProblem(f"weight '{ds}' ({name}) is missing: the model needs {len(shapes)} weight arrays") from None
        if info["dtype"] != "float32":
            raise FileProblem(f"weight '{ds}' ({name}) has dtype {info['dtype']}; hpcnn model files hold float32 weights")
        if tuple(info["shape"]) != shape:
            raise FileProblem(f"weight '{ds}' ({name}) has shape {tuple(info['shape'])}, the model needs {shape}")
        w = np.asarray(data.read_dataset(path, ds))
        if w.dtype != np.float32 or w.shape != shape:
            raise FileProblem(f"weight '{ds}' ({name}) reads as {w.dtype} {w.shape}, the model needs float32 {shape}")
        if not np.isfinite(w).all():
            # Refused rather than loaded: a model with NaN/inf weights predicts NaN for every input.
            bad = int(np.count_nonzero(~np.isfinite(w)))
            raise FileProblem(f"weight '{ds}' ({name}, layer '{name.split('/')[0]}') holds {bad} NaN/inf value(s): "
                           "the file is damaged or the model had diverged when it was saved")
        out.append(w)
    try:
        data.dataset_info(path, weight_dataset(len(shapes)))
    except ValueError:
        return out  # no extra weight arrays: as expected
    raise FileProblem(f"it holds more weight arrays than the model's {len(shapes)} (found '{weight_dataset(len(shapes))}')")
