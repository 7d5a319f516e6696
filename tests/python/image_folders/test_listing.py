"""image_dataset_from_directory lists, labels and splits a folder as Keras 3.15 does: the same files in
the same subset and order for the same seed (compared live with Keras' own function where TensorFlow
is installed), Keras' messages and argument checks."""
import os

import numpy as np
import pytest

from tests.support import image_folders as support

from hpcnn.data import image_dataset_from_directory
from hpcnn.image_folders import listing


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = support.make_folder(tmp_path_factory.mktemp("listing") / "imgs", {"zebra": 5, "ant": 7, "mole": 4})
    (root / "ant" / "nested" / "deeper").mkdir(parents=True)
    support.PIL.fromarray(np.zeros((9, 9, 3), np.uint8)).save(root / "ant" / "nested" / "deeper" / "n.GIF")
    support.PIL.fromarray(np.zeros((9, 9, 3), np.uint8)).save(root / "ant" / "nested" / "Z.jpeg")
    return root


def quiet(folder, cache, **kw):
    kw.setdefault("image_size", (8, 8))
    return image_dataset_from_directory(str(folder), verbose=False, cache_dir=str(cache), **kw)


def test_listing_rules(folder, tmp_path):
    ds = quiet(folder, tmp_path, shuffle=False)
    assert ds.class_names == ["ant", "mole", "zebra"]  # sorted, the hidden folder left out
    rel = [os.path.relpath(p, folder) for p in ds.file_paths]
    # class by class; in a class, folders by path then files by name; extensions in any case; no .txt
    assert rel[:3] == ["ant/img_000.png", "ant/img_001.jpg", "ant/img_002.JPG"]
    assert rel[7:9] == ["ant/nested/Z.jpeg", "ant/nested/deeper/n.GIF"]
    assert len(rel) == 18 and not any(r.endswith(".txt") or ".hidden" in r for r in rel)
    labels = np.concatenate([y for _, y in ds])
    assert labels.tolist() == [0] * 9 + [1] * 4 + [2] * 5


def test_seeded_split_is_keras_shuffle_then_cut(folder, tmp_path, capsys):
    train = quiet(folder, tmp_path, seed=7, validation_split=0.25, subset="training")
    val = quiet(folder, tmp_path, seed=7, validation_split=0.25, subset="validation")
    out = capsys.readouterr().out
    assert "Using 14 files for training." in out and "Using 4 files for validation." in out
    plain = sorted(quiet(folder, tmp_path, shuffle=False).file_paths)
    expected = list(listing.index_directory(str(folder), "inferred", None, False, 0, False, False).file_paths)
    np.random.RandomState(7).shuffle(expected)
    assert train.file_paths == expected[:14] and val.file_paths == expected[14:]
    assert sorted(train.file_paths + val.file_paths) == plain
    both = quiet(folder, tmp_path, seed=7, validation_split=0.25, subset="both")
    assert [d.file_paths for d in both] == [train.file_paths, val.file_paths]
    assert both[0].shuffle and not both[1].shuffle  # Keras: the validation half of 'both' keeps its order
    assert val.shuffle  # ... but subset='validation' alone is shuffled (Keras passes shuffle through)


def test_verbose_messages(folder, tmp_path, capsys):
    image_dataset_from_directory(str(folder), image_size=(8, 8), seed=1, validation_split=0.5, subset="training",
                                 cache_dir=str(tmp_path))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Found 18 files belonging to 3 classes." and out[1] == "Using 9 files for training."
    image_dataset_from_directory(str(folder), labels=None, image_size=(8, 8), cache_dir=str(tmp_path))
    assert capsys.readouterr().out.splitlines()[0] == "Found 19 files."  # from the top: the hidden folder's too


def test_class_names_and_labels_arguments(folder, tmp_path):
    ds = quiet(folder, tmp_path, class_names=["zebra", "ant"], shuffle=False)
    assert ds.class_names == ["zebra", "ant"] and len(ds.file_paths) == 14
    assert np.concatenate([y for _, y in ds]).tolist() == [0] * 5 + [1] * 9
    n = len(quiet(folder, tmp_path, labels=None, shuffle=False).file_paths)
    given = [i % 2 for i in range(n)]
    ds = quiet(folder, tmp_path, labels=given, shuffle=False)
    assert ds.class_names == ["0", "1"] and np.concatenate([y for _, y in ds]).tolist() == given
    sparse = quiet(folder, tmp_path, labels=[5 * v for v in given], shuffle=False)  # int: used as given
    assert sparse.class_names == ["0", "5"] and np.concatenate([y for _, y in sparse]).max() == 5
    with pytest.raises(ValueError, match=r"labels holds 5, not below the 2 classes .*needs labels 0..1"):
        quiet(folder, tmp_path, labels=[5 * v for v in given], label_mode="categorical", shuffle=False)
    with pytest.raises(ValueError, match=r"labels must be integers in \[0, 2\*\*31\)"):
        quiet(folder, tmp_path, labels=[-1] + given[1:], shuffle=False)
    x = next(iter(quiet(folder, tmp_path, labels=None, shuffle=False)))
    assert isinstance(x, np.ndarray) and x.shape == (19, 8, 8, 3)  # images alone, as Keras


@pytest.mark.parametrize("kw, message", [
    ({"class_names": ["ant", "cat"]}, "did not match the names of the subdirectories"),
    ({"labels": "folders"}, "should be a list/tuple of integer labels"),
    ({"labels": [0, 1], "class_names": ["a"]}, "You can only pass `class_names` if"),
    ({"labels": [0, 1]}, "Expected the lengths of `labels` to match"),
    ({"label_mode": "sparse"}, '`label_mode` argument must be one of "int"'),
    ({"label_mode": "binary"}, "there must be exactly 2 class_names"),
    ({"color_mode": "hsv"}, "`color_mode` must be one of"),
    ({"image_size": (8, 8, 3)}, "Invalid `image_size` value"),
    ({"interpolation": "cubic"}, "Argument `interpolation` should be one of"),
    ({"validation_split": 0.2}, "If `subset` is set, `validation_split` must be set"),
    ({"validation_split": 1.5, "subset": "training"}, "`validation_split` must be between 0 and 1"),
    ({"validation_split": 0.2, "subset": "train", "seed": 1}, '`subset` must be either "training"'),
    ({"validation_split": 0.2, "subset": "training"}, "you must provide a `seed` argument"),
    ({"crop_to_aspect_ratio": True, "pad_to_aspect_ratio": True}, "Only one of `pad_to_aspect_ratio`"),
])
def test_keras_argument_errors(folder, tmp_path, kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("`", ".")):
        quiet(folder, tmp_path, **kw)


def test_unsupported_interpolation_names_the_supported_ones(folder, tmp_path):
    with pytest.raises(NotImplementedError, match="interpolation='bicubic' is not implemented.*'bilinear', 'nearest'"):
        quiet(folder, tmp_path, interpolation="bicubic")


def test_missing_and_empty_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        quiet(tmp_path / "nowhere", tmp_path)
    (tmp_path / "empty" / "a").mkdir(parents=True)
    with pytest.raises(ValueError, match="No images found in directory .*Allowed formats"):
        quiet(tmp_path / "empty", tmp_path)


def test_same_files_and_subsets_as_keras_for_three_seeds(folder, tmp_path):
    cases = [dict(seed=s, validation_split=0.3, subset="both") for s in (1, 42, 1337)]
    cases += [dict(shuffle=False), dict(seed=5, labels=None), dict(seed=3, class_names=["mole", "ant"])]
    reply = support.run_keras("listing", {"dir": str(folder), "cases": cases}, tmp_path)
    for case in cases:
        ours = quiet(folder, tmp_path, **case)
        ours = ours if isinstance(ours, list) else [ours]
        theirs = reply[__import__("json").dumps(case, sort_keys=True)]
        assert [d.file_paths for d in ours] == [t["file_paths"] for t in theirs], case
        assert [d.class_names for d in ours] == [t["class_names"] for t in theirs], case
