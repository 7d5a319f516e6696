"""What hpcnn's own modules use of a model, a layer and a callback is public (tests/rules/test_import_rules.py
forbids private reads): the model's interface for its helpers, the one alias table, and the hooks
through which fit reaches the checkpointing callbacks without naming them."""
import numpy as np
import pytest

import hpcnn
from hpcnn import aliases, saving
from hpcnn.callbacks import BackupAndRestore, Callback, FitRun, History, ModelCheckpoint
from hpcnn.layers import Conv2D, Dense, Flatten, InputLayer


def small(seed=1):
    return hpcnn.Sequential([InputLayer(input_shape=[6, 6, 2]), Conv2D(3, 3, activation="relu"), Flatten(),
                             Dense(4, activation="softmax")], seed=seed)


def test_the_models_interface_for_its_helpers():
    m = small()
    assert m.is_sequential and not hpcnn.Model.is_sequential
    assert m.sample_shape == (6, 6, 2) and m.input_shape == (None, 6, 6, 2)
    assert not m.built and m.core is m.core and m.built  # built on first use, once
    assert m.weight_names() == ["conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias"]
    assert [(layer.name, shape) for layer, shape, _ in m.layer_outputs()] == [("conv2d", (4, 4, 3)), ("flatten", (48,)),
                                                                              ("dense", (4,))]
    assert m.compile_settings is None
    with pytest.raises(RuntimeError, match="fit: the model must be compiled first"):
        m.require_compiled("fit")
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    assert m.require_compiled("fit") is m.compile_settings and m.compile_settings["loss"] == \
        "sparse_categorical_crossentropy"
    assert m.trainable_mask() == [True, True, True] and not m.trainable_changed_since_compile()
    m.layers[0].trainable = False
    assert m.trainable_changed_since_compile()


def test_a_built_models_seed_is_set_with_its_rng_state_only():
    m = small(seed=3)
    m.seed = 5  # not built yet: the seed of its initial weights
    assert m.seed == 5
    m.build()
    with pytest.raises(ValueError, match="the seed of a built model is set with set_rng_state"):
        m.seed = 6
    m.set_rng_state(7, 2)
    assert m.seed == 7 and m.core.seed == 7 and m.core.step == 2


def test_the_alias_table_offers_higher_floors_names_when_used():
    assert hpcnn.models.load_model is saving.load_model
    assert hpcnn.models.tutorial_cnn is hpcnn.applications.tutorial_cnn
    assert set(aliases.names("hpcnn.models")) <= set(dir(hpcnn.models)) and "load_model" in hpcnn.models.__all__
    with pytest.raises(AttributeError, match="module 'hpcnn.models' has no attribute 'no_such_name'"):
        hpcnn.models.no_such_name


def test_fit_reaches_checkpointing_callbacks_only_through_the_base_hooks():
    """A callback of the user's that implements the hooks is driven as BackupAndRestore is."""
    seen = []

    class Recorder(Callback):
        restores_training = True

        def restore_training(self, run):
            seen.append(("restore", type(run).__name__, [type(c).__name__ for c in run.callbacks]))
            return None

        def on_train_position(self, position, epoch_end):
            seen.append(("position", position["epoch"], position["batch"], epoch_end))

        def on_training_complete(self):
            seen.append(("complete",))

    x = np.random.default_rng(0).random((8, 6, 6, 2), dtype=np.float32)
    y = np.arange(8) % 4
    m = small()
    m.compile("sgd", "sparse_categorical_crossentropy")
    m.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[Recorder()])
    assert seen == [("restore", "FitRun", ["Recorder", "History"]), ("position", 0, 1, False),
                    ("position", 0, 2, False), ("position", 1, 0, True), ("complete",)]
    with pytest.raises(ValueError, match="at most one Recorder callback, got 2"):
        m.fit(x, y, batch_size=4, verbose=0, callbacks=[Recorder(), Recorder()])
    assert BackupAndRestore.restores_training and not ModelCheckpoint.restores_training
    base = Callback()
    assert base.restore_training(FitRun([History()], {}, None)) is None
    assert base.on_stop_signal({"epoch": 0, "batch": 0}, {}) is None
