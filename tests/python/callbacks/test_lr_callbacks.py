"""The learning-rate callbacks and TerminateOnNaN, with Keras 3's rules: LearningRateScheduler sets
the rate every step of an epoch sees; ReduceLROnPlateau reduces after `patience` epochs without
improvement, waits `cooldown` epochs, stops at `min_lr`, and its state survives get_state /
set_state; TerminateOnNaN stops training at a NaN loss (which otherwise is fit's ValueError)."""
import math

import numpy as np
import pytest

import hpcnn
from hpcnn import _core, callbacks, optimizers
from hpcnn.layers import Dense, Flatten, InputLayer

from tests.support import optimizer_reference as ref


def model(seed=2):
    return hpcnn.Sequential([InputLayer(input_shape=[3, 3, 1]), Flatten(), Dense(4, activation="relu"),
                             Dense(2, activation="softmax")], seed=seed)


def data(n=16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 3, 3, 1)).astype(np.float32), rng.integers(0, 2, n)


class Recorder(callbacks.Callback):
    """The rate the core will use, read before every batch; weights and gradients of the last batch."""

    def __init__(self):
        super().__init__()
        self.rates, self.before = [], None

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(self.model.core.learning_rate))
        self.before = [w.astype(np.float64) for w in self.model.get_weights()]


# ------------------------------------------------------------------ LearningRateScheduler
def test_scheduler_sets_the_rate_every_step_of_the_epoch_uses():
    x, y = data()
    m = model()
    m.compile(optimizers.SGD(0.2), "sparse_categorical_crossentropy")
    rec = Recorder()
    sched = callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5 if epoch else lr)
    h = m.fit(x, y, batch_size=8, epochs=4, shuffle=False, verbose=0, callbacks=[sched, rec])
    want = [0.2, 0.1, 0.05, 0.025]
    np.testing.assert_allclose(rec.rates, np.repeat(want, 2), rtol=1e-12)
    np.testing.assert_allclose(h.history["learning_rate"], want, rtol=1e-12)  # as Keras logs it
    assert m.optimizer.learning_rate == pytest.approx(0.025)
    grads = ref.split(m.core.gradient_buffer(keras_layout=True), [w.shape for w in rec.before])
    for w0, w1, g in zip(rec.before, m.get_weights(), grads):  # the last step used 0.025
        np.testing.assert_allclose(w1, w0 - 0.025 * g, rtol=1e-6, atol=1e-9)


def test_scheduler_takes_keras_old_one_argument_schedules(capsys):
    x, y = data()
    m = model()
    m.compile(optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    m.fit(x, y, epochs=3, verbose=0, callbacks=[callbacks.LearningRateScheduler(lambda epoch: 0.1 / (epoch + 1),
                                                                                verbose=1)])
    assert m.optimizer.learning_rate == pytest.approx(0.1 / 3)
    assert "Epoch 3: LearningRateScheduler setting learning rate to 0.0333" in capsys.readouterr().out


# ------------------------------------------------------------------ ReduceLROnPlateau
def plateau_run(values, **kw):
    """ReduceLROnPlateau over epochs whose monitored value is `values[epoch]` (a LambdaCallback that
    runs first writes it into the logs); returns the rate in force after each epoch."""
    x, y = data(8)
    m = model()
    m.compile(optimizers.SGD(1.0), "sparse_categorical_crossentropy")
    rates = []
    feed = callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: logs.update(metric=values[epoch]))
    watch = callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: rates.append(m.optimizer.learning_rate))
    cb = callbacks.ReduceLROnPlateau(monitor="metric", **kw)
    h = m.fit(x, y, batch_size=8, epochs=len(values), verbose=0, callbacks=[feed, cb, watch])
    return rates, cb, h


def test_reduces_after_patience_epochs_without_improvement():
    rates, _, h = plateau_run([5, 4, 4, 4, 4, 4, 4], factor=0.5, patience=2)
    assert rates == [1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    assert h.history["learning_rate"] == [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.25]  # the rate each epoch trained with


def test_min_delta_decides_what_counts_as_improvement():
    rates, _, _ = plateau_run([5, 4.95, 4.9, 4.85, 4.0], factor=0.5, patience=2, min_delta=0.1)
    assert rates == [1.0, 1.0, 0.5, 0.5, 0.5]  # -0.05 steps are no improvement; -0.85 is


def test_cooldown_is_respected():
    rates, _, _ = plateau_run([5] * 9, factor=0.5, patience=1, cooldown=2)
    # Keras' counting: epoch 0 sets best; 1 reduces (cooldown 2); 2 counts the cooldown down to 1
    # and waits; 3 counts it down to 0 and, out of cooldown, reduces again; and so on
    assert rates == [1.0, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125, 0.0625, 0.0625]
    rates, _, _ = plateau_run([5] * 6, factor=0.5, patience=1)
    assert rates == [1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125]  # without cooldown: every epoch


def test_min_lr_is_the_floor():
    rates, _, _ = plateau_run([1] * 6, factor=0.1, patience=0, min_lr=0.02)
    assert rates == pytest.approx([1.0, 0.1, 0.02, 0.02, 0.02, 0.02])


def test_max_mode_for_accuracies():
    rates, cb, _ = plateau_run([0.5, 0.6, 0.6, 0.55, 0.7], factor=0.5, patience=2, mode="auto")
    assert cb.mode == "min"  # 'metric' is no accuracy: auto means min
    rates, cb, _ = plateau_run([0.5, 0.6, 0.6, 0.55, 0.7], factor=0.5, patience=2, mode="max")
    assert rates == [1.0, 1.0, 1.0, 0.5, 0.5]
    assert callbacks.ReduceLROnPlateau(monitor="val_accuracy").mode == "max"


def test_state_survives_get_state_and_set_state():
    """Epochs 0-3 then a new callback restored from the state runs epochs 4-8 exactly as an
    uninterrupted callback runs them (the restored state is not reset at on_train_begin)."""
    values = [5, 4, 4, 4, 3.9, 3.9, 3.9, 3.9, 3.9]
    whole, _, _ = plateau_run(values, factor=0.5, patience=2, cooldown=1)
    x, y = data(8)
    m = model()
    m.compile(optimizers.SGD(1.0), "sparse_categorical_crossentropy")
    rates = []

    def run(cb, epochs, initial_epoch):
        feed = callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: logs.update(metric=values[epoch]))
        watch = callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: rates.append(m.optimizer.learning_rate))
        m.fit(x, y, batch_size=8, epochs=epochs, initial_epoch=initial_epoch, verbose=0, callbacks=[feed, cb, watch])

    first = callbacks.ReduceLROnPlateau(monitor="metric", factor=0.5, patience=2, cooldown=1)
    run(first, 4, 0)
    state = first.get_state()
    assert state == {"best": 4.0, "wait": 0, "cooldown_counter": 1}
    second = callbacks.ReduceLROnPlateau(monitor="metric", factor=0.5, patience=2, cooldown=1)
    second.set_state(state)
    run(second, len(values), 4)
    assert rates == whole


def test_a_missing_metric_is_a_warning_as_in_keras():
    x, y = data(8)
    m = model()
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    with pytest.warns(UserWarning, match=r"conditioned on metric `val_loss` which is not available"):
        m.fit(x, y, epochs=1, verbose=0, callbacks=[callbacks.ReduceLROnPlateau()])


# ------------------------------------------------------------------ TerminateOnNaN
def nan_model():
    m = model()
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    ws = m.get_weights()
    ws[3][0] = np.nan  # the output bias: every loss is NaN
    m.set_weights(ws)
    return m, ws


def test_terminate_on_nan_stops_training_and_keeps_the_weights(capsys):
    x, y = data()
    m, ws = nan_model()
    h = m.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[callbacks.TerminateOnNaN()])
    assert h.epoch == [0] and math.isnan(h.history["loss"][0])  # the epoch ends, as in Keras; no more
    assert m.optimizer.iterations == 0  # the NaN batch was not applied
    for a, b in zip(m.get_weights(), ws):
        np.testing.assert_array_equal(a, b)
    assert "Batch 0: Invalid loss, terminating training" in capsys.readouterr().out


def test_without_it_a_nan_loss_is_an_error():
    x, y = data()
    m, _ = nan_model()
    with pytest.raises(ValueError, match=r"epoch 1, batch 1: the loss is NaN: training diverged"):
        m.fit(x, y, batch_size=8, epochs=3, verbose=0)
    with pytest.raises(_core.NonFiniteLossError) as info:
        m.train_on_batch(x, y)
    assert isinstance(info.value, ValueError) and math.isnan(info.value.loss)


def test_raise_error_raises_at_once():
    x, y = data()
    m, _ = nan_model()
    ended = []
    with pytest.raises(RuntimeError, match=r"NaN or Inf loss encountered at batch 0"):
        m.fit(x, y, batch_size=8, epochs=2, verbose=0,
              callbacks=[callbacks.TerminateOnNaN(raise_error=True),
                         callbacks.LambdaCallback(on_train_end=lambda logs: ended.append(1))])
    assert not ended  # Keras: raise_error bypasses the other callbacks' cleanup


def test_divergence_mid_epoch_stops_at_the_last_good_weights():
    """A rate so large the loss overflows after a few steps: training stops at that batch, with the
    weights of the step before (all finite)."""
    x, y = data(64)
    x *= 1e4
    m = model()
    m.compile(optimizers.SGD(1e4), "sparse_categorical_crossentropy")
    seen = []
    h = m.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0,
              callbacks=[callbacks.TerminateOnNaN(),
                         callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(logs["loss"]))])
    assert len(h.epoch) == 1 and not math.isfinite(h.history["loss"][0])
    assert not math.isfinite(seen[-1]) and all(math.isfinite(v) for v in seen[:-1])
    assert m.optimizer.iterations == len(seen) - 1
    assert all(np.isfinite(w).all() for w in m.get_weights())
