"""MirroredStrategy with GPU replicas against one device (issue 22): what tests/core/distribute/test_distribute.py
checks with CPU replicas, on GPUs.
  - BatchNormalization: each replica normalizes its own share of the batch with that share's
    statistics (the loss a step reports is theirs), and the moving mean and variance are averaged
    over the replicas that had rows (on a GPU: the state copied to the host, summed, copied back);
  - a replica without rows (a last batch smaller than the replica count: replica 0, the one Python
    reads, is the empty one) still takes part in every collective and ends with the others' weights;
  - evaluate and predict split among the replicas, a last batch smaller than the replica count too;
  - one GPU: MirroredStrategy(['gpu:0']) (NCCL, or the host transport) against a plain GPU model.
Two GPUs sum over NCCL and, in a second variant, over the host (what a build without NCCL does).
Each test runs twice: with CPU replicas against one CPU device (here, on every machine: the test's
own logic), and with GPU replicas against the CPU (`gpu`; the two-GPU ones also `multi_gpu`, run
by slurm/gpu-selftest-2gpu.sbatch), skipped with the reason where the GPUs are missing.
HPCNN_TEST_GPU=cpu runs the GPU variants with CPUs standing in (tests/support/gpu_target.py). TF32 is off.

The reference for BatchNormalization on R replicas is one CPU device: per global batch, each
replica's share trained alone from the same weights, then combined: SGD without momentum moves the
trainable weights by the sum over the shares of (share rows / batch rows) x the share's own update,
and the moving statistics are the mean over the shares that had rows.
"""
import numpy as np
import pytest

import hpcnn
from tests.support.gpu_target import (GPU, KINDS, LOSS_TOL, PARAM_MARKS, REASON, UPDATE_TOL, assert_loss_and_accuracy_close,
                        assert_updates_close)
from hpcnn import _core
from hpcnn.distribute import CommunicationOptions, MirroredStrategy
from hpcnn.layers import BatchNormalization, Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D, ReLU

pytestmark = pytest.mark.usefixtures("tf32_off")  # tests/conftest.py; harmless for the CPU variants

LR = 0.05
# Tolerances per replica kind: UPDATE_TOL and LOSS_TOL as tests/support/gpu_target.py has them; outputs to
# 1e-6 on CPU replicas (the order of float sums only), to 1e-4 on GPUs.
OUTPUT_TOL = {"cpu": 1e-6, "gpu": 1e-4}

# The replica kinds: 'cpu' runs everywhere; 'gpu' one GPU (GPU of tests/support/gpu_target.py); '2gpu' two.
ONE = KINDS
# Two replicas: (kind, transport); GPUs sum over NCCL ('auto' where the build has it) and over the
# host (what a build without NCCL does: the buffers copied to the host and back).
TWO = [pytest.param("cpu", "auto", id="cpu"),
       pytest.param("gpu", "auto", id="2gpu", marks=[*PARAM_MARKS, pytest.mark.multi_gpu]),
       pytest.param("gpu", "host", id="2gpu-host", marks=[*PARAM_MARKS, pytest.mark.multi_gpu])]


def two_replicas(kind, implementation):
    """MirroredStrategy with two replicas of `kind` summing over `implementation`."""
    strategy = MirroredStrategy(replica_devices(kind, 2),
                                communication_options=CommunicationOptions(implementation=implementation))
    if kind == "gpu" and GPU != "cpu":
        assert strategy.implementation == ("nccl" if implementation == "auto" and _core.distribute.nccl_compiled()
                                           else "host")
    return strategy


def replica_devices(kind, replicas):
    """The strategy's devices: CPUs, or `replicas` GPUs (the test skips, saying why, without them)."""
    if kind == "cpu" or GPU == "cpu":
        return ["cpu"] * replicas
    if replicas == 1:
        return [GPU]
    n = 0 if REASON else len(_core.cuda_devices(with_free_memory=False))
    if n < replicas:
        pytest.skip(f"only {n} GPU visible: needs {replicas} (slurm/gpu-selftest-2gpu.sbatch)")
    return [f"gpu:{i}" for i in range(replicas)]


def bn_model(seed=4, dropout=0.0):
    """Conv2D, BatchNormalization (first, so its batch statistics are the data's), ReLU, pooling."""
    layers = [InputLayer(input_shape=[6, 6, 2]), BatchNormalization(momentum=0.6), Conv2D(4, 3, padding="same"),
              BatchNormalization(momentum=0.6), ReLU(), MaxPooling2D(2), Flatten(), Dense(8, activation="relu")]
    if dropout:
        layers.append(Dropout(dropout))
    return hpcnn.Sequential(layers + [Dense(3, activation="softmax")], seed=seed)


def plain_model(seed=21):
    """No BatchNormalization, with dropout (its masks keyed by the global row): R replicas compute
    what one device computes."""
    return hpcnn.Sequential([InputLayer(input_shape=[6, 6, 2]), Conv2D(4, 3, padding="same", activation="relu"),
                             MaxPooling2D(2), Flatten(), Dense(8, activation="relu"), Dropout(0.25),
                             Dense(3, activation="softmax")], seed=seed)


def compiled(model, device=None, strategy=None):
    args = (hpcnn.optimizers.SGD(learning_rate=LR), "sparse_categorical_crossentropy", ["accuracy"])
    if strategy is None:
        model.compile(*args, device=device)
    else:
        with strategy.scope():
            model.compile(*args)
    return model


def data(rows, seed=0):
    """Images whose rows 4..7 of every 8 differ in scale and offset (so a share's batch statistics
    are not the batch's), labels 0..2."""
    r = np.random.default_rng(seed)
    x = r.standard_normal((rows, 6, 6, 2)).astype(np.float32) * np.array([1.0, 3.0], np.float32) + 0.5
    other = np.arange(rows) % 8 >= 4
    x[other] = x[other] * 2.5 + 3.0
    return x, r.integers(0, 3, rows).astype(np.int32)


def shares(rows, replicas):
    """Replica r's rows of a global batch: [r*B//R, (r+1)*B//R), as the core splits it."""
    return [slice(r * rows // replicas, (r + 1) * rows // replicas) for r in range(replicas)]


def replicas_reference(make, names, weights, x, y, replicas):
    """One step of `replicas` replicas on the global batch (x, y), on one CPU device (see the module
    docstring): (the weights after it, the loss the step reports)."""
    rows = len(x)
    is_state = [n.endswith(("moving_mean", "moving_variance")) for n in names]
    trained, losses = [], []
    for part in shares(rows, replicas):
        if part.stop == part.start:
            continue
        m = compiled(make(), "cpu")
        m.set_weights(weights)
        losses.append((part.stop - part.start, m.train_on_batch(x[part], y[part])[0]))
        trained.append((part.stop - part.start, m.get_weights()))
    out = []
    for k, w0 in enumerate(weights):
        w0 = w0.astype(np.float64)
        if is_state[k]:  # the mean over the replicas that had rows
            out.append(np.mean([w[k] for _, w in trained], axis=0))
        else:  # the gradients summed, each scaled by 1 / (global batch rows)
            out.append(w0 + sum(n / rows * (w[k] - w0) for n, w in trained))
    loss = sum(n * v for n, v in losses) / rows  # every replica's loss sum over all rows
    return out, loss


# ------------------------------------------------------------------ BatchNormalization
@pytest.mark.parametrize("kind,implementation", TWO)
def test_batchnorm_statistics_per_replica_and_moving_statistics_averaged(kind, implementation):
    """Three global batches on 2 replicas: 8 rows (4 each), 6 rows (3 each), then 1 row (replica 0
    has none: its moving statistics become replica 1's, not its own stale ones)."""
    strategy = two_replicas(kind, implementation)
    devices = strategy.local_devices
    x, y = data(15, seed=1)
    batches = [slice(0, 8), slice(8, 14), slice(14, 15)]
    model = compiled(bn_model(), strategy=strategy)
    names = model.weight_names()
    assert sum(n.endswith(("moving_mean", "moving_variance")) for n in names) == 4
    w0 = model.get_weights()
    want = w0
    for b in batches:
        before = model.get_weights()
        loss = model.train_on_batch(x[b], y[b])[0]
        want, want_loss = replicas_reference(bn_model, names, before, x[b], y[b], 2)
        got = model.get_weights()
        # the loss of the step: each share normalized with its own batch statistics
        assert loss == pytest.approx(want_loss, rel=LOSS_TOL[kind]), f"rows {b}"
        assert_updates_close(got, want, before, UPDATE_TOL[kind], f"rows {b}")
        for k, name in enumerate(names):
            if "moving" in name:  # the statistics really moved
                assert np.max(np.abs(got[k] - before[k])) > 1e-3, f"rows {b}: {name}"
        core = model.core
        assert core.replica_devices == devices
        for a, c in zip(core.replica_weights(0), core.replica_weights(1)):
            np.testing.assert_array_equal(a, c)  # every replica holds the same weights and statistics
    # Inference uses the averaged moving statistics, on every replica (predict splits the rows).
    ref = compiled(bn_model(), "cpu")
    ref.set_weights([w.astype(np.float32) for w in want])
    np.testing.assert_allclose(model.predict(x, batch_size=6), ref.predict(x, batch_size=6),
                               rtol=OUTPUT_TOL[kind], atol=OUTPUT_TOL[kind] * 0.1)
    # The test can tell: one device on the whole first batch (a synchronized batch norm) differs.
    whole = compiled(bn_model(), "cpu")
    whole.set_weights(w0)
    whole.train_on_batch(x[batches[0]], y[batches[0]])
    first, _ = replicas_reference(bn_model, names, w0, x[batches[0]], y[batches[0]], 2)
    moving_var = names.index(next(n for n in names if n.endswith("moving_variance")))
    assert not np.allclose(whole.get_weights()[moving_var], first[moving_var], rtol=1e-2)


@pytest.mark.parametrize("implementation", ["auto", "host"])
@pytest.mark.parametrize("kind", ONE)
def test_one_replica_strategy_matches_a_plain_model(kind, implementation):
    """MirroredStrategy on one device (the gradient sum and the moving statistics' average go
    through the transport: NCCL with one rank, or the host) computes what the plain model on that
    device computes, and that agrees with the CPU: fit with a shuffled partial last batch, then
    evaluate and predict with partial batches."""
    device = replica_devices(kind, 1)[0]
    strategy = MirroredStrategy([device], communication_options=CommunicationOptions(implementation=implementation))
    if device != "cpu" and implementation == "auto":
        assert strategy.implementation == ("nccl" if _core.distribute.nccl_compiled() else "host")
    else:
        assert strategy.implementation == "host"
    x, y = data(22, seed=2)
    replicated = compiled(bn_model(dropout=0.25), strategy=strategy)
    plain = compiled(bn_model(dropout=0.25), device)
    cpu = compiled(bn_model(dropout=0.25), "cpu")
    w0 = cpu.get_weights()
    for m in (replicated, plain):
        for a, b in zip(m.get_weights(), w0):
            np.testing.assert_array_equal(a, b)
    hist = {}
    for name, m in (("replicated", replicated), ("plain", plain), ("cpu", cpu)):
        hist[name] = m.fit(x, y, batch_size=8, epochs=2, shuffle=True, verbose=0).history  # 8 + 8 + 6 rows
    assert replicated.core.replica_devices == [device]
    # the same device: the same numbers but for the order of float sums
    np.testing.assert_allclose(hist["replicated"]["loss"], hist["plain"]["loss"], rtol=1e-5)
    assert_updates_close(replicated.get_weights(), plain.get_weights(), w0, 1e-4, "replicated vs plain")
    # against the CPU
    np.testing.assert_allclose(hist["replicated"]["loss"], hist["cpu"]["loss"], rtol=LOSS_TOL[kind])
    assert_updates_close(replicated.get_weights(), cpu.get_weights(), w0, UPDATE_TOL[kind], f"{device} vs cpu")
    want_eval = cpu.evaluate(x, y, batch_size=16, verbose=0)  # 16 + 6 rows
    for m in (replicated, plain):
        assert_loss_and_accuracy_close(m.evaluate(x, y, batch_size=16, verbose=0), want_eval, kind, 22, "evaluate")
    want_pred = cpu.predict(x, batch_size=5)  # 4 x 5 + 2 rows
    for m in (replicated, plain):
        got = m.predict(x, batch_size=5)
        assert got.shape == (22, 3)
        np.testing.assert_allclose(got, want_pred, rtol=OUTPUT_TOL[kind] * 10, atol=OUTPUT_TOL[kind])


# ------------------------------------------------------------------ a replica without rows
@pytest.mark.parametrize("kind,implementation", TWO)
def test_a_replica_without_rows_in_the_last_batch(kind, implementation):
    """5 rows, global batch 4, 2 replicas: the last batch has 1 row, which replica 1 takes; replica
    0 (the one Python reads) has none in that step. fit runs through 3 shuffled epochs (the empty
    replica staged nothing ahead and must take its next batch) and ends where one device does."""
    strategy = two_replicas(kind, implementation)
    x, y = data(5, seed=3)
    vx, vy = data(3, seed=4)
    ref = compiled(plain_model(), "cpu")
    w0 = ref.get_weights()
    h_ref = ref.fit(x, y, batch_size=4, epochs=3, shuffle=True, verbose=0, validation_data=(vx, vy))
    model = compiled(plain_model(), strategy=strategy)
    h = model.fit(x, y, batch_size=4, epochs=3, shuffle=True, verbose=0, validation_data=(vx, vy))
    assert model.optimizer.iterations == ref.optimizer.iterations == 6
    for k in ("loss", "val_loss"):
        np.testing.assert_allclose(h.history[k], h_ref.history[k], rtol=LOSS_TOL[kind], err_msg=k)
    for k, rows in (("accuracy", 5), ("val_accuracy", 3)):  # on a GPU up to one row (a near tie)
        np.testing.assert_allclose(h.history[k], h_ref.history[k], atol=1e-7 if kind == "cpu" else 1.01 / rows,
                                   err_msg=k)
    assert_updates_close(model.get_weights(), ref.get_weights(), w0, UPDATE_TOL[kind], "after 3 epochs")
    core = model.core
    for a, b in zip(core.replica_weights(0), core.replica_weights(1)):
        np.testing.assert_array_equal(a, b)
    # a batch of one row through train_on_batch: the same
    before = model.get_weights()
    ref.set_weights(before)
    loss = model.train_on_batch(x[:1], y[:1])[0]
    assert loss == pytest.approx(ref.train_on_batch(x[:1], y[:1])[0], rel=LOSS_TOL[kind])
    assert_updates_close(model.get_weights(), ref.get_weights(), before, UPDATE_TOL[kind], "one row")


# ------------------------------------------------------------------ evaluate and predict
@pytest.mark.parametrize("kind,implementation", TWO)
def test_evaluate_and_predict_on_replicas_match_one_device(kind, implementation):
    """Trained weights and moving statistics (inference uses them, whatever the share); batches of
    4 over 5 rows (the last one's row on replica 1 only), of 2 over 5, and one batch larger than
    all the rows; predict_on_batch and test_on_batch with one row."""
    r = np.random.default_rng(5)
    model = compiled(bn_model(dropout=0.25), strategy=two_replicas(kind, implementation))
    ref = compiled(bn_model(dropout=0.25), "cpu")
    weights = [(w + r.standard_normal(w.shape) * 0.2).astype(np.float32) if "variance" not in n
               else (w * r.uniform(0.5, 2.0, w.shape)).astype(np.float32)
               for n, w in zip(ref.weight_names(), ref.get_weights())]
    model.set_weights(weights)
    ref.set_weights(weights)
    x, y = data(5, seed=6)
    for batch in (4, 2, 8):
        assert_loss_and_accuracy_close(model.evaluate(x, y, batch_size=batch, verbose=0),
                                       ref.evaluate(x, y, batch_size=batch, verbose=0), kind, 5,
                                       f"evaluate, batch {batch}")
        got = model.predict(x, batch_size=batch)
        assert got.shape == (5, 3)
        np.testing.assert_allclose(got, ref.predict(x, batch_size=batch), rtol=OUTPUT_TOL[kind] * 10,
                                   atol=OUTPUT_TOL[kind], err_msg=f"predict, batch {batch}")
    np.testing.assert_allclose(model.predict_on_batch(x[:1]), ref.predict_on_batch(x[:1]),
                               rtol=OUTPUT_TOL[kind] * 10, atol=OUTPUT_TOL[kind])
    assert_loss_and_accuracy_close(model.test_on_batch(x[:1], y[:1]), ref.test_on_batch(x[:1], y[:1]), kind, 1,
                                   "test_on_batch, one row")
    # evaluate changed nothing: the weights are still the ones set
    for a, b in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(a, b)
