"""hpcnn.applications.resnet_cifar and the depth family (He et al. 2016, CIFAR variant): structure
and parameter counts as the paper, arguments, a training step that learns, save/load, summary."""
import numpy as np
import pytest

import hpcnn
from hpcnn import applications, regularizers
from hpcnn.applications import resnet20_cifar, resnet32_cifar, resnet56_cifar, resnet_cifar
from hpcnn.layers import (Add, BatchNormalization, Concatenate, Conv2D, Dense, GlobalAveragePooling2D,
                          GlobalMaxPooling2D, MaxPooling2D, ReLU, Rescaling, ZeroPadding2D)


def trainable_count(model):
    """The trainable weights' size (BN's moving statistics are not trainable), from get_weights."""
    return sum(w.size for name, w in zip(model.weight_names(), model.get_weights())
               if not name.endswith(("/moving_mean", "/moving_variance")))


def bn_channels(model):
    return sum(layer.count_params((layer.inbound_tensors[0].sample_shape)) // 4 for layer in model.layers
               if isinstance(layer, BatchNormalization))


@pytest.mark.parametrize("build, depth, trainable, paper", [
    (resnet20_cifar, 20, 269_722, 0.27), (resnet32_cifar, 32, 464_154, 0.46), (resnet56_cifar, 56, 853_018, 0.85)])
def test_parameter_counts_are_the_papers(build, depth, trainable, paper):
    """Table 6 of the paper: 0.27 M / 0.46 M / 0.85 M for option A (no weights in the shortcuts)."""
    m = build()
    assert m.name == f"resnet{depth}_cifar"
    assert trainable_count(m) == trainable and round(trainable / 1e6, 2) == paper
    # count_params adds BN's moving mean and variance (non-trainable, as in Keras)
    assert m.count_params() == trainable + 2 * bn_channels(m)
    convs = [layer for layer in m.layers if isinstance(layer, Conv2D)]
    assert len(convs) == depth - 1 and all(not c.use_bias for c in convs)           # + the Dense = depth
    assert sum(isinstance(layer, Add) for layer in m.layers) == (depth - 2) // 2    # one per basic block
    assert m.output_shape == (None, 10)


def test_option_b_projection_shortcuts():
    m = resnet20_cifar(shortcut="B")
    assert trainable_count(m) == 272_474
    proj = [layer for layer in m.layers if isinstance(layer, Conv2D) and layer.kernel_size == (1, 1)]
    assert [(p.filters, p.strides) for p in proj] == [(32, (2, 2)), (64, (2, 2))]
    assert not any(isinstance(layer, (Concatenate, Rescaling)) for layer in m.layers)


def test_shape_flow_through_the_stages():
    m = resnet20_cifar()
    shapes = {layer.name: layer.output.shape for layer in m.layers}
    assert shapes["stem_conv"] == (None, 32, 32, 16)
    assert shapes["stage1_block3_out"] == (None, 32, 32, 16)
    assert shapes["stage2_block1_conv1"] == (None, 16, 16, 32)
    assert shapes["stage2_block1_pad_channels"] == (None, 16, 16, 32)
    assert shapes["stage3_block3_out"] == (None, 8, 8, 64)
    assert shapes["avg_pool"] == (None, 64)


def test_option_a_shortcut_is_subsampling_with_zero_channels():
    """The weightless shortcut computes exactly x[:, ::2, ::2, :] followed by zeros."""
    x_in = hpcnn.Input(shape=(6, 6, 3))
    m = hpcnn.Model(x_in, applications._zero_padding_shortcut(x_in, 2, "s"))
    x = np.random.default_rng(0).standard_normal((4, 6, 6, 3)).astype(np.float32)
    y = m.predict(x, verbose=0)
    np.testing.assert_array_equal(y[..., :3], x[:, ::2, ::2, :])
    np.testing.assert_array_equal(y[..., 3:], 0)


def test_depth_must_be_6n_plus_2():
    with pytest.raises(ValueError, match=r"Expected 6n \+ 2.*Received: depth=21"):
        resnet_cifar(21)
    with pytest.raises(ValueError, match=r"Invalid value for argument `depth`.*Received: depth=2"):
        resnet_cifar(2)
    with pytest.raises(ValueError, match=r"`depth`.*Received: depth=20.0"):
        resnet_cifar(20.0)
    assert sum(isinstance(layer, Add) for layer in resnet_cifar(8).layers) == 3  # n = 1


def test_arguments_input_shape_classes_top_and_pooling():
    m = resnet_cifar(8, input_shape=(28, 28, 1), classes=7, classifier_activation=None, seed=1)
    assert m.input_shape == (None, 28, 28, 1) and m.output_shape == (None, 7)
    assert m.layers[-1].activation in ("linear", None)
    feats = resnet_cifar(8, include_top=False)
    assert feats.output_shape == (None, 8, 8, 64) and not any(isinstance(la, Dense) for la in feats.layers)
    assert isinstance(resnet_cifar(8, include_top=False, pooling="avg").layers[-1], GlobalAveragePooling2D)
    assert isinstance(resnet_cifar(8, include_top=False, pooling="max").layers[-1], GlobalMaxPooling2D)
    for bad, pattern in ((dict(input_shape=(32, 32)), r"Expected \(height, width, channels\)"),
                         (dict(classes=0), r"`classes`.*Received: classes=0"),
                         (dict(pooling="min"), r"`pooling`.*Received: pooling='min'"),
                         (dict(shortcut="C"), r"`shortcut`.*Received: shortcut='C'"),
                         (dict(weight_decay=-1.0), r"`weight_decay`.*Received: weight_decay=-1.0"),
                         (dict(include_top="yes"), r"`include_top`")):
        with pytest.raises(ValueError, match=pattern):
            resnet_cifar(8, **bad)
    with pytest.raises(TypeError):
        resnet20_cifar(dropout=0.2)


def test_weight_decay_and_kernel_regularizer():
    """weight_decay w gives every kernel L2(w / 2): the gradient w * kernel (the paper's decay)."""
    kernels = lambda m: [la for la in m.layers if isinstance(la, (Conv2D, Dense))]  # noqa: E731
    m = resnet_cifar(8)
    assert all(isinstance(la.kernel_regularizer, regularizers.L2) and la.kernel_regularizer.l2 == pytest.approx(5e-5)
               for la in kernels(m))
    m = resnet_cifar(8, weight_decay=5e-4)
    assert all(la.kernel_regularizer.l2 == pytest.approx(2.5e-4) for la in kernels(m))
    assert all(la.kernel_regularizer is None for la in kernels(resnet_cifar(8, weight_decay=None)))
    assert all(la.kernel_regularizer is None for la in kernels(resnet_cifar(8, weight_decay=0.0)))
    m = resnet_cifar(8, kernel_regularizer=regularizers.l1(1e-5))
    assert all(isinstance(la.kernel_regularizer, regularizers.L1) for la in kernels(m))
    with pytest.raises(ValueError, match="weight_decay or kernel_regularizer, not both"):
        resnet_cifar(8, weight_decay=1e-3, kernel_regularizer="l2")


def test_seed_fixes_the_weights():
    a, b, c = resnet_cifar(8, seed=3), resnet_cifar(8, seed=3), resnet_cifar(8, seed=4)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    assert any(not np.array_equal(wa, wc) for wa, wc in zip(a.get_weights(), c.get_weights()))


def test_input_tensor_puts_preprocessing_into_the_model():
    inp = hpcnn.Input(shape=(24, 24, 3))
    x = Rescaling(1 / 255)(ZeroPadding2D(4)(inp))
    m = resnet_cifar(8, input_tensor=x, seed=0)
    assert m.input_shape == (None, 24, 24, 3)
    assert [type(la) for la in m.layers[1:3]] == [ZeroPadding2D, Rescaling]
    with pytest.raises(ValueError, match="input_shape or input_tensor, not both"):
        resnet_cifar(8, input_tensor=hpcnn.Input(shape=(8, 8, 3)), input_shape=(8, 8, 3))
    with pytest.raises(TypeError, match="input_tensor must be an hpcnn tensor"):
        resnet_cifar(8, input_tensor=np.zeros((1, 8, 8, 3)))


def _batch(n=16, shape=(32, 32, 3), classes=10, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n,) + shape, dtype=np.float32), rng.integers(0, classes, n).astype(np.int32)


def test_a_training_step_decreases_the_loss():
    x, y = _batch()
    m = resnet20_cifar(seed=0)
    m.compile(hpcnn.optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy", ["accuracy"])
    first = m.train_on_batch(x, y)[0]      # the loss before the step
    second = m.train_on_batch(x, y)[0]     # after one step, on the same batch
    assert np.isfinite(first) and second < first
    # ... and a few more steps fit the batch
    for _ in range(8):
        last = m.train_on_batch(x, y)[0]
    assert last < 0.5 * first


def test_save_load_round_trip(tmp_path):
    x, y = _batch(8)
    m = resnet20_cifar(seed=0)
    m.compile(hpcnn.optimizers.SGD(0.05, momentum=0.9, nesterov=True), "sparse_categorical_crossentropy",
              ["accuracy"])
    m.fit(x, y, batch_size=4, epochs=1, verbose=0)  # moves the BN statistics off their initial values
    path = str(tmp_path / "resnet20.h5")
    m.save(path)
    r = hpcnn.load_model(path)
    assert [la.name for la in r.layers] == [la.name for la in m.layers]
    assert r.get_config() == m.get_config()
    for a, b in zip(m.get_weights(), r.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(r.predict(x, verbose=0), m.predict(x, verbose=0))
    # the loaded model trains on from where the saved one stood (optimizer state included)
    np.testing.assert_allclose(r.train_on_batch(x, y)[0], m.train_on_batch(x, y)[0], rtol=1e-5)


def test_summary_shows_the_graph_and_the_counts():
    lines = []
    resnet20_cifar().summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert 'Model: "resnet20_cifar"' in text and "Connected to" in text
    assert "stage2_block1_add (Add)" in text
    assert "Trainable params: 269,722" in text
    assert f"Non-trainable params: {2 * 688:,}" in text  # BN moving statistics of 688 channels
