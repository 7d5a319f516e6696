"""Optimizers against float64 NumPy models of Keras 3's formulas (tests/support/optimizer_reference.py):
the update ops on their own (hpcnn._core.ops), then whole training steps of a model, for SGD
(momentum, Nesterov), Adam, AdamW and RMSprop (centered, momentum), each with weight_decay,
clipnorm, global_clipnorm and clipvalue; frozen layers; weight-decay exclusions; the fixed-order
norms (the same bits on every thread count); get_config round trips; compile's default."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core, optimizers
from hpcnn.layers import Conv2D, Dense, Flatten, InputLayer
from hpcnn.optimizers import schedules

from tests.support import optimizer_reference as ref

ops = _core.ops


def model(seed=4):
    """No dropout: a step's gradient is a function of the weights and the batch only."""
    return hpcnn.Sequential([
        InputLayer(input_shape=[6, 6, 2]),
        Conv2D(3, 3, padding="same", activation="relu"),
        Flatten(),
        Dense(5, activation="relu"),
        Dense(3, activation="softmax"),
    ], seed=seed)


def data(n=16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 6, 6, 2)).astype(np.float32), rng.integers(0, 3, n)


def shapes_of(m):
    return [w.shape for w in m.get_weights()]


def grads_of(m):
    """The last step's gradients, one array per weight (Keras layouts)."""
    return ref.split(m.core.gradient_buffer(keras_layout=True), shapes_of(m))


def run_against_reference(opt, reference, steps=5, frozen=(), rtol=2e-5, atol=2e-7):
    """`steps` train_on_batch calls; after each, the weights against the reference applied to the
    model's own gradients (the trainable weights only)."""
    x, y = data()
    m = model()
    for i in frozen:
        m.layers[i].trainable = False
    m.compile(opt, "sparse_categorical_crossentropy")
    mask = [layer.trainable for layer in m.layers for _ in (0, 1) if isinstance(layer, (Conv2D, Dense))]
    params = [w.astype(np.float64) for w in m.get_weights()]
    for step in range(steps):
        m.train_on_batch(x[step % 2::2], y[step % 2::2])
        grads = grads_of(m)
        trainable = [k for k, t in enumerate(mask) if t]
        new = reference.apply([params[k] for k in trainable], [grads[k] for k in trainable])
        for k, p in zip(trainable, new):
            params[k] = p
        for k, (got, want) in enumerate(zip(m.get_weights(), params)):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"step {step + 1}, weight {k}")
    assert m.optimizer.iterations == steps
    return m


# ------------------------------------------------------------------ whole steps against Keras' formulas
CONFIGS = {
    "sgd": (optimizers.SGD, "sgd", dict(learning_rate=0.05)),
    "sgd-momentum": (optimizers.SGD, "sgd", dict(learning_rate=0.05, momentum=0.9)),
    "sgd-nesterov": (optimizers.SGD, "sgd", dict(learning_rate=0.05, momentum=0.8, nesterov=True)),
    "adam": (optimizers.Adam, "adam", dict(learning_rate=0.01)),
    "adam-betas": (optimizers.Adam, "adam", dict(learning_rate=0.01, beta_1=0.5, beta_2=0.9, epsilon=1e-4)),
    "rmsprop": (optimizers.RMSprop, "rmsprop", dict(learning_rate=0.01)),
    "rmsprop-centered": (optimizers.RMSprop, "rmsprop", dict(learning_rate=0.01, centered=True)),
    "rmsprop-momentum": (optimizers.RMSprop, "rmsprop", dict(learning_rate=0.01, momentum=0.7, rho=0.8)),
    "rmsprop-centered-momentum": (optimizers.RMSprop, "rmsprop",
                                  dict(learning_rate=0.01, momentum=0.5, centered=True, epsilon=1e-3)),
}
OPTIONS = {
    "plain": {},
    "weight_decay": dict(weight_decay=0.5),
    "clipnorm": dict(clipnorm=0.05),
    "global_clipnorm": dict(global_clipnorm=0.1),
    "clipvalue": dict(clipvalue=0.01),
    "weight_decay+clipnorm": dict(weight_decay=0.1, clipnorm=0.02),
}


@pytest.mark.parametrize("options", list(OPTIONS), ids=list(OPTIONS))
@pytest.mark.parametrize("name", list(CONFIGS), ids=list(CONFIGS))
def test_steps_follow_keras_formulas(name, options):
    cls, kind, args = CONFIGS[name]
    o = OPTIONS[options]
    run_against_reference(cls(**args, **o), ref.KerasOptimizer(kind, **args, **o))


def test_the_clippings_change_the_steps():
    """The clip values above are small enough to bind (else the tests would not test them)."""
    x, y = data()
    m = model()
    m.compile(optimizers.SGD(0.05), "sparse_categorical_crossentropy")
    m.train_on_batch(x[::2], y[::2])
    grads = grads_of(m)
    assert max(float(np.sqrt((g * g).sum())) for g in grads) > OPTIONS["clipnorm"]["clipnorm"]
    assert float(np.sqrt(sum((g * g).sum() for g in grads))) > OPTIONS["global_clipnorm"]["global_clipnorm"]
    assert max(float(np.abs(g).max()) for g in grads) > OPTIONS["clipvalue"]["clipvalue"]


def test_adamw_is_adam_with_decoupled_weight_decay():
    run_against_reference(optimizers.AdamW(0.01), ref.KerasOptimizer("adam", learning_rate=0.01, weight_decay=0.004))
    run_against_reference(optimizers.AdamW(0.01, weight_decay=0.3, global_clipnorm=0.5),
                          ref.KerasOptimizer("adam", learning_rate=0.01, weight_decay=0.3, global_clipnorm=0.5))
    assert optimizers.AdamW().weight_decay == 0.004  # Keras 3's default


def test_weight_decay_skips_excluded_weights():
    """exclude_from_weight_decay(var_names=['bias']): Keras' regular expression search, here on
    'layer/weight' names."""
    opt = optimizers.AdamW(0.01, weight_decay=0.5)
    opt.exclude_from_weight_decay(var_names=["bias", "dense_1/"])
    exclude = [False, True, False, True, True, True]  # conv2d/kernel, conv2d/bias, dense/..., dense_1/...
    run_against_reference(opt, ref.KerasOptimizer("adam", learning_rate=0.01, weight_decay=0.5, exclude=exclude))


@pytest.mark.parametrize("options", ["weight_decay", "global_clipnorm", "clipnorm"])
def test_frozen_layers_are_neither_stepped_nor_counted_in_norms(options):
    """The global norm covers the trainable gradients only; frozen weights get no decay."""
    o = OPTIONS[options]
    m = run_against_reference(optimizers.SGD(0.05, momentum=0.5, **o),
                              ref.KerasOptimizer("sgd", learning_rate=0.05, momentum=0.5, **o), frozen=(0,))
    state = ref.state_buffers(m.core)[0]
    conv = 3 * 3 * 2 * 3 + 3
    assert not state[:conv].any() and state[conv:].any()


def test_sgd_without_momentum_keeps_no_state_and_rmsprop_only_what_it_uses():
    x, y = data()
    for opt, count in ((optimizers.SGD(0.1), 0), (optimizers.SGD(0.1, momentum=0.9), 1), (optimizers.RMSprop(), 1),
                       (optimizers.RMSprop(momentum=0.5), 2), (optimizers.RMSprop(centered=True), 2),
                       (optimizers.RMSprop(momentum=0.5, centered=True), 3), (optimizers.AdamW(), 2)):
        m = model()
        m.compile(opt, "sparse_categorical_crossentropy")
        m.train_on_batch(x, y)
        state = ref.state_buffers(m.core)
        assert len(state) == count, opt
        assert all(s.shape == (m.count_params(),) for s in state)


def test_learning_rate_set_between_batches_takes_effect_at_the_next_step():
    x, y = data()
    m = model()
    m.compile(optimizers.SGD(0.05), "sparse_categorical_crossentropy")
    m.train_on_batch(x, y)
    before = [w.astype(np.float64) for w in m.get_weights()]
    m.optimizer.learning_rate = 0.2
    assert m.core.learning_rate == pytest.approx(0.2)
    m.train_on_batch(x, y)
    for w0, w1, g in zip(before, m.get_weights(), grads_of(m)):
        np.testing.assert_allclose(w1, w0 - 0.2 * g, rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------ the ops on their own
def variables(rng, sizes):
    return [rng.standard_normal(n).astype(np.float32) for n in sizes]


SIZES = [54, 3, 5000, 1, 4096, 4097, 7]


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("momentum", [0.0, 0.6])
def test_rmsprop_op(centered, momentum):
    rng = np.random.default_rng(1)
    n = sum(SIZES)
    p = rng.standard_normal(n).astype(np.float32)
    vel, mom, avg = (np.zeros(n, np.float32) for _ in range(3))
    reference = ref.KerasOptimizer("rmsprop", learning_rate=0.01, rho=0.8, momentum=momentum, centered=centered,
                                   epsilon=1e-6, weight_decay=0.3, clipvalue=1.5,
                                   exclude=[k % 2 == 1 for k in range(len(SIZES))])
    p64 = ref.split(p, [(s,) for s in SIZES])
    for _ in range(4):
        g = rng.standard_normal(n).astype(np.float32) * 2
        p, vel, mom, avg = ops.rmsprop_step(p, g, vel, mom, avg, lr=0.01, rho=0.8, momentum=momentum, epsilon=1e-6,
                                            centered=centered, sizes=SIZES, decay=[k % 2 == 0 for k in range(len(SIZES))],
                                            weight_decay=0.3, clipvalue=1.5)
        p64 = reference.apply(p64, ref.split(g, [(s,) for s in SIZES]))
    np.testing.assert_allclose(p, np.concatenate(p64), rtol=1e-5, atol=1e-6)
    if momentum == 0:
        assert not mom.any()  # not used, not touched
    if not centered:
        assert not avg.any()


def test_update_ops_touch_only_the_variables_given():
    """Elements beyond the variables (a frozen tail) keep their values and state."""
    rng = np.random.default_rng(2)
    p, g, m, v = (rng.standard_normal(100).astype(np.float32) for _ in range(4))
    v = np.abs(v)
    p2, m2, v2 = ops.adam_step(p, g, m, v, sizes=[30, 40])
    assert (p2[70:] == p[70:]).all() and (m2[70:] == m[70:]).all() and (v2[70:] == v[70:]).all()
    assert (p2[:70] != p[:70]).all()
    p3, vel = ops.sgd_step(p, g, m, lr=0.1, momentum=0.9, sizes=[10, 0, 5])
    assert (p3[15:] == p[15:]).all() and (vel[15:] == m[15:]).all() and (p3[:15] != p[:15]).all()


def test_clip_scales_op():
    rng = np.random.default_rng(3)
    gs = variables(rng, SIZES)
    gs[3][:] = 0  # a zero gradient: factor 1
    flat = np.concatenate(gs)
    norms = np.array([np.sqrt((g.astype(np.float64) ** 2).sum()) for g in gs])
    got = ops.clip_scales(flat, SIZES, clipnorm=10.0)
    np.testing.assert_allclose(got, 10.0 / np.maximum(norms, 10.0), rtol=1e-6)
    assert got[3] == 1.0 and got[1] == 1.0  # below the norm: unchanged
    total = np.sqrt((norms ** 2).sum())
    got = ops.clip_scales(flat, SIZES, clipnorm=5.0, global_norm=True)
    np.testing.assert_allclose(got, np.full(len(SIZES), 5.0 / total), rtol=1e-6)
    assert (ops.clip_scales(flat, SIZES, clipnorm=1e6, global_norm=True) == 1.0).all()
    flat[7] = np.inf  # Keras: an infinite global norm makes the factor NaN (visible, never silently finite)
    assert np.isnan(ops.clip_scales(flat, SIZES, clipnorm=5.0, global_norm=True)).all()


def test_variable_sums_are_fixed_order_sums():
    """The same bits with 1 and 2 threads (and every run), and float64-accurate."""
    rng = np.random.default_rng(4)
    flat = np.concatenate(variables(rng, SIZES)) * 1000
    with _threads(1):
        one = ops.variable_sums(flat, SIZES)
    with _threads(2):
        two = ops.variable_sums(flat, SIZES)
        again = ops.variable_sums(flat, SIZES)
    assert one.tobytes() == two.tobytes() == again.tobytes()
    at = 0
    for k, n in enumerate(SIZES):
        v = flat[at:at + n].astype(np.float64)
        at += n
        np.testing.assert_allclose(one[k], [np.abs(v).sum(), (v * v).sum()], rtol=1e-12)


class _threads:
    def __init__(self, n):
        self.n = n

    def __enter__(self):
        self.before = hpcnn.get_num_threads()
        hpcnn.set_num_threads(self.n)

    def __exit__(self, *exc):
        hpcnn.set_num_threads(self.before)


def test_update_ops_refuse_bad_input():
    p = np.zeros(10, np.float32)
    with pytest.raises(ValueError, match="do not fit in 10 elements"):
        ops.sgd_step(p, p, p, sizes=[8, 4])
    with pytest.raises(ValueError, match=r"rmsprop: momentum has shape \(4,\), expected \(10,\)"):
        ops.rmsprop_step(p, p, p, np.zeros(4, np.float32), p, momentum=0.5)
    with pytest.raises(ValueError, match="clipvalue must be >= 0"):
        ops.adam_step(p, p, p, p, clipvalue=-1.0)
    with pytest.raises(ValueError, match="the clip norm must be positive"):
        ops.clip_scales(p, clipnorm=0.0)


# ------------------------------------------------------------------ compile, config, repr
def test_compile_defaults_to_rmsprop_as_keras():
    x, y = data()
    m = model()
    m.compile(loss="sparse_categorical_crossentropy")
    assert type(m.optimizer) is optimizers.RMSprop and m.optimizer.learning_rate == pytest.approx(0.001)
    m.fit(x, y, epochs=1, verbose=0)
    assert m.optimizer.iterations == 1
    m.compile("rmsprop", "sparse_categorical_crossentropy")
    assert type(m.optimizer) is optimizers.RMSprop
    for name, cls in (("adamw", optimizers.AdamW), ("Adam", optimizers.Adam), ("SGD", optimizers.SGD)):
        assert type(optimizers.get(name)) is cls


def test_keras_defaults():
    r = optimizers.RMSprop()
    assert (r.learning_rate, r.rho, r.momentum, r.epsilon, r.centered) == (0.001, 0.9, 0.0, 1e-7, False)
    w = optimizers.AdamW()
    assert (w.learning_rate, w.weight_decay, w.beta_1, w.beta_2, w.epsilon) == (0.001, 0.004, 0.9, 0.999, 1e-7)
    s = optimizers.SGD()
    assert (s.learning_rate, s.momentum, s.nesterov, s.weight_decay, s.clipnorm) == (0.01, 0.0, False, None, None)
    assert (r.name, w.name, s.name, optimizers.Adam().name) == ("rmsprop", "adamw", "SGD", "adam")


@pytest.mark.parametrize("opt", [
    optimizers.SGD(0.1, momentum=0.9, nesterov=True, weight_decay=1e-4, clipnorm=1.0),
    optimizers.Adam(3e-4, beta_1=0.8, global_clipnorm=2.0),
    optimizers.AdamW(1e-3, weight_decay=0.01, clipvalue=0.5),
    optimizers.RMSprop(0.01, rho=0.95, momentum=0.1, epsilon=1e-6, centered=True, name="rms"),
    optimizers.SGD(schedules.CosineDecay(0.0, 1000, alpha=0.1, warmup_target=0.1, warmup_steps=100), momentum=0.9),
    optimizers.Adam(schedules.PiecewiseConstantDecay([100, 200], [1e-3, 5e-4, 1e-4])),
], ids=["sgd", "adam", "adamw", "rmsprop", "sgd-cosine", "adam-piecewise"])
def test_get_config_round_trips(opt):
    cfg = opt.get_config()
    for key in ("name", "learning_rate", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue"):
        assert key in cfg  # Keras' base keys
    again = type(opt).from_config(cfg)
    assert again.get_config() == cfg
    assert optimizers.deserialize(optimizers.serialize(opt)).get_config() == cfg
    assert type(opt).__name__ in repr(opt)


def test_keras_shaped_configs_load():
    """What keras.optimizers.serialize writes (module/registered_name keys, Keras' EMA arguments at
    their defaults) is read."""
    cfg = {"module": "keras.optimizers", "class_name": "SGD", "registered_name": None, "config": {
        "name": "SGD", "learning_rate": {"module": "keras.optimizers.schedules", "class_name": "ExponentialDecay",
                                         "config": {"initial_learning_rate": 0.1, "decay_steps": 100,
                                                    "decay_rate": 0.96, "staircase": True,
                                                    "name": "ExponentialDecay"}, "registered_name": None},
        "weight_decay": None, "clipnorm": None, "global_clipnorm": None, "clipvalue": None, "use_ema": False,
        "ema_momentum": 0.99, "ema_overwrite_frequency": None, "loss_scale_factor": None,
        "gradient_accumulation_steps": None, "momentum": 0.9, "nesterov": False}}
    opt = optimizers.get(cfg)
    assert isinstance(opt, optimizers.SGD) and opt.momentum == 0.9
    assert opt.learning_rate == pytest.approx(0.1)
    assert opt.schedule(250) == pytest.approx(0.1 * 0.96 ** 2)


def test_an_optimizer_follows_the_model_it_was_compiled_with():
    x, y = data()
    opt = optimizers.SGD(0.05)
    first, second = model(), model()
    first.compile(opt, "sparse_categorical_crossentropy")
    first.train_on_batch(x, y)
    assert opt.iterations == 1
    second.compile(opt, "sparse_categorical_crossentropy")  # Keras would refuse; hpcnn starts afresh
    assert opt.iterations == 0
    opt.learning_rate = 0.5
    first.fit(x, y, epochs=1, batch_size=16, verbose=0)  # the first model gets the rate at its next epoch
    assert first.core.learning_rate == pytest.approx(0.5)


# ------------------------------------------------------------------ model files
def adamw_without_bias_decay():
    opt = optimizers.AdamW(0.01, weight_decay=0.2)
    opt.exclude_from_weight_decay(var_names=["bias"])
    return opt


@pytest.mark.parametrize("make", [
    lambda: optimizers.SGD(0.05, momentum=0.9, nesterov=True, clipvalue=0.1),
    lambda: optimizers.Adam(0.01, global_clipnorm=1.0),
    adamw_without_bias_decay,
    lambda: optimizers.RMSprop(0.01, momentum=0.5, centered=True, clipnorm=0.5, weight_decay=0.01),
    lambda: optimizers.SGD(schedules.CosineDecay(0.0, 100, warmup_target=0.1, warmup_steps=10)),
    lambda: optimizers.Adam(schedules.PiecewiseConstantDecay([5, 10], [1e-2, 1e-3, 1e-4])),
], ids=["sgd", "adam", "adamw-excluding-biases", "rmsprop", "sgd-cosine-warmup", "adam-piecewise"])
def test_save_and_load_keep_the_optimizer(tmp_path, make):
    x, y = data()
    m = model()
    opt = make()
    m.compile(opt, "sparse_categorical_crossentropy")
    m.train_on_batch(x, y)
    path = str(tmp_path / "m.h5")
    m.save(path)
    loaded = hpcnn.models.load_model(path)
    assert type(loaded.optimizer) is type(opt)
    assert loaded.optimizer.get_config() == opt.get_config()
    assert loaded.optimizer.excluded_weight_names == opt.excluded_weight_names
    # The file carries the optimizer state (include_optimizer=True, Keras' default): training goes on
    # from the saved step count (a schedule's rate with it), and its state buffers come back too.
    assert loaded.optimizer.iterations == 1
    for a, b in zip(loaded.core.optimizer_state().values(), m.core.optimizer_state().values()):
        np.testing.assert_array_equal(a, b)
    loaded.fit(x, y, epochs=1, verbose=0)
    assert loaded.optimizer.iterations == 2
    m.save(path, include_optimizer=False)
    assert hpcnn.models.load_model(path).optimizer.iterations == 0


def test_a_loaded_model_steps_as_the_saved_one(tmp_path):
    """SGD without momentum has no state: the saved and the loaded model take the very same step,
    with weight decay (biases excluded) and clipping as compiled."""
    x, y = data()
    m = model()
    opt = optimizers.SGD(0.05, weight_decay=0.3, clipnorm=0.05)
    opt.exclude_from_weight_decay(var_names=["bias"])
    m.compile(opt, "sparse_categorical_crossentropy")
    path = str(tmp_path / "m.h5")
    m.save(path)
    loaded = hpcnn.models.load_model(path)
    m.train_on_batch(x, y)
    loaded.train_on_batch(x, y)
    for a, b in zip(m.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
