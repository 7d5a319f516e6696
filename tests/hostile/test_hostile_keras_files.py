"""Hostile .keras archives and configs (issue 26): each a ValueError naming the file and what is
wrong, never a crash, a hang, a write outside the target, a big allocation on a small file, or code
from the file imported, evaluated or unpickled. Built from an hpcnn model saved as Keras writes it
(config.json, metadata.json, model.weights.h5), so load_model builds it from its config.

tests/hostile/test_file_limits.py tests file_limits' constants at their edges; tests/hostile/test_hostile_models.py
runs a seeded corpus of such files."""
import io
import json
import os
import pickle
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

from hpcnn import _core
from hpcnn.formats.keras_weights import keras3_weight_items
from hpcnn.models import load_model, model_from_json
from tests.support import archive_tools as at
from tests.support.small_models import small_model


@pytest.fixture
def keras_file(tmp_path):
    """(model, its members as Keras writes them, a path to write archives to)."""
    m = small_model()
    m.save(tmp_path / "hpcnn.keras")
    return m, at.keras_members(tmp_path / "hpcnn.keras"), tmp_path / "case" / "m.keras"


def refused(path, data, expect, loader=load_model):
    """Writes `data` to `path`, checks that loading it is a ValueError naming the file and matching
    `expect`, and that nothing new appeared next to it or in its parent folder."""
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    before = {p: sorted(os.listdir(p)) for p in (path.parent, path.parent.parent)}
    with pytest.raises(ValueError) as info:
        loader(path)
    msg = str(info.value)
    assert str(path) in msg, msg
    assert __import__("re").search(expect, msg), msg
    assert {p: sorted(os.listdir(p)) for p in before} == before
    return msg


def config_of(members):
    return json.loads(dict(members)["config.json"])


def with_config(members, config):
    return [(n, json.dumps(config).encode() if n == "config.json" else d) for n, d in members]


def test_the_keras_shaped_archive_loads(keras_file):
    m, members, path = keras_file
    path.parent.mkdir()
    path.write_bytes(at.build(members))
    got = load_model(path)
    assert all(np.array_equal(a, b) for a, b in zip(got.get_weights(), m.get_weights()))
    path.write_bytes(at.build(members[::-1], deflate=True, comment=b"hello"))  # order, compression, comment
    assert all(np.array_equal(a, b) for a, b in zip(load_model(path).get_weights(), m.get_weights()))


# ---------------------------------------------------------------------- zip bombs
def test_a_member_inflating_beyond_the_ratio_is_refused_before_it_is_inflated(keras_file):
    _, members, path = keras_file
    bomb = [(n, d) for n, d in members if n != "model.weights.h5"] + [("model.weights.h5", b"\0" * (64 << 20))]
    data = at.build(bomb, deflate=("model.weights.h5",))
    assert len(data) < 1 << 20
    tracemalloc.start()
    refused(path, data, r"its 'model.weights.h5' inflates \d+-fold: a zip bomb\? \(at most 100-fold: "
                        r"file_limits.MAX_MEMBER_INFLATION\)")
    assert tracemalloc.get_traced_memory()[1] < 8 << 20
    tracemalloc.stop()


def test_a_member_inflating_beyond_its_declared_size_is_cut_at_it(keras_file):
    """zipfile stops at the declared size; the member then fails its CRC: nothing beyond is inflated."""
    _, members, path = keras_file
    cfg = dict(members)["config.json"]
    data = at.build([(n, d + b" " * (20 << 20) if n == "config.json" else d) for n, d in members],
                    deflate=("config.json",))
    data = at.patch(data, "config.json", file_size=len(cfg))
    tracemalloc.start()
    refused(path, data, r"its 'config.json' cannot be read \(BadZipFile: Bad CRC-32")
    assert tracemalloc.get_traced_memory()[1] < 8 << 20
    tracemalloc.stop()


def test_declared_sizes_that_lie_are_refused_without_allocating_them(keras_file):
    _, members, path = keras_file
    data = at.build(members)
    tracemalloc.start()
    refused(path, at.patch(data, "model.weights.h5", file_size=1 << 30, compress_size=1 << 30),
            r"its 'model.weights.h5' declares 1073741824 stored bytes in an archive of \d+")
    refused(path, at.patch(data, "model.weights.h5", file_size=1000),
            r"its 'model.weights.h5' is stored \(not compressed\) but declares 1000 bytes in \d+")
    n = len(dict(members)["config.json"])
    refused(path, at.patch(at.build(members, deflate=True), "config.json", file_size=n + 10),
            r"its 'config.json' (holds \d+ bytes, its listing says|cannot be read)")
    assert tracemalloc.get_traced_memory()[1] < 8 << 20
    tracemalloc.stop()


@pytest.mark.parametrize("method, expect", [(zipfile.ZIP_BZIP2, "12"), (zipfile.ZIP_LZMA, "14"), (None, "99")])
def test_compression_methods_other_than_stored_and_deflated_are_refused(keras_file, method, expect):
    _, members, path = keras_file
    if method is None:
        data = at.patch(at.build(members), "config.json", method=99)
    else:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=method) as z:
            for n, d in members:
                z.writestr(zipfile.ZipInfo(n, at.DATE), d, compress_type=method)
        data = buf.getvalue()
    refused(path, data, rf"uses compression method {expect}: hpcnn reads stored and deflated members only")


def test_an_encrypted_member_is_refused(keras_file):
    _, members, path = keras_file
    refused(path, at.patch(at.build(members), "model.weights.h5", flags=1), r"its 'model.weights.h5' is encrypted")


# ---------------------------------------------------------------------- names: traversal, links, duplicates
@pytest.mark.parametrize("name, why", [
    ("../evil.h5", r"climbs out of the archive \('..'\)"),
    ("assets/../../../evil", r"climbs out of the archive"),
    ("/etc/evil", r"is an absolute path"),
    ("\\evil", r"is an absolute path"),
    ("C:/evil", r"is an absolute path"),
    ("..\\evil", r"climbs out of the archive"),
    ("assets\\evil", r"holds a backslash"),
    ("evil\x01", r"holds control characters"),
])
def test_member_names_that_leave_the_archive_are_refused(keras_file, name, why):
    _, members, path = keras_file
    refused(path, at.build(members + [(name, b"x")]), why)


def test_a_member_named_as_the_weights_with_dots_is_refused_not_read(keras_file):
    _, members, path = keras_file
    weights = dict(members)["model.weights.h5"]
    renamed = [(("./" if n == "model.weights.h5" else "") + n, d) for n, d in members]
    refused(path, at.build(renamed), r"members hpcnn does not read: './model.weights.h5'")
    assert weights


def test_a_symbolic_link_member_is_refused(keras_file):
    _, members, path = keras_file
    linked = [m for m in members if m[0] != "model.weights.h5"] + [at.symlink("model.weights.h5", "/etc/passwd")]
    refused(path, at.build(linked), r"its member 'model.weights.h5' is a symbolic link")


def test_duplicate_member_names_are_refused(keras_file):
    _, members, path = keras_file
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = at.build(members + [("config.json", b"{}")])
    refused(path, data, r"it holds two members named 'config.json'")


# ---------------------------------------------------------------------- missing and extra members
@pytest.mark.parametrize("drop, expect", [
    ("config.json", r"it has no 'config.json': not a Keras model archive"),
    ("model.weights.h5", r"it has no 'model.weights.h5'"),
])
def test_missing_members_are_named(keras_file, drop, expect):
    _, members, path = keras_file
    refused(path, at.build([m for m in members if m[0] != drop]), expect)


@pytest.mark.parametrize("extra", ["evil.py", "model.pkl", "assets/", "assets/vocab.txt", "__init__.py"])
def test_extra_members_are_refused_by_name(keras_file, extra):
    _, members, path = keras_file
    payload = pickle.dumps({"x": 1}) if extra.endswith(".pkl") else b"import os\n"
    refused(path, at.build(members + [(extra, payload)]), rf"it holds members hpcnn does not read: '{extra}'")


def test_a_pickle_in_place_of_the_weights_is_not_unpickled(keras_file, tmp_path):
    class Boom:
        def __reduce__(self):
            return (open, (str(tmp_path / "unpickled"), "w"))
    _, members, path = keras_file
    evil = [(n, pickle.dumps(Boom()) if n == "model.weights.h5" else d) for n, d in members]
    refused(path, at.build(evil), r"model.weights.h5' is not an HDF5 file")
    assert not (tmp_path / "unpickled").exists()


# ---------------------------------------------------------------------- config.json
def test_a_config_nested_thousands_of_levels_deep_is_refused_before_it_is_parsed(keras_file):
    _, members, path = keras_file
    cfg = dict(members)["config.json"]
    deep = cfg[:-1] + b', "x": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    refused(path, at.build([(n, deep if n == "config.json" else d) for n, d in members]),
            r"its 'config.json' is nested 100001 levels deep, more than the 100 hpcnn reads "
            r"\(file_limits.MAX_CONFIG_DEPTH\)")


def test_brackets_inside_strings_do_not_count_as_nesting(keras_file):
    m, members, path = keras_file
    cfg = config_of(members)
    cfg["config"]["name"] = "[{" * 500 + '"\\'
    path.parent.mkdir()
    path.write_bytes(at.build(with_config(members, cfg)))
    assert load_model(path).name == cfg["config"]["name"]


@pytest.mark.parametrize("name", ["keras.src.layers.core.dense.Dense", "os.system", "builtins.eval",
                                  "Dense; import os", "", "x" * 101, "__import__('os')"])
def test_layer_class_names_that_are_not_plain_names_are_refused(keras_file, name):
    _, members, path = keras_file
    cfg = config_of(members)
    cfg["config"]["layers"][1]["class_name"] = name
    refused(path, at.build(with_config(members, cfg)), r"not a plain class name\).*nothing a file names is imported")


@pytest.mark.parametrize("where", ["activation", "kernel_initializer", "kernel_regularizer"])
def test_dotted_class_names_inside_a_layer_are_refused(keras_file, where):
    _, members, path = keras_file
    cfg = config_of(members)
    cfg["config"]["layers"][1]["config"][where] = {"class_name": "os.system", "config": {"command": "touch x"}}
    refused(path, at.build(with_config(members, cfg)), r"class name 'os.system' is not a plain class name: hpcnn "
                                                        r"builds only the Keras classes in its own table")


@pytest.fixture
def payload(tmp_path, monkeypatch):
    """A module on sys.path whose import writes a marker file (never to be imported)."""
    folder = tmp_path / "payload"
    folder.mkdir()
    marker = tmp_path / "imported"
    (folder / f"{at.PAYLOAD_MODULE}.py").write_text(at.payload_source(marker))
    monkeypatch.syspath_prepend(str(folder))
    yield marker
    assert not marker.exists() and at.PAYLOAD_MODULE not in sys.modules


def test_a_lambda_layer_is_refused_and_its_code_never_runs(keras_file, tmp_path, payload):
    _, members, path = keras_file
    cfg = config_of(members)
    cfg["config"]["layers"].insert(2, at.lambda_layer(tmp_path / "ran"))
    msg = refused(path, at.build(with_config(members, cfg)), r"layer classes hpcnn does not have: Lambda \(Python "
                                                              r"code\).*safe_mode=True refuses too")
    assert "nothing a file names is imported, evaluated or unpickled" in msg
    assert not (tmp_path / "ran").exists()


def test_a_lambda_activation_is_refused(keras_file, tmp_path):
    _, members, path = keras_file
    cfg = config_of(members)
    cfg["config"]["layers"][1]["config"]["activation"] = at.lambda_layer(tmp_path / "ran")["config"]["function"]
    refused(path, at.build(with_config(members, cfg)), r"it holds Python code \(__lambda__\).*Keras' own safe_mode")
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("edit, expect", [
    (lambda c: c["config"]["layers"][1].update(module=at.PAYLOAD_MODULE),
     r"Conv2D \(custom: module 'hostile_payload'\)"),
    (lambda c: c["config"]["layers"][1].update(class_name="Evil", registered_name="hostile_payload>Evil"),
     r"Evil \(custom: hostile_payload>Evil\)"),
    (lambda c: c["config"]["layers"][1]["config"].update(
        activation={"module": at.PAYLOAD_MODULE, "class_name": "function", "config": "Evil",
                    "registered_name": "function"}), r"function is a custom object \(custom: module 'hostile_payload'\)"),
    (lambda c: c.update(module=at.PAYLOAD_MODULE), r"Sequential is a custom object"),
    (lambda c: c["compile_config"].update(loss={"module": at.PAYLOAD_MODULE, "class_name": "Evil", "config": {}}),
     r"Evil is a custom object"),
])
def test_custom_objects_are_refused_and_their_module_never_imported(keras_file, payload, edit, expect):
    m, members, path = keras_file
    m.compile("adam", "sparse_categorical_crossentropy")
    m.save(path.parent.parent / "compiled.keras")
    members = at.keras_members(path.parent.parent / "compiled.keras")
    cfg = config_of(members)
    edit(cfg)
    refused(path, at.build(with_config(members, cfg)), expect)


# ---------------------------------------------------------------------- weights against the config
def _weights_member(model, change):
    items = [change(path, a, attrs) if a is not None else (path, a, attrs) for path, a, attrs in
             keras3_weight_items(model)]
    return _core.data.h5_tree_image(items, "test")


@pytest.mark.parametrize("change, expect", [
    (lambda p, a, at_: (p, a[..., :2] if p.endswith("conv2d/vars/0") else a, at_),
     r"layer 'conv2d' \(Conv2D\) kernel has shape \(3, 3, 2, 2\) in the file, the model needs \(3, 3, 2, 4\)"),
    (lambda p, a, at_: (p, a.astype(np.int32) if p.endswith("dense/vars/0") else a, at_),
     r"layer 'dense' \(Dense\) kernel: '.*' holds int32 values, not floats"),
    (lambda p, a, at_: (p, np.zeros((1 << 14, 64), np.float32) if p.endswith("dense_1/vars/1") else a, at_),
     r"layer 'dense_1' \(Dense\) bias has shape \(16384, 64\) in the file, the model needs \(3,\)"),
    (lambda p, a, at_: (p, np.full(a.shape, np.inf) if p.endswith("dense/vars/1") else a, at_),
     r"NaN/inf value"),
])
def test_weights_that_disagree_with_the_config_are_refused(keras_file, change, expect):
    m, members, path = keras_file
    weights = _weights_member(m, change)
    refused(path, at.build([(n, weights if n == "model.weights.h5" else d) for n, d in members]), expect)


def test_float64_and_float16_weights_are_converted(keras_file):
    m, members, path = keras_file
    weights = _weights_member(m, lambda p, a, at_: (p, a.astype(np.float64), at_))
    path.parent.mkdir()
    path.write_bytes(at.build([(n, weights if n == "model.weights.h5" else d) for n, d in members]))
    assert all(np.array_equal(a, b) for a, b in zip(load_model(path).get_weights(), m.get_weights()))


# ---------------------------------------------------------------------- model_from_json
@pytest.mark.parametrize("text, expect", [
    ("[" * 5000 + "]" * 5000, r"nested 5000 levels deep, more than the 100 hpcnn reads \(file_limits.MAX_CONFIG_DEPTH\)"),
    ('{"a": ' * 200 + "1" + "}" * 200, r"nested 200 levels deep"),
    (" " * ((16 << 20) + 1) + "{}", r"is 16777219 bytes long, more than the 16777216 bytes hpcnn reads "
                                     r"\(file_limits.MAX_CONFIG_BYTES\)"),
    ('"\\ud800"', None),
    ("\ud800", r"not valid JSON \(UnicodeEncodeError"),
    (b"\xff\xfe{", r"not valid JSON \(UnicodeDecodeError"),
    ('{"class_name": "keras.src.models.Sequential", "config": {"layers": []}}', r"describes a 'keras.src.models"),
    ('{"class_name": "Sequential", "config": {"layers": [{"class_name": "os.system", "config": {}}]}}',
     r"'os.system' \(not a plain class name\)"),
    ('{"class_name": "Sequential", "module": "os", "config": {"layers": []}}', r"Sequential is a custom object"),
    ('{"layers": [{"class_name": "os.system", "config": {}}]}', r"model_from_json: "),
    ('{"layers": [{"class_name": "Dense", "config": {"units": "x"}}]}', r"model_from_json: "),
    ('{"layers": [7]}', r"model_from_json: "),
])
def test_model_from_json_on_hostile_text(text, expect, payload):
    if expect is None:
        with pytest.raises(ValueError, match="model_from_json: "):
            model_from_json(text)
        return
    with pytest.raises(ValueError) as info:
        model_from_json(text)
    msg = str(info.value)
    assert msg.startswith("model_from_json: "), msg
    assert __import__("re").search(expect, msg), msg


def test_model_from_json_with_a_lambda_layer(tmp_path):
    m = small_model()
    cfg = json.loads(m.to_json())
    cfg["config"]["layers"].insert(2, at.lambda_layer(tmp_path / "ran"))
    with pytest.raises(ValueError, match=r"model_from_json: .*Lambda \(Python code\).*safe_mode"):
        model_from_json(json.dumps(cfg))
    assert not (tmp_path / "ran").exists()


# ---------------------------------------------------------------------- found by the corpus (tests/hostile/test_hostile_models.py)
def test_a_config_whose_layers_do_not_fit_together_names_the_file(keras_file):
    _, members, path = keras_file
    cfg = config_of(members)
    layers = cfg["config"]["layers"]
    layers[1], layers[-1] = layers[-1], layers[1]  # a Dense on images
    refused(path, at.build(with_config(members, cfg)), r"': its config.json: the model it describes cannot "
                                                        r"be built \(.*Dense expects a flat input")


def test_a_malformed_inbound_tensor_in_hpcnn_s_description_names_the_file(tmp_path):
    from tests.support.small_models import residual_model
    m = residual_model()
    m.save(tmp_path / "r.keras")
    members = at.read_members(tmp_path / "r.keras")
    meta = json.loads(dict(members)["hpcnn.json"])
    entry = next(e for e in meta["config"]["layers"] if e.get("inbound_nodes"))
    entry["inbound_nodes"][0]["args"][0]["config"] = 2 ** 31
    data = at.build([(n, json.dumps(meta).encode() if n == "hpcnn.json" else d) for n, d in members])
    refused(tmp_path / "case" / "r.keras", data, r"is damaged: its model description is not valid \(.*an inbound "
                                                 r"tensor has no keras_history")


def test_model_from_json_names_itself_for_what_hpcnn_cannot_build_yet():
    from tests.support.small_models import residual_model
    cfg = residual_model().get_config()
    entry = next(e for e in cfg["layers"] if e.get("inbound_nodes"))
    entry["inbound_nodes"][0]["args"][0]["config"]["keras_history"][1] = 1
    with pytest.raises(NotImplementedError, match=r"model_from_json: .* reads node \[1, 0\]"):
        model_from_json(json.dumps(cfg))
