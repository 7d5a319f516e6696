"""A step's activations and gradients live in one arena laid out by the step's plan
(csrc/nn/step_plan.h, memory_plan.h): a buffer is reused once nothing later in the step reads
it. The tutorial CNN's peak must not grow over the layout of one buffer per activation (what
the model allocated before plans), inference needs far less than training, a residual graph
reuses the memory of what its backward pass does not read, and the arena is allocated when the
batch capacity grows, never per step. (Whether reuse is correct is what the numerical tests of
test_graph_reference.py and test_reference_step.py check: a buffer reused too early would change
their results.)"""
import numpy as np
import pytest

import hpcnn
from hpcnn.layers import Activation, Add, Conv2D, Dense, Flatten

from tests.support.small_models import residual_model
from tests.support import paths


def report(model, batch):
    return model.core.memory_report(batch)


@pytest.mark.parametrize("batch", [1, 128, 250])
def test_tutorial_cnn_peak_does_not_grow(batch):
    m = hpcnn.models.tutorial_cnn(seed=0)
    m.compile("adam", "categorical_crossentropy")
    r = report(m, batch)
    assert r["train"] <= r["one_buffer_per_activation"]
    assert r["test"] == r["predict"] < r["train"]
    if batch == 250:  # 32x32x32 conv output + its gradient + the first pool's output and gradient
        assert r["train"] == 2 * (250 * 32 * 32 * 32 * 4) + 2 * (250 * 16 * 16 * 32 * 4)
        assert r["one_buffer_per_activation"] > 1.7 * r["train"]


def resnet_like(blocks=3, filters=8):
    """Conv-ReLU-Conv + Add + ReLU blocks: the conv outputs that only the Add reads, and the Add's
    output that only the ReLU reads, are not kept for the backward pass."""
    x = hpcnn.Input((16, 16, 3))
    y = Conv2D(filters, 3, padding="same", activation="relu")(x)
    for _ in range(blocks):
        h = Conv2D(filters, 3, padding="same", activation="relu")(y)
        h = Conv2D(filters, 3, padding="same")(h)
        y = Activation("relu")(Add()([h, y]))
    return hpcnn.Model(x, Dense(10, activation="softmax")(Flatten()(y)), seed=1)


def test_a_residual_graph_reuses_what_backward_does_not_read():
    m = resnet_like()
    m.compile("adam", "categorical_crossentropy")
    r = report(m, 64)
    per_activation = 64 * 16 * 16 * 8 * 4
    # 11 activations of this size; the backward pass keeps the stem's, each block's first conv's
    # (its fused ReLU) and each block's ReLU output: 7 (+ gradients in flight and the logits).
    assert r["train"] < 0.75 * r["one_buffer_per_activation"]
    assert r["train"] <= 10 * per_activation + 64 * 10 * 4 * 2 + 4096
    assert r["predict"] <= 3 * per_activation + 4096  # inference: the input, output and skip of a block


def test_frozen_layers_shrink_the_backward_plan():
    m = resnet_like()
    m.compile("adam", "categorical_crossentropy")
    full = report(m, 64)["train"]
    for layer in m.layers[:-2]:
        layer.trainable = False
    m.compile("adam", "categorical_crossentropy")
    assert report(m, 64)["train"] < full  # only the Dense runs backward: no conv gradients


def test_the_arena_is_allocated_once_for_the_capacity_not_per_step():
    m = residual_model(seed=1)
    m.compile("adam", "sparse_categorical_crossentropy")
    core = m.core
    assert core.memory_report(8)["allocated"] == 0  # nothing before the first step
    rng = np.random.default_rng(0)
    x, y = rng.random((8, 6, 6, 3), dtype=np.float32), rng.integers(0, 3, 8)
    m.train_on_batch(x, y)
    r = core.memory_report(8)
    assert r["allocated"] == max(r["train"], r["test"], r["predict"])
    for _ in range(3):
        m.train_on_batch(x, y)
        m.predict(x[:5])
        m.evaluate(x[:3], y[:3], verbose=0)
        assert core.memory_report(8)["allocated"] == r["allocated"]  # smaller batches: the same arena
    m.train_on_batch(np.concatenate([x, x]), np.concatenate([y, y]))
    assert core.memory_report(16)["allocated"] == max(core.memory_report(16)[k] for k in ("train", "test", "predict"))


def test_memory_report_needs_a_positive_batch():
    with pytest.raises(ValueError, match="memory_report: the batch size must be positive, got 0"):
        residual_model().core.memory_report(0)


# ------------------------------------------------------------------ reuse changes no bit
def _every_layer_kind():
    """A chain through every layer kind (each backward reading what it says it reads)."""
    from hpcnn.layers import (ELU, AveragePooling2D, BatchNormalization, Dropout, GlobalAveragePooling2D,
                              GlobalMaxPooling2D, InputLayer, LeakyReLU, MaxPooling2D, ReLU, Rescaling, Softmax,
                              ZeroPadding2D)
    return hpcnn.Sequential([
        InputLayer(input_shape=(9, 8, 3)), Rescaling(0.5, offset=0.1), ZeroPadding2D(((0, 1), (1, 1))),
        Conv2D(8, 3, strides=2, padding="same", use_bias=False), BatchNormalization(), LeakyReLU(),
        Conv2D(8, 1, activation="gelu"), BatchNormalization(), ReLU(), AveragePooling2D(2, padding="same"),
        Softmax(), ELU(), Conv2D(8, 3, padding="same", activation="swish"), Activation("tanh"),
        MaxPooling2D(1), GlobalMaxPooling2D(keepdims=True), Flatten(), Dense(6, activation="sigmoid"),
        Dropout(0.3), Dense(4, activation="softmax")], seed=5), (9, 8, 3), 4


def _resnet_with_batchnorm():
    from hpcnn.layers import BatchNormalization, Concatenate, GlobalAveragePooling2D
    x = hpcnn.Input((8, 8, 3))
    y = Activation("relu")(BatchNormalization()(Conv2D(8, 3, padding="same", use_bias=False)(x)))  # fused
    h = Activation("relu")(BatchNormalization()(Conv2D(8, 3, padding="same")(y)))
    h = BatchNormalization()(Conv2D(8, 3, padding="same")(h))
    y = Activation("relu")(Add()([h, y]))
    z = Concatenate()([y, BatchNormalization()(Conv2D(4, 1)(y))])  # a BN whose output two layers read
    return hpcnn.Model(x, Dense(4, activation="softmax")(GlobalAveragePooling2D()(z)), seed=6), (8, 8, 3), 4


@pytest.mark.parametrize("build", [_every_layer_kind, _resnet_with_batchnorm])
@pytest.mark.parametrize("frozen", [None, 2])
def test_reusing_memory_changes_no_bit(build, frozen):
    """The same steps with every buffer kept apart (memory_reuse False) give the same bits: losses,
    gradients, weights (moving statistics included) and predictions. A layer whose backward read
    an activation it said it does not read would see another buffer's data here."""
    models = []
    for reuse in (True, False):
        m, shape, classes = build()
        if frozen is not None:
            m.layers[frozen].trainable = False
        m.compile(hpcnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
        m.core.memory_reuse = reuse
        models.append((m, shape, classes))
    (a, shape, classes), (b, _, _) = models
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16,) + shape).astype(np.float32), rng.integers(0, classes, 16)
    for step in range(3):
        assert a.train_on_batch(x, y) == b.train_on_batch(x, y), f"loss of step {step + 1}"
        np.testing.assert_array_equal(a.core.gradient_buffer(), b.core.gradient_buffer())
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    np.testing.assert_array_equal(a.predict(x), b.predict(x))
    assert a.evaluate(x, y, verbose=0) == b.evaluate(x, y, verbose=0)
    ra, rb = a.core.memory_report(16), b.core.memory_report(16)
    assert ra["allocated"] < rb["allocated"]  # reuse is on in one of them only


# ------------------------------------------------------------------ keeping every buffer vs the plan
def test_train_keep_all_is_what_a_step_without_reuse_allocates():
    m = residual_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    planned = m.core.memory_report(8)
    m.core.memory_reuse = False
    rng = np.random.default_rng(0)
    m.train_on_batch(rng.random((8, 6, 6, 3), dtype=np.float32), rng.integers(0, 3, 8))
    assert m.core.memory_report(8)["allocated"] == planned["train_keep_all"] > planned["train"]


def test_bench_memory_reports_the_plan_against_keeping_all(capsys):
    """bench/bench_memory.py (the memory numbers in docs/tutorial.md) runs, on a CIFAR ResNet-8."""
    import importlib.util
    import os
    path = str(paths.BENCH / "bench_memory.py")
    spec = importlib.util.spec_from_file_location("bench_memory", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--batch", "4", "--depth", "8"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("resnet8")]
    assert len(rows) == 1
    keep_all, train = float(rows[0][2]), float(rows[0][4])
    assert 0 < train < keep_all


@pytest.mark.parametrize("metrics, doubles", [([], 3), (["accuracy"], 3),
                                              (["accuracy", "top_k_categorical_accuracy"], 4),
                                              (["mae", "top_k_categorical_accuracy"], 5)])
def test_the_report_names_the_statistics_a_step_copies_back(metrics, doubles):
    """Loss sum, correct count (accuracy), regularization penalty and one sum per other metric, as
    doubles: what a GPU step copies back (tests/gpu/test_gpu_contract.py and test_gpu_graph.py count
    the copies with it)."""
    m = hpcnn.models.tutorial_cnn(seed=0)
    m.compile("adam", "categorical_crossentropy", metrics)
    assert report(m, 8)["statistics"] == 8 * doubles
