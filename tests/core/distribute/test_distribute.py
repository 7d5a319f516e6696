"""hpcnn.distribute in one process: MirroredStrategy(["cpu", "cpu"]) (the host transport) against
one device, the API, the argument checks, the gradient buckets. MPI: test_distribute_mpi.py."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core
from hpcnn.distribute import CommunicationOptions, MirroredStrategy, MultiWorkerMirroredStrategy
from hpcnn.layers import BatchNormalization, Dense, Flatten, InputLayer
from tests.support.dist_common import BATCH, augmented_model, make_arrays, make_model, rel_err, residual_model, write_h5


def weights(model):
    return np.concatenate([w.ravel() for w in model.get_weights()])


def mirrored(replicas, **kw):
    return MirroredStrategy(["cpu"] * replicas, **kw)


@pytest.mark.parametrize("replicas", [2, 4])
def test_cpu_replicas_match_one_device_with_dropout_and_shuffle(replicas):
    x, y = make_arrays()
    ref = make_model()
    ref.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    with mirrored(replicas).scope():
        model = make_model()
    assert model.core.replica_devices == ["cpu"] * replicas
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    assert model.optimizer.iterations == 5
    assert rel_err(weights(model), weights(ref)) <= 1e-5
    # Every replica holds the same weights, bit for bit.
    core = model.core
    first = np.concatenate([w.ravel() for w in core.replica_weights(0)])
    for r in range(1, replicas):
        np.testing.assert_array_equal(np.concatenate([w.ravel() for w in core.replica_weights(r)]), first)
    # Dropout really is on: a model without it ends elsewhere.
    other = make_model(dropout=0.0)
    other.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    assert rel_err(weights(other), weights(ref)) > 1e-3


def test_cpu_replicas_from_hdf5_match_one_device(tmp_path):
    x, y = make_arrays()
    path = str(tmp_path / "d.h5")
    write_h5(path, x, y)
    ref = make_model()
    with hpcnn.data.HDF5Dataset(path, batch_size=BATCH, shuffle=True, seed=3) as ds:
        ref.fit(ds, epochs=2, verbose=0)
        ref_eval = ref.evaluate(ds, verbose=0)
    with mirrored(2).scope():
        model = make_model()
    with hpcnn.data.HDF5Dataset(path, batch_size=BATCH, shuffle=True, seed=3) as ds:
        model.fit(ds, epochs=2, verbose=0)
        ev = model.evaluate(ds, verbose=0)
    assert rel_err(weights(model), weights(ref)) <= 1e-5
    np.testing.assert_allclose(ev, ref_eval, rtol=1e-5)


@pytest.mark.parametrize("replicas", [2, 4])
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_augmentation_on_replicas_matches_one_device(replicas, dtype):
    """Flip, padded crop (staged) and translation (an op) draw per global row: N replicas x B/N
    see the same images as one device x B, so the weights agree up to float summation order."""
    x, y = make_arrays()
    if dtype == "uint8":
        x = np.clip(x * 40 + 128, 0, 255).astype(np.uint8)
    ref = augmented_model()
    ref.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0)
    with mirrored(replicas).scope():
        model = augmented_model()
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0)
    assert rel_err(weights(model), weights(ref)) <= 1e-5
    # The augmentation really acts: the same model without it (the same initial weights, the same
    # data and dropout) ends elsewhere.
    plain = make_model()
    assert rel_err(weights(plain), weights(augmented_model())) == 0
    plain.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0)
    assert rel_err(weights(plain), weights(ref)) > 1e-3


def test_last_batch_smaller_than_the_replica_count():
    # 50 rows, global batch 12 over 4 replicas: the last batch has 2 rows, so two replicas have
    # none in that step; they still take part (no hang) and the numbers are one device's.
    x, y = make_arrays(rows=50)
    ref = make_model(optimizer="sgd")
    ref.fit(x, y, batch_size=12, epochs=2, shuffle=True, verbose=0)
    with mirrored(4).scope():
        model = make_model(optimizer="sgd")
    h = model.fit(x, y, batch_size=12, epochs=2, shuffle=True, verbose=0)
    assert rel_err(weights(model), weights(ref)) <= 1e-5
    np.testing.assert_allclose(h.history["loss"], ref.history.history["loss"], rtol=1e-5)


def test_evaluate_and_predict_match_one_device():
    x, y = make_arrays()
    ref = make_model()
    with mirrored(2).scope():
        model = make_model()
    np.testing.assert_array_equal(weights(model), weights(ref))  # replica 0's initial weights everywhere
    np.testing.assert_allclose(model.evaluate(x, y, batch_size=10, verbose=0),
                               ref.evaluate(x, y, batch_size=10, verbose=0), rtol=1e-6)
    np.testing.assert_allclose(model.predict(x, batch_size=7), ref.predict(x, batch_size=7), rtol=1e-5, atol=1e-7)


def test_global_batch_must_split_evenly():
    x, y = make_arrays()
    with mirrored(2).scope():
        model = make_model()
    with pytest.raises(ValueError, match=r"batch_size 15 is the global batch and must be divisible by the 2 replicas"):
        model.fit(x, y, batch_size=15, epochs=1, verbose=0)
    assert model.optimizer.iterations == 0


def test_batch_normalization_each_replica_its_own_batch_moving_statistics_averaged():
    # BatchNormalization first: its batch statistics are those of the input rows. Each replica
    # normalizes its own half (Keras' MirroredStrategy); the moving statistics are the mean of
    # what each half alone gives, and every replica holds them.
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 6)) * np.arange(1, 7) + 3).astype(np.float32)
    x[4:] *= 2.5  # the halves differ: their variances' mean is not the batch's variance
    y = rng.integers(0, 3, 8).astype(np.int32)

    def bn_model():
        m = hpcnn.Sequential([InputLayer(input_shape=[6]), BatchNormalization(), Dense(3, activation="softmax")],
                             seed=4)
        m.compile("sgd", "sparse_categorical_crossentropy")
        return m

    halves = []
    for part in (slice(0, 4), slice(4, 8)):
        m = bn_model()
        m.train_on_batch(x[part], y[part])
        halves.append(m.get_weights())
    whole = bn_model()
    whole.train_on_batch(x, y)
    with mirrored(2).scope():
        model = bn_model()
    model.train_on_batch(x, y)
    got = model.get_weights()
    for k in (2, 3):  # moving_mean, moving_variance
        np.testing.assert_allclose(got[k], (halves[0][k] + halves[1][k]) / 2, rtol=1e-6)
    assert not np.allclose(got[3], whole.get_weights()[3], rtol=1e-4)  # not a synchronized batch norm
    core = model.core
    for a, b in zip(core.replica_weights(0), core.replica_weights(1)):
        np.testing.assert_array_equal(a, b)


def test_gradient_buckets_few_collectives_for_the_tutorial_cnn():
    x = np.random.default_rng(1).standard_normal((4, 32, 32, 3)).astype(np.float32)
    y = np.array([0, 1, 2, 3], dtype=np.int32)
    for pack, expected in ((None, 2), (0, 1)):
        with mirrored(2, communication_options=CommunicationOptions(bytes_per_pack=pack)).scope():
            model = hpcnn.applications.tutorial_cnn(seed=1)
            model.compile("adam", "sparse_categorical_crossentropy")
        model.train_on_batch(x, y)
        collectives, nbytes, buckets = model.core.step_collectives
        assert (collectives, buckets) == (expected, expected)
        assert nbytes == 4 * model.count_params()
    # The plan itself: buckets close in reverse layer order once they hold bytes_per_pack.
    plan = _core.distribute.plan_buckets([(0, 10), (10, 30), (30, 31)], 40)
    assert plan == [(10, 31, 1), (0, 10, 0)]


def test_same_numbers_when_repeated():
    x, y = make_arrays()
    runs = []
    for _ in range(2):
        with mirrored(3).scope():
            model = make_model()
        model.fit(x, y, batch_size=BATCH - 1, epochs=1, verbose=0)
        runs.append(weights(model))
    np.testing.assert_array_equal(runs[0], runs[1])


def test_strategy_api():
    s = mirrored(2)
    assert s.num_replicas_in_sync == 2 and s.is_chief and s.worker_index == 0 and s.num_workers == 1
    assert s.local_devices == ["cpu", "cpu"] and s.implementation == "host"
    assert not hpcnn.distribute.has_strategy()
    assert hpcnn.distribute.get_strategy().num_replicas_in_sync == 1
    with s.scope() as inner:
        assert inner is s and hpcnn.distribute.get_strategy() is s and hpcnn.distribute.has_strategy()
    assert "MirroredStrategy(replicas=2" in repr(s)


def test_compile_in_scope_after_creation_and_device_conflict():
    s = mirrored(2)
    model = make_model()  # created and compiled outside: one device
    assert not model.core.distributed
    with s.scope():
        model.compile("adam", "sparse_categorical_crossentropy")
        assert model.core.distributed
        with pytest.raises(ValueError, match="device= cannot be combined with a distribution strategy"):
            model.compile("adam", "sparse_categorical_crossentropy", device="cpu")


def test_argument_errors():
    with pytest.raises(ValueError, match="devices must be a list"):
        MirroredStrategy("cpu")
    with pytest.raises(ValueError, match="devices is empty"):
        MirroredStrategy([])
    with pytest.raises(ValueError, match="not a device|device"):
        MirroredStrategy(["tpu:0"])
    with pytest.raises(ValueError, match="bytes_per_pack"):
        CommunicationOptions(bytes_per_pack=-1)
    with pytest.raises(ValueError, match="timeout_seconds"):
        CommunicationOptions(timeout_seconds=0)
    with pytest.raises(ValueError, match="implementation must be one of"):
        CommunicationOptions(implementation="gloo")
    with pytest.raises(ValueError, match="communication_options must be a CommunicationOptions"):
        MirroredStrategy(["cpu"], communication_options={"bytes_per_pack": 0})
    with pytest.raises(ValueError, match="cluster_resolver is not supported"):
        MultiWorkerMirroredStrategy(cluster_resolver=object())


def test_without_mpi_multi_worker_says_why():
    if _core.distribute.mpi_compiled():
        pytest.skip("this build has MPI (the message is for builds without it)")
    with pytest.raises(RuntimeError, match="MultiWorkerMirroredStrategy needs MPI"):
        MultiWorkerMirroredStrategy()


def test_build_info_names_mpi_and_nccl():
    info = hpcnn.build_info()
    assert isinstance(info["mpi"], bool) and isinstance(info["nccl"], bool)
    if info["mpi"]:
        assert info["mpi_library"]
    if info["nccl"]:
        assert info["nccl_version"]


@pytest.mark.gpu
def test_two_gpus_with_nccl_match_one_device():
    gpus = len(_core.cuda_devices())
    if gpus < 2:   # the reason as tests/gpu/test_gpu_distribute.py gives it, so pytest -rs folds them
        reason = _core.cuda_unavailable_reason()
        pytest.skip(f"needs two usable GPUs ({gpus} here{': no usable GPU: ' + reason if reason else ''})")
    if not _core.distribute.nccl_compiled():
        pytest.skip("this build has no NCCL (HPCNN_NCCL)")
    x, y = make_arrays()
    ref = make_model()
    ref.compile("adam", "sparse_categorical_crossentropy", device="gpu:0")
    ref.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    s = MirroredStrategy(["gpu:0", "gpu:1"])
    assert s.implementation == "nccl"
    with s.scope():
        model = make_model()
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    assert rel_err(weights(model), weights(ref)) <= 1e-4
    core = model.core
    for a, b in zip(core.replica_weights(0), core.replica_weights(1)):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- functional (graph) models
@pytest.mark.parametrize("pack", [None, 0, 64])
def test_functional_residual_model_cpu_replicas_match_one_device(pack):
    x, y = make_arrays()
    ref = residual_model()
    ref.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    with mirrored(2, communication_options=CommunicationOptions(bytes_per_pack=pack)).scope():
        model = residual_model()
    assert model.core.replica_devices == ["cpu", "cpu"]
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    assert model.optimizer.iterations == 5
    assert rel_err(weights(model), weights(ref)) <= 1e-5
    core = model.core
    np.testing.assert_array_equal(np.concatenate([w.ravel() for w in core.replica_weights(1)]),
                                  np.concatenate([w.ravel() for w in core.replica_weights(0)]))
    collectives, nbytes, buckets = core.step_collectives
    assert nbytes == 4 * core.num_trainable_params  # every trainable gradient summed, each once
    assert collectives == buckets >= 1
    np.testing.assert_allclose(model.evaluate(x, y, batch_size=BATCH, verbose=0),
                               ref.evaluate(x, y, batch_size=BATCH, verbose=0), rtol=1e-5)
    # Dropout really is on: the model without it ends elsewhere.
    other = residual_model(dropout=0.0)
    other.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    assert rel_err(weights(other), weights(ref)) > 1e-3


def test_functional_resnet_block_with_batch_normalization_on_cpu_replicas():
    # A ResNet block model (stem, identity block, projection block, BatchNormalization in each).
    # Each replica normalizes its own half of the batch (Keras' MirroredStrategy), so one SGD step
    # on 2 replicas is the mean of two one-device steps on the halves: the trainable weights move
    # by the mean of the halves' gradients and the moving statistics are the halves' mean.
    from tests.support.small_models import resnet_block_model
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 8, 8, 3)).astype(np.float32)
    x[4:] = x[4:] * 2.0 + 1.0  # the halves differ: per-replica batch statistics matter
    y = rng.integers(0, 3, 8).astype(np.int32)

    def block_model():
        m = resnet_block_model(seed=4)
        m.compile(hpcnn.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
        return m

    halves = []
    for part in (slice(0, 4), slice(4, 8)):
        m = block_model()
        m.train_on_batch(x[part], y[part])
        halves.append(weights(m).astype(np.float64))
    whole = block_model()
    whole.train_on_batch(x, y)
    with mirrored(2).scope():
        model = block_model()
    model.train_on_batch(x, y)
    expected = (halves[0] + halves[1]) / 2
    assert rel_err(weights(model), expected) <= 1e-5
    assert rel_err(weights(whole), expected) > 1e-4  # not a synchronized batch norm
    core = model.core
    for a, b in zip(core.replica_weights(0), core.replica_weights(1)):
        np.testing.assert_array_equal(a, b)


# ---- compile's losses, metrics and weights on replicas (keras-api merged with dist)
def binary_model(seed=21, dropout=0.25):
    """A one-unit sigmoid output (fused with binary cross-entropy in the step) with dropout."""
    model = hpcnn.Sequential([
        InputLayer(input_shape=[8, 8, 2]),
        Flatten(),
        Dense(16, activation="relu"),
        hpcnn.layers.Dropout(dropout),
        Dense(1, activation="sigmoid"),
    ], seed=seed)
    model.compile("adam", hpcnn.losses.BinaryCrossentropy(label_smoothing=0.1), ["binary_accuracy", "mae"])
    return model


def binary_data(rows=80):
    x, labels = make_arrays(rows=rows)
    y = (labels % 2).astype(np.float32).reshape(-1, 1)
    w = np.random.default_rng(9).uniform(0.0, 2.0, rows).astype(np.float32)
    w[::7] = 0.0  # zero-weighted rows count in the batch size but not in the loss
    return x, y, w


@pytest.mark.parametrize("replicas", [2, 4])
def test_binary_crossentropy_sample_weight_and_two_metrics_on_replicas_match_one_device(replicas):
    # 50 rows, global batch 12: with 4 replicas the last batch (2 rows) leaves two replicas without
    # rows; they still send their (zero) loss and metric sums.
    x, y, w = binary_data(rows=50)
    vx, vy, vw = binary_data(rows=20)
    ref = binary_model()
    h_ref = ref.fit(x, y, sample_weight=w, batch_size=12, epochs=2, shuffle=True, verbose=0,
                    validation_data=(vx, vy, vw))
    with mirrored(replicas).scope():
        model = binary_model()
    assert model.core.replica_devices == ["cpu"] * replicas
    h = model.fit(x, y, sample_weight=w, batch_size=12, epochs=2, shuffle=True, verbose=0,
                  validation_data=(vx, vy, vw))
    assert rel_err(weights(model), weights(ref)) <= 1e-5
    keys = ["loss", "binary_accuracy", "mae", "val_loss", "val_binary_accuracy", "val_mae"]
    for k in keys:
        np.testing.assert_allclose(h.history[k], h_ref.history[k], rtol=1e-5, atol=1e-7, err_msg=k)
    # The sample weights really weigh: unweighted training ends elsewhere.
    other = binary_model()
    other.fit(x, y, batch_size=12, epochs=2, shuffle=True, verbose=0)
    assert rel_err(weights(other), weights(ref)) > 1e-3
    # evaluate with sample weights: the loss and both metrics reduced over the replicas.
    ev = model.evaluate(vx, vy, sample_weight=vw, batch_size=8, verbose=0, return_dict=True)
    ev_ref = ref.evaluate(vx, vy, sample_weight=vw, batch_size=8, verbose=0, return_dict=True)
    assert set(ev) == {"loss", "binary_accuracy", "mae"}
    for k in ev:
        np.testing.assert_allclose(ev[k], ev_ref[k], rtol=1e-5, err_msg=k)
    # A step's metric sums (its fourth result) are every replica's rows, not replica 0's share.
    sums = model.core.test_step((vx[:8], vy[:8], None, None, vw[:8]))[3]
    ref_sums = ref.core.test_step((vx[:8], vy[:8], None, None, vw[:8]))[3]
    assert len(sums) == 2
    np.testing.assert_allclose(sums, ref_sums, rtol=1e-5)


def test_class_weight_and_generator_sample_weights_on_replicas_match_one_device():
    x, y, w = binary_data()

    def gen():
        while True:
            for b in range(0, len(x), 16):
                yield x[b:b + 16], y[b:b + 16], w[b:b + 16]

    ref = binary_model(dropout=0.0)
    with mirrored(2).scope():
        model = binary_model(dropout=0.0)
    for m in (ref, model):
        m.fit(x, y, class_weight={0: 0.5, 1: 2.0}, batch_size=16, epochs=1, shuffle=False, verbose=0)
    assert rel_err(weights(model), weights(ref)) <= 1e-5
    h_ref = ref.fit(gen(), steps_per_epoch=5, epochs=1, verbose=0)
    h = model.fit(gen(), steps_per_epoch=5, epochs=1, verbose=0)
    assert rel_err(weights(model), weights(ref)) <= 1e-5
    for k in ("loss", "binary_accuracy", "mae"):
        np.testing.assert_allclose(h.history[k], h_ref.history[k], rtol=1e-5, err_msg=k)
    # train_on_batch: the replicas get the class weights and report the same logs.
    logs = model.train_on_batch(x[:16], y[:16], class_weight={0: 3.0, 1: 1.0}, return_dict=True)
    logs_ref = ref.train_on_batch(x[:16], y[:16], class_weight={0: 3.0, 1: 1.0}, return_dict=True)
    for k in logs_ref:
        np.testing.assert_allclose(logs[k], logs_ref[k], rtol=1e-5, err_msg=k)
    assert rel_err(weights(model), weights(ref)) <= 1e-5


def test_recompile_in_scope_gives_replicas_the_new_loss_and_metrics():
    x, y, w = binary_data()
    strategy = mirrored(2)
    with strategy.scope():
        model = binary_model()
        model.compile("sgd", "mse", ["mae"])
    ref = binary_model()
    ref.compile("sgd", "mse", ["mae"])
    h = model.fit(x, y, sample_weight=w, batch_size=16, epochs=1, verbose=0)
    h_ref = ref.fit(x, y, sample_weight=w, batch_size=16, epochs=1, verbose=0)
    assert model.core.distributed
    assert sorted(h.history) == sorted(h_ref.history)
    for k in ("loss", "mae"):
        np.testing.assert_allclose(h.history[k], h_ref.history[k], rtol=1e-5, err_msg=k)
    assert rel_err(weights(model), weights(ref)) <= 1e-5


def test_core_batch_tuple_carries_sample_weights_and_a_share():
    # (x, y, rows, decode, sample_weight, first_row, global_rows): one tuple for both features.
    x, y, w = binary_data(rows=16)
    a, b = binary_model(dropout=0.0).core, binary_model(dropout=0.0).core
    la = a.test_step((x, y, None, None, w))
    lb = b.test_step((x, y, None, None, w, 0, 16))  # the whole global batch, said explicitly
    np.testing.assert_allclose(lb[:3], la[:3], rtol=1e-6)
    np.testing.assert_allclose(lb[3], la[3], rtol=1e-6)  # the metric sums, returned with the loss
    unweighted = a.test_step((x, y, None, None, None, 0, 16))
    assert abs(unweighted[0] - la[0]) > 1e-4 * abs(la[0])  # the weights were used above
    a.train_step((x, y, None, None, w))
    b.train_step((x, y, None, None, w, 0, 16))
    np.testing.assert_allclose(b.parameter_buffer(), a.parameter_buffer(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"first_row comes with global_rows \(7 items\)"):
        a.train_step((x, y, None, None, w, 0))
    with pytest.raises(ValueError, match=r"sample_weight\[, first_row, global_rows\]\]\]\]\), got 8 items"):
        a.train_step((x, y, None, None, w, 0, 16, 1))
    with pytest.raises(ValueError, match="does not fit in a global batch of 10 rows"):
        a.train_step((x, y, None, None, w, 0, 10))


def test_start_description_names_the_build_fields_that_must_agree():
    # What every rank of a multi-process strategy compares before the first step (Strategy.agree).
    info = hpcnn.build_info()
    d = hpcnn.distribute.build_description()
    assert d["hpcnn version"] == hpcnn.__version__
    assert d["BLAS"] == info["blas_vendor"] and d["CUDA"] == bool(info["cuda"]) and d["NCCL"] == bool(info["nccl"])
    assert d["NumPy"] == np.__version__ and "Python" in d and "MPI" in d and "compiler" in d
    assert "blas_config" not in d and "num_threads" not in d  # may differ between nodes of one job


def test_start_differences_name_each_field_with_both_values():
    from hpcnn.distribute import _differences
    rank0 = {"hpcnn version": "0.3.0", "training rows": 50000, "seed": 21,
             "model": {"layers": [{"config": {"units": 8}}, {"config": {"units": 4}}]}}
    rank1 = dict(rank0, **{"hpcnn version": "0.2.0", "training rows": 49000,
                           "model": {"layers": [{"config": {"units": 8}}, {"config": {"units": 5}}]}})
    assert _differences(rank1, rank0, list(rank0)) == [
        "hpcnn version 0.2.0 vs rank 0's 0.3.0", "training rows 49000 vs rank 0's 50000",
        "model at layers[1].config.units 5 vs rank 0's 4"]
    assert _differences({"x": "a" * 200}, {"x": "b"}, ["x"]) == ["x " + "a" * 77 + "... vs rank 0's b"]
    assert _differences({"extra": 1}, {}, []) == ["extra 1 vs rank 0's (none)"]


def test_one_process_strategy_agrees_with_itself():
    # The description is compared only between processes: one process has nothing to compare.
    s = MirroredStrategy(["cpu", "cpu"])
    s.agree({"anything": object()})
    model = make_model()
    with s.scope():
        model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    x, y = make_arrays()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
