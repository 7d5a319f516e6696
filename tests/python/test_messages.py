"""One clear message for a newcomer's common mistakes: a wrong input or target shape (before the
first epoch), string labels, a misspelled dataset name, and the one line that says why fit uses
fewer threads than the CPUs it may use."""
import io
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout

import numpy as np
import pytest

import hpcnn
from hpcnn.layers import Conv2D, Dense, Flatten, InputLayer


def conv_model(loss="categorical_crossentropy"):
    m = hpcnn.Sequential([InputLayer(input_shape=(8, 8, 3)), Conv2D(4, 3, padding="same", activation="relu"),
                          Flatten(), Dense(5, activation="softmax")])
    m.compile("adam", loss, ["accuracy"])
    return m


def fit_output(m, *args, **kw):
    """(exception, printed text) of m.fit(*args, verbose=1, **kw)."""
    buf = io.StringIO()
    with redirect_stdout(buf), pytest.raises(ValueError) as e:
        m.fit(*args, verbose=1, **kw)
    return e.value, buf.getvalue()


def test_wrong_input_shape_is_found_before_the_first_epoch():
    x, y = np.zeros((10, 8, 8, 1), np.float32), np.eye(5, dtype=np.float32)[np.zeros(10, int)]
    err, printed = fit_output(conv_model(), x, y, epochs=1)
    assert "expects (None, 8, 8, 3) but got (10, 8, 8, 1)" in str(err)
    assert "Epoch" not in printed and printed == ""          # nothing started
    assert err.__cause__ is None and err.__context__ is None  # one traceback, not a chained pair


@pytest.mark.parametrize("y,loss,match", [
    (np.zeros((10, 1)), "categorical_crossentropy", r"one-hot targets of shape \(n, 5\).*y has shape \(10, 1\).*"
                                                    r"to_categorical\(y, 5\)"),
    (np.eye(4, dtype=np.float32)[np.zeros(10, int)], "categorical_crossentropy", r"y has shape \(10, 4\)"),
    (np.eye(5, dtype=np.float32)[np.zeros(10, int)], "sparse_categorical_crossentropy",
     r"y has shape \(10, 5\); these look one-hot"),
])
def test_wrong_target_shape_is_found_before_the_first_epoch(y, loss, match):
    err, printed = fit_output(conv_model(loss), np.zeros((10, 8, 8, 3), np.float32), y, epochs=1)
    assert printed == "" and err.__cause__ is None
    assert re.search(match, str(err)), str(err)


def test_wrong_validation_shape_is_found_before_training():
    x, y = np.zeros((10, 8, 8, 3), np.float32), np.eye(5, dtype=np.float32)[np.zeros(10, int)]
    err, printed = fit_output(conv_model(), x, y, epochs=1, validation_data=(np.zeros((4, 8, 8, 2), np.float32), y[:4]))
    assert "got (4, 8, 8, 2) (validation_data x)" in str(err) and printed == ""


def test_dataset_with_wrong_sample_shape_is_found_before_training(tmp_path):
    p = str(tmp_path / "d.h5")
    hpcnn.data.write_hdf5(p, {"x_train": np.zeros((6, 8, 8, 2), np.uint8), "y_train": np.zeros(6, np.uint8)})
    ds = hpcnn.data.HDF5Dataset(p, batch_size=2, one_hot=5)
    err, printed = fit_output(conv_model(), ds, epochs=1)
    assert "expects (None, 8, 8, 3) but got (None, 8, 8, 2)" in str(err) and printed == ""


def test_grey_images_without_channel_axis_still_fit():
    """(N, H, W) arrays fit an (H, W, 1) input, as the core accepts them: the early check agrees."""
    m = hpcnn.models.deep_mnist(seed=0)
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    h = m.fit(np.zeros((4, 28, 28), np.float32), np.zeros(4, int), batch_size=2, verbose=0)
    assert len(h.history["loss"]) == 1


def test_to_categorical_with_string_labels():
    with pytest.raises(ValueError, match=r"integer class indices, got dtype <U3 \(first label 'cat'\).*np.unique"):
        hpcnn.utils.to_categorical(np.array(["cat", "dog"]))
    with pytest.raises(ValueError, match="dtype object"):
        hpcnn.utils.to_categorical(np.array(["cat", 1], dtype=object))
    np.testing.assert_array_equal(hpcnn.utils.to_categorical([0, 2], 3), [[1, 0, 0], [0, 0, 1]])


def test_missing_dataset_lists_what_the_file_holds(tmp_path):
    p = str(tmp_path / "t.h5")
    hpcnn.data.write_hdf5(p, {"x_train": np.zeros((4, 2), np.uint8), "y_train": np.zeros(4, np.uint8),
                              "x_valid": np.zeros((2, 2), np.uint8)})
    with pytest.raises(ValueError, match=r"no dataset 'x_trian'.*it holds datasets x_train, x_valid, y_train"):
        hpcnn.data.HDF5Dataset(p, x="x_trian")
    with pytest.raises(ValueError, match=r"no dataset 'y_valid'.*x_train, x_valid, y_train"):
        hpcnn.data.dataset_info(p, "y_valid")


def run_fit_line(env_extra):
    code = ("import numpy as np, hpcnn; from hpcnn.layers import Dense, InputLayer\n"
            "m = hpcnn.Sequential([InputLayer(input_shape=(2,)), Dense(2, activation='softmax')])\n"
            "m.compile('adam', 'sparse_categorical_crossentropy')\n"
            "m.fit(np.zeros((4, 2), np.float32), np.zeros(4, int), verbose=2)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HPCNN_NUM_THREADS", "SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS")}
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [l for l in r.stdout.splitlines() if l.startswith("Training on")][0]


def test_fit_says_why_it_uses_fewer_threads_than_cpus():
    cpus = len(os.sched_getaffinity(0))
    assert run_fit_line({"OMP_NUM_THREADS": "1"}) == \
        f"Training on cpu with {cpus} CPU threads" + (" (OMP_NUM_THREADS=1 is not read by hpcnn)" if cpus > 1 else "")
    if cpus < 2:
        pytest.skip("one CPU here: hpcnn cannot use fewer threads than the CPUs it may use")
    line = run_fit_line({"SLURM_CPUS_PER_TASK": "1"})
    assert line.startswith(f"Training on cpu with 1 of {cpus} CPU threads (SLURM_CPUS_PER_TASK=1;"), line
    assert "HPCNN_NUM_THREADS" in line
    assert run_fit_line({"HPCNN_NUM_THREADS": "1"}).startswith(f"Training on cpu with 1 of {cpus} CPU threads "
                                                               "(HPCNN_NUM_THREADS=1;")


def test_set_num_threads_is_named_as_the_reason(threads):
    cpus = len(os.sched_getaffinity(0))
    if cpus < 2:
        pytest.skip("one CPU here")
    hpcnn.set_num_threads(1)
    assert hpcnn.threads.describe().startswith(f"1 of {cpus} CPU threads (hpcnn.set_num_threads(1);")
