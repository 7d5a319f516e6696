"""A missing file names what helps (issue 43, item 3): the working directory for a relative path,
the data directory, and the close matches in both (``mydata.hdf5`` when ``mydata.h5`` was asked),
for HDF5Dataset, load_model and load_weights; a bare name that is not in the working directory is
found in the data directory, as ``datasets.*.load_data`` finds its files. An unknown loss or
optimizer name gets a "did you mean"."""
import errno

import numpy as np
import pytest

import hpcnn
from hpcnn.data import HDF5Dataset, dataset_info, write_hdf5
from hpcnn.layers import Dense, InputLayer


def small_model():
    m = hpcnn.Sequential([InputLayer(input_shape=(4,)), Dense(2, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy")
    return m


def small_file(path):
    write_hdf5(path, {"x": np.zeros((4, 4), np.float32), "y": np.zeros(4, np.int32)})


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """(working directory, data directory), both empty, the first the current one."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HPCNN_DATA_DIR", str(data))
    return work, data


READERS = {
    "HDF5Dataset": lambda name: HDF5Dataset(name, x="x", y="y", batch_size=2),
    "load_model": lambda name: hpcnn.load_model(name),
    "load_weights": lambda name: small_model().load_weights(name),
}


@pytest.mark.parametrize("caller", READERS)
def test_a_relative_path_names_the_working_and_data_directories(folders, caller):
    work, data = folders
    with pytest.raises(FileNotFoundError) as e:
        READERS[caller]("nothing_like_it.h5")
    text = str(e.value)
    assert text.splitlines()[0] == f"[Errno 2] {caller}: no such file: 'nothing_like_it.h5'", text
    assert f"working directory {work}" in text and str(data) in text and "$HPCNN_DATA_DIR" in text, text
    assert "close matches" not in text, text
    assert e.value.errno == errno.ENOENT and e.value.filename == "nothing_like_it.h5"


@pytest.mark.parametrize("caller", READERS)
@pytest.mark.parametrize("where", ["work", "data"])
def test_close_matches_in_either_folder_are_named(folders, caller, where):
    work, data = folders
    folder = work if where == "work" else data
    small_file(folder / "mydata.hdf5")
    (folder / "unrelated.txt").write_text("x")
    with pytest.raises(FileNotFoundError) as e:
        READERS[caller]("mydata.h5")
    text = str(e.value)
    assert f"close matches: {folder / 'mydata.hdf5'}" in text, text
    assert "unrelated.txt" not in text, text


def test_an_absolute_path_lists_close_matches_beside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCNN_DATA_DIR", str(tmp_path / "elsewhere"))
    small_model().save(tmp_path / "cnn.keras")
    with pytest.raises(FileNotFoundError) as e:
        hpcnn.load_model(tmp_path / "cnn.kears")
    text = str(e.value)
    assert "working directory" not in text and f"close matches: {tmp_path / 'cnn.keras'}" in text, text


def test_a_missing_folder_is_said(folders):
    with pytest.raises(FileNotFoundError, match=r"the folder .*no_such_folder does not exist"):
        hpcnn.load_model("no_such_folder/cnn.keras")


def test_the_tutorials_file_names_the_commands_that_make_it(folders):
    with pytest.raises(FileNotFoundError) as e:
        HDF5Dataset("dataset_cifar10.hdf5", x="x_train", y="y_train", batch_size=2)
    text = str(e.value)
    assert "`hpcnn convert cifar10 --download`" in text and "`hpcnn tutorial --synthetic`" in text, text
    assert "synthetic_cifar10_seed0.hdf5" in text and "same layout" in text, text


def test_a_bare_name_is_found_in_the_data_directory(folders):
    work, data = folders
    small_file(data / "mydata.hdf5")
    ds = HDF5Dataset("mydata.hdf5", x="x", y="y", batch_size=2, shuffle=False)
    assert len(ds) == 2
    assert tuple(dataset_info("mydata.hdf5", "x")["shape"]) == (4, 4)


def test_the_working_directory_comes_first(folders):
    work, data = folders
    write_hdf5(work / "d.hdf5", {"x": np.ones((6, 2), np.float32), "y": np.zeros(6, np.int32)})
    write_hdf5(data / "d.hdf5", {"x": np.ones((4, 2), np.float32), "y": np.zeros(4, np.int32)})
    assert HDF5Dataset("d.hdf5", x="x", y="y", batch_size=2).num_rows == 6


def test_a_path_with_a_folder_is_not_looked_for_in_the_data_directory(folders):
    work, data = folders
    (data / "sub").mkdir()
    small_file(data / "sub" / "d.hdf5")
    with pytest.raises(FileNotFoundError, match="no such file: 'sub/d.hdf5'"):
        HDF5Dataset("sub/d.hdf5", x="x", y="y", batch_size=2)


@pytest.mark.parametrize("given, meant", [("categorical_crosentropy", "categorical_crossentropy"),
                                          ("sparse_categorical", "sparse_categorical_crossentropy"),
                                          ("MeanSquaredErorr", "MeanSquaredError")])
def test_an_unknown_loss_gets_a_did_you_mean(given, meant):
    with pytest.raises(ValueError, match=rf"unknown loss '{given}' \(did you mean '{meant}'"):
        small_model().compile("adam", given)


@pytest.mark.parametrize("given, meant", [("adamm", "adam"), ("sdg", "sgd"), ("rms_prop", "rmsprop"),
                                          ({"class_name": "Adma", "config": {}}, "Adam")])
def test_an_unknown_optimizer_gets_a_did_you_mean(given, meant):
    m = hpcnn.Sequential([InputLayer(input_shape=(4,)), Dense(2, activation="softmax")])
    with pytest.raises(ValueError, match=rf"unknown optimizer .*\(did you mean '{meant}'"):
        m.compile(given, "sparse_categorical_crossentropy")


def test_a_name_like_nothing_gets_no_guess():
    with pytest.raises(ValueError) as e:
        hpcnn.optimizers.get("zzzz")
    assert "did you mean" not in str(e.value)
