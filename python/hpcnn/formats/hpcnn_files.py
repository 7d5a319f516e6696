"""hpcnn's own layout beside Keras' in the files it writes, and the layouts of its earlier
versions: the JSON description (``hpcnn_model_json``: format, version, config, seed and step
counter, weight names, compile settings, the optimizer state's description), the optimizer state
buffers (``optimizer_000``, ...: each flat over all parameters, in Keras' layout), and the weight
arrays of format_version 1 and 2 files and of backups (``weight_000``, ... in get_weights() order).
Everything is read from the file opened once as an H5Tree, each array checked before it is read
(H5Tree.read_floats: float32, the model's shape, finite values); a problem is a FileProblem that
the caller completes with the file's name."""
from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .. import _core, validation
from ..errors import FileProblem
from .compile_config import describe
from .config_json import config_json_bytes, read_config_json
from .file_limits import MAX_CONFIG_BYTES
from .h5tree import H5Tree

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
    return np.frombuffer(config_json_bytes(meta, "the file's description"), dtype=np.uint8)


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
    """The path of a file to write, checked: a string, in a folder that exists (FileNotFoundError);
    not existing when overwrite=False."""
    path = file_path(value, caller)
    validation.output_directory(path, caller)
    overwrite = validation.boolean(overwrite, "overwrite", caller)
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(f"{caller}: '{path}' exists and overwrite=False")
    return path


def write_file(path: str, arrays: Dict[str, np.ndarray], caller: str) -> None:
    """Writes the datasets (uncompressed) atomically: ``_core.data.write_h5_tree`` builds the file
    in memory and writes it to a temporary file, flushed to disk (fsync) and renamed into place;
    it refuses links, directories, special and read-only files and removes a killed earlier
    writer's temporary file. A write the file system refuses (disk full, quota, file size limit,
    I/O error) is an OSError with its errno, naming `path`, which is left as it was."""
    try:
        _core.data.write_h5_tree(path, [("/" + name, a, {}) for name, a in arrays.items()], caller)
    except ValueError as e:
        raise rename_error(e, caller) from None


def rename_error(e: ValueError, caller: str) -> ValueError:
    """A writer's ValueError as the caller's: "write_hdf5: ..." -> "save: ..."."""
    text = str(e)
    for prefix in ("write_hdf5: ", "write_h5_tree: "):
        text = text.replace(prefix, f"{caller}: ", 1)
    return ValueError(text)


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


def read_optimizer_buffers(tree: H5Tree, model: Any, desc: Dict[str, Any]) -> List[np.ndarray]:
    """The optimizer state buffers that `desc` describes, from an hpcnn file (a model file, a
    backup, an archive's hpcnn_state.h5): float32, one value per parameter, finite."""
    names = desc.get("buffers")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise FileProblem(f"its optimizer state names {names!r:.200} are not a list of names")
    shape = (int(model.core.num_params),)
    return [tree.read_floats("/" + optimizer_dataset(i), shape, f"optimizer state '{name}'", exact_float32=True)
            for i, name in enumerate(names)]


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


def read_description(tree: H5Tree, dataset: str, fmt: str, max_version: int, caller: str,
                     what: str) -> Dict[str, Any]:
    """The JSON description of an hpcnn file (model, weights or backup), its size checked before it
    is read, then checked to be a dict of format `fmt` with a format_version in 1..max_version.
    ValueError naming the file when it has no description (not an hpcnn file of that kind at
    all); FileProblem for a malformed one."""
    return parse_description(description_bytes(tree, dataset, caller, what), fmt, max_version, what)


def description_bytes(tree: H5Tree, dataset: str, caller: str, what: str) -> bytes:
    """The bytes of an hpcnn file's JSON description (read_description's first half: a backup
    checks their checksum before it parses them)."""
    obj = tree.dataset("/" + dataset)
    if obj is None:
        raise ValueError(f"{caller}: '{tree.label}' is not an hpcnn {what} file (no '{dataset}')")
    if obj["dtype"] != "uint8" or len(obj["shape"]) != 1:
        raise FileProblem(f"its {what} description '{dataset}' is {obj['dtype']} {tuple(obj['shape'])}, not UTF-8 bytes")
    if obj["shape"][0] > MAX_CONFIG_BYTES:
        raise FileProblem(f"its {what} description is {obj['shape'][0]} bytes long, more than the {MAX_CONFIG_BYTES} "
                          "bytes hpcnn reads (file_limits.MAX_CONFIG_BYTES)")
    return np.asarray(tree.reader.read("/" + dataset)).astype(np.uint8).tobytes()


def parse_description(raw: bytes, fmt: str, max_version: int, what: str) -> Dict[str, Any]:
    """UTF-8 JSON bytes -> a dict of format `fmt` with a format_version in 1..max_version (else FileProblem)."""
    meta = read_config_json(raw, f"its {what} description")
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        raise FileProblem(f"its {what} description is not an '{fmt}' description")
    version = meta.get("format_version")
    if not (isinstance(version, int) and 1 <= version <= max_version):
        raise FileProblem(f"format_version {version!r} is not one this hpcnn reads (1..{max_version}): "
                       "written by a newer hpcnn?")
    return meta


def read_meta(tree: H5Tree, caller: str) -> Dict[str, Any]:
    """hpcnn's description in an HDF5 model file, checked."""
    return _checked_meta(read_description(tree, META_DATASET, FORMAT, FORMAT_VERSION, caller, "model"))


def check_meta(raw: bytes) -> Dict[str, Any]:
    """hpcnn's description from its JSON bytes (a .keras archive's hpcnn.json), checked."""
    return _checked_meta(parse_description(raw, FORMAT, FORMAT_VERSION, "model"))


def _checked_meta(meta: Dict[str, Any]) -> Dict[str, Any]:
    for key, kind in (("config", dict), ("compile", (dict, type(None))), ("rng", (dict, type(None))),
                      ("optimizer_state", (dict, type(None)))):
        if not isinstance(meta.get(key), kind):
            raise FileProblem(f"its model description has no valid '{key}'")
    # Absent: weight_000, ... (format_version 1 and 2); "keras": Keras' layout (format_version 3).
    if meta.get("weights") not in (WEIGHTS_IN_KERAS_LAYOUT, None):
        raise FileProblem(f"its model description names an unknown weights layout {meta.get('weights')!r:.60}")
    return meta


def read_weights(tree: H5Tree, model: Any) -> List[np.ndarray]:
    """The weight arrays ``weight_000``, ... (format_version 1 and 2 files, weights files before
    Keras' layouts, backups): exactly as many as the model has, each float32 of the model's shape
    with finite values."""
    names = model.weight_names()
    shapes = [tuple(shape) for per_layer in model.core.weight_shapes for _, shape in per_layer]
    if tree.dataset("/" + weight_dataset(len(shapes))) is not None:
        raise FileProblem(f"it holds more weight arrays than the model's {len(shapes)} "
                          f"(found '{weight_dataset(len(shapes))}')")
    return [tree.read_floats("/" + weight_dataset(i), shape, f"weight '{name}'", exact_float32=True)
            for i, (name, shape) in enumerate(zip(names, shapes))]
