"""A missing path is a FileNotFoundError wherever hpcnn meets one (a file to read, a folder to
write into), naming the caller and the path, as Python's open() and Keras do: never a ValueError
for one reader and a FileNotFoundError for the next."""
import subprocess
import sys

import numpy as np
import pytest

import hpcnn
from hpcnn.data import HDF5Dataset, write_hdf5
from hpcnn.datasets import cifar10, mnist
from hpcnn.datasets.converters import load_hdf5
from hpcnn.layers import Dense, InputLayer


def small_model():
    m = hpcnn.Sequential([InputLayer(input_shape=(4,)), Dense(2, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy")
    return m


READERS = {
    "load_model .h5": lambda p: hpcnn.load_model(p / "missing.h5"),
    "load_model .keras": lambda p: hpcnn.load_model(p / "missing.keras"),
    "load_model, no suffix": lambda p: hpcnn.load_model(p / "missing"),
    "load_weights .weights.h5": lambda p: small_model().load_weights(p / "missing.weights.h5"),
    "load_weights .h5": lambda p: small_model().load_weights(p / "missing.h5"),
    "HDF5Dataset": lambda p: HDF5Dataset(p / "missing.h5", x="x", y="y", batch_size=2),
    "load_hdf5": lambda p: load_hdf5(str(p / "missing.h5")),
    "cifar10.load_data": lambda p: cifar10.load_data(path=str(p / "missing.tar.gz")),
    "mnist.load_data": lambda p: mnist.load_data(path=str(p / "missing.npz")),
}

WRITERS = {
    "save .h5": lambda p: small_model().save(p / "no-dir" / "m.h5"),
    "save .keras": lambda p: small_model().save(p / "no-dir" / "m.keras"),
    "save_weights": lambda p: small_model().save_weights(p / "no-dir" / "m.weights.h5"),
    "write_hdf5": lambda p: write_hdf5(p / "no-dir" / "d.h5", {"x": np.zeros((2, 2), np.float32)}),
}


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_reading_a_missing_file(tmp_path, read):
    with pytest.raises(FileNotFoundError, match="missing"):
        read(tmp_path)


@pytest.mark.parametrize("write", WRITERS.values(), ids=WRITERS.keys())
def test_writing_into_a_missing_folder(tmp_path, write):
    with pytest.raises(FileNotFoundError, match=r"cannot write '.*no-dir.*': no such directory") as e:
        write(tmp_path)
    assert e.value.filename == str(tmp_path / "no-dir")
    assert not (tmp_path / "no-dir").exists()


def test_the_message_names_the_caller_and_the_path(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        hpcnn.load_model(tmp_path / "missing.h5")
    # The first line is Python's own; the lines after it say where hpcnn looked (test_missing_file_hints.py).
    assert str(e.value).splitlines()[0] == f"[Errno 2] load_model: no such file: '{tmp_path / 'missing.h5'}'"


def test_the_command_line_says_not_found(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hpcnn", "convert", "cifar10", str(tmp_path / "missing.tar.gz"),
                        str(tmp_path / "out.h5")], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "missing.tar.gz' not found" in r.stderr, r.stderr
    assert not (tmp_path / "out.h5").exists()
