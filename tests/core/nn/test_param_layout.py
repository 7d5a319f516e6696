"""Conv kernels in the layout of the model's device (csrc/ops/conv2d_layout.h, csrc/nn/param_layout.h):
HWIO (kh, kw, in, out) = Keras' on the CPU, OHWI (out, kh, kw, in) = cuDNN's NHWC filter on a GPU.
The conversions (get_weights, set_weights, moves between devices, the ops entry points, model files)
are host code, tested here without a GPU; tests/gpu/test_gpu_param_layout.py runs the same paths on one.
Every array starts at a multiple of 64 floats (256 bytes) of the buffer, with zero padding between
them that no op reads or writes; the flat arrays Python sees are packed (no padding)."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core
from hpcnn import optimizers, regularizers
from hpcnn.layers import BatchNormalization, Conv2D, Dense, Flatten, InputLayer
from tests.support.small_models import layout_model

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


# ------------------------------------------------------------------ alignment: every array at 256 bytes
ALIGN = 64  # floats


def aligned(n):
    return -(-n // ALIGN) * ALIGN


def bn_model(seed=3):
    """Arrays of many odd sizes, trainable and not (BatchNormalization's moving statistics), and a
    regularized kernel (so the fixed-order sums run over the variables)."""
    return hpcnn.Sequential([
        InputLayer(input_shape=[6, 5, 3]),
        Conv2D(4, 3, padding="same", kernel_regularizer=regularizers.L2(0.01)),
        BatchNormalization(),
        Conv2D(3, (2, 2), activation="relu"),
        Flatten(),
        Dense(5),
        BatchNormalization(),
        Dense(3, activation="softmax"),
    ], seed=seed)


def trainable_flags(core):
    return [t for layer in core.layer_weights for (_, _, t) in layer]


def check_padded_buffer(core, weights):
    """The buffer as held: every array at an aligned offset, trainable ones first, each directly
    after the previous one's padding, the padding zero. Returns the mask of the arrays' elements."""
    offsets, sizes, trainable = core.param_offsets, [w.size for w in weights], trainable_flags(core)
    n = len(weights)
    assert len(offsets) == n and all(o % ALIGN == 0 for o in offsets), offsets
    order = sorted(range(n), key=offsets.__getitem__)
    assert order == [k for k in range(n) if trainable[k]] + [k for k in range(n) if not trainable[k]]
    assert offsets[order[0]] == 0
    for a, b in zip(order, order[1:]):
        assert offsets[b] == aligned(offsets[a] + sizes[a]), (a, b, offsets)  # at most 63 floats between
    total = core.param_buffer_size
    assert total == aligned(offsets[order[-1]] + sizes[order[-1]])
    held = core.parameter_buffer(padded=True)
    assert held.shape == (total,)
    mask = np.zeros(total, bool)
    for k, w in enumerate(weights):
        np.testing.assert_array_equal(held[offsets[k]:offsets[k] + w.size], w.ravel())
        mask[offsets[k]:offsets[k] + w.size] = True
    assert not held[~mask].any(), "the padding between arrays is zero"
    return mask


def test_every_array_starts_at_256_bytes_and_the_padding_stays_zero():
    m = bn_model()
    core = m.core
    w = m.get_weights()
    assert core.num_params == m.count_params() == sum(a.size for a in w)
    check_padded_buffer(core, w)
    # Trained (Adam with clipnorm and weight decay, a weight penalty): the sums, norms and updates
    # run over the arrays only: the padding of the parameters and gradients stays zero.
    m.compile(optimizers.Adam(0.01, clipnorm=0.5, weight_decay=0.01), "sparse_categorical_crossentropy")
    r = np.random.default_rng(0)
    x, y = r.random((12, 6, 5, 3), dtype=np.float32), r.integers(0, 3, 12).astype(np.int32)
    m.fit(x, y, batch_size=4, epochs=2, verbose=0)
    w = m.get_weights()
    mask = check_padded_buffer(core, w)
    grads = core.gradient_buffer(padded=True)
    assert grads.shape == mask.shape and not grads[~mask].any() and grads[mask].any()
    # The packed forms: the trainable arrays then the others, flattened, without the padding.
    trainable = trainable_flags(core)
    packed = np.concatenate([w[k].ravel() for k in range(len(w)) if trainable[k]] +
                            [w[k].ravel() for k in range(len(w)) if not trainable[k]])
    np.testing.assert_array_equal(core.parameter_buffer(), packed)
    np.testing.assert_array_equal(core.parameter_buffer(keras_layout=True), packed)
    held = core.parameter_buffer(padded=True)
    np.testing.assert_array_equal(held[mask], packed)  # the arrays, in the buffer's order, are the packed form
    assert core.num_trainable_params == sum(w[k].size for k in range(len(w)) if trainable[k])
    for s in core.optimizer_state(keras_layout=True).values():
        assert s.shape == (m.count_params(),)
    with pytest.raises(ValueError, match="packed form"):
        core.parameter_buffer(keras_layout=True, padded=True)


def test_the_layout_of_a_functional_model_and_of_a_frozen_layer():
    """Frozen layers and graph models: the same rule (the optimizer's ranges are the arrays alone)."""
    m = bn_model(seed=4)
    m.layers[0].trainable = False
    m.compile("sgd", "sparse_categorical_crossentropy")
    w = m.get_weights()
    check_padded_buffer(m.core, w)
    assert m.core.num_trainable_params == m.count_params() - w[0].size - w[1].size - sum(
        a.size for a, t in zip(w, trainable_flags(m.core)) if not t)


def test_an_optimizer_state_in_the_packed_form_restores_into_the_padded_buffer():
    """Files hold the optimizer state packed (one value per parameter, as before the padding
    existed): restored into the padded buffer and read back, it is the same; the state of each
    array lands on that array (a step from it matches a model that took the steps itself)."""
    r = np.random.default_rng(1)
    x, y = r.random((16, 6, 5, 3), dtype=np.float32), r.integers(0, 3, 16).astype(np.int32)
    ref = bn_model(seed=6)
    ref.compile(optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    ref.fit(x[:8], y[:8], batch_size=8, epochs=1, shuffle=False, verbose=0)
    state = ref.core.optimizer_state(keras_layout=True)
    weights, rng = ref.get_weights(), (ref.core.seed, ref.core.step)
    other = bn_model(seed=9)
    other.compile(optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    other.set_weights(weights)
    other.core.set_optimizer_state({k: v.copy() for k, v in state.items()}, ref.core.iterations)
    other.core.set_rng_state(*rng)
    for k, v in state.items():
        np.testing.assert_array_equal(other.core.optimizer_state(keras_layout=True)[k], v)
    ref.train_on_batch(x[8:], y[8:])
    other.train_on_batch(x[8:], y[8:])
    for a, b in zip(other.get_weights(), ref.get_weights()):
        np.testing.assert_array_equal(a, b)
