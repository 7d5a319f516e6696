"""A full training step of both reference models against a float64 NumPy reference:
loss, every gradient, and the weights after one Adam step."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core

from tests.support import reference as ref


def _masks(model, spec, batch, shapes_after):
    """The dropout masks the core uses at step 1: a pure function of (seed, stream) with
    stream = step * 1024 + core layer index (see csrc/nn/layer.h)."""
    masks = {}
    for layer in spec:
        if layer[0] == "dropout":
            key = layer[1]
            shape = (batch,) + tuple(shapes_after[key])
            rate = 0.2 if model.name == "tutorial_cnn" else 0.5
            masks[key] = _core.ops.dropout_forward(np.ones(shape, np.float32), rate, model.seed,
                                                   1 * 1024 + key).astype(np.float64)
    return masks


@pytest.mark.parametrize("build,spec,in_shape", [
    (hpcnn.models.tutorial_cnn, ref.TUTORIAL_SPEC, (32, 32, 3)),
    (hpcnn.models.deep_mnist, ref.DEEP_MNIST_SPEC, (28, 28, 1)),
])
def test_one_adam_step_matches_numpy(build, spec, in_shape):
    rng = np.random.default_rng(0)
    batch = 3
    model = build(seed=1234)
    model.compile(optimizer=hpcnn.optimizers.Adam(learning_rate=1e-3), loss="categorical_crossentropy",
                  metrics=["accuracy"])
    x = rng.random((batch,) + in_shape, dtype=np.float32)
    labels = rng.integers(0, 10, batch)
    y = hpcnn.utils.to_categorical(labels, 10)
    w0 = [w.astype(np.float64) for w in model.get_weights()]
    masks = _masks(model, spec, batch, model.core.output_shapes)

    loss_ref, grads_ref = ref.train_step(spec, w0, x.astype(np.float64), y.astype(np.float64), masks)
    loss, acc = model.train_on_batch(x, y)

    assert loss == pytest.approx(loss_ref, rel=1e-4)
    flat = model.core.gradient_buffer(keras_layout=True)  # Keras shapes, whatever the device
    off = 0
    for g_ref in grads_ref:
        g = flat[off:off + g_ref.size].reshape(g_ref.shape)
        off += g_ref.size
        scale = max(np.abs(g_ref).max(), 1e-12)
        np.testing.assert_allclose(g, g_ref, rtol=1e-3, atol=1e-4 * scale)
    assert off == flat.size

    for w_new, w_old, g_ref in zip(model.get_weights(), w0, grads_ref):
        np.testing.assert_allclose(w_new, ref.adam_first_step(w_old, g_ref), rtol=0, atol=2e-5)


def test_sparse_and_categorical_losses_agree():
    rng = np.random.default_rng(1)
    x = rng.random((8, 28, 28, 1), dtype=np.float32)
    labels = rng.integers(0, 10, (8, 1))
    a = hpcnn.models.deep_mnist(seed=7)
    b = hpcnn.models.deep_mnist(seed=7)
    a.compile("adam", "categorical_crossentropy", ["accuracy"])
    b.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    la = a.train_on_batch(x, hpcnn.utils.to_categorical(labels, 10))
    lb = b.train_on_batch(x, labels)
    assert la == pytest.approx(lb, rel=1e-6)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
