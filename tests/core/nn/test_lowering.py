"""The core's lowering of Keras layers to core layers (csrc/nn/lowering.h): Python sends one config
per Keras layer; the core fuses ReLU into Conv2D and Dense, splits other activations and softmax
into an Activation, computes a lone plain ReLU inside the BatchNormalization it follows, and
reports shapes, weights (names, shapes, kinds) and counts per Keras layer."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core, optimizers
from hpcnn.layers import (ELU, Activation, Add, BatchNormalization, Conv2D, Dense, Dropout, Flatten,
                          GlobalAveragePooling2D, InputLayer, LeakyReLU, ReLU, Softmax)


def core_of(layers, input_shape=(6, 6, 3), inputs=None, seed=7):
    return _core.Model(list(input_shape), [la.core_config() for la in layers], seed, inputs)


def test_relu_is_fused_into_conv2d_and_dense_and_other_activations_follow():
    core = core_of([Conv2D(4, 3, activation="relu"), Conv2D(4, 3, activation="tanh"), Conv2D(2, 1), Flatten(),
                    Dense(5, activation="relu"), Dense(4, activation="leaky_relu"), Dense(3, activation="softmax")])
    assert core.core_layers == [["Conv2D+relu"], ["Conv2D", "Activation:tanh"], ["Conv2D"], ["Flatten"],
                                ["Dense+relu"], ["Dense", "Activation:leaky_relu"], ["Dense", "Activation:softmax"]]
    # One output shape per Keras layer, its last core layer's; the core graph keeps its own nodes.
    assert core.layer_output_shapes == [[4, 4, 4], [2, 2, 4], [2, 2, 2], [8], [5], [4], [3]]
    assert len(core.output_shapes) == len(core.node_inputs) == 10 and core.output_shapes[-1] == [3]


def test_activation_layers_lower_to_one_core_activation():
    core = core_of([Activation("relu"), ReLU(max_value=6), ReLU(negative_slope=0.1), LeakyReLU(), ELU(0.5),
                    Softmax(), Activation("gelu")])
    assert core.core_layers == [["Activation:relu"], ["Activation:relu6"], ["Activation:leaky_relu"],
                                ["Activation:leaky_relu"], ["Activation:elu"], ["Activation:softmax"],
                                ["Activation:gelu"]]


@pytest.mark.parametrize("relu", [ReLU, lambda: Activation("relu")], ids=["ReLU", "Activation"])
def test_a_batchnorm_whose_lone_reader_is_a_plain_relu_computes_it(relu):
    core = core_of([Conv2D(4, 3, use_bias=False), BatchNormalization(), relu(), Flatten(), Dense(2)])
    assert core.core_layers == [["Conv2D"], ["BatchNormalization+relu"], ["Identity"], ["Flatten"], ["Dense"]]
    assert core.layer_output_shapes[1] == core.layer_output_shapes[2] == [4, 4, 4]


@pytest.mark.parametrize("after", [lambda: ReLU(max_value=6), lambda: ReLU(negative_slope=0.2), LeakyReLU,
                                   lambda: Activation("gelu")], ids=["relu6", "leaky", "LeakyReLU", "gelu"])
def test_a_relu_that_is_not_plain_is_not_fused(after):
    core = core_of([BatchNormalization(), after(), Flatten(), Dense(2)])
    assert core.core_layers[0] == ["BatchNormalization"] and core.core_layers[1][0].startswith("Activation:")


def test_a_batchnorm_read_by_two_layers_is_not_fused():
    # Graph: bn -> relu -> add; bn -> add. The ReLU is not the BatchNormalization's only reader.
    layers = [Conv2D(4, 3, padding="same"), BatchNormalization(), ReLU(), Add(), Flatten(), Dense(2)]
    inputs = [[-1], [0], [1], [2, 1], [3], [4]]
    core = core_of(layers, inputs=inputs)
    assert core.core_layers[1:3] == [["BatchNormalization"], ["Activation:relu"]]
    # The same through the functional API.
    x = hpcnn.Input((6, 6, 3))
    b = BatchNormalization()(Conv2D(4, 3, padding="same")(x))
    m = hpcnn.Model(x, Dense(2)(Flatten()(Add()([ReLU()(b), b]))))
    assert [c for c in m.core.core_layers if c[0].startswith("Batch")] == [["BatchNormalization"]]


def test_a_relu_reading_the_batchnorm_twice_is_not_fused():
    core = core_of([BatchNormalization(), Add(), ReLU(), Flatten(), Dense(2)], inputs=[[-1], [0, 0], [1], [2], [3]])
    assert core.core_layers[0] == ["BatchNormalization"]


def test_weights_names_kinds_and_counts_per_layer():
    m = hpcnn.Sequential([InputLayer(input_shape=(6, 6, 3)), Conv2D(4, 3, use_bias=False, name="c"),
                          BatchNormalization(name="bn"), ReLU(name="r"), Flatten(name="f"),
                          Dense(2, activation="softmax", name="d")])
    core = m.core
    assert core.layer_weights == [
        [("kernel", [3, 3, 3, 4], True)],
        [("gamma", [4], True), ("beta", [4], True), ("moving_mean", [4], False), ("moving_variance", [4], False)],
        [], [], [("kernel", [64, 2], True), ("bias", [2], True)]]
    assert core.layer_param_counts == [108, 16, 0, 0, 130]
    assert core.weight_shapes[1] == [("gamma", [4]), ("beta", [4]), ("moving_mean", [4]), ("moving_variance", [4])]
    assert m.weight_names() == ["c/kernel", "bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance",
                                 "d/kernel", "d/bias"]
    assert core.num_params == m.count_params() == 108 + 16 + 130
    assert core.num_trainable_params == 108 + 8 + 130
    # One trainable flag per Keras layer; the core spreads it over the layer's core layers.
    core.set_trainable([True, False, True, True, False])
    assert core.num_trainable_params == 108
    with pytest.raises(ValueError, match="set_trainable: the model has 5 layers, got 2 flags"):
        core.set_trainable([True, False])


def test_one_layer_on_its_own():
    dense = Dense(3, activation="softmax").core_config()
    assert _core.layer_output_shape(dense, [[7]]) == [3]
    assert _core.layer_weight_shapes(dense, [[7]]) == [("kernel", [7, 3], True), ("bias", [3], True)]
    bn = BatchNormalization(center=False).core_config()
    assert _core.layer_weight_shapes(bn, [[4, 4, 5]]) == [("gamma", [5], True), ("moving_mean", [5], False),
                                                          ("moving_variance", [5], False)]
    assert BatchNormalization().count_params((4, 4, 5)) == 20
    assert _core.layer_output_shape(Add().core_config(), [[2, 3], [2, 3]]) == [2, 3]
    with pytest.raises(ValueError, match="Conv2D expects inputs of shape"):
        _core.layer_output_shape(Conv2D(2, 3).core_config(), [[5]])
    assert _core.layer_output_shape(dict(class_name="ReLU", max_value=4.0), [[5]]) == [5]  # the general form
    with pytest.raises(ValueError, match="ReLU: max_value must be >= 0"):
        _core.layer_output_shape(dict(class_name="ReLU", max_value=-4.0), [[5]])
    with pytest.raises(ValueError, match="BatchNormalization takes no 'activation'"):
        _core.layer_output_shape(dict(bn, activation="relu"), [[5]])


def test_positions_keep_their_core_nodes_whatever_the_fusion():
    """Random draws are keyed by core node; a fusion does not move a later layer's node."""
    fused = core_of([BatchNormalization(), ReLU(), Dropout(0.5), Flatten(), Dense(2)])
    apart = core_of([BatchNormalization(), ReLU(negative_slope=0.1), Dropout(0.5), Flatten(), Dense(2)])
    assert [len(c) for c in fused.core_layers] == [len(c) for c in apart.core_layers] == [1, 1, 1, 1, 1]
    assert fused.node_inputs == apart.node_inputs


def _train(core, x, y, steps=3):
    core.compile(optimizers.SGD(0.1, momentum=0.9).core_config(), "sparse_categorical_crossentropy")
    losses = [core.train_step((x, y))[0] for _ in range(steps)]
    return losses, core.get_weights(), core.predict_step((x,))


def _assert_same_bits(one, two, x, y):
    """Both models trained alike: the same losses, weights and predictions to the bit."""
    lo, wo, po = _train(one, x, y)
    lt, wt, pt = _train(two, x, y)
    assert lo == lt
    for a, b in zip(wo, wt):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(po, pt)


def _data(shape=(6, 6, 3), n=10, classes=3):
    r = np.random.default_rng(6)
    return r.standard_normal((n,) + shape).astype(np.float32), (np.arange(n) % classes).astype(np.int32)


def test_a_fused_relu_trains_bit_for_bit_as_a_relu_layer():
    """Conv2D(activation='relu') and Dense(activation='relu') against the layer followed by ReLU():
    the same weights (the ReLU has none), so the same bits after a few steps."""
    x, y = _data()
    fused = core_of([Conv2D(4, 3, activation="relu"), Flatten(), Dense(5, activation="relu"),
                     Dense(3, activation="softmax")])
    apart = core_of([Conv2D(4, 3), ReLU(), Flatten(), Dense(5), ReLU(), Dense(3, activation="softmax")])
    assert fused.core_layers[0] == ["Conv2D+relu"] and apart.core_layers[:2] == [["Conv2D"], ["Activation:relu"]]
    _assert_same_bits(fused, apart, x, y)


def test_softmax_split_is_the_same_as_a_softmax_layer():
    x, y = _data(shape=(5,))
    one = core_of([Dense(4, activation="tanh"), Dense(3, activation="softmax")], input_shape=(5,))
    two = core_of([Dense(4), Activation("tanh"), Dense(3), Softmax()], input_shape=(5,))
    assert [c for per in one.core_layers for c in per] == ["Dense", "Activation:tanh", "Dense", "Activation:softmax"]
    _assert_same_bits(one, two, x, y)


def test_a_fused_batchnorm_relu_trains_as_the_two_layers_apart():
    """BatchNormalization+ReLU fused against the same two layers kept apart by a Dropout(0) (which
    passes every value unchanged): the same bits after a few steps."""
    x, y = _data()
    fused = core_of([Conv2D(4, 3, use_bias=False), BatchNormalization(), ReLU(), Flatten(),
                     Dense(3, activation="softmax")])
    apart = core_of([Conv2D(4, 3, use_bias=False), BatchNormalization(), Dropout(0.0), ReLU(), Flatten(),
                     Dense(3, activation="softmax")])
    assert fused.core_layers[1:3] == [["BatchNormalization+relu"], ["Identity"]]
    assert apart.core_layers[1:4] == [["BatchNormalization"], ["Dropout"], ["Activation:relu"]]
    _assert_same_bits(fused, apart, x, y)


def test_summary_counts_from_the_core():
    m = hpcnn.Sequential([InputLayer(input_shape=(6, 6, 3)), Conv2D(4, 3), BatchNormalization(), ReLU(),
                          GlobalAveragePooling2D(), Dense(2, activation="softmax")])
    lines = []
    m.summary(print_fn=lines.append)
    text = "\n".join(lines)
    total = 3 * 3 * 3 * 4 + 4 + 16 + 4 * 2 + 2
    assert f"Total params: {total:,}" in text and "Non-trainable params: 8 " in text
    m.layers[0].trainable = False
    lines.clear()
    m.summary(print_fn=lines.append)
    assert "Non-trainable params: 120 " in "\n".join(lines)
