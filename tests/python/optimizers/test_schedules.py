"""Learning-rate schedules (hpcnn.optimizers.schedules): their values against Keras 3's closed forms
at chosen steps (tests/support/optimizer_reference.py), configs, and their use as an optimizer's
learning_rate: the core evaluates them at every step from the step count."""
import numpy as np
import pytest

import hpcnn
from hpcnn import optimizers
from hpcnn.layers import Dense, Flatten, InputLayer
from hpcnn.optimizers import schedules

from tests.support import optimizer_reference as ref

STEPS = [0, 1, 2, 7, 9, 10, 11, 49, 50, 51, 99, 100, 101, 250, 1000, 10**9]

CASES = {
    "exponential": (schedules.ExponentialDecay(0.1, 10, 0.5), lambda s: ref.exponential_decay(s, 0.1, 10, 0.5)),
    "exponential-staircase": (schedules.ExponentialDecay(0.1, 10, 0.5, staircase=True),
                              lambda s: ref.exponential_decay(s, 0.1, 10, 0.5, True)),
    "exponential-growth": (schedules.ExponentialDecay(1e-3, 100.5, 1.01),
                           lambda s: ref.exponential_decay(s, 1e-3, 100.5, 1.01) if s < 10**6 else None),
    "piecewise": (schedules.PiecewiseConstantDecay([10, 50, 100], [1.0, 0.5, 0.1, 0.01]),
                  lambda s: ref.piecewise_constant(s, [10, 50, 100], [1.0, 0.5, 0.1, 0.01])),
    "piecewise-float-boundaries": (schedules.PiecewiseConstantDecay([9.5], [0.3, 0.2]),
                                   lambda s: ref.piecewise_constant(s, [9.5], [0.3, 0.2])),
    "polynomial": (schedules.PolynomialDecay(0.1, 100), lambda s: ref.polynomial_decay(s, 0.1, 100)),
    "polynomial-power": (schedules.PolynomialDecay(0.1, 100, end_learning_rate=0.01, power=0.5),
                         lambda s: ref.polynomial_decay(s, 0.1, 100, 0.01, 0.5)),
    "polynomial-cycle": (schedules.PolynomialDecay(0.1, 50, end_learning_rate=0.0, power=2.0, cycle=True),
                         lambda s: ref.polynomial_decay(s, 0.1, 50, 0.0, 2.0, True)),
    "inverse-time": (schedules.InverseTimeDecay(0.1, 10, 0.5), lambda s: ref.inverse_time_decay(s, 0.1, 10, 0.5)),
    "inverse-time-staircase": (schedules.InverseTimeDecay(0.1, 10, 0.5, staircase=True),
                               lambda s: ref.inverse_time_decay(s, 0.1, 10, 0.5, True)),
    "cosine": (schedules.CosineDecay(0.1, 100), lambda s: ref.cosine_decay(s, 0.1, 100)),
    "cosine-alpha": (schedules.CosineDecay(0.1, 100, alpha=0.2), lambda s: ref.cosine_decay(s, 0.1, 100, 0.2)),
    "cosine-warmup": (schedules.CosineDecay(0.0, 100, warmup_target=0.2, warmup_steps=10),
                      lambda s: ref.cosine_decay(s, 0.0, 100, 0.0, 0.2, 10)),
    "cosine-warmup-alpha": (schedules.CosineDecay(0.01, 50, alpha=0.1, warmup_target=0.5, warmup_steps=50),
                            lambda s: ref.cosine_decay(s, 0.01, 50, 0.1, 0.5, 50)),
    "cosine-warmup-target-no-steps": (schedules.CosineDecay(0.3, 100, warmup_target=0.1),
                                      lambda s: ref.cosine_decay(s, 0.3, 100, 0.0, 0.1, 0)),
    "cosine-restarts": (schedules.CosineDecayRestarts(0.1, 10), lambda s: ref.cosine_decay_restarts(s, 0.1, 10)),
    "cosine-restarts-constant-periods": (schedules.CosineDecayRestarts(0.1, 10, t_mul=1.0, m_mul=0.5, alpha=0.1),
                                         lambda s: ref.cosine_decay_restarts(s, 0.1, 10, 1.0, 0.5, 0.1)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_values_at_chosen_steps(name):
    schedule, closed_form = CASES[name]
    for step in STEPS:
        if "restarts" in name and step > 10**6:
            continue  # the reference walks the periods one by one
        want = closed_form(step)
        if want is None:
            continue
        assert schedule(step) == pytest.approx(want, rel=1e-12, abs=1e-15), (name, step)


def test_warmup_is_linear_and_reaches_the_target():
    s = schedules.CosineDecay(0.0, 1000, warmup_target=0.1, warmup_steps=100)
    values = s(np.arange(0, 101))
    np.testing.assert_allclose(np.diff(values[:100]), 0.001, rtol=1e-9)  # a straight line from 0 ...
    assert values[100] == pytest.approx(0.1)  # ... to the target, where the decay starts
    assert s(1100) == pytest.approx(0.0, abs=1e-15) and s(5000) == s(1100)


def test_called_on_an_array():
    s = schedules.ExponentialDecay(1.0, 2, 0.5, staircase=True)
    values = s(np.array([[0, 1], [2, 5]]))
    assert values.shape == (2, 2) and values.tolist() == [[1.0, 1.0], [0.5, 0.25]]
    assert isinstance(s(np.int64(3)), float)


@pytest.mark.parametrize("name", list(CASES))
def test_config_round_trip(name):
    schedule = CASES[name][0]
    cfg = schedule.get_config()
    again = type(schedule).from_config(cfg)
    assert again.get_config() == cfg and again == schedule
    assert schedules.deserialize(schedules.serialize(schedule)) == schedule
    assert again(37) == schedule(37)


def test_keras_defaults_and_names():
    assert schedules.CosineDecay(0.1, 10).get_config() == {
        "initial_learning_rate": 0.1, "decay_steps": 10, "alpha": 0.0, "name": "CosineDecay", "warmup_target": None,
        "warmup_steps": 0}
    assert schedules.PolynomialDecay(0.1, 10).get_config()["end_learning_rate"] == 0.0001
    assert schedules.PiecewiseConstantDecay([1], [2.0, 1.0]).name == "PiecewiseConstant"
    assert schedules.CosineDecayRestarts(0.1, 10).get_config()["t_mul"] == 2.0


def dense_model():
    return hpcnn.Sequential([InputLayer(input_shape=[4, 4, 1]), Flatten(), Dense(3, activation="softmax")], seed=1)


def xy(n=8, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 4, 4, 1)).astype(np.float32), rng.integers(0, 3, n)


def test_each_step_takes_the_schedule_value_at_the_step_count():
    """The rate the core reports before each step is schedule(iterations), and SGD's update is
    exactly -rate * gradient with it."""
    x, y = xy()
    s = schedules.PiecewiseConstantDecay([2, 4], [0.5, 0.1, 0.02])
    m = dense_model()
    m.compile(optimizers.SGD(s), "sparse_categorical_crossentropy")
    for step in range(7):
        assert m.optimizer.iterations == step
        assert m.optimizer.learning_rate == pytest.approx(s(step))
        before = [w.astype(np.float64) for w in m.get_weights()]
        m.train_on_batch(x, y)
        grads = ref.split(m.core.gradient_buffer(keras_layout=True), [w.shape for w in before])
        for w0, w1, g in zip(before, m.get_weights(), grads):
            np.testing.assert_allclose(w1, w0 - s(step) * g, rtol=1e-6, atol=1e-8)


def test_fit_follows_the_schedule_without_python_per_batch():
    """fit with a schedule: after n steps the rate is schedule(n); weight decay uses the same rate."""
    x, y = xy(40)
    s = schedules.CosineDecay(0.0, 11, warmup_target=0.2, warmup_steps=3)
    reference = ref.KerasOptimizer("sgd", learning_rate=lambda t: s(t), momentum=0.9, weight_decay=0.1)
    m = dense_model()
    m.compile(optimizers.SGD(s, momentum=0.9, weight_decay=0.1), "sparse_categorical_crossentropy")
    params = [w.astype(np.float64) for w in m.get_weights()]
    for _ in range(4):
        m.train_on_batch(x[:8], y[:8])
        params = reference.apply(params, ref.split(m.core.gradient_buffer(keras_layout=True),
                                                   [p.shape for p in params]))
    for got, want in zip(m.get_weights(), params):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    m.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert m.optimizer.iterations == 14
    assert m.optimizer.learning_rate == pytest.approx(s(14)) == pytest.approx(0.0)


def test_a_schedule_can_replace_the_rate_mid_training():
    x, y = xy()
    m = dense_model()
    m.compile(optimizers.Adam(0.01), "sparse_categorical_crossentropy")
    m.train_on_batch(x, y)
    s = schedules.ExponentialDecay(0.05, 1, 0.5)
    m.optimizer.learning_rate = s  # Keras allows a schedule to be set
    assert m.optimizer.learning_rate == pytest.approx(s(1))  # evaluated at the step count (1)
    m.train_on_batch(x, y)
    assert m.core.learning_rate == pytest.approx(s(2))
    with pytest.raises(TypeError, match="not settable"):
        m.optimizer.learning_rate = 0.1


def test_an_unattached_optimizer_reports_the_first_value():
    assert optimizers.SGD(schedules.ExponentialDecay(0.1, 10, 0.5)).learning_rate == pytest.approx(0.1)
    assert optimizers.SGD(schedules.CosineDecay(0.0, 10, warmup_target=1.0, warmup_steps=2)).learning_rate == 0.0
