"""Both reference models trained on the GPU against the CPU backend, through the public API.

  - one training step (SGD, so the update is linear in the gradient and a tolerance on it means
    something; Adam's first step is ~lr * sign(g) and would amplify rounding differences):
    weight updates agree to rtol 2e-3 / atol 2e-3 x the largest update, TF32 off;
  - a 2-epoch training curve (Adam) on learnable synthetic data: per-epoch loss within 5 %
    (relative) and accuracy within 0.05 between the devices, and both devices learn.
Dropout masks are equal on both devices (counter-based RNG), so DeepMNIST is compared as is.
Without a usable GPU the module is skipped with the reason (`pytest -rs` shows it).
"""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core

_REASON = _core.cuda_unavailable_reason()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(bool(_REASON), reason=f"no usable GPU: {_REASON}"),
    pytest.mark.usefixtures("tf32_off"),  # tests/conftest.py
]

SHAPES = {"tutorial_cnn": (32, 32, 3), "deep_mnist": (28, 28, 1)}




def _api():
    missing = [n for n in ("models", "optimizers") if not hasattr(hpcnn, n)]
    if missing:
        pytest.skip(f"the model API is not in this build yet (hpcnn.{', hpcnn.'.join(missing)} missing)")
    return hpcnn


def _seed(s):
    for owner in (hpcnn, getattr(hpcnn, "utils", None)):
        f = getattr(owner, "set_random_seed", None) if owner is not None else None
        if f:
            f(s)
            return


def synthetic(name, n, seed=0):
    """Images whose class k shows as a brighter horizontal band k: learnable in a few epochs."""
    h, w, c = SHAPES[name]
    r = np.random.default_rng(seed)
    labels = r.integers(0, 10, n)
    x = (r.random((n, h, w, c)) * 0.3).astype(np.float32)
    band = h // 10
    for i, k in enumerate(labels):
        x[i, k * band:(k + 1) * band] += 0.7
    y = np.eye(10, dtype=np.float32)[labels]
    return x, y


def build(name, device, optimizer):
    api = _api()
    _seed(1234)
    try:  # the model's seed also drives its dropout masks: the same on both devices
        model = getattr(api.models, name)(seed=1234)
    except TypeError:
        model = getattr(api.models, name)()
    model.compile(optimizer=optimizer, loss="categorical_crossentropy", metrics=["accuracy"], device=device)
    return model


@pytest.mark.parametrize("name", ["tutorial_cnn", "deep_mnist"])
def test_one_training_step_matches_cpu(name):
    api = _api()
    x, y = synthetic(name, 64)
    cpu = build(name, "cpu", api.optimizers.SGD(learning_rate=0.05))
    gpu = build(name, "gpu", api.optimizers.SGD(learning_rate=0.05))
    w0 = cpu.get_weights()
    gpu.set_weights(w0)
    cpu.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0)
    gpu.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0)
    for i, (a, c, w) in enumerate(zip(gpu.get_weights(), cpu.get_weights(), w0)):
        d_gpu, d_cpu = np.asarray(a) - w, np.asarray(c) - w
        scale = max(float(np.max(np.abs(d_cpu))), 1e-8)
        np.testing.assert_allclose(d_gpu, d_cpu, rtol=2e-3, atol=2e-3 * scale,
                                   err_msg=f"{name}: update of weight array {i}")


@pytest.mark.parametrize("name", ["tutorial_cnn", "deep_mnist"])
def test_two_epoch_curve_matches_cpu(name):
    api = _api()
    x, y = synthetic(name, 1024, seed=1)
    cpu = build(name, "cpu", api.optimizers.Adam(learning_rate=1e-3))
    gpu = build(name, "gpu", api.optimizers.Adam(learning_rate=1e-3))
    gpu.set_weights(cpu.get_weights())
    h_cpu = cpu.fit(x, y, batch_size=64, epochs=2, shuffle=False, verbose=0).history
    h_gpu = gpu.fit(x, y, batch_size=64, epochs=2, shuffle=False, verbose=0).history
    assert len(h_gpu["loss"]) == len(h_cpu["loss"]) == 2
    np.testing.assert_allclose(h_gpu["loss"], h_cpu["loss"], rtol=5e-2, err_msg=f"{name}: loss per epoch")
    np.testing.assert_allclose(h_gpu["accuracy"], h_cpu["accuracy"], atol=0.05, err_msg=f"{name}: accuracy")
    assert h_gpu["loss"][1] < h_gpu["loss"][0], f"{name} does not learn on the GPU: {h_gpu['loss']}"
    # evaluate and predict on the GPU agree with the CPU too
    l_c, a_c = cpu.evaluate(x[:256], y[:256], verbose=0)
    l_g, a_g = gpu.evaluate(x[:256], y[:256], verbose=0)
    assert l_g == pytest.approx(l_c, rel=5e-2)
    p_c = cpu.predict(x[:32], verbose=0)
    p_g = gpu.predict(x[:32], verbose=0)
    np.testing.assert_allclose(p_g, p_c, atol=0.05)


@pytest.mark.parametrize("loss,activation,units", [("mse", "linear", 3), ("binary_crossentropy", "sigmoid", 2),
                                                   ("categorical_crossentropy", "softmax", 4)])
def test_keras_losses_metrics_and_weights_match_the_cpu(loss, activation, units):
    """Issue 14: a loss, several metrics and sample weights give the CPU's numbers on the GPU."""
    from hpcnn.layers import Dense, InputLayer
    rng = np.random.default_rng(30)
    x = rng.standard_normal((40, 6)).astype(np.float32)
    y = (np.eye(units, dtype=np.float32)[rng.integers(0, units, 40)] if loss == "categorical_crossentropy"
         else rng.integers(0, 2, (40, units)).astype(np.float32))
    w = rng.uniform(0, 2, 40)
    res = []
    for device in ("cpu", "gpu:0"):
        m = hpcnn.Sequential([InputLayer(input_shape=(6,)), Dense(units, activation=activation)], seed=4)
        m.compile("sgd", loss, ["accuracy", "mae"], device=device)
        h = m.fit(x, y, sample_weight=w, batch_size=8, epochs=2, validation_data=(x, y, w), verbose=0)
        res.append(h.history)
    for k in ("loss", "accuracy", "mae", "val_loss", "val_accuracy", "val_mae"):
        np.testing.assert_allclose(res[1][k], res[0][k], rtol=1e-4, err_msg=k)
