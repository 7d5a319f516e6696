"""A seeded generator of hostile `.h5` model and weights files, and the judge of what hpcnn does with
them (issue 26's `.h5` bullet; tests/hostile/test_h5_tree_refusals.py has one regression test per kind).

Used by tests/hostile/test_hostile_model_h5.py, which runs the cases in worker subprocesses (a crash or a
hang must not take pytest down). Run by hand:

    python -m tests.support.hostile_model_h5 --seed 26 --cases 0:100          # one JSON line per case
    python -m tests.support.hostile_model_h5 --seed 26 --cases 17 --verbose   # one case, with details
    python -m tests.support.hostile_model_h5 --seed 26 --cases 17 --keep DIR  # ... and keep its file

Each case prints "START i" and a "RESULT {json}" line. A case is a pure function of (seed, index):
a valid base file, written by hpcnn (Keras 3 `.weights.h5`, legacy `.h5` weights, an hpcnn `.h5`
model, the same model as Keras writes it) or by Keras itself (tests/data/keras: tf.keras 2's model
and weights, Keras 3's `.weights.h5`), copied and edited with h5py by one to three damages drawn
from DAMAGES: external links, soft links and loops, hard-link cycles and shared groups, datasets
stored in an external file, virtual datasets, attributes around MAX_ATTRIBUTE_ELEMENTS, texts and
names that are not UTF-8, groups nested around MAX_DEPTH, absurd, overflowing and disagreeing
declared shapes, other dtypes; and harmless edits that must still load (names rewritten as fixed
or variable-length strings, weights as float64, unused groups and attributes inside the limits).

The judge: a case with a refusing damage must raise a ValueError (or MemoryError) that names the
file and says what one of its damages is; the weights of the model loaded into stay as they were.
A case with harmless edits only must load exactly the base's weights. Whatever a damage names as
another file is the worker's FIFO tripwire or a valid file that would load: a reader that opens
either fails the case (the tripwire notices any reader, and a followed valid file would load).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import threading
import time

import h5py
import numpy as np

from tests.support import hostile_driver, paths

KERAS_DATA = str(paths.KERAS_DATA)
DEFAULT_SEED = 26
# The worker's address-space limit: nothing a case declares may be allocated (not under ASan,
# whose shadow memory reserves terabytes of address space).
ADDRESS_SPACE_LIMIT = 3 << 30


def sanitized() -> bool:
    return "asan" in os.environ.get("LD_PRELOAD", "") or bool(os.environ.get("HPCNN_SANITIZE"))


# ---------------------------------------------------------------------------------------------
# The tripwire: a FIFO no reader may open.
# ---------------------------------------------------------------------------------------------
class Tripwire:
    """A thread polls for a reader of the FIFO (a writer's non-blocking open succeeds only while one
    has it open, blocked or not), counts it and lets it go (the reader sees end of file)."""

    def __init__(self, path):
        self.path = str(path)
        os.mkfifo(self.path)
        self.opened = 0  # readers seen so far
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        while not self._stop.is_set():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.005)
                continue
            self.opened += 1
            os.close(fd)  # the reader sees end of file and fails instead of blocking
            time.sleep(0.005)

    def close(self):
        self._stop.set()
        self._thread.join()


# ---------------------------------------------------------------------------------------------
# Base files and how each is loaded
# ---------------------------------------------------------------------------------------------
class Base:
    """A valid file, how hpcnn loads it, what it must load, and its objects."""

    def __init__(self, name, path, load, weights, datasets, groups, weight_datasets, names_attrs):
        self.name, self.path, self.load, self.weights = name, path, load, weights
        self.datasets, self.groups = datasets, groups            # every dataset / group path ("" = root)
        self.weight_datasets = weight_datasets                   # the datasets the loader reads as weights
        self.names_attrs = names_attrs                           # (group, attribute) lists of names


def _loader(kind, make_model):
    """load(path) -> weights, for a model file (load_model) or weights loaded into a fresh model
    whose weights were zeroed (a refusal must leave them zero)."""
    from hpcnn.models import load_model

    if kind == "model":
        return lambda path: load_model(path).get_weights()

    def load(path):
        m = make_model()
        m.set_weights([np.zeros_like(w) for w in m.get_weights()])
        try:
            m.load_weights(path)
        except BaseException:
            if any(np.any(w) for w in m.get_weights()):
                raise AssertionError("the refused load changed the model's weights") from None
            raise
        return m.get_weights()
    return load


def _objects(path):
    datasets, groups = [], [""]
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: (datasets if isinstance(o, h5py.Dataset) else groups).append(n))
    return datasets, groups


def _make_bases(workdir):
    from hpcnn.formats import hpcnn_files
    from hpcnn.models import load_model
    from tests.support.small_models import small_model

    bases = {}

    def add(name, path, kind, make_model, weight_root):
        load = _loader(kind, make_model)
        weights = load(path)
        datasets, groups = _objects(path)
        wd = [d for d in datasets if d.startswith(weight_root)]
        names = []
        with h5py.File(path, "r") as f:
            for g in groups:
                for a in ("layer_names", "weight_names"):
                    if a in f[g or "/"].attrs and f[g or "/"].attrs[a].dtype.kind in "OS":
                        names.append((g, a))
        bases[name] = Base(name, path, load, weights, datasets, groups, wd, names)

    m = small_model()
    p = os.path.join(workdir, "hp.weights.h5")
    m.save_weights(p)
    add("hpcnn .weights.h5", p, "weights", lambda: small_model(seed=9), "layers/")
    p = os.path.join(workdir, "hp_legacy.h5")
    m.save_weights(p)
    add("hpcnn legacy weights .h5", p, "weights", lambda: small_model(seed=9), "")
    p = os.path.join(workdir, "hp_model.h5")
    m.compile("adam", "sparse_categorical_crossentropy")
    m.save(p)
    add("hpcnn model .h5", p, "model", None, "model_weights/")
    p = os.path.join(workdir, "as_keras_model.h5")
    shutil.copy(os.path.join(workdir, "hp_model.h5"), p)
    with h5py.File(p, "r+") as f:
        del f[hpcnn_files.META_DATASET]
        for k in [k for k in f if k.startswith("optimizer_")]:
            del f[k]
    add("hpcnn model .h5 as Keras writes it", p, "model", None, "model_weights/")
    tfk2 = lambda: load_model(os.path.join(KERAS_DATA, "tfk2_cnn.h5"), compile=False)  # noqa: E731
    k3 = lambda: load_model(os.path.join(KERAS_DATA, "k3_cnn.keras"), compile=False)  # noqa: E731
    for name, file, kind, make, root in [("tf.keras 2 model .h5", "tfk2_cnn.h5", "model", None, "model_weights/"),
                                         ("tf.keras 2 weights .h5", "tfk2_cnn_weights.h5", "weights", tfk2, ""),
                                         ("Keras 3 .weights.h5", "k3_cnn.weights.h5", "weights", k3, "layers/")]:
        p = os.path.join(workdir, file)
        shutil.copy(os.path.join(KERAS_DATA, file), p)
        add(name, p, kind, make, root)
    return bases


# ---------------------------------------------------------------------------------------------
# Damages: each edits the open file (h5py, mode r+) and returns (description, phrases): the
# refusal must say one of the phrases; an empty tuple: harmless, the file must still load.
# ---------------------------------------------------------------------------------------------
def _pick(rng, items):
    return items[int(rng.integers(len(items)))]


def _alive(f, paths, want):
    """The `paths` that an earlier damage of the case left as a `want` ('dataset' or 'group')
    reached through hard links only."""
    out = []
    for p in paths:
        parts = p.split("/") if p else []
        try:
            if not all(isinstance(f.get("/".join(parts[:i + 1]), getlink=True), h5py.HardLink)
                       for i in range(len(parts))):
                continue
            obj = f[p or "/"]
        except (KeyError, ValueError, OSError, RuntimeError):
            continue
        if isinstance(obj, h5py.Dataset) == (want == "dataset"):
            out.append(p)
    return out


NOTHING = ("nothing left to damage", ())


def _original(base, where):
    """The base's own values of dataset `where` (an earlier damage may have made the case's huge)."""
    with h5py.File(base.path, "r") as f:
        return np.asarray(f[where])


def _names_attrs(f, base):
    alive = set(_alive(f, [g for g, _ in base.names_attrs], "group"))
    return [(g, a) for g, a in base.names_attrs if g in alive and a in f[g or "/"].attrs]


def _other_file(ctx):
    """Another file a damage names: the tripwire, or a valid file (which would load if followed)."""
    return ctx["tripwire"] if ctx["rng"].random() < 0.5 else ctx["valid_file"]


def d_external_link(f, base, ctx):
    rng = ctx["rng"]
    target = _other_file(ctx)
    alive = _alive(f, base.weight_datasets, "dataset") + _alive(f, base.groups[1:], "group")
    where = _pick(rng, alive) if alive and rng.random() < 0.8 else "extra_link"
    if where in f:
        del f[where]
    f[where] = h5py.ExternalLink(target, "/" + (_pick(rng, base.datasets) if rng.random() < 0.7 else "x"))
    return f"external link '{where}' -> '{target}'", ("is an external link",)


def d_soft_link(f, base, ctx):
    rng = ctx["rng"]
    alive = _alive(f, base.weight_datasets, "dataset") + _alive(f, base.groups[1:], "group")
    if not alive:
        return NOTHING
    where = _pick(rng, alive)
    target = _pick(rng, ["/" + _pick(rng, base.datasets), "/" + where, "/" + where.rsplit("/", 1)[0], "/nowhere",
                         "/"])
    del f[where]
    f[where] = h5py.SoftLink(target)
    return f"soft link '{where}' -> '{target}'", ("is a soft link",)


def d_hard_link(f, base, ctx):
    rng = ctx["rng"]
    groups = _alive(f, base.groups, "group")
    group = _pick(rng, groups)
    parts = group.split("/") if group else []
    if rng.random() < 0.6:  # a cycle: an ancestor (or the group itself) linked inside it
        ancestor = "/".join(parts[:int(rng.integers(len(parts) + 1))])
        target = f[ancestor or "/"]
    else:  # a group linked into two places
        target = f[_pick(rng, groups) or "/"]
    f[(group + "/" if group else "") + "zz_again"] = target
    return f"hard link '{group}/zz_again' -> '{target.name}'", ("again (a group linked",)


def d_external_storage(f, base, ctx):
    rng = ctx["rng"]
    alive = _alive(f, base.weight_datasets, "dataset")
    where = _pick(rng, alive) if alive and rng.random() < 0.8 else "extra_raw"
    if where in f:
        data = _original(base, where)
        shape, dtype = data.shape, data.dtype
        raw = ctx["raw"].get(where)
        if raw is None:  # the dataset's own values, in a file of their own: followed, they would load
            raw = os.path.join(ctx["workdir"], f"raw_{len(ctx['raw'])}.bin")
            with open(raw, "wb") as out:
                out.write(data.tobytes())
            ctx["raw"][where] = raw
        del f[where]
    else:
        shape, dtype, raw = (4,), "f4", None
    target = ctx["tripwire"] if raw is None or rng.random() < 0.5 else raw
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    f.create_dataset(where, shape=shape, dtype=dtype, external=[(target, 0, max(size, 1))])
    return f"external storage of '{where}' in '{target}'", ("external file(s)",)


def d_virtual(f, base, ctx):
    rng = ctx["rng"]
    alive = _alive(f, base.weight_datasets, "dataset")
    if not alive:
        return NOTHING
    where = _pick(rng, alive)
    shape, dtype = f[where].shape, f[where].dtype
    source = _pick(rng, [ctx["tripwire"], base.path, "."])  # "." is the file itself
    layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
    layout[...] = h5py.VirtualSource(source, "/" + where, shape=shape)
    del f[where]
    f.create_virtual_dataset(where, layout)
    # ("virtual": HDF5 1.10 cannot decode the layout a 'latest' file gives it, when another damage
    # asked for one: it says so, and the file is refused all the same)
    return f"virtual dataset '{where}' from '{source}'", ("virtual", "VDS")


def d_big_attribute(f, base, ctx):
    from hpcnn.formats.h5_limits import MAX_ATTRIBUTE_ELEMENTS as N
    rng = ctx["rng"]
    n = int(_pick(rng, [N - 1, N, N + 1, 2 * N, int(rng.integers(1, 5000))]))
    dtype = _pick(rng, ["u1", "i2", "f4"])
    # (a fresh group: attributes past 64 KB need the object header of a 'latest' file)
    ctx["latest"] = True
    g = f.require_group("zz_big")
    g.attrs[f"big{len(g.attrs)}"] = np.zeros(n, dtype)
    return f"attribute of {n} {dtype}", (("MAX_ATTRIBUTE_ELEMENTS",) if n > N else ())


def _not_utf8(rng, text):
    b = text.encode() if isinstance(text, str) else bytes(text)
    k = int(rng.integers(len(b) + 1))
    return b[:k] + _pick(rng, [b"\xff", b"\xc3", b"\xe9t\xe9", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80"]) + b[k:]


def d_not_utf8(f, base, ctx):
    rng = ctx["rng"]
    choice = rng.random()
    names_attrs = _names_attrs(f, base)
    if names_attrs and choice < 0.6:
        group, attr = _pick(rng, names_attrs)
        obj = f[group or "/"]
        names = [n.encode() if isinstance(n, str) else bytes(n) for n in obj.attrs[attr]]
        i = int(rng.integers(len(names)))
        names[i] = _not_utf8(rng, names[i])
        del obj.attrs[attr]
        if rng.random() < 0.5:
            obj.attrs[attr] = np.array(names)
        else:
            obj.attrs.create(attr, names, dtype=h5py.special_dtype(vlen=bytes))
        return f"'{attr}' of '{group}' element {i} not UTF-8", ("is not UTF-8 text",)
    if choice < 0.8:
        g = f[_pick(rng, _alive(f, base.groups, "group")) or "/"]
        g.create_group(_not_utf8(rng, "layer"))
        return f"a group name in '{g.name}' not UTF-8", ("is not UTF-8 text",)
    obj = f[_pick(rng, _alive(f, base.groups, "group")) or "/"]
    obj.attrs.create("note", _not_utf8(rng, "a note"), dtype=h5py.special_dtype(vlen=bytes))
    return f"a text attribute of '{obj.name}' not UTF-8", ("is not UTF-8 text",)


def d_names_reencoded(f, base, ctx):
    """Harmless: a list of names as fixed-length (h5py 2's Keras) or variable-length strings."""
    rng = ctx["rng"]
    names_attrs = _names_attrs(f, base)
    if not names_attrs:
        return "no names to rewrite", ()
    group, attr = _pick(rng, names_attrs)
    obj = f[group or "/"]
    raw = [n.encode() if isinstance(n, str) else bytes(n) for n in obj.attrs[attr]]  # (damaged ones too)
    del obj.attrs[attr]
    kind = _pick(rng, ["fixed", "vlen bytes", "vlen utf-8"])
    if kind == "fixed":
        obj.attrs[attr] = np.array(raw)
    elif kind == "vlen bytes":
        obj.attrs.create(attr, raw, dtype=h5py.special_dtype(vlen=bytes))
    else:
        obj.attrs.create(attr, [n.decode(errors="replace") for n in raw], dtype=h5py.string_dtype("utf-8"))
    return f"'{attr}' of '{group}' as {kind} strings", ()


def d_depth(f, base, ctx):
    from hpcnn.formats.h5_limits import MAX_DEPTH
    rng = ctx["rng"]
    depth = int(_pick(rng, [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 3 * MAX_DEPTH]))
    f.create_group("/".join(["zz_deep"] + ["d"] * (depth - 1)))
    return f"groups nested {depth} levels", (("MAX_DEPTH",) if depth > MAX_DEPTH else ())


def d_declared_shape(f, base, ctx):
    rng = ctx["rng"]
    alive = _alive(f, base.weight_datasets, "dataset")
    if not alive:
        return NOTHING
    where = _pick(rng, alive)
    shape = f[where].shape
    kind = _pick(rng, ["absurd", "overflow", "transposed", "one more", "scalar"])
    if kind == "absurd":
        new = tuple(int(1 << int(rng.integers(16, 31))) for _ in range(max(len(shape), 2)))
    elif kind == "overflow":
        new = (1 << 40, 1 << 40, 1 << 20)
    elif kind == "transposed":
        new = tuple(reversed(shape)) if len(set(shape)) > 1 else shape + (1,)
    elif kind == "one more":
        new = shape[:-1] + (shape[-1] + 1,) if shape else (2,)
    else:
        new = ()
    del f[where]
    if new:
        f.create_dataset(where, shape=new, dtype="f4", chunks=(1,) * len(new))
    else:
        f[where] = np.float32(1)
    phrases = ("more than 2^63-1 elements",) if kind == "overflow" else ("in the file, the model needs",
                                                                       "more than 2^63-1 elements")
    return f"'{where}' declared {new}", phrases


def d_dtype(f, base, ctx):
    rng = ctx["rng"]
    alive = _alive(f, base.weight_datasets, "dataset")
    if not alive:
        return NOTHING
    where = _pick(rng, alive)
    data = _original(base, where)
    kind = _pick(rng, ["float64", "int32", "string", "compound"])
    del f[where]
    if kind == "float64":  # harmless: converted to float32 exactly
        f[where] = data.astype(np.float64)
        return f"'{where}' as float64", ()
    if kind == "int32":
        f[where] = data.astype(np.int32)
        return f"'{where}' as int32", ("not floats",)
    if kind == "string":
        f[where] = "weights"
        return f"'{where}' as a string", ("not floats", "in the file, the model needs")
    f[where] = np.zeros(data.shape, [("a", "f4"), ("b", "f4")])
    return f"'{where}' as a compound", ("not floats",)


def d_unused(f, base, ctx):
    """Harmless: an unused group with a dataset and attributes inside the limits."""
    rng = ctx["rng"]
    g = f.require_group("zz_notes")
    g.attrs["count"] = int(rng.integers(100))
    g.attrs["text"] = "caf\u00e9 " * int(rng.integers(1, 100))
    g["data"] = rng.standard_normal(int(rng.integers(1, 100))).astype("f4")
    return "an unused group", ()


DAMAGES = {  # name -> (weight, function)
    "external link": (3, d_external_link),
    "soft link": (3, d_soft_link),
    "hard link": (3, d_hard_link),
    "external storage": (3, d_external_storage),
    "virtual dataset": (2, d_virtual),
    "big attribute": (2, d_big_attribute),
    "not UTF-8": (3, d_not_utf8),
    "names re-encoded": (2, d_names_reencoded),
    "depth": (2, d_depth),
    "declared shape": (3, d_declared_shape),
    "dtype": (2, d_dtype),
    "unused": (1, d_unused),
}


# ---------------------------------------------------------------------------------------------
# A case
# ---------------------------------------------------------------------------------------------
_BASES = None


def make_case(seed, index, workdir, tripwire):
    """Writes case `index` of `seed`; returns (path, base, description, phrases)."""
    global _BASES
    if _BASES is None:
        _BASES = _make_bases(workdir)
    rng = np.random.default_rng([seed, index])
    base = _BASES[sorted(_BASES)[int(rng.integers(len(_BASES)))]]
    path = os.path.join(workdir, f"case_{seed}_{index}.h5")
    shutil.copy(base.path, path)
    names = sorted(DAMAGES)
    weights = np.array([DAMAGES[n][0] for n in names], float)
    picks = rng.choice(len(names), size=int(_pick(rng, [1, 1, 1, 2, 3])), replace=False, p=weights / weights.sum())
    ctx = {"rng": rng, "tripwire": tripwire, "valid_file": _BASES["hpcnn .weights.h5"].path, "workdir": workdir,
           "raw": {}, "latest": False}
    descs, phrases = [], []
    # virtual datasets: written so that HDF5 1.10 (what hpcnn links on Debian) reads their layout;
    # large attributes: in a 'latest' file (dense attribute storage)
    kinds = [names[i] for i in picks]
    libver = "latest" if "big attribute" in kinds else ("earliest", "v110")
    with h5py.File(path, "r+", libver=libver) as f:
        for kind in kinds:
            d, p = DAMAGES[kind][1](f, base, ctx)
            descs.append(f"{kind}: {d}")
            phrases += p
    return path, base, "; ".join(descs), tuple(phrases)


def check_case(seed, index, workdir, tripwire, keep=None):
    """Runs one case; returns (description, failure reasons, what hpcnn did)."""
    path, base, desc, phrases = make_case(seed, index, workdir, tripwire)
    desc = f"{base.name}: {desc}"
    fails = []
    opened_before = TRIPWIRE.opened
    try:
        try:
            got = base.load(path)
            did = "loaded"
        except (ValueError, MemoryError) as e:
            got, did, msg = None, "refused", f"{type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001  (anything else is a failure, reported)
            got, did, msg = None, "other", f"{type(e).__name__}: {e}"
        if did == "other":
            fails.append(f"raised {msg[:600]}")
        elif did == "refused":
            if not phrases:
                fails.append(f"refused a file that must load: {msg[:600]}")
            elif f"'{path}'" not in msg:
                fails.append(f"the message does not name the file: {msg[:600]}")
            elif not any(p in msg for p in phrases):
                fails.append(f"the message says none of {phrases}: {msg[:600]}")
        else:
            if phrases:
                fails.append(f"loaded a file it must refuse (expected one of {phrases})")
            elif len(got) != len(base.weights) or any(a.shape != b.shape or not np.array_equal(a, b)
                                                     for a, b in zip(got, base.weights)):
                fails.append("loaded other weights than the base's")
        time.sleep(0.02)  # the tripwire's poll
        if TRIPWIRE.opened != opened_before:
            fails.append(f"opened '{TRIPWIRE.path}', a file named by the file it was asked to read")
    finally:
        hostile_driver.keep_or_remove(path, keep)
    return desc, fails, did


TRIPWIRE = None  # the worker's Tripwire


def main(argv=None):
    global TRIPWIRE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--cases", required=True, help="indices: '0:100', '5,9,12'")
    ap.add_argument("--keep", help="keep the case files in this directory")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--inject", help="test the harness: 'crash:I' or 'hang:I' at case I")
    args = ap.parse_args(argv)
    if not sanitized():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    import hpcnn
    hpcnn.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="hpcnn-hostile-h5-") as workdir:
        TRIPWIRE = Tripwire(os.path.join(workdir, "tripwire"))
        def run_case(i):
            desc, fails, did = check_case(args.seed, i, workdir, TRIPWIRE.path, args.keep)
            return {"desc": desc, "fails": fails, "did": did}

        hostile_driver.serve(args.cases, args.inject, run_case, verbose_line=(lambda i, r: (
            f"  case {i}: {r['desc']}: {r['did']}: {'ok' if not r['fails'] else r['fails']}")) if args.verbose else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
