"""Conv kernels in the layout of the model's device (csrc/ops/conv2d_layout.h, csrc/nn/param_layout.h):
HWIO (kh, kw, in, out) = Keras' on the CPU, OHWI (out, kh, kw, in) = cuDNN's NHWC filter on a GPU.
The conversions (get_weights, set_weights, moves between devices, the ops entry points, model files)
are host code, tested here without a GPU; tests/test_gpu_param_layout.py runs the same paths on one."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core
from hpcnn.layers import Dense, Flatten, InputLayer
from small_models import layout_model

ops = _core.ops


def to_ohwi(w):
    """The OHWI array of a Keras HWIO kernel, by NumPy: element [o, ky, kx, c] = w[ky, kx, c, o]."""
    return np.ascontiguousarray(np.transpose(w, (3, 0, 1, 2)))


def random_weights(model, seed=0):
    r = np.random.default_rng(seed)
    return [(r.standard_normal(w.shape) * 0.2).astype(np.float32) for w in model.get_weights()]


# ------------------------------------------------------------------ the kernel conversion itself
def test_each_backend_declares_its_kernel_layout():
    assert ops.conv2d_kernel_layout("cpu") == "HWIO"
    for gpu in ("gpu", "gpu:0", "cuda:1"):  # a question about the backend: needs no GPU
        assert ops.conv2d_kernel_layout(gpu) == "OHWI"


@pytest.mark.parametrize("shape", [(3, 3, 3, 32), (3, 2, 5, 4), (1, 1, 7, 5), (5, 5, 1, 2), (1, 1, 1, 1)])
def test_kernel_conversion_is_the_transpose_and_round_trips(shape):
    w = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    ohwi = ops.convert_conv2d_kernel(w, "HWIO", "OHWI")
    assert ohwi.shape == (shape[3], shape[0], shape[1], shape[2])
    assert np.array_equal(ohwi, to_ohwi(w))
    assert np.array_equal(ops.convert_conv2d_kernel(ohwi, "OHWI", "HWIO"), w)
    assert np.array_equal(ops.convert_conv2d_kernel(w, "HWIO", "HWIO"), w)


def test_kernel_conversion_rejects_bad_input():
    w = np.zeros((3, 3, 4), np.float32)
    with pytest.raises(ValueError, match=r"4-D, HWIO \(kh, kw, in, out\), got shape \(3, 3, 4\)"):
        ops.convert_conv2d_kernel(w, "HWIO", "OHWI")
    with pytest.raises(ValueError, match="unknown kernel layout 'NCHW'"):
        ops.convert_conv2d_kernel(np.zeros((1, 1, 1, 1), np.float32), "NCHW", "OHWI")


def test_conv_op_names_the_layout_it_expects():
    """The op reads the kernel in the layout of its device's backend and says so when it does not fit."""
    x = np.zeros((2, 8, 8, 3), np.float32)
    with pytest.raises(ValueError) as e:
        ops.conv2d_forward(x, np.zeros((3, 3, 5, 4), np.float32), np.zeros(4, np.float32))
    msg = str(e.value)
    for word in ("conv2d", "HWIO (kh, kw, in, out)", "CPU backend", "(3, 3, 5, 4)", "(2, 8, 8, 3)", "5 input channels"):
        assert word in msg, (word, msg)


# ------------------------------------------------------------------ a model's flat buffers
def keras_flat(weights):
    return np.concatenate([w.ravel() for w in weights])


def test_relayout_of_a_models_buffer_converts_the_kernels_only():
    """What to() applies to the parameters and the optimizer's moments, on the host."""
    m = layout_model()
    core = m.core
    w = m.get_weights()
    flat = core.parameter_buffer().copy()
    assert np.array_equal(flat, keras_flat(w))  # the CPU holds Keras' layout
    on_gpu = core.relayout_buffer(flat, "cpu", "gpu:0")
    expected = keras_flat([to_ohwi(a) if a.ndim == 4 else a for a in w])
    assert np.array_equal(on_gpu, expected)
    assert np.array_equal(core.relayout_buffer(on_gpu, "gpu:0", "cpu"), flat)
    # same kind of device: same layout, a plain copy
    assert np.array_equal(core.relayout_buffer(flat, "cpu", "cpu"), flat)
    assert np.array_equal(core.relayout_buffer(on_gpu, "gpu:0", "gpu:1"), on_gpu)
    with pytest.raises(ValueError, match=f"{flat.size} float32 elements"):
        core.relayout_buffer(flat[:-1], "cpu", "gpu:0")


def test_a_model_without_kernels_has_one_layout():
    m = hpcnn.Sequential([InputLayer(input_shape=[4, 4, 2]), Flatten(), Dense(3, activation="softmax")], seed=1)
    flat = m.core.parameter_buffer().copy()
    assert np.array_equal(m.core.relayout_buffer(flat, "cpu", "gpu:0"), flat)


def test_keras_layout_buffers_match_get_weights():
    m = layout_model()
    m.compile("adam", "sparse_categorical_crossentropy", device="cpu")
    x = np.random.default_rng(2).random((5, 7, 6, 3), dtype=np.float32)
    m.train_on_batch(x, np.array([0, 1, 2, 3, 4], np.int32))
    core = m.core
    assert np.array_equal(core.parameter_buffer(keras_layout=True), keras_flat(m.get_weights()))
    # on the CPU the held layout is Keras': the gradients read the same both ways
    assert np.array_equal(core.gradient_buffer(keras_layout=True), core.gradient_buffer())
    assert core.parameter_buffer(keras_layout=True).size == m.count_params()


def test_set_and_get_weights_round_trip_bitwise():
    m = layout_model()
    w = random_weights(m)
    m.set_weights(w)
    for a, b in zip(m.get_weights(), w):
        assert a.shape == b.shape and np.array_equal(a, b)


# ------------------------------------------------------------------ model files: Keras' layout
def test_model_file_holds_keras_layout(tmp_path):
    h5py = pytest.importorskip("h5py")
    m = layout_model()
    m.compile("sgd", "sparse_categorical_crossentropy", device="cpu")
    w = random_weights(m, seed=4)
    m.set_weights(w)
    path = tmp_path / "m.h5"
    m.save(path)
    with h5py.File(path, "r") as f:  # read independently of hpcnn, in Keras' legacy HDF5 layout
        stored = [f["model_weights"][name.split("/")[0]][f"{name}:0"][()] for name in m.weight_names()]
    assert len(stored) == len(w)
    for s, a in zip(stored, w):
        assert s.shape == a.shape and np.array_equal(s, a)
    assert stored[0].shape == (3, 2, 3, 5) and stored[2].shape == (2, 3, 5, 4)  # (kh, kw, in, out)
    loaded = hpcnn.models.load_model(path)
    for a, b in zip(loaded.get_weights(), w):
        assert np.array_equal(a, b)
    x = np.random.default_rng(5).random((4, 7, 6, 3), dtype=np.float32)
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))
