"""Model files under attack (issue 12): load_model on damaged or hostile files (item 10) and save
onto odd targets (item 12, the save side).

Every damaged file is a ValueError that names the file and what is wrong (never a raw
AttributeError/KeyError/TypeError, a silently NaN model, or an arbitrary attribute of
hpcnn.optimizers called by name). save refuses read-only files, symbolic links, directories and
special files, leaving them untouched, and removes the temporary file a killed save left behind.
"""
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hpcnn
from hpcnn.formats import hpcnn_files
from hpcnn.data import read_dataset, write_hdf5
from tests.support.small_models import small_model

N_WEIGHTS = 6  # small_model: conv2d, dense, dense_1 kernels and biases


def saved(tmp_path, name="good.h5"):
    rng = np.random.default_rng(0)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(rng.random((16, 8, 8, 2), dtype=np.float32), rng.integers(0, 3, 16), batch_size=8, verbose=0)
    path = str(tmp_path / name)
    m.save(path)
    return m, path


def contents(path):
    """(meta dict, [weights]) of a saved model, as hpcnn's format_version 1 layout holds them (one
    dataset per weight array, weight_000, ...; files of that layout still load): rewrite() writes
    them back in that layout. tests/python/formats/test_keras_files.py damages files of the Keras layout."""
    meta = json.loads(bytes(read_dataset(path, hpcnn_files.META_DATASET)).decode())
    assert meta.pop("weights") == hpcnn_files.WEIGHTS_IN_KERAS_LAYOUT  # without it: weight_000, ...
    weights = hpcnn.models.load_model(path, compile=False).get_weights()
    assert len(weights) == N_WEIGHTS
    return meta, weights


def rewrite(path, meta=None, weights=None, raw_meta=None):
    arrays = {hpcnn_files.META_DATASET: raw_meta if raw_meta is not None
              else np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    for i, w in enumerate(weights or []):
        if w is not None:
            arrays[hpcnn_files.weight_dataset(i)] = w
    os.remove(path)
    write_hdf5(path, arrays)


def damage(kind):
    """A function (meta, weights) -> (meta, weights) or {'raw_meta': ...}."""
    def edit_meta(f):
        def g(meta, weights):
            f(meta)
            return meta, weights
        return g

    def set_layer(i, cfg):
        return edit_meta(lambda m: m["config"]["layers"].__setitem__(i, cfg))

    table = {
        "malformed JSON": lambda m, w: {"raw_meta": np.frombuffer(b'{"format": "hpcnn-model", ', np.uint8)},
        "not UTF-8": lambda m, w: {"raw_meta": np.frombuffer(b"\xff\xfe\x00{", np.uint8)},
        "deeply nested JSON": lambda m, w: {"raw_meta": np.frombuffer(b"[" * 200000 + b"]" * 200000, np.uint8)},
        "JSON list": lambda m, w: {"raw_meta": np.frombuffer(b"[1, 2, 3]", np.uint8)},
        "description of float32": lambda m, w: {"raw_meta": np.zeros(4, np.float32)},
        "other format": edit_meta(lambda m: m.update(format="keras")),
        "newer format_version": edit_meta(lambda m: m.update(format_version=99)),
        "no config": edit_meta(lambda m: m.pop("config")),
        "config a string": edit_meta(lambda m: m.update(config="x")),
        "layers not a list": edit_meta(lambda m: m["config"].update(layers={"a": 1})),
        "unknown layer class": set_layer(1, {"class_name": "Lambda", "config": {"function": "os.system"}}),
        "layer class not a string": set_layer(1, {"class_name": ["Dense"], "config": {}}),
        "layer not a dict": set_layer(1, "Dense"),
        "layer config not a dict": set_layer(2, {"class_name": "Dense", "config": [3]}),
        "unknown layer argument": set_layer(1, {"class_name": "Conv2D",
                                                "config": {"filters": 4, "kernel_size": 3, "evil": 1}}),
        "negative units": set_layer(4, {"class_name": "Dense", "config": {"units": -8}}),
        "units beyond int32": set_layer(4, {"class_name": "Dense", "config": {"units": 2**40}}),
        "huge input shape": set_layer(0, {"class_name": "InputLayer", "config": {"input_shape": [2**40, 2**40, 2]}}),
        "bad seed": edit_meta(lambda m: m.update(seed="12")),
        "optimizer by attribute name 'get'": edit_meta(lambda m: m["compile"].update(optimizer="get")),
        "optimizer base class": edit_meta(lambda m: m["compile"].update(optimizer="Optimizer")),
        "optimizer dunder": edit_meta(lambda m: m["compile"].update(optimizer="__loader__")),
        "optimizer not a string": edit_meta(lambda m: m["compile"].update(optimizer=None)),
        "optimizer config bad key": edit_meta(lambda m: m["compile"]["optimizer_config"].update(decay=0.1)),
        "optimizer config bad value": edit_meta(lambda m: m["compile"]["optimizer_config"].update(learning_rate=-1)),
        "optimizer config a list": edit_meta(lambda m: m["compile"].update(optimizer_config=[0.1])),
        "unknown loss": edit_meta(lambda m: m["compile"].update(loss="mse")),
        "metrics a string": edit_meta(lambda m: m["compile"].update(metrics="accuracy")),
        "compile a list": edit_meta(lambda m: m.update(compile=[1])),
        "float64 weight": lambda m, w: (m, w[:3] + [w[3].astype(np.float64)] + w[4:]),
        "int weight": lambda m, w: (m, w[:1] + [np.zeros(w[1].shape, np.int32)] + w[2:]),
        "NaN weight": lambda m, w: (m, w[:2] + [np.where(np.arange(w[2].size).reshape(w[2].shape) == 5, np.nan,
                                                          w[2]).astype(np.float32)] + w[3:]),
        "inf weight": lambda m, w: (m, w[:5] + [np.full(w[5].shape, np.inf, np.float32)]),
        "missing weight": lambda m, w: (m, w[:4] + [None, w[5]]),
        "too few weights": lambda m, w: (m, w[:4]),
        "extra weight": lambda m, w: (m, w + [np.zeros(3, np.float32)]),
        "transposed weight": lambda m, w: (m, w[:2] + [np.ascontiguousarray(w[2].T)] + w[3:]),
        "weight of another size": lambda m, w: (m, w[:1] + [np.zeros(7, np.float32)] + w[2:]),
    }
    return table[kind]


EXPECT = {
    "malformed JSON": r"not valid JSON",
    "not UTF-8": r"not valid JSON \(UnicodeDecodeError",
    "deeply nested JSON": r"is nested \d+ levels deep, more than the 100 hpcnn reads \(file_limits.MAX_CONFIG_DEPTH\)",
    "JSON list": r"not an 'hpcnn-model' description",
    "description of float32": r"not UTF-8 bytes|not an hpcnn model file",
    "other format": r"not an 'hpcnn-model' description",
    "newer format_version": r"format_version 99 is not one this hpcnn reads",
    "no config": r"no valid 'config'",
    "config a string": r"no valid 'config'",
    "layers not a list": r"a Sequential config is a dict with a 'layers' list",
    "unknown layer class": r"unknown layer class 'Lambda'",
    "layer class not a string": r"unknown layer class \['Dense'\]",
    "layer not a dict": r"a layer config must be a dict",
    "layer config not a dict": r"the config of a Dense layer must be a dict",
    "unknown layer argument": r"Conv2D: Unrecognized keyword arguments passed to Conv2D: \{'evil': 1\}",
    "negative units": r"invalid value for `units`.*Received: units=-8",
    "units beyond int32": r"invalid value for `units`.*Received: units=1099511627776",
    "huge input shape": r"larger than 2147483647",
    "bad seed": r"Invalid value for argument `seed`",
    "optimizer by attribute name 'get'": r"unknown optimizer 'get': hpcnn has \['Adam', 'AdamW', 'RMSprop', 'SGD'\]",
    "optimizer base class": r"unknown optimizer 'Optimizer'",
    "optimizer dunder": r"unknown optimizer '__loader__'",
    "optimizer not a string": r"unknown optimizer None",
    "optimizer config bad key": r"the Adam optimizer's config is not valid \(Unrecognized keyword arguments",
    "optimizer config bad value": r"compile settings are not valid .*learning_rate",
    "optimizer config a list": r"the optimizer config is not a dict",
    "unknown loss": r"unknown loss 'mse'",
    "metrics a string": r"metrics is not a list",
    "compile a list": r"no valid 'compile'",
    "float64 weight": r"weight 'dense/bias': '/weight_003' holds float64 values; hpcnn's own files hold float32",
    "int weight": r"weight 'conv2d/bias': '/weight_001' holds int32 values",
    "NaN weight": r"weight 'dense/kernel' \('/weight_002'\) holds 1 NaN/inf value",
    "inf weight": r"weight 'dense_1/bias' \('/weight_005'\) holds 3 NaN/inf value",
    "missing weight": r"weight 'dense_1/kernel': '/weight_004' is missing",
    "too few weights": r"weight 'dense_1/kernel': '/weight_004' is missing",
    "extra weight": r"more weight arrays than the model's 6 \(found 'weight_006'\)",
    "transposed weight": r"weight 'dense/kernel' has shape \(8, 64\) in the file, the model needs \(64, 8\) "
                         r"\(dataset '/weight_002'\)",
    "weight of another size": r"weight 'conv2d/bias' has shape \(7,\) in the file, the model needs \(4,\) "
                              r"\(dataset '/weight_001'\)",
}


@pytest.mark.parametrize("kind", sorted(EXPECT))
def test_load_model_on_a_damaged_file_is_a_clear_error(kind, tmp_path):
    _, path = saved(tmp_path)
    meta, weights = contents(path)
    out = damage(kind)(meta, weights)
    if isinstance(out, dict):
        rewrite(path, weights=weights, **out)
    else:
        rewrite(path, *out)
    with pytest.raises(ValueError) as info:
        hpcnn.models.load_model(path)
    assert type(info.value) is ValueError
    msg = str(info.value)
    assert msg.startswith(f"load_model: '{path}'"), msg  # names the file
    assert __import__("re").search(EXPECT[kind], msg), msg


def test_every_damage_kind_has_an_expected_message():
    for kind in EXPECT:
        damage(kind)  # KeyError if the table lost a row


def test_load_model_with_compile_false_skips_compile_settings_only(tmp_path):
    m, path = saved(tmp_path)
    meta, weights = contents(path)
    meta["compile"]["optimizer"] = "Nadam"
    rewrite(path, meta, weights)
    with pytest.raises(ValueError, match="unknown optimizer 'Nadam'"):
        hpcnn.models.load_model(path)
    loaded = hpcnn.models.load_model(path, compile=False)  # the architecture and weights are fine
    for a, b in zip(loaded.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"Invalid value for argument `compile`"):
        hpcnn.models.load_model(path, compile="no")


def test_load_model_of_other_paths(tmp_path):
    with pytest.raises((ValueError, OSError)):
        hpcnn.models.load_model(str(tmp_path))  # a directory
    with pytest.raises(ValueError, match="the file path must be a string"):
        hpcnn.models.load_model(b"model.h5")


# ------------------------------------------------------------------ save onto odd targets
def snapshot(path):
    st = os.lstat(path)
    body = None
    if stat.S_ISREG(st.st_mode):
        with open(path, "rb") as f:
            body = f.read()
    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    return st.st_mode, st.st_ino, body, link


def test_save_refuses_a_read_only_file(tmp_path):
    m, _ = saved(tmp_path)
    target = tmp_path / "ro.h5"
    target.write_bytes(b"keep me")
    target.chmod(0o444)
    before = snapshot(target)
    with pytest.raises(ValueError, match=r"save: '.*ro.h5' is read-only; hpcnn does not replace it"):
        m.save(str(target))
    assert snapshot(target) == before
    assert sorted(os.listdir(tmp_path)) == ["good.h5", "ro.h5"]  # no temporary file left


@pytest.mark.parametrize("dangling", [False, True])
def test_save_refuses_a_symbolic_link_and_leaves_it_and_its_target(tmp_path, dangling):
    m, _ = saved(tmp_path)
    target = tmp_path / "elsewhere.h5"
    if not dangling:
        target.write_bytes(b"someone else's file")
    link = tmp_path / "link.h5"
    link.symlink_to(target)
    before = snapshot(link)
    target_before = None if dangling else snapshot(target)
    with pytest.raises(ValueError, match=r"'.*link.h5' is a symbolic link; hpcnn does not write through or replace"):
        m.save(str(link))
    assert snapshot(link) == before
    if dangling:
        assert not target.exists()
    else:
        assert snapshot(target) == target_before
    with pytest.raises(FileExistsError):  # a dangling link exists too
        m.save(str(link), overwrite=False)


def test_save_refuses_a_directory_and_a_fifo(tmp_path):
    m, _ = saved(tmp_path)
    d = tmp_path / "dir.h5"
    d.mkdir()
    (d / "inside").write_text("x")
    with pytest.raises(ValueError, match=r"'.*dir.h5' is a directory"):
        m.save(str(d))
    assert os.listdir(d) == ["inside"]
    fifo = tmp_path / "fifo.h5"
    os.mkfifo(fifo)
    before = snapshot(fifo)
    with pytest.raises(ValueError, match=r"'.*fifo.h5' exists and is not a regular file \(a FIFO\)"):
        m.save(str(fifo))
    assert snapshot(fifo) == before
    with pytest.raises(ValueError, match=r"write_hdf5: '.*fifo.h5' exists and is not a regular file"):
        write_hdf5(str(fifo), {"x": np.zeros(3, np.float32)})


def test_save_replaces_a_writable_file_atomically(tmp_path):
    m, path = saved(tmp_path)
    m.fit(np.zeros((4, 8, 8, 2), np.float32), np.zeros(4, int), verbose=0)
    m.save(path)  # over the earlier save
    np.testing.assert_array_equal(hpcnn.models.load_model(path).get_weights()[0], m.get_weights()[0])
    assert sorted(os.listdir(tmp_path)) == ["good.h5"]


_KILLED_WRITER = """
    import os, signal, socket, sys
    # What a save killed mid-write leaves: its temporary file, named by host and process.
    name = f"{sys.argv[1]}.tmp-{socket.gethostname()}-{os.getpid()}-5eed"
    with open(name, "wb") as f:
        f.write(b"half a model")
    print(name, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_writers_temporary_file_is_removed_by_the_next_save(tmp_path):
    m, path = saved(tmp_path)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_KILLED_WRITER), path], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    stale = proc.stdout.strip()
    assert os.path.exists(stale)
    host = socket.gethostname()
    alive = f"{path}.tmp-{host}-{os.getpid()}-abc"          # a save in progress in a live process
    other_host = f"{path}.tmp-othernode-{os.getpid() + 1}-abc"  # another node of a shared file system
    unrelated = str(tmp_path / "good.h5.tmp-notes.txt")
    for p in (alive, other_host, unrelated):
        with open(p, "w") as f:
            f.write("x")
    m.save(path)
    assert not os.path.exists(stale)
    for p in (alive, other_host, unrelated):
        assert os.path.exists(p), p
    np.testing.assert_array_equal(hpcnn.models.load_model(path).get_weights()[0], m.get_weights()[0])
