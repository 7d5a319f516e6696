"""A training step folds the BatchNormalizations of the model's frozen part into their
convolutions, as predict does (nn/step_plan.h, frozen_folds): the transfer-learning guide's first
phase (base.trainable = False, base(x, training=False), a new head) runs its base as an inference
forward pass, one pass over each activation less (and a ReLU6 after a folded normalization capped
into the convolution). What is checked:
- the head trains to the same weights and losses as with the base's layers apart (an
  Activation('linear') between each convolution and its normalization keeps the plan from
  folding), to float32 rounding, on the CPU and (the gpu kind) on a GPU;
- only frozen pairs fold: a trainable base folds nothing in training, nor does a block tail's
  normalization; the memory report counts the folds."""
import numpy as np
import pytest

import hpcnn
from tests.support.gpu_target import GPU, KINDS
from hpcnn import optimizers
from hpcnn.layers import (Activation, Add, BatchNormalization, Conv2D, Dense, DepthwiseConv2D,
                          GlobalAveragePooling2D, Input, ReLU)


def base_net(apart: bool, seed: int = 4) -> hpcnn.Model:
    """MobileNetV2's expand/depthwise pattern and a residual block (whose last normalization is a
    block tail in training: never folded)."""
    def sep(t):
        return Activation("linear")(t) if apart else t

    inp = Input((10, 10, 3))
    x = ReLU(6.0)(BatchNormalization()(sep(Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inp))))
    x = ReLU(6.0)(BatchNormalization()(sep(DepthwiseConv2D(3, padding="same", use_bias=False)(x))))
    y = ReLU()(BatchNormalization()(sep(Conv2D(16, 3, padding="same", use_bias=False)(x))))
    y = BatchNormalization()(Conv2D(16, 1, use_bias=False)(y))
    return hpcnn.Model(inp, ReLU()(Add()([x, y])), seed=seed, name="base")


def transfer(apart: bool, freeze: bool = True) -> hpcnn.Model:
    base = base_net(apart)
    base.trainable = not freeze
    inp = Input((10, 10, 3))
    out = Dense(3)(GlobalAveragePooling2D()(base(inp, training=False)))
    return hpcnn.Model(inp, out, seed=1)


def data(n=12, seed=3):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n, 10, 10, 3)) * 3.0).astype(np.float32), (np.arange(n) % 3).astype(np.int32)


def compiled(m, kind):
    if kind != "cpu":
        m.to(GPU)
    m.compile(optimizers.SGD(0.05, momentum=0.9),
              hpcnn.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


@pytest.mark.parametrize("kind", KINDS)
def test_frozen_base_trains_the_head_as_with_the_layers_apart(kind):
    folded, apart = transfer(False), transfer(True)
    apart.set_weights(folded.get_weights())
    # moving statistics away from 0 and 1 first (the base trained briefly, then frozen)
    for m in (folded, apart):
        m.layers[1].set_weights([w * 1.5 + 0.1 if w.ndim == 1 else w for w in m.layers[1].get_weights()])
    compiled(folded, kind), compiled(apart, kind)
    x, y = data()
    h_f = folded.fit(x, y, batch_size=6, epochs=3, verbose=0, shuffle=False).history["loss"]
    h_a = apart.fit(x, y, batch_size=6, epochs=3, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(h_f, h_a, rtol=1e-5)
    for a, b in zip(folded.get_weights(), apart.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_only_the_frozen_part_folds_in_training():
    folded = compiled(transfer(False), "cpu")
    report = folded.core.memory_report(8)
    # the stem's and the depthwise normalizations and the block's first; the block's last is its tail
    assert report["train_residual_blocks"] == 1
    assert report["train_folded"] == 3
    assert report["predict_folded"] == 4
    assert compiled(transfer(True), "cpu").core.memory_report(8)["train_folded"] == 0
    assert compiled(transfer(False, freeze=False), "cpu").core.memory_report(8)["train_folded"] == 0
