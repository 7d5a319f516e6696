"""The backup files of ``callbacks.BackupAndRestore`` in ``<backup_dir>``, and what each holds.

The directory (the callback writes it; see its docstring for the order of the steps):

  backup.h5            the newest backup
  backup-previous.h5   the one before it (``double_checkpoint``, the default): used, with a
                       warning, when the newest is damaged
  backup-next.h5       a new backup complete on disk but not yet moved into place (only after a
                       job was killed between the write and the renames: it is the newest then)
  backup.lock          held (an OS lock) by the training that writes here (backup_lock.py)

Every backup file is written as every hpcnn file is (built in memory, written to a temporary file,
flushed to disk and renamed into place), so a file with one of these names is always complete
when it was made, and a temporary file left by a killed writer is removed by the next write. A
backup holds everything the rest of the training depends on:

  weights            ``weight_000``, ... (get_weights order, Keras layouts)
  optimizer state    ``optimizer_000``, ... (Adam's moments, SGD's momentum: flat, Keras layout),
                     with the step count and the learning rate in the description
  random state       the model's seed and step counter (dropout masks are keyed by both), the
                     shuffle seed of an HDF5Dataset (arrays are shuffled by the model's seed: every
                     epoch's order is a pure function of (seed, epoch))
  position           the epoch and the batch to continue from, with the running loss/accuracy sums
                     and seconds of a partly trained epoch
  callback states    History so far and every callback's get_state() (EarlyStopping's counters,
                     ModelCheckpoint's best value, ...); arrays in them as ``array_000``, ...
  description        ``hpcnn_backup_json``: all of the above that is not an array, plus the model's
                     config and what the data looked like (batches per epoch, batch size, rows),
                     checked when resuming, and the replica count it trained on (not checked: a
                     backup resumes on any count that divides its global batch, see
                     docs/distributed.md)
  checksums          (format_version 2) ``checksums`` in the description: the SHA-256 of every
                     array dataset (its name, dtype, shape and values as read back), and
                     ``hpcnn_backup_json_sha256``: the SHA-256 of the description's bytes. A file
                     damaged on disk after it was written (truncated, bytes overwritten, a dataset
                     removed: a node that died while copying it to a shared file system) is a
                     FileProblem before anything is applied. Backups of format_version 1 (before
                     the checksums) still resume, without that check.

This module writes and reads one backup file (``write_backup``, ``read_backup``: everything read
is checked before anything is applied); the callback decides when, where, and what to say.
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Dict, List, Tuple

import numpy as np

from .. import _core, validation
from ..errors import FileProblem, OtherTraining
from .compile_config import describe
from .h5tree import H5Tree
from .hpcnn_files import (description_bytes, json_bytes, optimizer_dataset, optimizer_state, parse_description,
                          read_optimizer_buffers, read_weights, rng_state, weight_dataset, write_file)

BACKUP_FORMAT = "hpcnn-backup"
BACKUP_FORMAT_VERSION = 2  # 1: before the checksums (still read)
BACKUP_META = "hpcnn_backup_json"
BACKUP_DIGEST = "hpcnn_backup_json_sha256"  # the SHA-256 (hex) of BACKUP_META's bytes
BACKUP_FILE = "backup.h5"
PREVIOUS_FILE = "backup-previous.h5"  # double_checkpoint=True: the backup before the newest
NEXT_FILE = "backup-next.h5"  # a new backup until it is renamed to BACKUP_FILE
_ARRAY_TAG = "__hpcnn_array__"


def _array_dataset(i: int) -> str:
    return f"array_{i:03d}"


# ---------------------------------------------------------------------- callback states <-> files
def _to_json(obj: Any, arrays: List[np.ndarray], where: str) -> Any:
    """A callback state as JSON, its arrays moved to `arrays` (replaced by a reference)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        arrays.append(np.ascontiguousarray(obj))
        return {_ARRAY_TAG: len(arrays) - 1}
    if isinstance(obj, (list, tuple)):
        return [_to_json(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise ValueError(f"BackupAndRestore: {where} has the key {k!r}; state keys must be strings")
            out[k] = _to_json(v, arrays, f"{where}[{k!r}]")
        return out
    raise ValueError(f"BackupAndRestore: {where} is a {type(obj).__name__}; callback states hold numbers, strings, "
                     "booleans, None, lists, dicts and NumPy arrays")


def _from_json(obj: Any, arrays: List[np.ndarray]) -> Any:
    if isinstance(obj, list):
        return [_from_json(v, arrays) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {_ARRAY_TAG}:
            k = obj[_ARRAY_TAG]
            if not (isinstance(k, int) and 0 <= k < len(arrays)):
                raise FileProblem(f"a callback state refers to array {k!r:.50}, which it does not hold")
            return arrays[k]
        return {k: _from_json(v, arrays) for k, v in obj.items()}
    return obj


def keyed(callbacks: List[Any]) -> List[Tuple[str, Any]]:
    """('EarlyStopping#0', cb), ...: a callback's key is its class and its rank among the callbacks
    of that class, so a resumed fit matches states to callbacks even when others were added."""
    seen: Dict[str, int] = {}
    out = []
    for cb in callbacks:
        name = type(cb).__name__
        out.append((f"{name}#{seen.get(name, 0)}", cb))
        seen[name] = seen.get(name, 0) + 1
    return out


def dataset_checksum(name: str, a: np.ndarray) -> str:
    """The SHA-256 of a dataset as it reads back (H5Tree gives floats as float32, integers as
    stored), with its name, dtype and shape: a value, a shape or a name damaged on disk differs."""
    a = np.asarray(a)
    a = a.astype(np.uint8) if a.dtype.kind == "b" else a  # (booleans are stored, and read, as uint8)
    a = a.astype("<f4") if a.dtype.kind == "f" else a.astype(a.dtype.newbyteorder("<"))
    h = hashlib.sha256(f"{name}|{a.dtype.str}|{a.shape}|".encode())
    h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _normalized(obj: Any) -> Any:
    """As it reads back from JSON (tuples become lists): for comparing configs."""
    return json.loads(json.dumps(obj))


def write_backup(path: str, model: Any, callbacks: List[Any], owner: Any, signature: Dict[str, Any],
                 position: Dict[str, Any]) -> None:
    """Writes a backup of the model, its optimizer, the random state, the states of `callbacks`
    (all but `owner`, the callback writing it) and the training position."""
    desc, buffers = optimizer_state(model)
    arrays: Dict[str, np.ndarray] = {}
    for i, w in enumerate(model.get_weights()):
        arrays[weight_dataset(i)] = w
    for i, b in enumerate(buffers):
        arrays[optimizer_dataset(i)] = b
    cb_arrays: List[np.ndarray] = []
    states = []
    for key, cb in keyed(callbacks):
        if cb is owner:
            continue
        state = cb.get_state()
        if state is not None:
            states.append({"key": key, "state": _to_json(state, cb_arrays, f"{type(cb).__name__}.get_state()")})
    for i, a in enumerate(cb_arrays):
        arrays[_array_dataset(i)] = a
    meta = {"format": BACKUP_FORMAT, "format_version": BACKUP_FORMAT_VERSION,
            "hpcnn_version": _core.build_info()["version"], "written": time.strftime("%Y-%m-%d %H:%M:%S"),
            "config": model.get_config(), "weight_names": model.weight_names(),
            "compile": describe(model), "optimizer_state": desc,
            "rng": rng_state(model), "fit": signature, "position": position, "callbacks": states,
            "arrays": len(cb_arrays), "checksums": {name: dataset_checksum(name, a) for name, a in arrays.items()}}
    raw = json_bytes(meta)
    arrays[BACKUP_META] = raw
    arrays[BACKUP_DIGEST] = np.frombuffer(hashlib.sha256(raw.tobytes()).hexdigest().encode(), np.uint8)
    # Uncompressed: float weights hardly compress, and the write stays a plain copy.
    write_file(path, arrays, "BackupAndRestore")


# ---- reading (called by fit)
def read_backup(path: str, model: Any, signature: Dict[str, Any], backup_dir: str) -> Dict[str, Any]:
    """Everything in the backup at `path`, checked against this fit (`signature`: what its data
    looks like); nothing is applied yet. FileProblem when it is damaged, OtherTraining when it is
    another training's (`backup_dir` is named in the advice), ValueError when it is not a backup."""
    try:
        tree = H5Tree.open(path)
    except ValueError as e:
        raise ValueError(f"BackupAndRestore: '{path}' is not an hpcnn backup file ({e})") from None
    with tree:
        return _read_backup(tree, model, signature, backup_dir)


def _read_backup(tree: H5Tree, model: Any, signature: Dict[str, Any], backup_dir: str) -> Dict[str, Any]:
    path = tree.label
    meta = _checked_description(tree)
    for key, kind in (("config", dict), ("compile", (dict, type(None))), ("optimizer_state", (dict, type(None))),
                      ("rng", dict), ("fit", dict), ("position", dict), ("callbacks", list), ("arrays", int)):
        if not isinstance(meta.get(key), kind):
            raise FileProblem(f"its backup description has no valid '{key}'")
    checksums = meta.get("checksums")
    if meta["format_version"] >= 2:
        _check_members(tree, checksums)
    # The same model, optimizer and data: anything else could not continue the same training.
    mine, theirs = _normalized(model.get_config()), meta["config"]
    if mine != theirs:
        raise OtherTraining(f"BackupAndRestore: the backup '{path}' was written for another model "
                            f"({_config_difference(theirs, mine)}); use another backup_dir for this model, or "
                            f"delete '{backup_dir}' to train it from the start")
    comp = describe(model)
    if meta["compile"] is not None and comp is not None and meta["compile"]["optimizer"] != comp["optimizer"]:
        raise OtherTraining(f"BackupAndRestore: the backup '{path}' was written training with "
                            f"{meta['compile']['optimizer']}, this model is compiled with {comp['optimizer']}")
    theirs_fit = meta["fit"]
    for key, label in (("data", "data kind"), ("steps", "batches per epoch"), ("batch_size", "batch size"),
                       ("rows", "training rows"), ("shuffle", "shuffle")):
        if theirs_fit.get(key) != signature.get(key):
            raise OtherTraining(f"BackupAndRestore: the backup '{path}' was written by a fit with {label} "
                                f"{theirs_fit.get(key)!r}, this fit has {signature.get(key)!r}: resuming needs the "
                                f"same data, batch size and steps_per_epoch (or delete '{backup_dir}' to train "
                                "from the start)")
    # Backups written before the shuffle modes (no "data_shuffle") resume under any.
    if "data_shuffle" in theirs_fit and theirs_fit["data_shuffle"] != signature.get("data_shuffle"):
        raise OtherTraining(f"BackupAndRestore: the backup '{path}' was written by a fit over a dataset with "
                            f"shuffle_mode {theirs_fit['data_shuffle']!r}, this fit's dataset has "
                            f"{signature.get('data_shuffle')!r}: another order makes other batches; resume with "
                            f"HDF5Dataset(shuffle={theirs_fit['data_shuffle']!r})".replace("'off'", "False")
                            + f" (or delete '{backup_dir}' to "
                            "train from the start)")
    pos = meta["position"]
    for key in ("epoch", "batch", "seen"):
        if not (validation.is_integer(pos.get(key)) and not isinstance(pos.get(key), bool) and pos[key] >= 0):
            raise FileProblem(f"its position has no valid '{key}' ({pos.get(key)!r:.50})")
    for key in ("loss_sum", "correct", "seconds"):
        if not isinstance(pos.get(key), (int, float)) or isinstance(pos.get(key), bool):
            raise FileProblem(f"its position has no valid '{key}' ({pos.get(key)!r:.50})")
    if pos["batch"] > signature["steps"]:
        raise FileProblem(f"its position (batch {pos['batch']}) is beyond the {signature['steps']} batches of "
                          "an epoch")
    weights = read_weights(tree, model)
    desc = meta["optimizer_state"]
    buffers = read_optimizer_buffers(tree, model, desc) if desc is not None else []
    cb_arrays = [tree.read_array("/" + _array_dataset(i), "a callback state's array") for i in range(meta["arrays"])]
    if checksums is not None:  # every value read is the value written
        for name, a in ([(weight_dataset(i), w) for i, w in enumerate(weights)]
                        + [(optimizer_dataset(i), b) for i, b in enumerate(buffers)]
                        + [(_array_dataset(i), a) for i, a in enumerate(cb_arrays)]):
            if dataset_checksum(name, a) != checksums.get(name):
                raise FileProblem(f"the checksum of its dataset '{name}' does not match its contents: the file was "
                                  "damaged after it was written (bytes overwritten or lost)")
    states = {}
    for entry in meta["callbacks"]:
        if not (isinstance(entry, dict) and isinstance(entry.get("key"), str) and isinstance(entry.get("state"), dict)):
            raise FileProblem(f"its callback states are malformed ({entry!r:.100})")
        states[entry["key"]] = _from_json(entry["state"], cb_arrays)
    return {"meta": meta, "weights": weights, "optimizer": desc, "buffers": buffers, "states": states,
            "position": pos, "path": path}


def _checked_description(tree: H5Tree) -> Dict[str, Any]:
    """The backup's description, its checksum checked (format_version 2) before it is parsed: a
    damaged description is damage, never taken for another training's backup."""
    raw = description_bytes(tree, BACKUP_META, "BackupAndRestore", "backup")
    digest = tree.dataset("/" + BACKUP_DIGEST)
    if digest is not None:
        if digest["dtype"] != "uint8" or tuple(digest["shape"]) != (64,):
            raise FileProblem(f"its checksum '{BACKUP_DIGEST}' is {digest['dtype']} {tuple(digest['shape'])}, not a "
                              "SHA-256")
        stored = np.asarray(tree.reader.read("/" + BACKUP_DIGEST)).astype(np.uint8).tobytes()
        if stored != hashlib.sha256(raw).hexdigest().encode():
            raise FileProblem("the checksum of its description does not match: the file was damaged after it was "
                              "written (bytes overwritten or lost)")
    meta = parse_description(raw, BACKUP_FORMAT, BACKUP_FORMAT_VERSION, "backup")
    if meta["format_version"] >= 2 and digest is None:
        raise FileProblem(f"it has no '{BACKUP_DIGEST}' (the checksum of its description): a dataset was removed")
    return meta


def _check_members(tree: H5Tree, checksums: Any) -> None:
    """The datasets of a format_version 2 backup are exactly those its checksums name."""
    if not (isinstance(checksums, dict) and all(isinstance(v, str) for v in checksums.values())):
        raise FileProblem("its backup description has no valid 'checksums'")
    present = {p.lstrip("/") for p, o in tree.objects.items() if o["kind"] == "dataset"} - {BACKUP_META, BACKUP_DIGEST}
    missing, extra = sorted(set(checksums) - present), sorted(present - set(checksums))
    if missing:
        raise FileProblem(f"its dataset(s) {', '.join(missing[:5])} are missing (the file is damaged: truncated, or a "
                          "dataset was removed)")
    if extra:
        raise FileProblem(f"it holds dataset(s) its checksums do not name ({', '.join(extra[:5])})")


def backup_fit(path: str) -> Dict[str, Any]:
    """The description of the fit that wrote the backup at `path` (batch size, batches per epoch,
    rows, replicas: what ``_Run.signature`` held), read without its arrays; {} when the file
    cannot be read as a backup (``read_backup`` says why when it is resumed)."""
    try:
        with H5Tree.open(path) as tree:
            meta = _checked_description(tree)
    except (ValueError, FileProblem):
        return {}
    fit = meta.get("fit")
    return fit if isinstance(fit, dict) else {}


def _config_difference(theirs: Dict[str, Any], mine: Dict[str, Any]) -> str:
    a, b = theirs.get("layers") or [], mine.get("layers") or []
    if len(a) != len(b):
        return f"{len(a)} layers in the backup, {len(b)} in this model"
    for i, (la, lb) in enumerate(zip(a, b)):
        if la != lb:
            return f"layer {i}: {json.dumps(la)[:150]} in the backup, {json.dumps(lb)[:150]} here"
    return "their configs differ"
