"""file_limits' constants as a contract (docs/reliability.md, "The limits"): each one just inside
(the file loads, or passes that check and is judged on the next) and just outside (refused, the
message naming the limit and the constant). The limits must admit real models: a ResNet-50-size
config and a weights member of several hundred MB load."""
import json
import zipfile

import numpy as np
import pytest

import hpcnn
from hpcnn.formats import file_limits, keras_archive
from hpcnn.formats.config_json import nesting_depth
from hpcnn.layers import Dense, InputLayer
from hpcnn.models import load_model, model_from_json
from tests.support import archive_tools as at
from tests.support.small_models import small_model

L = file_limits


@pytest.fixture
def keras_file(tmp_path):
    m = small_model()
    m.save(tmp_path / "hpcnn.keras")
    return m, at.keras_members(tmp_path / "hpcnn.keras"), tmp_path / "m.keras"


def same_weights(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights()))


def load_or_message(path, data):
    path.write_bytes(data)
    try:
        return load_model(path)
    except ValueError as e:
        assert str(path) in str(e)
        return str(e)


def with_member(members, name, data):
    return [(n, data if n == name else d) for n, d in members]


# ---------------------------------------------------------------------- MAX_CONFIG_BYTES
def test_max_config_bytes(keras_file):
    m, members, path = keras_file
    cfg = dict(members)["config.json"]
    inside = cfg + b" " * (L.MAX_CONFIG_BYTES - len(cfg))
    assert same_weights(load_or_message(path, at.build(with_member(members, "config.json", inside))), m)
    msg = load_or_message(path, at.build(with_member(members, "config.json", inside + b" ")))
    assert f"its 'config.json' is {L.MAX_CONFIG_BYTES + 1} bytes, more than the {L.MAX_CONFIG_BYTES} hpcnn reads " \
           "(file_limits.MAX_CONFIG_BYTES)" in msg, msg
    # model_from_json: the same limit on its text
    assert model_from_json(inside.decode()).get_config()["layers"] == m.get_config()["layers"]
    with pytest.raises(ValueError, match=rf"model_from_json: the JSON text is {L.MAX_CONFIG_BYTES + 1} bytes long, "
                                         r"more than .* \(file_limits.MAX_CONFIG_BYTES\)"):
        model_from_json(inside.decode() + " ")


# ---------------------------------------------------------------------- MAX_CONFIG_DEPTH
def padded_to_depth(cfg_bytes, depth):
    """The config with a key whose value nests the whole to exactly `depth` levels."""
    cfg = json.loads(cfg_bytes)
    out = cfg_bytes[:-1] + b', "pad": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    assert nesting_depth(out) == depth and json.loads(out)["config"] == cfg["config"]
    return out


def test_max_config_depth(keras_file):
    m, members, path = keras_file
    cfg = dict(members)["config.json"]
    inside = padded_to_depth(cfg, L.MAX_CONFIG_DEPTH)
    assert same_weights(load_or_message(path, at.build(with_member(members, "config.json", inside))), m)
    outside = padded_to_depth(cfg, L.MAX_CONFIG_DEPTH + 1)
    msg = load_or_message(path, at.build(with_member(members, "config.json", outside)))
    assert f"is nested {L.MAX_CONFIG_DEPTH + 1} levels deep, more than the {L.MAX_CONFIG_DEPTH} hpcnn reads " \
           "(file_limits.MAX_CONFIG_DEPTH)" in msg, msg
    assert model_from_json(inside.decode()).get_config()["layers"] == m.get_config()["layers"]
    with pytest.raises(ValueError, match=r"model_from_json: .* \(file_limits.MAX_CONFIG_DEPTH\)"):
        model_from_json(outside.decode())


def test_real_keras_configs_are_far_inside_the_config_limits():
    # Measured with Keras 3.15 (to_json of keras.applications, weights=None): NASNetLarge 1,033,378
    # bytes and 11 levels, the largest of them; a nested model adds 6 levels.
    assert L.MAX_CONFIG_BYTES >= 10 * 1_033_378 and L.MAX_CONFIG_DEPTH >= 11 + 6 * 10


# ---------------------------------------------------------------------- MAX_ARCHIVE_MEMBER_BYTES
def test_max_archive_member_bytes_at_its_value(keras_file):
    """At the real value, with declared sizes (a real member of 4 GiB is too big for a test): one
    byte more is refused by this limit before anything is read; exactly the limit passes it (and is
    refused by the next check, the inflation)."""
    _, members, path = keras_file
    data = at.build(members, deflate=("model.weights.h5",))
    msg = load_or_message(path, at.patch(data, "model.weights.h5", file_size=L.MAX_ARCHIVE_MEMBER_BYTES + 1))
    assert f"its 'model.weights.h5' is {L.MAX_ARCHIVE_MEMBER_BYTES + 1} bytes, more than the " \
           f"{L.MAX_ARCHIVE_MEMBER_BYTES} hpcnn reads (file_limits.MAX_ARCHIVE_MEMBER_BYTES)" in msg, msg
    msg = load_or_message(path, at.patch(data, "model.weights.h5", file_size=L.MAX_ARCHIVE_MEMBER_BYTES))
    assert "MAX_ARCHIVE_MEMBER_BYTES" not in msg and "a zip bomb?" in msg, msg


def test_max_archive_member_bytes_at_the_members_size(keras_file, monkeypatch):
    m, members, path = keras_file
    size = len(dict(members)["model.weights.h5"])
    monkeypatch.setattr(keras_archive, "MAX_ARCHIVE_MEMBER_BYTES", size)
    assert same_weights(load_or_message(path, at.build(members)), m)
    monkeypatch.setattr(keras_archive, "MAX_ARCHIVE_MEMBER_BYTES", size - 1)
    msg = load_or_message(path, at.build(members))
    assert f"is {size} bytes, more than the {size - 1} hpcnn reads (file_limits.MAX_ARCHIVE_MEMBER_BYTES)" in msg


def test_a_weights_member_of_several_hundred_megabytes_loads(tmp_path):
    assert L.MAX_ARCHIVE_MEMBER_BYTES >= 1_400_000_000  # Keras' largest application, ConvNeXtXLarge (float32)
    m = hpcnn.Sequential([InputLayer(input_shape=[4096]), Dense(16384)], seed=1)  # 268 MB of weights
    m.save(tmp_path / "big.keras")
    with zipfile.ZipFile(tmp_path / "big.keras") as z:
        assert z.getinfo("model.weights.h5").file_size > 250_000_000
    got = load_model(tmp_path / "big.keras", compile=False)
    assert same_weights(got, m)


# ---------------------------------------------------------------------- MAX_ARCHIVE_MEMBERS
def test_max_archive_members(keras_file):
    """Members hpcnn does not read are refused by name; the count is checked first, from the end
    record, before zipfile builds an object per member: at the limit the refusal names the extra
    members, one more names the limit."""
    _, members, path = keras_file
    extras = [(f"x{i}", b"") for i in range(L.MAX_ARCHIVE_MEMBERS - len(members))]
    msg = load_or_message(path, at.build(members + extras))
    assert "it holds members hpcnn does not read: 'x0'" in msg and "MAX_ARCHIVE_MEMBERS" not in msg, msg
    msg = load_or_message(path, at.build(members + extras + [("one_more", b"")]))
    assert f"it lists {L.MAX_ARCHIVE_MEMBERS + 1} members, more than the {L.MAX_ARCHIVE_MEMBERS} hpcnn reads " \
           "(file_limits.MAX_ARCHIVE_MEMBERS)" in msg, msg
    # an end record that claims a million members in a small file: refused before parsing
    msg = load_or_message(path, at.patch_end_record(at.build(members), entries=60000))
    assert "it lists 60000 members" in msg and "MAX_ARCHIVE_MEMBERS" in msg, msg


def test_max_archive_directory_bytes(keras_file):
    m, members, path = keras_file
    data = at.build(members)
    msg = load_or_message(path, at.patch_end_record(data, directory=L.MAX_ARCHIVE_DIRECTORY_BYTES + 1))
    assert f"its listing of members is {L.MAX_ARCHIVE_DIRECTORY_BYTES + 1} bytes, more than the " \
           f"{L.MAX_ARCHIVE_DIRECTORY_BYTES} hpcnn reads (file_limits.MAX_ARCHIVE_DIRECTORY_BYTES)" in msg, msg
    msg = load_or_message(path, at.patch_end_record(data, directory=L.MAX_ARCHIVE_DIRECTORY_BYTES))
    assert "MAX_ARCHIVE_DIRECTORY_BYTES" not in msg and "not a valid zip archive" in msg, msg
    # a real listing near the limit: members with long names (refused by name, not by size)
    long_names = [("y" * 3000 + str(i), b"") for i in range(L.MAX_ARCHIVE_MEMBERS - len(members))]
    msg = load_or_message(path, at.build(members + long_names))
    assert "it holds members hpcnn does not read" in msg, msg


# ---------------------------------------------------------------------- MAX_MEMBER_INFLATION
@pytest.mark.parametrize("extra, refused", [(0, False), (1, True)])
def test_max_member_inflation(extra, refused):
    info = zipfile.ZipInfo("model.weights.h5")
    info.compress_type = zipfile.ZIP_DEFLATED
    info.compress_size = 10_000
    info.file_size = L.MAX_MEMBER_INFLATION * info.compress_size + L.INFLATION_SLACK_BYTES + extra
    if not refused:
        keras_archive.check_member(info, 1 << 30)
        return
    with pytest.raises(ValueError, match=r"inflates 204-fold: a zip bomb\? \(at most 100-fold: "
                                         r"file_limits.MAX_MEMBER_INFLATION\)"):
        keras_archive.check_member(info, 1 << 30)


def test_a_deflated_archive_of_real_weights_loads(keras_file):
    m, members, path = keras_file
    assert same_weights(load_or_message(path, at.build(members, deflate=True)), m)


def test_hpcnn_never_writes_a_description_it_would_not_read_back(tmp_path):
    from hpcnn.formats import hpcnn_files
    with pytest.raises(ValueError, match=r"the file's description would be \d+ bytes nested 101 levels deep, more than "
                                         r"hpcnn reads back .*MAX_CONFIG_DEPTH"):
        hpcnn_files.json_bytes({"x": json.loads("[" * 100 + "]" * 100)})
    with pytest.raises(ValueError, match=r"MAX_CONFIG_BYTES"):
        hpcnn_files.json_bytes({"x": " " * L.MAX_CONFIG_BYTES})
    assert len(hpcnn_files.json_bytes({"x": json.loads("[" * 99 + "]" * 99)})) > 0
