"""The GPU training path through the public API, against the CPU: what a first run on a GPU must
get right beyond the operators (test_gpu_ops.py) and the two reference models on full batches of
float one-hot data (test_gpu_model.py):
  - a partial last batch, shuffled rows gathered by the core, uint8 inputs, sparse int labels;
  - evaluate with batches larger than training's (the buffers grow), predict with a partial batch;
  - moving a model between devices in mid-training (Adam's moments and step count go along);
  - get_weights / set_weights / save() of a model on the GPU;
  - an HDF5 dataset feeding the GPU from pinned buffers, uint8 rows crossing as uint8 (a quarter
    of float32's bytes, counted) and decoded on the GPU;
  - device buffers grown right after a training step whose kernels are still queued;
  - a model on a GPU other than 0, and moving between two GPUs (when two are visible).
HPCNN_TEST_GPU=cpu runs these tests with the CPU standing in for the GPU (the CPU is then compared
with itself): a check of the tests' own logic on machines without a GPU. TF32 is off.
"""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core, data
from hpcnn.layers import Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D

from tests.support.gpu_target import GPU, MARKS

pytestmark = MARKS


def model(seed=5):
    return hpcnn.Sequential([
        InputLayer(input_shape=[12, 12, 3]),
        Conv2D(8, 3, padding="same", activation="relu"),
        MaxPooling2D(2),
        Conv2D(16, 3, strides=2, padding="same", activation="relu"),  # odd padding total: explicit pad on a GPU
        Flatten(),
        Dense(32, activation="relu"),
        Dropout(0.25),
        Dense(5, activation="softmax"),
    ], seed=seed)


def uint8_data(n=150, seed=0):
    """uint8 images (fed unscaled) whose class k shows as a brighter band of rows; int32 labels."""
    r = np.random.default_rng(seed)
    labels = r.integers(0, 5, n)
    x = r.integers(0, 3, (n, 12, 12, 3)).astype(np.uint8)
    for i, k in enumerate(labels):
        x[i, 2 * k:2 * k + 2] += 4
    return x, labels.astype(np.int32)


def pair(optimizer_factory, seed=5):
    """The same model (weights, dropout seed) compiled on the CPU and on the GPU."""
    cpu, gpu = model(seed), model(seed)
    cpu.compile(optimizer_factory(), "sparse_categorical_crossentropy", ["accuracy"], device="cpu")
    gpu.compile(optimizer_factory(), "sparse_categorical_crossentropy", ["accuracy"], device=GPU)
    assert gpu.device == GPU
    gpu.set_weights(cpu.get_weights())
    return cpu, gpu


def assert_updates_close(after_gpu, after_cpu, before, what):
    for i, (a, c, w) in enumerate(zip(after_gpu, after_cpu, before)):
        d_gpu, d_cpu = a - w, c - w
        scale = max(float(np.max(np.abs(d_cpu))), 1e-8)
        np.testing.assert_allclose(d_gpu, d_cpu, rtol=2e-3, atol=2e-3 * scale, err_msg=f"{what}: weight array {i}")


def test_partial_shuffled_uint8_sparse_epoch_matches_cpu():
    x, y = uint8_data()  # 150 rows, batches of 32: the last one has 22
    cpu, gpu = pair(lambda: hpcnn.optimizers.SGD(learning_rate=0.02))
    w0 = cpu.get_weights()
    h_c = cpu.fit(x, y, batch_size=32, epochs=1, shuffle=True, verbose=0).history
    h_g = gpu.fit(x, y, batch_size=32, epochs=1, shuffle=True, verbose=0).history
    assert h_g["loss"][0] == pytest.approx(h_c["loss"][0], rel=1e-3)
    assert h_g["accuracy"][0] == pytest.approx(h_c["accuracy"][0], abs=1.5 / len(x))
    assert_updates_close(gpu.get_weights(), cpu.get_weights(), w0, "one shuffled epoch")
    # evaluation batches larger than training's (the device buffers grow), then a partial batch
    l_c, a_c = cpu.evaluate(x, y, batch_size=100, verbose=0)
    l_g, a_g = gpu.evaluate(x, y, batch_size=100, verbose=0)
    assert l_g == pytest.approx(l_c, rel=1e-3)
    assert a_g == pytest.approx(a_c, abs=1.5 / len(x))
    p_c = cpu.predict(x, batch_size=64)
    p_g = gpu.predict(x, batch_size=64)  # 64 + 64 + 22 rows
    assert p_g.shape == (150, 5)
    np.testing.assert_allclose(p_g, p_c, atol=1e-4)
    # labels outside [0, 5) are refused on the host before anything reaches the device
    bad = y.copy()
    bad[3] = 5
    with pytest.raises(ValueError, match="label 5"):
        gpu.fit(x, bad, batch_size=32, epochs=1, shuffle=False, verbose=0)


def test_moving_in_mid_training_keeps_the_optimizer_state():
    x, y = uint8_data(96, seed=1)
    adam = lambda: hpcnn.optimizers.Adam(learning_rate=1e-3)  # noqa: E731
    a, b = model(7), model(7)
    for m in (a, b):
        m.compile(adam(), "sparse_categorical_crossentropy", ["accuracy"], device="cpu")
        m.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    steps = b.core.iterations
    b.to(GPU)
    assert b.device == GPU and b.core.iterations == steps
    b.to("cpu")
    # a round trip through the GPU copies weights and Adam's moments bit for bit: the next epoch
    # on the CPU is then identical to a model that never moved
    for m in (a, b):
        m.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        assert np.array_equal(wa, wb)
    # and training goes on on the GPU with the moved state
    b.to(GPU)
    h_a = a.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0).history
    h_b = b.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0).history
    assert b.core.iterations == a.core.iterations == 3 * steps
    assert h_b["loss"][0] == pytest.approx(h_a["loss"][0], rel=1e-2)


def test_weights_and_save_of_a_gpu_model(tmp_path):
    m = model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"], device=GPU)
    r = np.random.default_rng(3)
    w = [(r.standard_normal(a.shape) * 0.1).astype(np.float32) for a in m.get_weights()]
    m.set_weights(w)
    for a, b in zip(m.get_weights(), w):
        assert np.array_equal(a, b)
    path = tmp_path / "gpu_model.h5"
    m.save(path)
    assert m.device == GPU
    loaded = hpcnn.models.load_model(path)
    assert loaded.device == "cpu"
    for a, b in zip(loaded.get_weights(), w):
        assert np.array_equal(a, b)
    x, _ = uint8_data(40)
    np.testing.assert_allclose(m.predict(x), loaded.predict(x), atol=1e-5)


def test_hdf5_dataset_feeds_the_gpu_from_pinned_buffers(tmp_path):
    x, y = uint8_data(100, seed=2)
    path = str(tmp_path / "train.h5")
    data.write_hdf5(path, {"x_train": x, "y_train": y.astype(np.uint8)})
    ds = data.HDF5Dataset(path, batch_size=32, shuffle=False, scale=None)
    it = ds._live().epoch(0, 2, GPU)
    try:
        assert it.pinned == (GPU != "cpu")
    finally:
        it.close()
    it = ds._live().epoch(0, 2, GPU, True)  # what fit asks for on a GPU: rows as stored
    try:
        assert it.pinned == (GPU != "cpu")
        xb, _, decode = next(it)
        assert xb.dtype == np.uint8 and decode == ([1.0] * 3, [0.0] * 3)
    finally:
        it.close()
    cpu, gpu = pair(lambda: hpcnn.optimizers.SGD(learning_rate=0.02))
    w0 = cpu.get_weights()
    h_c = cpu.fit(ds, epochs=1, shuffle=False, verbose=0).history
    h_g = gpu.fit(ds, epochs=1, shuffle=False, verbose=0).history
    assert h_g["loss"][0] == pytest.approx(h_c["loss"][0], rel=1e-3)
    assert_updates_close(gpu.get_weights(), cpu.get_weights(), w0, "one epoch from the HDF5 dataset")


@pytest.mark.multi_gpu
def test_a_model_on_a_gpu_other_than_0():
    n = 2 if GPU == "cpu" else len(_core.cuda_devices())
    if n < 2:
        pytest.skip(f"only {n} GPU visible: the device-index test needs 2")
    last = "cpu" if GPU == "cpu" else f"gpu:{n - 1}"
    x, y = uint8_data(64, seed=3)
    first = model(9)
    first.compile(hpcnn.optimizers.SGD(learning_rate=0.02), "sparse_categorical_crossentropy", device=GPU)
    other = model(9)
    other.compile(hpcnn.optimizers.SGD(learning_rate=0.02), "sparse_categorical_crossentropy", device=last)
    assert other.device == last
    other.set_weights(first.get_weights())
    w0 = first.get_weights()
    first.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    other.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    assert_updates_close(other.get_weights(), first.get_weights(), w0, f"{GPU} vs {last}")
    # moving between the two GPUs (a peer copy) keeps the weights bit for bit, and training goes on
    w1 = first.get_weights()
    first.to(last)
    assert first.device == last
    for a, b in zip(first.get_weights(), w1):
        assert np.array_equal(a, b)
    other.set_weights(w1)  # both go on from the same weights (SGD without momentum: no other state)
    first.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    other.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    assert_updates_close(first.get_weights(), other.get_weights(), w1, f"after moving to {last}")


def test_uint8_batches_cross_as_uint8(tmp_path):
    """A uint8 batch moves N*H*W*C bytes to the GPU (plus its labels), not 4x that as float32; the
    same for an HDF5 dataset's uint8 rows, which the loader leaves undecoded for a GPU model."""
    if GPU == "cpu":
        pytest.skip("counts host->device bytes: needs a real GPU")
    x, y = uint8_data(64, seed=5)
    cpu, gpu = pair(lambda: hpcnn.optimizers.SGD(learning_rate=0.02))
    core = gpu.core
    core.train_step((x[:32], y[:32]))  # buffers made: what follows is one step's copies each

    def step_bytes(batch):
        _core.reset_transfer_stats()
        core.train_step(batch)
        return _core.transfer_stats()["h2d_bytes"]
    u8 = x[32:].nbytes
    labels = 32 * 4  # int32
    extra = step_bytes((x[32:], y[32:])) - u8 - labels
    assert extra == 0, "a step copies its batch and nothing else up (the loss statistics are zeroed on the GPU)"
    assert step_bytes((x[32:].astype(np.float32), y[32:])) == 4 * u8 + labels + extra
    assert step_bytes((x, y, np.arange(32, 64))) == u8 + labels + extra  # gathered rows: uint8 too
    path = str(tmp_path / "u8.h5")
    data.write_hdf5(path, {"x_train": x, "y_train": y.astype(np.uint8)})
    ds = data.HDF5Dataset(path, batch_size=32, shuffle=False)  # scale 1/255, decoded on the GPU
    _core.reset_transfer_stats()
    h_g = gpu.fit(ds, epochs=1, verbose=0).history
    assert _core.transfer_stats()["h2d_bytes"] == x.nbytes + 64 * 4 + 2 * extra
    h_c = cpu.fit(ds, epochs=1, verbose=0).history
    assert h_g["loss"][0] == pytest.approx(h_c["loss"][0], rel=1e-2)


def test_buffers_grown_right_after_a_training_step_match_cpu():
    """A training step returns with its backward pass and optimizer step still queued on the GPU.
    Growing the batch at once (an evaluation of 100 rows with 100 more staged, then a prediction
    of 150) frees and replaces device buffers those kernels may still read: the model must let
    them finish first. Then destroying a model with work queued, and training a new one."""
    x, y = uint8_data(200, seed=4)
    cpu, gpu = pair(lambda: hpcnn.optimizers.SGD(learning_rate=0.02))
    w0 = cpu.get_weights()
    out = {}
    for name, m in (("cpu", cpu), ("gpu", gpu)):
        core = m.core
        core.train_step((x[:32], y[:32]))
        first = core.test_step((x[:100], y[:100]), (x[100:], y[100:]))
        second = core.test_step(None)
        preds = core.predict_step((x[:150],))
        out[name] = (first, second, preds, m.get_weights())
    for k in (0, 1):
        assert out["gpu"][k][0] == pytest.approx(out["cpu"][k][0], rel=1e-3)
        assert out["gpu"][k][2] == out["cpu"][k][2] == 100
    np.testing.assert_allclose(out["gpu"][2], out["cpu"][2], atol=1e-4)
    assert_updates_close(out["gpu"][3], out["cpu"][3], w0, "one step, then bigger batches at once")
    for _ in range(3):
        m = model(11)
        m.compile("sgd", "sparse_categorical_crossentropy", device=GPU)
        m.core.train_step((x, y))  # 200 rows: work queued when the model goes
        del m
    m = model(11)
    m.compile("sgd", "sparse_categorical_crossentropy", device=GPU)
    ls, _, n, _ = m.core.train_step((x, y))
    assert n == 200 and np.isfinite(ls)
