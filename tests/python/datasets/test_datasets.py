"""hpcnn.datasets readers and converters on small archives built in the official formats."""
import gzip
import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest

from tests.support.cifar_files import add_bytes, cifar_binary_tar, cifar_python_tar, expected_cifar, fake_cifar
from hpcnn import convert, data, datasets
from hpcnn.datasets import converters

h5py = pytest.importorskip("h5py")


def idx_bytes(a):
    code = {np.dtype(np.uint8): 0x08}[a.dtype]
    head = bytes([0, 0, code, a.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in a.shape)
    return head + a.tobytes()


def fake_idx_folder(folder, n_train=20, n_test=5, gz=True, seed=1):
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train).astype(np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test).astype(np.uint8),
    }
    os.makedirs(folder, exist_ok=True)
    for name, a in arrays.items():
        blob = idx_bytes(a)
        if gz:
            with gzip.open(os.path.join(folder, name + ".gz"), "wb") as f:
                f.write(blob)
        else:
            Path(folder, name).write_bytes(blob)
    return arrays


@pytest.mark.parametrize("fmt", ["python", "binary"])
def test_cifar10_archives(tmp_path, fmt):
    batches = fake_cifar()
    make = cifar_python_tar if fmt == "python" else cifar_binary_tar
    p = make(tmp_path / f"cifar-10-{fmt}.tar.gz", batches)
    (xt, yt), (xv, yv) = datasets.cifar10.load_data(p)
    (ext, eyt), (exv, eyv) = expected_cifar(batches)
    assert xt.shape == (35, 32, 32, 3) and xt.dtype == np.uint8 and yt.shape == (35, 1)
    np.testing.assert_array_equal(xt, ext)
    np.testing.assert_array_equal(yt, eyt)
    np.testing.assert_array_equal(xv, exv)
    np.testing.assert_array_equal(yv, eyv)


def test_cifar10_extracted_folder_and_hdf5_roundtrip(tmp_path):
    batches = fake_cifar()
    tarp = cifar_python_tar(tmp_path / "c.tar.gz", batches)
    with tarfile.open(tarp) as tf:
        tf.extractall(tmp_path / "x")
    a = datasets.cifar10.load_data(str(tmp_path / "x"))
    out = str(tmp_path / "dataset_cifar10.hdf5")
    assert convert.main(["cifar10", tarp, out]) == 0
    with h5py.File(out, "r") as f:  # the tutorial layout, readable by h5py
        assert set(f) == {"x_train", "y_train", "x_valid", "y_valid"}
        np.testing.assert_array_equal(f["x_train"][:], a[0][0])
        np.testing.assert_array_equal(f["y_valid"][:], a[1][1])
        assert f["x_train"].compression == "gzip"
    b = datasets.cifar10.load_data(out)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u[0], v[0])
        np.testing.assert_array_equal(u[1], v[1])
    ds = data.HDF5Dataset(out, batch_size=8, one_hot=10)
    assert len(ds) == 5 and ds.x_shape == (32, 32, 3)


def test_cifar10_class_names():
    assert datasets.cifar10.class_names[0] == "airplane" and len(datasets.cifar10.class_names) == 10


def test_cifar10_damaged_archive(tmp_path):
    p = tmp_path / "bad.tar.gz"
    p.write_bytes(b"not a tarball")
    with pytest.raises(ValueError, match="bad.tar.gz"):
        datasets.cifar10.load_data(str(p))
    with tarfile.open(tmp_path / "empty.tar.gz", "w:gz") as tf:
        add_bytes(tf, "readme.txt", b"hello")
    with pytest.raises(ValueError, match="CIFAR-10 batches"):
        datasets.cifar10.load_data(str(tmp_path / "empty.tar.gz"))



class _Payload:
    """Pickles as a call of os.system: what a hostile CIFAR-10 batch from a mirror could hold."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("where", ["batch", "data"])
def test_cifar10_pickle_runs_no_code(tmp_path, where):
    """A CIFAR-10 python batch that refers to anything but NumPy's array reconstruction is refused
    naming the member and the global; the call it asks for never happens (issue 26)."""
    import pickle
    marker = tmp_path / "ran"
    batches = fake_cifar()
    good = cifar_python_tar(tmp_path / "good.tar.gz", batches)
    with tarfile.open(good) as src, tarfile.open(tmp_path / "evil.tar.gz", "w:gz") as dst:
        for m in src.getmembers():
            blob = src.extractfile(m).read()
            if m.name.endswith("data_batch_1"):
                d = pickle.loads(blob, encoding="bytes")
                if where == "batch":
                    d = _Payload(marker)
                else:
                    d[b"data"] = _Payload(marker)
                blob = pickle.dumps(d, protocol=2)
            add_bytes(dst, m.name, blob)
    with pytest.raises(ValueError, match=r"data_batch_1.*(posix|os)\.system.*refused"):
        datasets.cifar10.load_data(str(tmp_path / "evil.tar.gz"))
    assert not marker.exists()
    # The official files (written by NumPy 1: numpy.core) and NumPy 2's (numpy._core) both load.
    (xt, _), _ = datasets.cifar10.load_data(good)
    np.testing.assert_array_equal(xt, expected_cifar(batches)[0][0])

@pytest.mark.parametrize("gz", [True, False])
def test_mnist_idx_folder(tmp_path, gz):
    arrays = fake_idx_folder(tmp_path / "m", gz=gz)
    (xt, yt), (xv, yv) = datasets.mnist.load_data(str(tmp_path / "m"))
    assert xt.shape == (20, 28, 28) and yt.shape == (20,) and xt.dtype == np.uint8
    np.testing.assert_array_equal(xt, arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(yv, arrays["t10k-labels-idx1-ubyte"])


def test_idx_convert_cli_and_loader(tmp_path, capsys):
    arrays = fake_idx_folder(tmp_path / "m", n_train=300)
    out = str(tmp_path / "mnist.h5")
    assert convert.main(["mnist", str(tmp_path / "m"), out, "--chunk-rows", "64"]) == 0
    assert "x_train" in capsys.readouterr().out
    info = data.dataset_info(out, "x_train")
    assert info["chunks"] == (64, 28, 28) and info["shape"] == (300, 28, 28)
    ds = data.HDF5Dataset(out, batch_size=50, shuffle=False, scale=1.0)
    assert ds.x_shape == (28, 28, 1)
    xs = np.concatenate([a.copy() for a, _ in ds.epoch_batches(0)])
    np.testing.assert_array_equal(xs[..., 0], arrays["train-images-idx3-ubyte"])
    assert convert.main(["info", out]) == 0


def test_idx_truncated(tmp_path):
    fake_idx_folder(tmp_path / "m", gz=False)
    p = tmp_path / "m" / "train-images-idx3-ubyte"
    p.write_bytes(p.read_bytes()[:-10])
    with pytest.raises(ValueError, match="truncated"):
        datasets.mnist.load_data(str(tmp_path / "m"))
    with pytest.raises(ValueError, match="not an IDX"):
        converters.parse_idx(b"\x01\x02\x03\x04", "x")


def test_npz_converter(tmp_path):
    rng = np.random.default_rng(3)
    p = str(tmp_path / "a.npz")
    x = rng.integers(0, 256, (12, 28, 28), dtype=np.uint8)
    np.savez(p, x_train=x, y_train=np.arange(12) % 10, x_test=x[:4], y_test=np.arange(4))
    (xt, yt), (xv, yv) = datasets.mnist.load_data(p)
    np.testing.assert_array_equal(xt, x)
    out = str(tmp_path / "o.h5")
    assert convert.main(["npz", p, out]) == 0
    np.testing.assert_array_equal(h5py.File(out, "r")["x_valid"][:], x[:4])


def test_convert_errors_are_reported(tmp_path, capsys):
    assert convert.main(["cifar10", str(tmp_path / "missing.tar.gz"), str(tmp_path / "o.h5")]) == 2
    assert "missing.tar.gz" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o.h5")


def test_fashion_mnist_from_debian_package():
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    (xt, yt), (xv, yv) = datasets.fashion_mnist.load_data(download_if_missing=False)
    assert xt.shape == (60000, 28, 28) and yt.shape == (60000,) and xv.shape == (10000, 28, 28)
    assert xt.dtype == np.uint8 and set(np.unique(yt)) == set(range(10))
    assert datasets.fashion_mnist.class_names[9] == "Ankle boot"


def test_download_helper_verifies_local_copies(tmp_path):
    from hpcnn.datasets import _download
    p = tmp_path / "f.bin"
    p.write_bytes(b"abc")
    # An existing file is verified, not downloaded again (no network used).
    assert datasets.download("http://invalid.invalid/f.bin", str(p), md5="900150983cd24fb0d6963f7d28e17f72") == str(p)
    with pytest.raises(ValueError, match="checksum mismatch"):
        datasets.download("http://invalid.invalid/f.bin", str(p), md5="0" * 32)
    # In a file (here a StringIO) the download bar is one final line, not '\r' redraws.
    bar = _download._Progress("f", 100, stream=io.StringIO())
    bar.update(50)
    bar.update(50)
    bar.close()
    assert "100.0%" in bar.stream.getvalue() and "\r" not in bar.stream.getvalue()
    assert bar.stream.getvalue().count("\n") == 1


def test_rechunk_a_tutorial_file(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (300, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, (300, 1)).astype(np.uint8)
    src = str(tmp_path / "dataset_cifar10.hdf5")
    with h5py.File(src, "w") as hf:  # the tutorial's calls, train split only
        hf.create_dataset("x_train", data=x, shape=x.shape, compression="gzip", chunks=True)
        hf.create_dataset("y_train", data=y, shape=y.shape, compression="gzip", chunks=True)
    out = str(tmp_path / "rechunked.hdf5")
    assert convert.main(["hdf5", src, out, "--chunk-rows", "100"]) == 0
    with h5py.File(out, "r") as f:
        assert f["x_train"].chunks == (100, 32, 32, 3) and "x_valid" not in f
        np.testing.assert_array_equal(f["x_train"][:], x)
        np.testing.assert_array_equal(f["y_train"][:], y)
