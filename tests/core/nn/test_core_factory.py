"""The C++ factories behind hpcnn._core.Model (csrc/nn/factory.h): layers, optimizers and losses
built from the config dicts Python sends, and a clear ValueError naming the key for any bad one."""
import numpy as np
import pytest

from hpcnn import _core
from tests.support.small_models import small_model


def conv(**over):
    cfg = dict(class_name="Conv2D", filters=4, kernel_size=[3, 3], strides=[1, 1], padding="same",
               activation="relu")
    cfg.update(over)
    return cfg


def core_model(layers, input_shape=(8, 8, 2)):
    return _core.Model(list(input_shape), layers, 0)


def test_python_layer_configs_build_the_same_model():
    m = small_model()
    core = core_model([layer.core_config() for layer in m.layers])
    assert core.num_params == m.count_params()
    assert [tuple(s) for s in core.output_shapes] == [(8, 8, 4), (4, 4, 4), (64,), (8,), (8,), (8,), (3,), (3,)]


def test_every_layer_kind_from_its_config():
    core = core_model([
        conv(),
        dict(class_name="MaxPooling2D", pool_size=[2, 2], strides=[2, 2], padding="valid"),
        dict(class_name="Flatten"),
        dict(class_name="Dense", units=5, activation="linear"),
        dict(class_name="Dropout", rate=0.25),
        dict(class_name="Activation", activation="softmax"),
    ])
    assert core.num_params == (3 * 3 * 2 * 4 + 4) + (4 * 4 * 4 * 5 + 5)
    assert [tuple(s) for s in core.output_shapes][-1] == (5,)


def test_numpy_scalars_and_tuples_are_accepted():
    core = core_model([conv(filters=np.int64(6), kernel_size=(np.int32(3), 3), strides=(1, 1)),
                       dict(class_name="Dropout", rate=np.float32(0.5)), dict(class_name="Flatten")])
    assert core.num_params == 3 * 3 * 2 * 6 + 6


@pytest.mark.parametrize("cfg,match", [
    (dict(class_name="Conv3D"), "unknown layer class 'Conv3D'"),
    (dict(filters=4), "layer config is missing 'class_name'"),
    (conv(filters=None), "layer config is missing 'filters'"),
    (conv(filters="8"), "'filters' must be an integer"),
    (conv(filters=2.0), "'filters' must be an integer"),
    (conv(filters=2 ** 40), "'filters' = 1099511627776 is out of range"),
    (conv(kernel_size=[3]), "'kernel_size' must be a list of two integers"),
    (conv(kernel_size=[3, 3, 3]), "'kernel_size' must be a list of two integers"),
    (conv(kernel_size=[3.0, 3.0]), "'kernel_size' must hold integers only"),
    (conv(kernel_size=3), "'kernel_size' must be a list of two integers"),
    (conv(padding="full"), "padding"),
    (conv(activation={"name": "relu"}), "'activation' has a value of type dict"),
    (dict(class_name="Dropout", rate="half"), "'rate' must be a number"),
    (dict(class_name="Activation", activation="tanhh"), "unknown activation 'tanhh'"),
    ("Flatten", "layer config must be a dict"),
])
def test_bad_layer_configs_name_what_is_wrong(cfg, match):
    with pytest.raises(ValueError, match=match):
        core_model([cfg, dict(class_name="Flatten")])


def test_optimizers_and_losses_from_their_configs():
    core = core_model([dict(class_name="Flatten"), dict(class_name="Dense", units=3, activation="linear")])
    core.compile(dict(name="Adam", learning_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-7),
                 "categorical_crossentropy", True)
    assert core.learning_rate == pytest.approx(0.01)
    core.compile(dict(name="SGD", learning_rate=1, momentum=0.5, nesterov=True), "sparse_categorical_crossentropy",
                 True)
    assert core.learning_rate == 1.0


@pytest.mark.parametrize("opt,loss,match", [
    (dict(name="Adagrad", learning_rate=0.1), "categorical_crossentropy", "unknown optimizer 'Adagrad'"),
    (dict(name="SGD", momentum=0.0, nesterov=False), "categorical_crossentropy",
     "optimizer config is missing 'learning_rate'"),
    (dict(name="SGD", learning_rate=0.1, momentum=0.0, nesterov=1), "categorical_crossentropy",
     "'nesterov' must be True or False"),
    (dict(name="SGD", learning_rate=0.1, momentum=0.0, nesterov=False), "mse", "unknown loss 'mse'"),
])
def test_bad_compile_configs_name_what_is_wrong(opt, loss, match):
    core = core_model([dict(class_name="Flatten"), dict(class_name="Dense", units=3, activation="linear")])
    with pytest.raises(ValueError, match=match):
        core.compile(opt, loss, True)
