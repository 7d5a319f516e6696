"""hpcnn.layers.Rescaling in a GPU model (issue 22): y = x * scale + offset per channel, run as an
op of the step (csrc/ops/scale_shift.h).
  - the op forward and backward against NumPy;
  - a model that starts with Rescaling, fed float32, uint8 arrays (the uint8 rows cross to the GPU as
    uint8 and are decoded there) and a uint8 HDF5 dataset: fit, evaluate and predict equal those of
    the same model without the Rescaling, on the CPU, fed the images rescaled by NumPy;
  - a Rescaling between layers (its backward runs): fit and predict on the GPU equal the CPU.
Each test that can runs twice: on the CPU (here, on every machine: the test's own logic) and on the
GPU of tests/support/gpu_target.py (`gpu`, skipped with the reason where none is usable; HPCNN_TEST_GPU=cpu
runs it with the CPU standing in). TF32 is off; tolerances as in tests/gpu/test_gpu_training_path.py.
"""
import numpy as np
import pytest

import hpcnn
from tests.support.gpu_target import (GPU, KINDS, LOSS_TOL, PARAM_MARKS, UPDATE_TOL, assert_loss_and_accuracy_close,
                        assert_updates_close)
from hpcnn import _core, data
from hpcnn.layers import Conv2D, Dense, Flatten, InputLayer, MaxPooling2D, ReLU, Rescaling

pytestmark = pytest.mark.usefixtures("tf32_off")  # tests/conftest.py; harmless for the CPU variants

OUTPUT_TOL = {"cpu": 1e-5, "gpu": 1e-4}
SCALE = [1 / 255, 2 / 255, 0.5 / 255]
OFFSET = [-0.5, 0.0, 0.25]


def device(kind):
    return "cpu" if kind == "cpu" else GPU


def images(n=30, seed=0):
    r = np.random.default_rng(seed)
    return r.integers(0, 256, (n, 8, 8, 3)).astype(np.uint8), r.integers(0, 3, n).astype(np.int32)


def rescaled(x):
    """What Rescaling(SCALE, offset=OFFSET) gives, in NumPy (float64, then float32)."""
    return (x.astype(np.float64) * np.array(SCALE) + np.array(OFFSET)).astype(np.float32)


def cnn(front, seed=3):
    return hpcnn.Sequential([InputLayer(input_shape=[8, 8, 3]), *front, Conv2D(4, 3, activation="relu"),
                             MaxPooling2D(2), Flatten(), Dense(3, activation="softmax")], seed=seed)


def compiled(model, dev):
    model.compile(hpcnn.optimizers.SGD(learning_rate=0.05), "sparse_categorical_crossentropy", ["accuracy"],
                  device=dev)
    return model


@pytest.mark.parametrize("kind", KINDS)
def test_scale_shift_op_forward_and_backward(kind):
    dev = device(kind)
    r = np.random.default_rng(1)
    x = r.standard_normal((5, 4, 3, 6)).astype(np.float32)
    s, o = r.standard_normal(6).astype(np.float32), r.standard_normal(6).astype(np.float32)
    y = _core.ops.scale_shift_forward(x, s, o, device=dev)
    np.testing.assert_allclose(y, x.astype(np.float64) * s + o, rtol=1e-6, atol=1e-6)
    dx = _core.ops.scale_shift_backward(x, s, device=dev)  # dy = x
    np.testing.assert_allclose(dx, x.astype(np.float64) * s, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("source", ["float32", "uint8", "hdf5-uint8"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_leading_rescaling_equals_rescaling_the_images_first(kind, source, tmp_path):
    """30 images, batches of 8 (the last one 6 rows), 2 shuffled epochs, then evaluate and predict
    with partial batches; the reference is the model without Rescaling, on the CPU, fed rescaled()."""
    dev = device(kind)
    x8, y = images()
    model = compiled(cnn([Rescaling(SCALE, offset=OFFSET)]), dev)
    ref = compiled(cnn([]), "cpu")
    ref.set_weights(model.get_weights())
    w0 = ref.get_weights()
    shuffle = source != "hdf5-uint8"  # the dataset is read in order
    h_ref = ref.fit(rescaled(x8), y, batch_size=8, epochs=2, shuffle=shuffle, verbose=0).history
    if source == "hdf5-uint8":
        path = str(tmp_path / "images.h5")
        data.write_hdf5(path, {"x_train": x8, "y_train": y})
        with data.HDF5Dataset(path, batch_size=8, shuffle=False, scale=None) as ds:  # rows as stored
            h = model.fit(ds, epochs=2, verbose=0).history
    else:
        x = x8 if source == "uint8" else x8.astype(np.float32)
        h = model.fit(x, y, batch_size=8, epochs=2, shuffle=True, verbose=0).history
    np.testing.assert_allclose(h["loss"], h_ref["loss"], rtol=LOSS_TOL[kind])
    assert_updates_close(model.get_weights(), ref.get_weights(), w0, UPDATE_TOL[kind], f"{source} on {dev}")
    x = x8 if source != "float32" else x8.astype(np.float32)
    assert_loss_and_accuracy_close(model.evaluate(x, y, batch_size=16, verbose=0),
                                   ref.evaluate(rescaled(x8), y, batch_size=16, verbose=0), kind, 30, "evaluate")
    got = model.predict(x, batch_size=7)
    assert got.shape == (30, 3)
    np.testing.assert_allclose(got, ref.predict(rescaled(x8), batch_size=7), rtol=OUTPUT_TOL[kind] * 10,
                               atol=OUTPUT_TOL[kind])


def gpu_only(test):
    """tests/support/gpu_target.py's marks on one test (the others of this module also run on the CPU)."""
    for mark in PARAM_MARKS:
        test = mark(test)
    return test


@gpu_only
def test_a_rescaling_between_layers_trains_as_on_the_cpu():
    """Conv2D -> Rescaling (per channel, a negative scale) -> ReLU: the Rescaling's backward runs."""
    x8, y = images(seed=2)
    x = x8.astype(np.float32) / 255

    def model():
        return hpcnn.Sequential([InputLayer(input_shape=[8, 8, 3]), Conv2D(4, 3), Rescaling([0.5, 2.0, 1.0, -1.0],
                                                                                             offset=0.1),
                                 ReLU(), Flatten(), Dense(3, activation="softmax")], seed=5)

    cpu, gpu = compiled(model(), "cpu"), compiled(model(), GPU)
    gpu.set_weights(cpu.get_weights())
    w0 = cpu.get_weights()
    h_c = cpu.fit(x, y, batch_size=8, epochs=2, shuffle=True, verbose=0).history
    h_g = gpu.fit(x, y, batch_size=8, epochs=2, shuffle=True, verbose=0).history
    np.testing.assert_allclose(h_g["loss"], h_c["loss"], rtol=LOSS_TOL["gpu"])
    assert_updates_close(gpu.get_weights(), cpu.get_weights(), w0, UPDATE_TOL["gpu"], "Rescaling between layers")
    np.testing.assert_allclose(gpu.predict(x, batch_size=7), cpu.predict(x, batch_size=7),
                               rtol=OUTPUT_TOL["gpu"] * 10, atol=OUTPUT_TOL["gpu"])
