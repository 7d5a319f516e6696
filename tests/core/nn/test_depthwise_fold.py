"""A BatchNormalization folded into the DepthwiseConv2D before it for inference (issue 38;
nn/step_plan.h `folds`, DepthwiseConv2DLayer::forward_folded: ops::conv_bn_fold on the kernel
viewed as HWIO (kh, kw, 1, c*m)): MobileNetV2's depthwise convolution and its normalization run as
one pass over the expanded activations in evaluate and predict. What is checked:
- the folded model predicts and evaluates what the same layers compute apart (an
  Activation('linear') between the convolution and the normalization keeps the plan from folding),
  to float32 rounding, after training has moved the moving statistics and the weights, with a
  bias and without, depth_multiplier 1 and 2, stride 1 and 2, at batch 10 and batch 1, on the CPU
  and (the gpu kind) on a GPU;
- a normalization with a fused ReLU (which the depthwise op cannot compute) is not folded, and
  gives the same answers;
- a ReLU6 that alone reads a folded normalization is computed by the convolution too, capped at 6
  in its output stage (`capped`; Conv2D through the GEMM and the direct kernels, DepthwiseConv2D
  row by row): the same answers on inputs large enough that the cap is reached (checked);
- the memory report counts the folds and the caps."""
import numpy as np
import pytest

import hpcnn
from tests.support.gpu_target import GPU, KINDS
from hpcnn import optimizers
from hpcnn.layers import (Activation, Add, BatchNormalization, Conv2D, Dense, DepthwiseConv2D,
                          GlobalAveragePooling2D, Input, ReLU)


def mobile_net(apart: bool, seed: int = 3) -> hpcnn.Model:
    """Inverted residual blocks as MobileNetV2's (expand, depthwise, project), and a depthwise
    convolution whose normalization has a plain ReLU (fused into the normalization: no fold)."""
    def sep(t):  # an identity between a depthwise convolution and its normalization when `apart`
        return Activation("linear")(t) if apart else t

    inp = Input((9, 9, 8))
    x = ReLU(6.0)(BatchNormalization()(sep(Conv2D(16, 1, use_bias=False)(inp))))
    y = ReLU(6.0)(BatchNormalization()(sep(DepthwiseConv2D(3, padding="same", use_bias=False)(x))))
    y = BatchNormalization()(Conv2D(16, 1, use_bias=False)(y))
    x = Add()([x, y])
    # with a bias, depth_multiplier 2, stride 2
    y = ReLU(6.0)(BatchNormalization()(sep(DepthwiseConv2D(3, strides=2, depth_multiplier=2, padding="same")(x))))
    # a plain ReLU after the normalization: fused into it, so not folded into the convolution
    y = ReLU()(BatchNormalization()(sep(DepthwiseConv2D(3, padding="valid")(y))))
    return hpcnn.Model(inp, Dense(4, activation="softmax")(GlobalAveragePooling2D()(y)), seed=seed)


def data(n=10, seed=7):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n, 9, 9, 8)) * 2.0 + 0.5).astype(np.float32), (np.arange(n) % 4).astype(np.int32)


@pytest.mark.parametrize("kind", KINDS)
def test_folded_inference_matches_the_layers_apart(kind):
    folded, apart = mobile_net(False), mobile_net(True)
    apart.set_weights(folded.get_weights())
    for m in (folded, apart):
        if kind != "cpu":
            m.to(GPU)
        m.compile(optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy")
    x, y = data()
    for _ in range(3):  # moving statistics and weights away from their initial values
        folded.fit(x, y, batch_size=10, epochs=1, verbose=0)
        apart.fit(x, y, batch_size=10, epochs=1, verbose=0)
    for a, b in zip(folded.get_weights(), apart.get_weights()):
        np.testing.assert_array_equal(a, b)  # training never folds: the same steps
    want = apart.predict(x, verbose=0)
    np.testing.assert_allclose(folded.predict(x, verbose=0), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(folded.predict(x[3:4], verbose=0), want[3:4], rtol=1e-5, atol=1e-6)  # batch 1
    assert folded.evaluate(x, y, verbose=0) == pytest.approx(apart.evaluate(x, y, verbose=0), rel=1e-5)
    # inputs 8x larger: the ReLU6s cap (the first expansion's outputs reach 6: checked on the
    # model's own layers), and the capped convolutions still give what the layers apart give
    big = x * 8.0
    expand = hpcnn.Model(apart.inputs, apart.layers[4].output)  # ReLU6 of the first expansion
    assert expand.predict(big, verbose=0).max() == 6.0
    np.testing.assert_allclose(folded.predict(big, verbose=0), apart.predict(big, verbose=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(folded.predict(big[:1], verbose=0), apart.predict(big[:1], verbose=0), rtol=1e-5,
                               atol=1e-6)


def test_the_plan_folds_each_depthwise_normalization_without_a_relu():
    folded, apart = mobile_net(False), mobile_net(True)
    report_f, report_a = folded.core.memory_report(32), apart.core.memory_report(32)
    # the projection's normalization in both; the expansion's and 2 depthwise ones only without the
    # linear Activations (the third depthwise one has a fused ReLU)
    assert report_a["predict_folded"] == 1
    assert report_f["predict_folded"] == 4
    # the ReLU6s after the expansion's and the first two depthwise normalizations
    assert (report_a["predict_capped"], report_f["predict_capped"]) == (0, 3)
    assert report_f["predict"] <= report_a["predict"]


def stem_net(apart: bool, seed: int = 5) -> hpcnn.Model:
    """Conv2D + BatchNormalization + ReLU6 on each CPU convolution path: the direct kernel (3 input
    channels, stride 2), Winograd (3x3 stride 1, 16 channels), im2col's GEMM (5x5) and, at batch 1,
    the few-row product (36 output pixels)."""
    def block(t, filters, k, strides=1):
        t = Conv2D(filters, k, strides=strides, padding="same", use_bias=False)(t)
        return ReLU(6.0)(BatchNormalization()(Activation("linear")(t) if apart else t))

    inp = Input((12, 12, 3))
    x = block(block(block(inp, 16, 3, 2), 16, 3), 8, 5)
    return hpcnn.Model(inp, Dense(3)(GlobalAveragePooling2D()(x)), seed=seed)


@pytest.mark.parametrize("kind", KINDS)
def test_capped_relu6_on_every_convolution_path(kind):
    capped, apart = stem_net(False), stem_net(True)
    apart.set_weights(capped.get_weights())
    assert (capped.core.memory_report(4)["predict_capped"], apart.core.memory_report(4)["predict_capped"]) == (3, 0)
    if kind != "cpu":
        capped.to(GPU)
        apart.to(GPU)
    r = np.random.default_rng(9)
    x = (r.standard_normal((6, 12, 12, 3)) * 20.0).astype(np.float32)  # large enough for the caps
    first = hpcnn.Model(apart.inputs, apart.layers[4].output)  # the stem's ReLU6
    assert first.predict(x, verbose=0).max() == 6.0
    for batch in (x, x[:1]):
        np.testing.assert_allclose(capped.predict(batch, verbose=0), apart.predict(batch, verbose=0), rtol=1e-5,
                                   atol=1e-5)
