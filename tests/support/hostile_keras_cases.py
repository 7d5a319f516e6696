"""The .keras archive and model_from_json families of the hostile model-file corpus
(tests/support/hostile_model_kinds.py describes the registry; tests/support/hostile_models.py runs the cases).

Bases: hpcnn models with seeded weights, saved by hpcnn (hpcnn's own members: load_model reads its
description) and as Keras writes them (config.json, metadata.json, model.weights.h5: load_model
builds the model from the config), stored and deflated; for model_from_json, their Keras 3 JSON
and hpcnn's own config. Kinds: damage to the zip (bit flips anywhere or in its headers, truncation,
lying sizes, methods and flags, the end record), to its members (swapped, renamed, missing, extra,
duplicated, hostile names, symbolic links, zip bombs), to the config (deep, long, random edits,
class names, Lambda and custom objects), to the weights (shapes, dtypes, NaN, missing and extra
arrays), valid variants that must load, and the same for model_from_json's text.
"""
from __future__ import annotations

import json
import os
import pickle
import tempfile
import warnings
from typing import List, Optional, Tuple

import numpy as np

from tests.support import archive_tools as at
from tests.support.hostile_model_kinds import Base, Case, Family, family, kind

# Files the hostile code would leave if it ever ran: hostile_models.py checks that none appears.
# (Relative: the worker runs in its own folder, so the case bytes do not depend on where it is.)
RAN_MARKER = "hostile_code_ran"
HOSTILE_NAMES = ["keras.src.layers.core.dense.Dense", "os.system", "builtins.eval", "subprocess.Popen",
                 f"{at.PAYLOAD_MODULE}.Evil", "Dense ", "", "x" * 150, "__import__('os').system('id')", "Den\u00dfe",
                 "Lambda", "TFOpLambda", "__lambda__"]
HOSTILE_VALUES = [None, True, False, -1, 0, 1, 3, 2 ** 31, 2 ** 40, -2 ** 63, 1e308, -1e308, 0.5, "x", "", "same",
                  "relu", [], {}, [None], [1, 2], [-1, 2 ** 40, 3], {"class_name": "os.system", "config": {}},
                  {"class_name": "Zeros", "config": {}}, "A" * 300]
_MODELS = {}  # base name -> the hpcnn model it was saved from (the weights kinds rewrite its weights)


# ---------------------------------------------------------------------- bases
def _seeded(model, seed):
    rng = np.random.default_rng(seed)
    model.build()
    model.set_weights([rng.uniform(0.1, 1.0, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


def _expected(model):
    return [w.copy() for w in model.get_weights()], model.get_config()["layers"]


def archive_bases() -> List[Base]:
    from tests.support.small_models import residual_model, small_model
    out = []
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, make in (("seq", lambda: small_model(seed=3)), ("residual", lambda: residual_model(seed=5))):
            m = _seeded(make(), 7)
            m.compile("adam", "sparse_categorical_crossentropy")
            path = os.path.join(d, f"{name}.keras")
            m.save(path)
            members = at.read_members(path)
            members = [(n, json.dumps({"keras_version": "3.15.1", "date_saved": "2020-01-01@00:00:00"}).encode()
                        if n == "metadata.json" else at.fixed_times(b) if n.endswith(".h5") else b) for n, b in members]
            keras = [(n, at.fixed_times(b) if n.endswith(".h5") else b) for n, b in at.keras_members(path)]
            for base, data in ((f"hpcnn_{name}", at.build(members)), (f"keras_{name}", at.build(keras)),
                               (f"keras_{name}_deflated", at.build(keras, deflate=True))):
                out.append(Base(base, data, _expected(m)))
                _MODELS[base] = m
    return out


def json_bases() -> List[Base]:
    from tests.support.small_models import residual_model, small_model
    out = []
    for name, m in (("seq", small_model(seed=3)), ("residual", residual_model(seed=5))):
        m.build()
        out.append(Base(f"keras_json_{name}", m.to_json().encode(), _expected(m)))
        out.append(Base(f"hpcnn_json_{name}", json.dumps(m.get_config()).encode(), _expected(m)))
    return out


def _same_model(got, base: Base, case: Case) -> Optional[str]:
    weights, layers = base.expected
    have = got.get_weights()
    if len(have) != len(weights) or any(a.shape != b.shape or not np.array_equal(a, b) for a, b in zip(have, weights)):
        return "loaded, with other weights than the file's"
    if not case.changes_model and got.get_config()["layers"] != layers:
        return "loaded, with another architecture than the file's"
    return None


def _same_config(got, base: Base, case: Case) -> Optional[str]:
    if not hasattr(got, "get_config"):
        return f"returned {type(got).__name__}, not a model"
    if not case.changes_model and got.get_config()["layers"] != base.expected[1]:
        return "returned a model of another architecture than the text's"
    return None


def _load_archive(path):
    from hpcnn.models import load_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_model(path)


def _from_json(path):
    from hpcnn.models import model_from_json
    with open(path, "rb") as f:
        text = f.read()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model_from_json(text)


family(Family("keras", ".keras", archive_bases, _load_archive, _same_model, lambda msg, path: path in msg))
family(Family("json", ".json", json_bases, _from_json, _same_config,
              lambda msg, path: msg.startswith("model_from_json")))


# ---------------------------------------------------------------------- helpers
def pick(rng, items):
    return items[int(rng.integers(len(items)))]


def members_of(base: Base) -> List[Tuple[str, bytes]]:
    return at.read_members(base.data)


def deflated(base: Base) -> Tuple[str, ...]:
    return ("config.json", "metadata.json", "model.weights.h5") if base.name.endswith("_deflated") else ()


def rebuilt(base: Base, members) -> bytes:
    return at.build(members, deflate=deflated(base))


def keras_bases(bases):
    return [b for b in bases if b.name.startswith("keras_")]


def flip_bits(rng, data: bytes, regions=None, count=None) -> Tuple[bytes, str]:
    b = bytearray(data)
    count = count or int(rng.integers(1, 17))
    spots = []
    for _ in range(count):
        if regions:
            start, end = pick(rng, regions)
            at_ = int(rng.integers(start, max(start + 1, min(end, len(b)))))
        else:
            at_ = int(rng.integers(len(b)))
        bit = int(rng.integers(8))
        b[at_] ^= 1 << bit
        spots.append(at_)
    return bytes(b), f"{count} bit flips at {sorted(spots)[:6]}"


def zip_regions(data: bytes):
    """(start, end) byte ranges of the zip's own structures: local headers, directory entries, end record."""
    regions = []
    for _, central, local in at._entries(data):
        regions.append((local, local + 30))
        regions.append((central, central + 46))
    end = data.rfind(b"PK\x05\x06")
    if end >= 0:
        regions.append((end, end + 22))
    return regions


# ---------------------------------------------------------------------- the zip itself
@kind("bit flips anywhere", "keras", 4)
def _bit_flips(rng, bases):
    base = pick(rng, bases)
    data, desc = flip_bits(rng, base.data)
    return Case(data, f"{base.name}: {desc}")


@kind("bit flips in zip headers", "keras", 4)
def _header_flips(rng, bases):
    base = pick(rng, bases)
    data, desc = flip_bits(rng, base.data, zip_regions(base.data), count=int(rng.integers(1, 4)))
    return Case(data, f"{base.name}: {desc} (headers)")


@kind("truncation", "keras", 2)
def _truncation(rng, bases):
    base = pick(rng, bases)
    n = int(rng.integers(len(base.data)))
    return Case(base.data[:n], f"{base.name}: truncated to {n} of {len(base.data)} bytes")


@kind("lying sizes", "keras", 3)
def _lying_sizes(rng, bases):
    base = pick(rng, bases)
    name = pick(rng, [n for n, _ in members_of(base)])
    field = pick(rng, ["file_size", "compress_size", "both"])
    value = int(pick(rng, [0, 1, 100, 0xFFFFFFFF, 1 << 31, int(rng.integers(1 << 32))]))
    sizes = {"file_size": value} if field == "file_size" else (
        {"compress_size": value} if field == "compress_size" else {"file_size": value, "compress_size": value})
    return Case(at.patch(base.data, name, **sizes), f"{base.name}: {name} declares {sizes}")


@kind("compression methods and flags", "keras", 2)
def _methods(rng, bases):
    base = pick(rng, bases)
    name = pick(rng, [n for n, _ in members_of(base)])
    if rng.random() < 0.5:
        method = int(pick(rng, [1, 6, 9, 12, 14, 93, 95, 98, 99, int(rng.integers(1 << 16))]))
        return Case(at.patch(base.data, name, method=method), f"{base.name}: {name} method {method}",
                    must_refuse=True)
    flags = int(pick(rng, [1, 0x41, 0x2000, int(rng.integers(1 << 16))]))
    return Case(at.patch(base.data, name, flags=flags), f"{base.name}: {name} flags {flags:#x}",
                must_refuse=bool(flags & 1))


@kind("end record", "keras", 2)
def _end_record(rng, bases):
    base = pick(rng, bases)
    entries = int(pick(rng, [0, 1, 2, 65, 60000, 0xFFFF, int(rng.integers(1 << 16))]))
    directory = int(pick(rng, [0, 46, 1 << 18, (1 << 18) + 1, 0xFFFFFFFF, int(rng.integers(1 << 32))]))
    if rng.random() < 0.5:
        return Case(at.patch_end_record(base.data, entries=entries), f"{base.name}: end record lists {entries}")
    return Case(at.patch_end_record(base.data, directory=directory),
                f"{base.name}: end record's directory is {directory} bytes")


# ---------------------------------------------------------------------- members
@kind("members swapped or renamed", "keras", 3)
def _swapped(rng, bases):
    base = pick(rng, bases)
    members = members_of(base)
    names = [n for n, _ in members]
    i, j = rng.choice(len(members), 2, replace=False)
    if rng.random() < 0.5:
        data = dict(members)
        swapped = [(n, data[names[j]] if k == i else data[names[i]] if k == j else d) for k, (n, d) in
                   enumerate(members)]
        return Case(rebuilt(base, swapped), f"{base.name}: contents of {names[i]} and {names[j]} swapped")
    new = pick(rng, ["config.json", "metadata.json", "model.weights.h5", "hpcnn.json", "hpcnn_state.h5",
                     "model.weights.npz", "Config.json", "config.json ", "model.weights.h5/"])
    renamed = [(new if k == i else n, d) for k, (n, d) in enumerate(members)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a duplicate name, on purpose
        return Case(rebuilt(base, renamed), f"{base.name}: {names[i]} renamed {new!r}")


@kind("missing member", "keras", 2)
def _missing(rng, bases):
    base = pick(rng, bases)
    members = members_of(base)
    drop = pick(rng, [n for n, _ in members])
    return Case(rebuilt(base, [m for m in members if m[0] != drop]), f"{base.name}: no {drop}")


@kind("extra member", "keras", 2)
def _extra(rng, bases):
    base = pick(rng, bases)
    name = pick(rng, ["evil.py", "model.pkl", "assets/", "assets/vocab.txt", "__init__.py", f"{at.PAYLOAD_MODULE}.py",
                      "variables/variables.index", "saved_model.pb", "keras_metadata.pb"])
    payload = pickle.dumps({"x": 1}) if name.endswith(".pkl") else f"open({RAN_MARKER!r}, 'w')\n".encode()
    members = members_of(base)
    members.insert(int(rng.integers(len(members) + 1)), (name, payload))
    return Case(rebuilt(base, members), f"{base.name}: extra member {name!r}", must_refuse=True)


@kind("duplicate member", "keras", 2)
def _duplicate(rng, bases):
    base = pick(rng, bases)
    members = members_of(base)
    name, data = pick(rng, members)
    other = pick(rng, [data, b"{}", b"", members[0][1]])
    members.insert(int(rng.integers(len(members) + 1)), (name, other))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Case(rebuilt(base, members), f"{base.name}: {name} twice", must_refuse=True)


@kind("hostile member names", "keras", 3)
def _names(rng, bases):
    base = pick(rng, bases)
    members = members_of(base)
    hostile = pick(rng, ["../", "../../../../tmp/", "/", "/etc/", "C:/", "C:\\", "..\\", "\\\\server\\", "a/../../",
                         "./", "assets/../", "\u202e", "x\x01"])
    i = int(rng.integers(len(members)))
    renamed = [((hostile + n) if k == i else n, d) for k, (n, d) in enumerate(members)]
    if rng.random() < 0.3:  # added, not renamed
        renamed = members + [(hostile + members[i][0], members[i][1])]
    return Case(rebuilt(base, renamed), f"{base.name}: member {hostile + members[i][0]!r}", must_refuse=True)


@kind("symbolic link member", "keras", 1)
def _symlink(rng, bases):
    base = pick(rng, bases)
    members = members_of(base)
    i = int(rng.integers(len(members)))
    target = pick(rng, ["/etc/passwd", "../../secret", "/dev/zero", "/proc/self/mem", members[i][0]])
    linked = [at.symlink(n, target) if k == i else (n, d) for k, (n, d) in enumerate(members)]
    return Case(at.build(linked), f"{base.name}: {members[i][0]} a link to {target}", must_refuse=True)


@kind("zip bomb", "keras", 2)
def _bomb(rng, bases):
    base = pick(rng, bases)
    members = members_of(base)
    name = pick(rng, [n for n, _ in members])
    size = int(rng.integers(2 << 20, 9 << 20))
    filler = pick(rng, [b"\0", b" ", b"[", b"\xff"])
    data = dict(members)[name]
    bomb = data[:-1] + filler * size + data[-1:] if name.endswith(".json") else data + filler * size
    blob = at.build([(n, bomb if n == name else d) for n, d in members], deflate=(name,))
    lie = rng.random() < 0.4
    if lie:  # the listing declares the original size: zipfile stops there, the CRC fails
        blob = at.patch(blob, name, file_size=len(data))
    # Declared small, the member passes the listing's checks and is refused when it is read (its CRC
    # fails): an archive whose bomb is a member hpcnn never reads (metadata.json) loads, unharmed.
    return Case(blob, f"{base.name}: {name} inflates {size} bytes of {filler!r}" + (", declared small" if lie else ""),
                must_refuse=not lie)


# ---------------------------------------------------------------------- config.json
def edit_config(rng, base: Base, edit) -> Tuple[bytes, str, bool]:
    members = members_of(base)
    member = "hpcnn.json" if base.name.startswith("hpcnn_") else "config.json"
    cfg = json.loads(dict(members)[member])
    target = cfg["config"] if member == "hpcnn.json" else cfg
    desc, refuse = edit(rng, target)
    return rebuilt(base, [(n, json.dumps(cfg).encode() if n == member else d) for n, d in members]), \
        f"{base.name}: {member}: {desc}", refuse


def _nodes(value):
    """(container, key) for every place in a JSON value, without recursion."""
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, child in items:
            out.append((v, k))
            stack.append(child)
    return out


def mutate(rng, cfg) -> Tuple[str, bool]:
    """One random edit of a config in place: (what, whether it must be refused)."""
    op = pick(rng, ["value", "value", "delete", "class name", "custom", "lambda", "layers"])
    nodes = _nodes(cfg)
    if op == "value" and nodes:
        holder, key = pick(rng, nodes)
        value = pick(rng, HOSTILE_VALUES)
        holder[key] = json.loads(json.dumps(value))
        return f"{key!r} = {str(value)[:40]}", False
    if op == "delete":
        dicts = [(h, k) for h, k in nodes if isinstance(h, dict)]
        if dicts:
            holder, key = pick(rng, dicts)
            del holder[key]
            return f"{key!r} deleted", False
    objects = [h[k] for h, k in nodes if isinstance(h[k], dict) and "class_name" in h[k]]
    if op == "class name" and objects:
        obj = pick(rng, objects)
        name = pick(rng, HOSTILE_NAMES)
        obj["class_name"] = name
        refuse = name in ("Lambda", "TFOpLambda", "__lambda__") or not name.isidentifier() or len(name) > 100 \
            or not name.isascii()
        return f"class_name {name[:40]!r}", refuse
    if op == "custom" and objects:
        obj = pick(rng, objects)
        if rng.random() < 0.5:
            obj["module"] = at.PAYLOAD_MODULE
        else:
            obj["registered_name"] = f"{at.PAYLOAD_MODULE}>Evil"
        return f"custom object {obj.get('class_name')!r}", True
    layers = cfg.get("config", cfg).get("layers") if isinstance(cfg.get("config", cfg), dict) else None
    if isinstance(layers, list) and layers:
        if op == "lambda":
            layers.insert(int(rng.integers(len(layers) + 1)), at.lambda_layer(RAN_MARKER))
            return "a Lambda layer", True
        i, j = int(rng.integers(len(layers))), int(rng.integers(len(layers)))
        how = pick(rng, ["swap", "duplicate", "drop"])
        if how == "swap":
            layers[i], layers[j] = layers[j], layers[i]
        elif how == "duplicate":
            layers.insert(j, json.loads(json.dumps(layers[i])))
        else:
            del layers[i]
        return f"layers: {how} {i}, {j}", False
    return "no edit", False


@kind("config edits", "keras", 8)
def _config_edits(rng, bases):
    base = pick(rng, bases)
    data, desc, refuse = edit_config(rng, base, mutate)
    # hpcnn's own description builds by its own table: no Keras class rules, but never code either
    return Case(data, desc, must_refuse=refuse and base.name.startswith("keras_"), changes_model=True)


@kind("config nested deep", "keras", 2)
def _deep(rng, bases):
    base = pick(rng, keras_bases(bases))
    depth = int(pick(rng, [50, 99, 100, 101, 102, 1000, 5000, 100000]))
    members = members_of(base)
    cfg = dict(members)["config.json"]
    opener, closer = pick(rng, [(b"[", b"]"), (b'{"a":', b"}")])
    value = opener * (depth - 1) + (b"1" if opener != b"[" else b"") + closer * (depth - 1)
    if opener == b'{"a":':
        value = opener * (depth - 1) + b"1" + closer * (depth - 1)
    text = cfg[:-1] + b', "pad": ' + value + b"}"
    return Case(rebuilt(base, [(n, text if n == "config.json" else d) for n, d in members]),
                f"{base.name}: config.json nested {depth} deep", must_refuse=depth > 100, must_load=depth <= 100)


@kind("config too long", "keras", 1)
def _long(rng, bases):
    base = pick(rng, keras_bases(bases))
    members = members_of(base)
    cfg = dict(members)["config.json"]
    extra = int(pick(rng, [1, 2, 1000, 1 << 20]))
    text = cfg + b" " * ((16 << 20) - len(cfg) + extra)
    return Case(at.build([(n, text if n == "config.json" else d) for n, d in members], deflate=("config.json",)),
                f"{base.name}: config.json {len(text)} bytes", must_refuse=True)


@kind("code and custom objects", "keras", 3)
def _code(rng, bases):
    base = pick(rng, keras_bases(bases))

    def edit(rng, cfg):
        layers = cfg["config"]["layers"]
        where = pick(rng, ["lambda layer", "lambda activation", "custom layer", "custom activation",
                           "custom registered", "dotted class", "custom model"])
        i = int(rng.integers(1, len(layers)))
        if where == "lambda layer":
            layers.insert(i, at.lambda_layer(RAN_MARKER))
        elif where == "lambda activation":
            layers[i]["config"]["activation"] = at.lambda_layer(RAN_MARKER)["config"]["function"]
        elif where == "custom layer":
            layers[i]["module"] = at.PAYLOAD_MODULE
        elif where == "custom activation":
            layers[i]["config"]["activation"] = {"module": at.PAYLOAD_MODULE, "class_name": "function",
                                                 "config": "Evil", "registered_name": "function"}
        elif where == "custom registered":
            layers[i].update(class_name="Evil", registered_name=f"{at.PAYLOAD_MODULE}>Evil")
        elif where == "dotted class":
            layers[i]["class_name"] = f"{at.PAYLOAD_MODULE}.Evil"
        else:
            cfg["module"] = at.PAYLOAD_MODULE
        return f"{where} at layer {i}", True
    data, desc, refuse = edit_config(rng, base, edit)
    return Case(data, desc, must_refuse=True)


# ---------------------------------------------------------------------- weights
@kind("weights against the config", "keras", 3)
def _weights(rng, bases):
    from hpcnn import _core
    from hpcnn.formats.keras_weights import keras3_weight_items
    base = pick(rng, keras_bases(bases))
    items = keras3_weight_items(_MODELS[base.name])
    arrays = [i for i, (_, a, _) in enumerate(items) if a is not None]
    k = pick(rng, arrays)
    path, a, attrs = items[k]
    how = pick(rng, ["shape", "transposed", "int32", "uint8", "float64", "nan", "inf", "missing", "extra", "scalar",
                     "huge"])
    refuse, load = True, False
    if how == "shape":
        items[k] = (path, np.zeros(a.shape[:-1] + (a.shape[-1] + 1,), np.float32), attrs)
    elif how == "transposed":
        if a.ndim < 2 or a.shape == a.T.shape:
            how, refuse, load = "transposed (square: unchanged)", False, True
        items[k] = (path, np.ascontiguousarray(a.T), attrs)
    elif how in ("int32", "uint8"):
        items[k] = (path, a.astype(how), attrs)
    elif how == "float64":
        items[k] = (path, a.astype(np.float64), attrs)
        refuse, load = False, True
    elif how in ("nan", "inf"):
        b = a.copy()
        b.flat[int(rng.integers(b.size))] = np.nan if how == "nan" else np.inf
        items[k] = (path, b, attrs)
    elif how == "missing":
        del items[k]
    elif how == "extra":
        items.insert(k + 1, (path.rsplit("/", 1)[0] + "/99", a, attrs))
    elif how == "scalar":
        items[k] = (path, np.float32(1.0).reshape(()), attrs)
    else:
        items[k] = (path, np.zeros((1 << 16, 16), np.float32), attrs)
    weights = at.fixed_times(_core.data.h5_tree_image(items, "hostile"))
    members = [(n, weights if n == "model.weights.h5" else d) for n, d in members_of(base)]
    return Case(rebuilt(base, members), f"{base.name}: weight {path} {how}", must_refuse=refuse, must_load=load)


# ---------------------------------------------------------------------- valid variants
@kind("valid variants", "keras", 2)
def _valid(rng, bases):
    base = pick(rng, bases)
    members = members_of(base)
    order = [members[i] for i in rng.permutation(len(members))]
    deflate = tuple(n for n, _ in members if rng.random() < 0.5)
    comment = pick(rng, [b"", b"a comment", bytes(rng.integers(0, 256, 300, dtype=np.uint8))])
    return Case(at.build(order, deflate=deflate, comment=comment),
                f"{base.name}: reordered, deflated {deflate}, comment of {len(comment)}", must_load=True)


# ---------------------------------------------------------------------- model_from_json
@kind("json bit flips and truncation", "json", 3)
def _json_bytes(rng, bases):
    base = pick(rng, bases)
    if rng.random() < 0.3:
        n = int(rng.integers(len(base.data)))
        return Case(base.data[:n], f"{base.name}: truncated to {n}")
    data, desc = flip_bits(rng, base.data, count=int(rng.integers(1, 6)))
    return Case(data, f"{base.name}: {desc}", changes_model=True)


@kind("json edits", "json", 6)
def _json_edits(rng, bases):
    base = pick(rng, bases)
    cfg = json.loads(base.data)
    desc, refuse = mutate(rng, cfg)
    return Case(json.dumps(cfg).encode(), f"{base.name}: {desc}", must_refuse=refuse and base.name.startswith("keras_"),
                changes_model=True)


@kind("json deep and long", "json", 2)
def _json_limits(rng, bases):
    base = pick(rng, [b for b in bases if b.name.startswith("keras_")])
    if rng.random() < 0.8:
        depth = int(pick(rng, [99, 100, 101, 1000, 100000]))
        text = base.data[:-1] + b', "pad": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
        return Case(text, f"{base.name}: nested {depth} deep", must_refuse=depth > 100, must_load=depth <= 100)
    extra = int(pick(rng, [0, 1]))
    text = base.data + b" " * ((16 << 20) - len(base.data) + extra)
    return Case(text, f"{base.name}: {len(text)} bytes", must_refuse=extra > 0, must_load=extra == 0)


@kind("json valid variants", "json", 1)
def _json_valid(rng, bases):
    base = pick(rng, bases)
    indent = pick(rng, [None, 1, 4, "\t"])
    return Case(json.dumps(json.loads(base.data), indent=indent, ensure_ascii=bool(rng.random() < 0.5)).encode(),
                f"{base.name}: indent {indent!r}", must_load=True)
