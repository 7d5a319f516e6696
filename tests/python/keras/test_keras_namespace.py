"""hpcnn.keras, Keras' namespace over hpcnn: every name the tutorial seed (CIFAR-10 CPU vs GPU) and
the MNIST seed (TensorFlow's MNIST classifier, recognition_model.hdf5) use imports from it; a
name Keras has and hpcnn lacks raises NotImplementedError naming the alternative, never
AttributeError; names hpcnn's own modules gain (new layers, losses, metrics) appear without an
edit."""
import importlib
import sys
import types

import numpy as np
import pytest

import hpcnn
from hpcnn import keras
from hpcnn.keras import _compat


def test_every_name_the_tutorial_seed_imports():
    # The seed's import block with `tensorflow.keras` / `keras` replaced by `hpcnn.keras`:
    #   import tensorflow as tf; import keras; from keras.datasets import cifar10; ...
    import hpcnn as tf
    from hpcnn import keras as keras_module
    from hpcnn.keras.datasets import cifar10
    from hpcnn.keras.models import Sequential
    from hpcnn.keras.layers import Dense, Conv2D, Flatten, MaxPooling2D, Input, InputLayer, Dropout
    import hpcnn.keras.layers.merge as merge
    from hpcnn.keras.layers.merge import Concatenate
    from hpcnn.keras.utils import to_categorical
    from hpcnn.keras.optimizers import SGD, Adam
    from hpcnn.keras.models import clone_model

    assert Sequential is hpcnn.Sequential and clone_model is hpcnn.clone_model
    assert (Dense, Conv2D, Flatten, MaxPooling2D, InputLayer, Dropout) == (
        hpcnn.layers.Dense, hpcnn.layers.Conv2D, hpcnn.layers.Flatten, hpcnn.layers.MaxPooling2D,
        hpcnn.layers.InputLayer, hpcnn.layers.Dropout)
    assert Input is hpcnn.layers.Input and (SGD, Adam) == (hpcnn.optimizers.SGD, hpcnn.optimizers.Adam)
    assert to_categorical is hpcnn.utils.to_categorical and callable(cifar10.load_data)
    assert isinstance(merge, types.ModuleType)
    # Attribute spellings the lesson uses further down.
    assert tf.keras is keras_module and tf.keras.Sequential is hpcnn.Sequential
    assert tf.keras.utils.Sequence is hpcnn.utils.Sequence
    assert keras_module.optimizers.Adam is hpcnn.optimizers.Adam
    assert tf.config.list_physical_devices("CPU") and callable(tf.device)
    # Imported but not used by the lesson: the merging layers need the functional API.
    if getattr(Concatenate, "_hpcnn_not_implemented", None):
        with pytest.raises(NotImplementedError, match=r"keras\.layers\.merge\.Concatenate is not available in hpcnn"):
            Concatenate()


def test_every_name_the_mnist_seed_uses():
    # TensorFlow's MNIST classifier, as the seed's hpc.py: tf.keras.datasets.mnist, Sequential of
    # Flatten, Dense, Dropout, Dense; SparseCategoricalCrossentropy(from_logits=True); Softmax;
    # model.save('recognition_model.hdf5'); tf.keras.models.load_model.
    import hpcnn as tf
    from hpcnn.keras.datasets import mnist
    from hpcnn.keras.datasets.mnist import load_data
    from hpcnn.keras.layers import Dense, Dropout, Flatten, Softmax
    from hpcnn.keras.losses import SparseCategoricalCrossentropy
    from hpcnn.keras.models import Sequential, load_model

    assert load_data is mnist.load_data and tf.keras.datasets.mnist is mnist
    assert tf.keras.models.Sequential is Sequential is hpcnn.Sequential
    assert tf.keras.layers.Flatten is Flatten and tf.keras.layers.Dense is Dense
    assert tf.keras.layers.Dropout is Dropout and tf.keras.layers.Softmax is Softmax is hpcnn.layers.Softmax
    assert tf.keras.losses.SparseCategoricalCrossentropy is SparseCategoricalCrossentropy
    assert load_model is hpcnn.models.load_model
    model = tf.keras.models.Sequential([Flatten(input_shape=(6, 6)), Dense(8, activation="relu"), Dropout(0.2),
                                        Dense(3)])
    model.compile(optimizer="adam", loss=SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    assert model.compiled


def test_module_imports_as_keras_spells_them():
    for name in ("hpcnn.keras.layers", "hpcnn.keras.models", "hpcnn.keras.optimizers", "hpcnn.keras.optimizers.schedules",
                 "hpcnn.keras.callbacks", "hpcnn.keras.losses", "hpcnn.keras.metrics", "hpcnn.keras.utils",
                 "hpcnn.keras.regularizers", "hpcnn.keras.initializers", "hpcnn.keras.datasets",
                 "hpcnn.keras.activations", "hpcnn.keras.applications", "hpcnn.keras.saving", "hpcnn.keras.backend",
                 "hpcnn.keras.config", "hpcnn.keras.preprocessing", "hpcnn.keras.preprocessing.image",
                 "hpcnn.keras.layers.merge", "hpcnn.keras.datasets.cifar10", "hpcnn.keras.datasets.fashion_mnist"):
        assert isinstance(importlib.import_module(name), types.ModuleType), name
    from hpcnn.keras import callbacks, layers, losses, metrics, models, optimizers, utils  # the line
    assert keras.Sequential is models.Sequential and keras.Input is layers.Input
    assert utils.to_categorical(np.array([0, 2]), 3).tolist() == [[1, 0, 0], [0, 0, 1]]


def test_the_layers_and_optimizers_main_gained_are_there():
    from hpcnn.keras.layers import (AveragePooling2D, BatchNormalization, ELU, GlobalAveragePooling2D,
                                    GlobalMaxPooling2D, LeakyReLU, Rescaling, ZeroPadding2D)
    from hpcnn.keras.optimizers import AdamW, RMSprop
    from hpcnn.keras.optimizers.schedules import CosineDecay, ExponentialDecay
    from hpcnn.keras.callbacks import BackupAndRestore, ModelCheckpoint, ReduceLROnPlateau
    from hpcnn.keras.regularizers import l2
    assert BatchNormalization is hpcnn.layers.BatchNormalization and AdamW is hpcnn.optimizers.AdamW
    assert ModelCheckpoint is hpcnn.callbacks.ModelCheckpoint and l2 is hpcnn.regularizers.l2
    assert {AveragePooling2D, ELU, GlobalAveragePooling2D, GlobalMaxPooling2D, LeakyReLU, Rescaling, ZeroPadding2D,
            RMSprop, CosineDecay, ExponentialDecay, BackupAndRestore, ReduceLROnPlateau}


@pytest.mark.parametrize("module, name, advice", [
    ("layers", "LSTM", r"recurrent, attention and text layers are not in hpcnn"),
    ("layers", "Conv1D", r"kernel_size=\(k, 1\)"),
    ("layers", "Lambda", r"Lambda layer runs Python"),
    ("optimizers", "Nadam", r"hpcnn has SGD, Adam, AdamW and RMSprop"),
    ("callbacks", "RemoteMonitor", r"CSVLogger or LambdaCallback"),
    ("utils", "model_to_dot", r"model.summary\(\)"),
    ("", "ops", r"keras.ops"),
    ("models", "model_from_yaml", r"model_from_json"),
])
def test_keras_names_hpcnn_lacks_raise_not_implemented(module, name, advice):
    mod = importlib.import_module("hpcnn.keras" + (f".{module}" if module else ""))
    where = f"keras.{module}.{name}" if module else f"keras.{name}"
    with pytest.raises(NotImplementedError, match=rf"{where} is not available in hpcnn: .*{advice}.*docs/keras.md"):
        getattr(mod, name)
    with pytest.raises(NotImplementedError):  # `from hpcnn.keras.<module> import <name>` as well
        exec(f"from {mod.__name__} import {name}", {})


def test_a_name_keras_does_not_have_either_is_an_attribute_error():
    with pytest.raises(AttributeError):
        keras.layers.Dense2
    with pytest.raises(AttributeError):
        keras.no_such_module
    assert not hasattr(keras.layers, "Denze")


def test_merging_layers_import_but_raise_when_used():
    from hpcnn.keras.layers import Add, Concatenate
    for cls in (Add, Concatenate):
        if not hasattr(cls, "_hpcnn_not_implemented"):
            continue  # hpcnn has it (the functional API landed): nothing to check here
        with pytest.raises(NotImplementedError, match=r"merging layers need the functional API"):
            cls()
        assert cls.__name__ not in _compat.available(keras.layers, "layers")


def test_names_hpcnns_modules_gain_appear_without_an_edit(monkeypatch):
    """hpcnn.keras.losses / metrics re-export what hpcnn.losses / hpcnn.metrics provide, looked up
    at each use (the compile/fit helper's new losses and metrics appear here as they land)."""
    class MeanSquaredError:  # what hpcnn.losses would gain
        pass

    monkeypatch.setattr(hpcnn.losses, "MeanSquaredError", MeanSquaredError, raising=False)
    monkeypatch.setattr(hpcnn.losses, "__all__", list(hpcnn.losses.__all__) + ["MeanSquaredError"])
    assert keras.losses.MeanSquaredError is MeanSquaredError
    fake_metrics = types.ModuleType("hpcnn.metrics")
    fake_metrics.TopKCategoricalAccuracy = object()
    fake_metrics.__all__ = ["TopKCategoricalAccuracy"]
    monkeypatch.setitem(sys.modules, "hpcnn.metrics", fake_metrics)
    assert keras.metrics.TopKCategoricalAccuracy is fake_metrics.TopKCategoricalAccuracy


def test_losses_and_metrics_hpcnn_lacks_raise_not_implemented():
    for module, name in (("losses", "Huber"), ("losses", "KLDivergence"), ("metrics", "F1Score")):
        mod = getattr(keras, module)
        if name in dir(mod):
            continue  # hpcnn gained it
        with pytest.raises(NotImplementedError, match=rf"keras\.{module}\.{name} is not available in hpcnn"):
            getattr(mod, name)


def test_dir_lists_what_is_available():
    names = dir(keras.layers)
    assert {"Conv2D", "Dense", "BatchNormalization", "merge"} <= set(names)
    assert "LSTM" not in names
    assert "Conv2D" in _compat.available(keras.layers, "layers")
    assert "LSTM" not in _compat.available(keras.layers, "layers")


def test_the_version_functions():
    assert keras.version() == keras.__version__ == hpcnn.build_info()["version"]
