"""Hostile `.h5` model and weights files (issue 26): what hpcnn's HDF5 tree reader refuses, each a
ValueError that names the file, the object and what is wrong, and the limits of
hpcnn.formats.h5_limits, each tested just inside (loads) and just outside (refused naming the limit).

The files are valid ones (written by hpcnn, or by Keras: tests/data/keras) damaged with h5py. A
file must never make hpcnn open another file: where a damage names one (an external link,
external raw storage, a virtual dataset's source), it names a FIFO watched by a tripwire thread,
which notices (and unblocks) any reader that opens it. The seeded corpus of such files is
tests/hostile/test_hostile_model_h5.py."""
import os
import re
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from hpcnn.formats import h5_limits
from hpcnn.formats.h5tree import H5Tree
from hpcnn.models import load_model
from tests.support.hostile_model_h5 import Tripwire
from tests.support.small_models import small_model
from tests.support import paths

KERAS_DATA = paths.KERAS_DATA
L = h5_limits


# ------------------------------------------------------------------ helpers
@pytest.fixture
def tripwire(tmp_path):
    t = Tripwire(tmp_path / "secret")
    yield t
    t.close()
    assert not t.opened, f"hpcnn opened '{t.path}', a file named by the file it was asked to read"


def saved(tmp_path, name):
    m = small_model()
    path = tmp_path / name
    if name.startswith("m."):
        m.save(path)
    else:
        m.save_weights(path)
    return m, path


def edit(path, fn, **kw):
    with h5py.File(path, "r+", **kw) as f:
        fn(f)


def refused(load, path, pattern):
    """load(path) raises a ValueError that starts with the caller and the file and matches `pattern`."""
    with pytest.raises(ValueError) as info:
        load(path)
    msg = str(info.value)
    assert re.match(rf"(load_weights|load_model): '{re.escape(str(path))}'", msg), msg
    assert re.search(pattern, msg), msg
    return msg


def load_weights_into_fresh(path):
    other = small_model(seed=9)
    before = other.get_weights()
    try:
        other.load_weights(path)
    finally:
        for a, b in zip(other.get_weights(), before):
            np.testing.assert_array_equal(a, b)  # refused before any weight changed


KERNEL = {"w.weights.h5": "layers/dense/vars/0", "w.h5": "dense/dense/kernel:0",
          "m.h5": "model_weights/dense/dense/kernel:0"}
LOADERS = {"w.weights.h5": load_weights_into_fresh, "w.h5": load_weights_into_fresh, "m.h5": load_model}


# ------------------------------------------------------------------ another file must never be opened
@pytest.mark.parametrize("name", sorted(KERNEL))
def test_an_external_link_is_refused_and_never_followed(tmp_path, tripwire, name):
    _, path = saved(tmp_path, name)

    def damage(f):
        del f[KERNEL[name]]
        f[KERNEL[name]] = h5py.ExternalLink(tripwire.path, "/x")
    edit(path, damage)
    refused(LOADERS[name], path, rf"'/{KERNEL[name]}' is an external link to object '/x' of file "
                                 rf"'{tripwire.path}': hpcnn follows hard links only")


def test_an_external_link_where_nothing_is_read_is_refused_too(tmp_path, tripwire):
    _, path = saved(tmp_path, "m.h5")
    edit(path, lambda f: f.__setitem__("extra/elsewhere", h5py.ExternalLink(tripwire.path, "/")))
    refused(load_model, path, r"'/extra/elsewhere' is an external link")


@pytest.mark.parametrize("where", ["kernel", "unused"])
def test_a_dataset_stored_in_an_external_file_is_refused(tmp_path, tripwire, where):
    m, path = saved(tmp_path, "w.weights.h5")
    target = "layers/dense/vars/0" if where == "kernel" else "extra"
    shape = m.get_weights()[2].shape

    def damage(f):
        if target in f:
            del f[target]
        f.create_dataset(target, shape=shape, dtype="f4", external=[(tripwire.path, 0, 4 * int(np.prod(shape)))])
    edit(path, damage)
    refused(load_weights_into_fresh, path, rf"dataset '/{target}' stores its values in 1 external file\(s\) "
                                           rf"\('{tripwire.path}'.*hpcnn never reads another file")


def test_a_virtual_dataset_is_refused(tmp_path, tripwire):
    m, path = saved(tmp_path, "w.weights.h5")
    shape = m.get_weights()[2].shape
    layout = h5py.VirtualLayout(shape=shape, dtype="f4")
    layout[:] = h5py.VirtualSource(tripwire.path, "kernel", shape=shape)

    def damage(f):
        del f["layers/dense/vars/0"]
        f.create_virtual_dataset("layers/dense/vars/0", layout)
    # HDF5 1.10 (what hpcnn links on Debian) reads the virtual layout of files written for 1.10
    edit(path, damage, libver=("earliest", "v110"))
    refused(load_weights_into_fresh, path, r"dataset '/layers/dense/vars/0' is a virtual dataset")


# ------------------------------------------------------------------ links and cycles
@pytest.mark.parametrize("target", ["/layers/dense_1/vars/0", "/layers/loop", "/nowhere"])
def test_a_soft_link_is_refused_not_followed(tmp_path, target):
    _, path = saved(tmp_path, "w.weights.h5")

    def damage(f):
        if target == "/layers/dense_1/vars/0":  # a weight that is another layer's (a valid target)
            del f["layers/dense/vars/0"]
            f["layers/dense/vars/0"] = h5py.SoftLink(target)
        else:  # a loop, a dangling link
            f["layers/loop"] = h5py.SoftLink(target)
    edit(path, damage)
    link = "/layers/dense/vars/0" if target.startswith("/layers/dense") else "/layers/loop"
    refused(load_weights_into_fresh, path, rf"'{link}' is a soft link to '{target}': hpcnn follows hard links only")


@pytest.mark.parametrize("into", ["itself", "the root", "two places"])
def test_a_group_met_twice_is_refused_at_once(tmp_path, into):
    _, path = saved(tmp_path, "w.weights.h5")

    def damage(f):
        if into == "itself":
            f["layers/dense/again"] = f["layers/dense"]
        elif into == "the root":
            f["layers/dense/vars/up"] = f["/"]
        else:  # no cycle, but a group walked twice: a chain of such doubles is 2^depth walks
            f["layers/copy"] = f["layers/dense"]
    edit(path, damage)
    start = time.monotonic()
    first = {"itself": "/layers/dense", "the root": "/", "two places": "/layers/copy"}[into]
    msg = refused(load_weights_into_fresh, path, rf"is group '{first}' again \(a group linked into itself or into two "
                                                 r"places\)")
    assert time.monotonic() - start < 5, msg


def test_a_doubling_chain_of_groups_is_refused_not_walked(tmp_path):
    """Each group linked twice into the one above: 2^40 paths through 40 groups."""
    path = tmp_path / "chain.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("g0")
        for i in range(1, 41):
            nxt = f.create_group(f"g{i}")
            g["a"], g["b"] = nxt, nxt
            g = nxt
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"group '/g0(/a)*/b' is group '/g0(/a)*' again"):
        H5Tree.open(str(path))
    assert time.monotonic() - start < 5


# ------------------------------------------------------------------ texts: UTF-8, fixed and variable length
def names_as(f, group, attr, kind):
    """Rewrites a list-of-names attribute as Keras' writers did: fixed-length bytes (h5py 2's Keras:
    NULL-padded), or variable-length ASCII or UTF-8 strings."""
    names = [n.decode() if isinstance(n, bytes) else n for n in f[group].attrs[attr]]
    del f[group].attrs[attr]
    if kind == "fixed":
        f[group].attrs[attr] = np.array([n.encode() for n in names])
    elif kind == "vlen bytes":
        f[group].attrs.create(attr, [n.encode() for n in names], dtype=h5py.special_dtype(vlen=bytes))
    else:
        f[group].attrs.create(attr, names, dtype=h5py.string_dtype("utf-8"))


@pytest.mark.parametrize("kind", ["fixed", "vlen bytes", "vlen utf-8"])
@pytest.mark.parametrize("name", ["w.h5", "m.h5"])
def test_layer_and_weight_names_load_as_fixed_or_variable_length_strings(tmp_path, kind, name):
    m, path = saved(tmp_path, name)
    root = "/model_weights" if name == "m.h5" else "/"

    def rewrite(f):
        names_as(f, root, "layer_names", kind)
        for layer in ("conv2d", "dense", "dense_1"):
            names_as(f, f"{root.rstrip('/')}/{layer}", "weight_names", kind)
    edit(path, rewrite)
    loaded = load_model(path) if name == "m.h5" else small_model(seed=9)
    if name != "m.h5":
        loaded.load_weights(path)
    for a, b in zip(loaded.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("attr, kind", [("layer_names", "fixed"), ("layer_names", "vlen"),
                                        ("weight_names", "fixed"), ("weight_names", "vlen")])
def test_names_that_are_not_utf8_are_refused_naming_the_attribute(tmp_path, attr, kind):
    _, path = saved(tmp_path, "w.h5")
    group = "/" if attr == "layer_names" else "/dense"

    def damage(f):
        names = [n.encode() if isinstance(n, str) else n for n in f[group].attrs[attr]]
        names[-1] = names[-1][:3] + b"\xff\xfe" + names[-1][3:]  # Latin-1 bytes, not UTF-8
        del f[group].attrs[attr]
        if kind == "fixed":
            f[group].attrs[attr] = np.array(names)
        else:
            f[group].attrs.create(attr, names, dtype=h5py.special_dtype(vlen=bytes))
    edit(path, damage)
    owner = "the root group" if group == "/" else f"group '{group}'"
    refused(load_weights_into_fresh, path, rf"attribute '{attr}' of {owner} \(element \d+\) is not UTF-8 text "
                                           r"\('...\\xff\\xfe")


def test_a_group_name_that_is_not_utf8_is_refused(tmp_path):
    _, path = saved(tmp_path, "w.h5")
    edit(path, lambda f: f.create_group(b"caf\xe9"))
    refused(load_weights_into_fresh, path, r"a link name in group '/' is not UTF-8 text \('caf\\xe9'\)")


# ------------------------------------------------------------------ declared shapes
def unwritten(f, name, shape, dtype="f4"):
    """A dataset of any declared shape whose chunks were never written: a few hundred bytes on disk."""
    if name in f:
        del f[name]
    f.create_dataset(name, shape=shape, dtype=dtype, chunks=(1,) * len(shape))


def test_an_absurd_declared_weight_shape_is_refused_before_anything_is_allocated(tmp_path):
    _, path = saved(tmp_path, "w.weights.h5")
    edit(path, lambda f: unwritten(f, "layers/dense/vars/0", (1 << 20, 1 << 20)))  # 2^40 values
    assert path.stat().st_size < 100_000
    refused(load_weights_into_fresh, path, r"layer 'dense' \(Dense\) kernel has shape \(1048576, 1048576\) in the "
                                           r"file, the model needs \(64, 8\)")


def test_a_declared_shape_past_2_63_elements_is_refused(tmp_path):
    _, path = saved(tmp_path, "w.weights.h5")
    edit(path, lambda f: unwritten(f, "layers/dense/vars/0", (1 << 40, 1 << 40)))
    refused(load_weights_into_fresh, path, r"dataset '/layers/dense/vars/0' declares shape \(1099511627776, "
                                           r"1099511627776\), more than 2\^63-1 elements")


# ------------------------------------------------------------------ the limits, just inside and just outside
def test_the_limits_are_the_readers_and_admit_real_models():
    assert (L.MAX_ATTRIBUTE_BYTES, L.MAX_ATTRIBUTE_ELEMENTS, L.MAX_ATTRIBUTES_PER_OBJECT) == (64 << 20, 1 << 20, 4096)
    assert (L.MAX_WEIGHT_ELEMENTS, L.MAX_WEIGHT_BYTES, L.MAX_DEPTH, L.MAX_NAME_BYTES) == (1 << 31, 1 << 33, 64, 65535)
    assert 10_000 * 10_000 * 4 * 20 <= L.MAX_WEIGHT_BYTES  # a 100M-parameter Dense kernel, 20 times over


def listing(tmp_path, fill, **kw):
    """A small valid file (libver 'latest': attributes past 64 KB) with `fill(f)` added, listed."""
    path = tmp_path / "f.h5"
    with h5py.File(path, "w", libver="latest") as f:
        fill(f)
    return path, (lambda: H5Tree.open(str(path)))


def at_limit(tmp_path, fill, inside, outside, limit):
    path, open_ = listing(tmp_path, lambda f: fill(f, inside))
    with open_() as tree:
        assert tree.objects
    path, open_ = listing(tmp_path, lambda f: fill(f, outside))
    with pytest.raises(ValueError) as info:
        open_()
    assert str(info.value).startswith(f"'{path}': ") and f"(hpcnn's limit {limit} = " in str(info.value), info.value
    return str(info.value)


def test_attribute_elements_limit(tmp_path):
    msg = at_limit(tmp_path, lambda f, n: f.create_group("g").attrs.__setitem__("big", np.zeros(n, np.uint8)),
                   L.MAX_ATTRIBUTE_ELEMENTS, L.MAX_ATTRIBUTE_ELEMENTS + 1, "MAX_ATTRIBUTE_ELEMENTS")
    assert "attribute 'big' of group '/g' holds 1048577 elements" in msg


def test_attribute_bytes_limit_fixed_length_strings(tmp_path):
    # inside: 2^20 names of 64 bytes (64 MiB); outside: one text of 64 MiB + 1
    def fill(f, n):
        if n == "inside":
            f.create_group("g").attrs.create("names", np.zeros(L.MAX_ATTRIBUTE_ELEMENTS, "S64"))
        else:
            f.create_group("g").attrs.create("names", np.zeros((), f"S{L.MAX_ATTRIBUTE_BYTES + 1}"))
    msg = at_limit(tmp_path, fill, "inside", "outside", "MAX_ATTRIBUTE_BYTES")
    assert "attribute 'names' of group '/g' holds 1 string(s) of 67108865 bytes" in msg


def test_attribute_bytes_limit_variable_length_strings(tmp_path):
    def fill(f, extra):
        texts = ["x" * (4 << 20)] * 16
        texts[-1] += "x" * extra
        f.create_group("g").attrs.create("names", texts, dtype=h5py.string_dtype("utf-8"))
    msg = at_limit(tmp_path, fill, 0, 1, "MAX_ATTRIBUTE_BYTES")
    assert "attribute 'names' of group '/g' holds 67108865 bytes of text, more than hpcnn reads" in msg


# The child measures its peak resident memory (ru_maxrss, KiB on Linux) before and after asking
# load_model for the file; it prints the increase in MB and the refusal.
PEAK_CHILD = """
import resource, sys
from hpcnn.models import load_model
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    load_model(sys.argv[1])
    print("LOADED")
except ValueError as e:
    print("REFUSED", e)
print("PEAK_MB", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


@pytest.mark.parametrize("layout", ["one text", "a list of texts"])
def test_a_100_mb_model_config_is_refused_by_its_stored_size_before_it_is_read(tmp_path, layout):
    """An .h5 file whose model_config is a 100 MB text (as h5py and Keras write a str: a
    variable-length string, its bytes in the file's global heap) is refused at the 64 MiB limit by
    the lengths stored in the attribute, before the text is read: reading it first cost HDF5 about
    five times the text (525 MB here) before the limit could refuse it."""
    path = tmp_path / "huge_config.h5"
    text = '{"class_name": "Sequential", "config": {"name": "' + "a" * 100_000_000 + '"}}'
    with h5py.File(path, "w") as f:
        if layout == "one text":
            f.attrs["model_config"] = text
        else:
            f.attrs.create("model_config", [text[:50_000_000], text[50_000_000:]], dtype=h5py.string_dtype())
    del text
    try:
        out = subprocess.run([sys.executable, "-c", PEAK_CHILD, str(path)], capture_output=True, text=True,
                             timeout=120)
    finally:
        path.unlink()
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    refusal = next(line for line in lines if line.startswith("REFUSED"))
    assert f"'{path}': attribute 'model_config' of the root group holds 100000052 bytes of text" in refusal
    assert "(hpcnn's limit MAX_ATTRIBUTE_BYTES = 67108864)" in refusal
    peak_mb = float(next(line for line in lines if line.startswith("PEAK_MB")).split()[1])
    assert peak_mb < 100, f"refusing the file raised the peak resident memory by {peak_mb:.0f} MB"


def test_attributes_per_object_limit(tmp_path):
    def fill(f, n):
        g = f.create_group("g")
        for i in range(n):
            h5py.h5a.create(g.id, f"a{i}".encode(), h5py.h5t.NATIVE_UINT8, h5py.h5s.create(h5py.h5s.SCALAR)).close()
    msg = at_limit(tmp_path, fill, L.MAX_ATTRIBUTES_PER_OBJECT, L.MAX_ATTRIBUTES_PER_OBJECT + 1,
                   "MAX_ATTRIBUTES_PER_OBJECT")
    assert "group '/g' has more than 4096 attributes" in msg


def test_depth_limit(tmp_path):
    def fill(f, depth):
        f.create_group("/".join(["g"] * depth))
    msg = at_limit(tmp_path, fill, L.MAX_DEPTH, L.MAX_DEPTH + 1, "MAX_DEPTH")
    assert "groups nest deeper than 64 levels" in msg


def test_name_limit(tmp_path):
    msg = at_limit(tmp_path, lambda f, n: f.create_group("g").create_group("n" * n), L.MAX_NAME_BYTES,
                   L.MAX_NAME_BYTES + 1, "MAX_NAME_BYTES")
    assert "group '/g' has a link name of 65536 bytes" in msg


def test_keras_sized_attributes_load(tmp_path):
    """Far inside the limits: ResNet-50's legacy file has 177 layer names and a ~100 KB config; here
    10,000 long names, fixed and variable length, and a 1 MB config text."""
    names = [f"conv{i}_block{i % 7}_{'x' * 30}" for i in range(10_000)]

    def fill(f):
        f.attrs["model_config"] = "{" + " " * (1 << 20) + "}"
        f.create_group("w").attrs["layer_names"] = np.array([n.encode() for n in names])
        f["w"].attrs.create("weight_names", names, dtype=h5py.string_dtype("utf-8"))
    _, open_ = listing(tmp_path, fill)
    with open_() as tree:
        assert tree.text_list("/w", "layer_names") == names == tree.text_list("/w", "weight_names")


WEIGHT_PROBE = r"""
import resource, sys
from hpcnn.formats.h5tree import H5Tree
if sys.argv[3] != "0":  # this much more address space than the process has now
    now = int(next(x for x in open("/proc/self/status") if x.startswith("VmSize:")).split()[1]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (now + int(sys.argv[3]), now + int(sys.argv[3])))
with H5Tree.open(sys.argv[1]) as tree:
    try:
        a = tree.reader.read(sys.argv[2])
        print("READ", a.shape, a.dtype, float(abs(a).max()))
    except (ValueError, MemoryError) as e:
        print(type(e).__name__, e)
"""


def probe(tmp_path, shape, dtype, address_space=0):
    """Reads an unwritten dataset of `shape` in a subprocess (whose address space may be limited:
    then an allocation the limit admits fails there, as a MemoryError)."""
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("w", shape=shape, dtype=dtype, chunks=True)
    # The child imports the same hpcnn as this process: the same interpreter and environment.
    out = subprocess.run([sys.executable, "-c", WEIGHT_PROBE, str(path), "/w", str(address_space)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def sanitized():
    return "asan" in os.environ.get("LD_PRELOAD", "")


@pytest.mark.parametrize("dtype, outside, limit", [("f4", (1 << 31) + 1, "MAX_WEIGHT_ELEMENTS"),
                                                   ("i8", (1 << 30) + 1, "MAX_WEIGHT_BYTES")])
def test_weight_limits_just_outside_are_refused_before_allocating(tmp_path, dtype, outside, limit):
    out = probe(tmp_path, (outside,), dtype, 0 if sanitized() else 1 << 30)
    assert out.startswith(f"ValueError '{tmp_path / 'big.h5'}': dataset '/w' declares shape ({outside},)"), out
    assert f"(hpcnn's limit {limit} = " in out, out


@pytest.mark.skipif(sanitized(), reason="needs an address-space limit, which ASan's shadow memory rules out")
@pytest.mark.parametrize("dtype, inside", [("f4", 1 << 31), ("i8", 1 << 30)])
def test_weight_limits_just_inside_pass_to_the_allocation(tmp_path, dtype, inside):
    # 8 GiB as read: admitted by the limits, so only the (limited) memory refuses it, as MemoryError
    out = probe(tmp_path, (inside,), dtype, 1 << 30)
    assert out.startswith("MemoryError") and f"cannot allocate {inside} values" in out, out


def test_a_100m_parameter_dense_kernel_reads(tmp_path):
    out = probe(tmp_path, (10_000, 10_000), "f4")
    assert out == "READ (10000, 10000) float32 0.0", out


def test_objects_limit_by_its_mechanism(tmp_path):
    """MAX_OBJECTS (a million) itself would take minutes to write: the same check, at 5 objects."""
    from hpcnn import _core
    for groups, ok in ((4, True), (5, False)):  # + the root
        path = tmp_path / f"g{groups}.h5"
        with h5py.File(path, "w") as f:
            for i in range(groups):
                f.create_group(f"g{i}")
        reader = _core.data.H5Reader(str(path))
        if ok:
            assert len(reader.list(5)) == 5
        else:
            with pytest.raises(ValueError, match=rf"'{re.escape(str(path))}': more than 5 groups and datasets "
                                                 r"\(hpcnn's limit MAX_OBJECTS\)"):
                reader.list(5)
        reader.close()
    assert L.MAX_OBJECTS == 1_000_000


@pytest.mark.parametrize("odd", ["exponent bias", "bit offset"])
def test_a_weight_of_a_nonstandard_number_type_is_refused(tmp_path, odd):
    """HDF5 1.10 converts a custom float layout (or one a damaged type message describes) to
    garbage or zeros without an error: refused, not loaded as zeros."""
    m, path = saved(tmp_path, "w.weights.h5")
    shape = m.get_weights()[2].shape

    def damage(f):
        del f["layers/dense/vars/0"]
        t = h5py.h5t.IEEE_F32LE.copy()
        if odd == "exponent bias":
            t.set_ebias(100)
        else:
            t.set_fields(23, 15, 8, 0, 15)
            t.set_precision(24)
            t.set_offset(8)
        h5py.h5d.create(f.id, b"layers/dense/vars/0", t, h5py.h5s.create_simple(shape)).close()
    edit(path, damage)
    refused(load_weights_into_fresh, path, r"dataset '/layers/dense/vars/0' holds numbers whose type (is not an IEEE "
                                           r"float|uses 24 bits at bit offset 8).*garbage or zeros")
