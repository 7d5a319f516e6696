"""The augmentation on the GPU against the CPU (issues 13, 23): the CUDA kernel computes every output
element with the CPU's functions (csrc/ops/augment_body.h; a rotation's sine and cosine too, written
out in double precision rather than the libraries' sinf/cosf), so the op is compared bit for bit; a
model with augmentation layers at its start (run by the batch stager after the upload on a GPU,
fused into the gather on the CPU) and one with an augmentation op after a Rescaling train to the
same weights on both devices (within the GPU's float tolerance for the convolution), from float32
and from uint8 input (decoded on the device).

Without a usable GPU the module is skipped with the reason (`pytest -rs`); HPCNN_TEST_GPU=cpu runs
it with the CPU standing in (tests/support/gpu_target.py), to check the tests' own logic."""
import io
import contextlib

import numpy as np
import pytest

import hpcnn
from tests.support.gpu_target import GPU, MARKS
from hpcnn import _core, optimizers
from hpcnn.layers import (Conv2D, Dense, Flatten, InputLayer, RandomCrop, RandomFlip, RandomRotation, RandomTranslation,
                          RandomZoom, Rescaling, ZeroPadding2D)

ops = _core.ops
pytestmark = MARKS

CONFIGS = ([dict(class_name="RandomFlip", mode=m) for m in ("horizontal", "vertical", "horizontal_and_vertical")]
           + [dict(class_name="RandomTranslation", height_lo=-0.7, height_hi=0.4, width_lo=-0.2, width_hi=0.9,
                   fill_mode=f, fill_value=-0.5, interpolation=i)
              for f in ("constant", "reflect", "wrap", "nearest") for i in ("nearest", "bilinear")]
           + [dict(class_name="RandomCrop", height=6, width=5)]
           + [dict(class_name="RandomRotation", factor_lo=-0.8, factor_hi=0.6, fill_mode=f, fill_value=-0.5,
                   interpolation=i) for f in ("constant", "reflect", "wrap", "nearest") for i in ("nearest", "bilinear")]
           + [dict(class_name="RandomZoom", height_lo=-0.6, height_hi=0.5, width_lo=-0.2, width_hi=0.9, fill_mode=f,
                   fill_value=-0.5, interpolation=i)
              for f in ("constant", "reflect", "wrap", "nearest") for i in ("nearest", "bilinear")]
           + [dict(class_name="RandomZoom", height_lo=-0.3, height_hi=0.3, fill_mode="reflect", fill_value=0.0,
                   interpolation="bilinear")])


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
@pytest.mark.parametrize("training", [True, False])
def test_op_equals_the_cpu_bit_for_bit(cfg, training):
    x = np.random.default_rng(0).standard_normal((9, 7, 8, 3)).astype(np.float32)
    kw = dict(training=training, seed=2**37 + 3, stream=5 * 1024 + 1, first_row=300)
    pad = [1, 2, 0, 3] if cfg["class_name"] == "RandomCrop" else []
    np.testing.assert_array_equal(ops.augment(x, cfg, padding=pad, device=GPU, **kw),
                                  ops.augment(x, cfg, padding=pad, device="cpu", **kw))


def model(front):
    return hpcnn.Sequential([InputLayer(input_shape=(10, 10, 3)), *front, Conv2D(4, 3, activation="relu"),
                             Flatten(), Dense(3, activation="softmax")], seed=7)


@pytest.mark.parametrize("front", [
    lambda: [RandomFlip("horizontal"), ZeroPadding2D(2), RandomCrop(10, 10)],
    lambda: [RandomTranslation(0.2, 0.3, fill_mode="reflect"), RandomFlip()],
    lambda: [Rescaling(1 / 255), RandomFlip("vertical"), RandomTranslation(0.1, 0.1, interpolation="nearest")],
    lambda: [RandomRotation(0.2), RandomZoom(0.2, seed=4)],
    lambda: [Rescaling(1 / 255), RandomZoom((-0.3, 0.1), 0.2, fill_mode="constant"), RandomRotation(0.1, seed=8)],
], ids=["flip+padded-crop", "translation+flip", "after-rescaling", "rotation+zoom", "zoom+rotation-after-rescaling"])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_a_model_with_augmentation_trains_the_same_on_the_gpu(front, dtype):
    r = np.random.default_rng(1)
    x = r.integers(0, 256, (40, 10, 10, 3)).astype(dtype)
    y = r.integers(0, 3, 40)
    weights = {}
    for dev in ("cpu", GPU):
        m = model(front())
        m.compile(optimizers.SGD(0.01), "sparse_categorical_crossentropy", device=dev)
        with contextlib.redirect_stdout(io.StringIO()):
            m.fit(x, y, batch_size=8, epochs=2, verbose=0)
        weights[dev] = m.get_weights()
        weights[dev + " predict"] = m.predict(x, verbose=0)
    for a, b in zip(weights[GPU], weights["cpu"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(weights[GPU + " predict"], weights["cpu predict"], rtol=1e-4, atol=1e-5)
