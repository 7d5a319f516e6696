"""The Keras-like API: structure, fit/evaluate/predict, weights, config, devices, bad input."""
import io
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import hpcnn
from tests.support.small_models import small_model
from hpcnn.layers import Activation, Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D, ReLU


def data(n=64, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 8, 8, 2), dtype=np.float32)
    # a learnable rule: which of the first `classes` rows of channel 0 is brightest
    y = x[:, :classes, :, 0].mean(axis=2).argmax(axis=1)
    return x, y


def test_tutorial_cnn_summary_and_params():
    m = hpcnn.models.tutorial_cnn(seed=0)
    assert m.count_params() == 787_530
    out = io.StringIO()
    m.summary(print_fn=lambda s: out.write(s + "\n"))
    text = out.getvalue()
    assert "Total params: 787,530" in text
    assert "(None, 32, 32, 32)" in text and "(None, 2, 2, 256)" in text
    assert "Device: cpu" in text
    assert hpcnn.models.deep_mnist(seed=0).count_params() == 3_274_634


def test_tutorial_code_verbatim_shape():
    """The tutorial's model code with only the imports changed."""
    model = hpcnn.Sequential()
    model.add(InputLayer(input_shape=[32, 32, 3]))
    for f in (32, 64, 128, 256):
        model.add(Conv2D(filters=f, kernel_size=3, padding="same", activation="relu"))
        model.add(MaxPooling2D(pool_size=[2, 2], strides=[2, 2], padding="same"))
    model.add(Flatten())
    model.add(Dense(256, activation="relu"))
    model.add(Dropout(0.2))
    model.add(Dense(512, activation="relu"))
    model.add(Dropout(0.2))
    model.add(Dense(10, activation="softmax"))
    opt = hpcnn.optimizers.Adam(learning_rate=0.001)
    model.compile(optimizer=opt, loss="categorical_crossentropy", metrics=["accuracy"])
    assert model.count_params() == 787_530
    new_model = hpcnn.models.clone_model(model)
    new_model.compile(optimizer=opt, loss="categorical_crossentropy", metrics=["accuracy"])
    assert new_model.count_params() == 787_530
    assert not all(np.array_equal(a, b) for a, b in zip(model.get_weights(), new_model.get_weights()))


def test_fit_learns_and_history_has_keras_keys():
    x, y = data(256)
    m = small_model()
    m.compile(optimizer=hpcnn.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    h = m.fit(x, y, batch_size=32, epochs=30, validation_data=(x[:64], y[:64]), verbose=0)
    assert sorted(h.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]  # Keras' keys, no timings
    for k in h.history:
        assert len(h.history[k]) == 30, k
    assert len(h.seconds) == len(h.images_per_second) == 30 and min(h.images_per_second) > 0
    assert h.history["loss"][-1] < 0.7 * h.history["loss"][0]
    assert h.history["accuracy"][-1] > 0.65  # chance is 1/3
    loss, acc = m.evaluate(x, y, verbose=0)
    assert acc > 0.65 and np.isfinite(loss)
    p = m.predict(x[:10])
    assert p.shape == (10, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(m.predict_classes(x[:10]), p.argmax(axis=1))
    np.testing.assert_allclose(m.predict_on_batch(x[:10]), p, rtol=1e-6)


def test_evaluate_matches_train_mode_free_loss():
    x, y = data(40)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    p = m.predict(x, batch_size=7).astype(np.float64)
    expected = -np.mean(np.log(p[np.arange(len(y)), y]))
    loss, acc = m.evaluate(x, y, batch_size=9, verbose=0)
    assert loss == pytest.approx(expected, rel=1e-5)
    assert acc == pytest.approx(np.mean(p.argmax(1) == y))
    assert m.test_on_batch(x, y)[0] == pytest.approx(expected, rel=1e-5)


def test_uint8_inputs_are_unscaled_floats_like_keras():
    rng = np.random.default_rng(2)
    xu = rng.integers(0, 256, (5, 8, 8, 2), dtype=np.uint8)
    m = small_model()
    np.testing.assert_allclose(m.predict(xu), m.predict(xu.astype(np.float32)), rtol=1e-6)


def test_same_seed_same_threads_bitwise_identical():
    x, y = data(96)
    ws = []
    for _ in range(2):
        m = small_model(seed=11)
        m.compile("adam", "sparse_categorical_crossentropy")
        m.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=True)
        ws.append(m.get_weights())
    for a, b in zip(*ws):
        np.testing.assert_array_equal(a, b)


def test_tutorial_cnn_bitwise_reproducible_two_threads():
    rng = np.random.default_rng(5)
    x = rng.random((64, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, 64)
    ws = []
    for _ in range(2):
        m = hpcnn.models.tutorial_cnn(seed=21)
        m.compile("adam", "sparse_categorical_crossentropy")
        m.fit(x, y, batch_size=32, epochs=1, verbose=0)
        ws.append(m.get_weights())
    for a, b in zip(*ws):
        np.testing.assert_array_equal(a, b)


def test_weights_roundtrip_and_keras_layouts():
    m = small_model()
    shapes = [w.shape for w in m.get_weights()]
    assert shapes == [(3, 3, 2, 4), (4,), (64, 8), (8,), (8, 3), (3,)]
    new = [np.full(s, i, np.float32) for i, s in enumerate(shapes)]
    m.set_weights(new)
    for a, b in zip(m.get_weights(), new):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"weight 2 .*Dense kernel.* has shape \(8, 64\), expected \(64, 8\)"):
        m.set_weights(new[:2] + [new[2].T] + new[3:])
    with pytest.raises(ValueError, match="has 6 weight arrays, got 5"):
        m.set_weights(new[:5])


def test_config_roundtrip():
    m = small_model()
    cfg = m.get_config()
    m2 = hpcnn.Sequential.from_config(cfg)
    assert m2.get_config() == cfg
    assert m2.count_params() == m.count_params()


def test_sgd_nesterov_and_sequence_dataset():
    x, y = data(128)

    class Gen(hpcnn.utils.Sequence):
        def __init__(self):
            self.epochs_ended = 0

        def __len__(self):
            return 4

        def __getitem__(self, i):
            return x[i * 32:(i + 1) * 32], hpcnn.utils.to_categorical(y[i * 32:(i + 1) * 32], 3)

        def on_epoch_end(self):
            self.epochs_ended += 1

    g = Gen()
    m = small_model()
    m.compile(hpcnn.optimizers.SGD(0.1, momentum=0.9, nesterov=True), "categorical_crossentropy", ["accuracy"])
    h = m.fit(g, epochs=3, validation_data=g, verbose=0)
    assert g.epochs_ended >= 3
    assert len(h.history["val_accuracy"]) == 3
    assert m.evaluate(g, verbose=0)[1] >= 0


def test_callbacks_early_stopping_and_csv(tmp_path):
    x, y = data(64)
    m = small_model()
    m.compile(hpcnn.optimizers.Adam(1e-6), "sparse_categorical_crossentropy", ["accuracy"])
    csv_path = tmp_path / "log.csv"
    h = m.fit(x, y, epochs=20, batch_size=32, verbose=0, validation_data=(x, y),
              callbacks=[hpcnn.callbacks.EarlyStopping(monitor="val_accuracy", patience=1),
                         hpcnn.callbacks.CSVLogger(str(csv_path))])
    assert len(h.epoch) < 20
    lines = csv_path.read_text().strip().splitlines()
    assert lines[0] == "epoch,accuracy,loss,val_accuracy,val_loss"  # Keras' columns: no timings
    assert len(lines) == len(h.epoch) + 1


def test_keyboard_interrupt_stops_at_batch_boundary():
    x, y = data(64)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])

    class Interrupt(hpcnn.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if self.model.core.step == 5:
                raise KeyboardInterrupt

    h = m.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[Interrupt()])
    assert h.interrupted
    assert len(h.epoch) == 1  # epoch 1 had 4 batches; the 5th step was in epoch 2
    assert m.core.step == 5
    assert m.evaluate(x, y, verbose=0)[0] > 0  # still usable


def test_verbose_2_prints_one_line_per_epoch(capsys):
    x, y = data(32)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x, y, epochs=2, batch_size=8, verbose=2)
    out = capsys.readouterr().out
    assert out.count("Epoch ") == 2
    assert "img/s" in out and "\r" not in out


# ------------------------------------------------------------------ bad input
def test_fit_before_compile():
    x, y = data(8)
    with pytest.raises(RuntimeError, match="must be compiled"):
        small_model().fit(x, y, verbose=0)


def test_wrong_input_shape():
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"expects \(None, 8, 8, 2\).*got \(4, 8, 8, 3\)"):
        m.fit(np.zeros((4, 8, 8, 3), np.float32), np.zeros(4, int), verbose=0)


def test_labels_out_of_range_and_wrong_shape():
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    x, _ = data(4)
    with pytest.raises(ValueError, match=r"label 7 .*outside \[0, 3\)"):
        m.fit(x, np.array([0, 1, 7, 2]), verbose=0)
    with pytest.raises(ValueError, match="x has 4 rows but y has 3"):
        m.fit(x, np.array([0, 1, 2]), verbose=0)
    m2 = small_model()
    m2.compile("adam", "categorical_crossentropy")
    with pytest.raises(ValueError, match=r"one-hot targets of shape \(n, 3\).*to_categorical"):
        m2.fit(x, np.array([0, 1, 2, 1]), verbose=0)


def test_nan_input_names_epoch_and_batch():
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    x, y = data(16)
    x[9, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"epoch 1, batch 2: input batch contains NaN"):
        m.fit(x, y, batch_size=8, shuffle=False, verbose=0)


def test_diverging_loss_is_reported():
    m = small_model()
    m.compile(hpcnn.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    m.set_weights([np.full(w.shape, 3e38, np.float32) for w in m.get_weights()])  # overflows to inf
    x, y = data(32)
    w_before = m.get_weights()
    with pytest.raises(ValueError, match=r"epoch 1, batch 1: the loss is (NaN|inf).*not updated"):
        m.fit(x, y, batch_size=8, epochs=5, verbose=0)
    for a, b in zip(m.get_weights(), w_before):
        np.testing.assert_array_equal(a, b)


def test_compile_errors():
    m = small_model()
    with pytest.raises(ValueError, match="unknown loss"):
        m.compile("adam", "hinge")  # ('mse' is a loss now: issue 14)
    with pytest.raises(ValueError, match="unknown optimizer"):
        m.compile("adagrad", "categorical_crossentropy")
    with pytest.raises(ValueError, match="unknown metric"):
        m.compile("adam", "categorical_crossentropy", metrics=["auc"])
    no_softmax = hpcnn.Sequential([InputLayer(input_shape=[4]), Dense(3)])
    with pytest.raises(ValueError, match="no softmax"):
        no_softmax.compile("adam", "categorical_crossentropy")
    no_softmax.compile("adam", hpcnn.losses.CategoricalCrossentropy(from_logits=True))


def test_layer_argument_errors():
    with pytest.raises(ValueError, match="padding"):
        Conv2D(4, 3, padding="full")
    with pytest.raises(ValueError, match="activation"):
        Dense(3, activation="tanhh")
    with pytest.raises(ValueError, match="rate"):
        Dropout(1.5)
    bad = hpcnn.Sequential([InputLayer(input_shape=[4, 4, 1]), Dense(3)])
    with pytest.raises(ValueError, match="Flatten"):
        bad.build()
    with pytest.raises(ValueError, match="input shape"):
        hpcnn.Sequential([Dense(3)]).build()


# ------------------------------------------------------------------ devices
def test_cpu_device_listing_and_scope():
    cpus = hpcnn.list_physical_devices("CPU")
    assert cpus[0].device_type == "CPU" and cpus[0].details["threads"] == hpcnn.get_num_threads()
    with hpcnn.device("/device:CPU:0"):
        m = small_model()
        m.compile("adam", "sparse_categorical_crossentropy")
    assert m.device == "cpu"


def test_gpu_request_without_gpu_is_a_clear_error():
    if hpcnn.list_physical_devices("GPU"):
        pytest.skip("a GPU is present")
    reason = hpcnn.gpu_unavailable_reason()
    assert reason
    with pytest.raises(RuntimeError) as e:
        with hpcnn.device("gpu"):
            pass
    assert reason[:40] in str(e.value)
    m = small_model()
    with pytest.raises(RuntimeError):
        m.compile("adam", "sparse_categorical_crossentropy", device="gpu:0")
    assert m.device == "cpu"


@pytest.mark.parametrize("value,expect", [("", "empty"), ("NoDevFiles", "NoDevFiles")])
def test_gpu_error_names_slurm_without_gres(value, expect):
    if not hpcnn.build_info()["cuda"]:
        pytest.skip("CUDA backend not compiled: the reason is the missing backend")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=value)
    code = "import hpcnn\ntry:\n  hpcnn.device('gpu').__enter__()\nexcept RuntimeError as e: print(e)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert expect in out and "--gres" in out


def test_gil_is_released_during_a_step():
    import threading
    import time as _time
    m = hpcnn.models.tutorial_cnn(seed=0)
    m.compile("adam", "sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    x = rng.random((200, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, 200)
    m.train_on_batch(x, y)  # warm up buffers
    done = threading.Event()

    def work():
        for _ in range(3):
            m.train_on_batch(x, y)
        done.set()

    t = threading.Thread(target=work)
    ticks = 0
    start = _time.perf_counter()
    t.start()
    while not done.is_set():
        ticks += 1
        _time.sleep(0.001)
    t.join()
    elapsed = _time.perf_counter() - start
    # With the GIL held for whole steps this loop would barely run; released, it ticks ~every ms.
    assert ticks > 0.2 * elapsed / 0.001, (ticks, elapsed)


def test_save_and_load_model(tmp_path):
    x, y = data(64)
    m = small_model()
    m.compile(hpcnn.optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x, y, epochs=2, batch_size=16, verbose=0)
    path = tmp_path / "model.h5"
    m.save(str(path))
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]  # written atomically
    m2 = hpcnn.models.load_model(str(path))
    for a, b in zip(m.get_weights(), m2.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(m.predict(x), m2.predict(x))
    assert m2.evaluate(x, y, verbose=0) == pytest.approx(m.evaluate(x, y, verbose=0))
    assert isinstance(m2.optimizer, hpcnn.optimizers.SGD) and m2.optimizer.momentum == 0.9
    m2.fit(x, y, epochs=1, batch_size=16, verbose=0)  # trainable again
    with pytest.raises(FileExistsError):
        m.save(str(path), overwrite=False)


def test_load_model_rejects_other_files(tmp_path):
    p = tmp_path / "data.h5"
    hpcnn.data.write_hdf5(str(p), {"x": np.zeros((4, 2), np.float32)})
    with pytest.raises(ValueError, match="not an hpcnn model file"):
        hpcnn.models.load_model(str(p))
    with pytest.raises((ValueError, OSError)):
        hpcnn.models.load_model(str(tmp_path / "missing.h5"))


def test_tf32_switch_roundtrip():
    was = hpcnn.config.tf32_enabled()
    try:
        hpcnn.config.set_tf32(False)
        assert hpcnn.config.tf32_enabled() is False
        hpcnn.config.enable_tensor_float_32_execution(True)
        assert hpcnn.config.tensor_float_32_execution_enabled() is True
    finally:
        hpcnn.config.set_tf32(was)


def test_out_of_memory_for_a_big_batch_leaves_the_model_usable():
    """The OutOfMemory message says "try a smaller batch_size": after it, a smaller batch must train.
    (A GPU runs out of memory for real; here a batch of 2^22 rows, each with a 64 MiB activation,
    asks for 2^48 bytes: more than a process can map, so the host allocation fails at once.)"""
    m = hpcnn.Sequential([InputLayer(input_shape=[64, 64, 1]), Conv2D(4096, 1), MaxPooling2D(64), Flatten(),
                          Dense(3, activation="softmax")], seed=1)
    m.compile("sgd", "sparse_categorical_crossentropy")
    core = m.core
    x = np.ones((2, 64, 64, 1), np.float32)
    y = np.array([0, 1], np.int32)
    core.train_step((x, y))                     # buffers for 2 rows
    with pytest.raises(MemoryError):
        core.train_step((x, y, np.zeros(1 << 22, np.int64)))  # row 0, 2^22 times
    # a batch larger than the old buffers but far smaller than the failed one: fresh buffers
    loss, correct, n, _ = core.train_step((np.ones((3, 64, 64, 1), np.float32), np.array([0, 1, 2], np.int32)))
    assert n == 3 and np.isfinite(loss)
    assert m.predict(x).shape == (2, 3)


def test_hdf5_dataset_with_fit_evaluate_predict(tmp_path):
    x, y = data(96)
    p = str(tmp_path / "d.h5")
    hpcnn.data.write_hdf5(p, {"x_train": (x * 255).astype(np.uint8), "y_train": y.astype(np.uint8)})
    m = small_model()
    m.compile("adam", "categorical_crossentropy", ["accuracy"])
    sparse = hpcnn.data.HDF5Dataset(p, batch_size=32)  # int labels for a one-hot loss
    with pytest.raises(ValueError, match=r"epoch 1, batch 1: .*one_hot=3"):
        m.fit(sparse, epochs=1, verbose=0)
    train = hpcnn.data.HDF5Dataset(p, batch_size=32, one_hot=3, seed=1)
    h = m.fit(train, epochs=2, verbose=0, validation_data=hpcnn.data.HDF5Dataset(p, batch_size=40, one_hot=3,
                                                                                  shuffle=False))
    assert len(h.history["val_accuracy"]) == 2
    with pytest.raises(ValueError, match="shuffle=False"):
        m.predict(train)
    ordered = hpcnn.data.HDF5Dataset(p, batch_size=40, one_hot=3, shuffle=False)
    np.testing.assert_allclose(m.predict(ordered), m.predict((x * 255).astype(np.uint8) / 255.0), rtol=1e-5,
                               atol=1e-6)
    assert m.evaluate(ordered, verbose=0)[1] >= 0


def test_validation_split_initial_epoch_and_column_labels():
    x, y = data(100)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    h = m.fit(x, y.reshape(-1, 1), batch_size=20, epochs=3, initial_epoch=1, validation_split=0.2, verbose=0)
    assert h.epoch == [1, 2]
    assert len(h.history["val_loss"]) == 2
    assert m.core.step == 2 * 4  # 80 training rows in batches of 20, two epochs
    assert np.isscalar(hpcnn.models.clone_model(m).predict(x[:1]).sum())
    no_metric = small_model()
    no_metric.compile("adam", "sparse_categorical_crossentropy")
    assert isinstance(no_metric.evaluate(x, y, verbose=0), float)


def test_arrays_whose_dtype_came_back_from_pickle_are_taken():
    """An unpickled float32 / int32 array has a dtype object of its own (pickle rebuilds it): the
    bindings used to compare dtypes by identity and refused it ('unsupported dtype float32'), so
    weights or data passed through pickle, multiprocessing or joblib could not be used."""
    import pickle
    x, y = data(16)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    xp, yp, wp = pickle.loads(pickle.dumps((x, y.astype(np.int32), m.get_weights())))
    assert xp.dtype == np.float32 and xp.dtype is not np.dtype(np.float32)  # the case at hand
    m.set_weights(wp)
    np.testing.assert_array_equal(m.predict(xp), m.predict(x))
    m.fit(xp, yp, batch_size=8, verbose=0)
    swapped = x.astype(">f4")  # byte-swapped float32 is converted, not misread
    np.testing.assert_array_equal(m.predict(swapped), m.predict(x))
