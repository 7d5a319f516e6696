"""Transfer learning as Keras' guide does it, on a backbone of hpcnn.applications: the base frozen
(``base_model.trainable = False``, recursively), called with ``training=False`` so that its
BatchNormalization stays in inference mode also after unfreezing; a new head trained; then the
base (or its top layers) unfrozen and the model recompiled at a low learning rate. The summary's
trainable and non-trainable counts are Keras'."""
import numpy as np
import pytest

import hpcnn
from hpcnn.keras import applications

SHAPE = (32, 32, 3)


def head_model(base, classes=5):
    inputs = hpcnn.Input(shape=SHAPE)
    x = base(inputs, training=False)
    x = hpcnn.layers.GlobalAveragePooling2D()(x)
    x = hpcnn.layers.Dropout(0.2)(x)
    return hpcnn.Model(inputs, hpcnn.layers.Dense(classes)(x))


def compile_at(model, rate):
    model.compile(optimizer=hpcnn.optimizers.Adam(rate),
                  loss=hpcnn.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def summary_counts(model):
    lines = []
    model.summary(print_fn=lines.append)
    counts = {}
    for line in lines:
        for key in ("Total params", "Trainable params", "Non-trainable params"):
            if line.startswith(key + ":"):
                counts[key] = int(line.split(":")[1].split("(")[0].replace(",", ""))
    return counts


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.uniform(0, 255, (32, *SHAPE)).astype(np.float32), rng.integers(0, 5, 32)


@pytest.fixture(scope="module")
def base():
    return applications.ResNet50(weights=None, include_top=False, input_shape=SHAPE)


def by_kind(model):
    """{weight name: value} of the base's trainable-by-kind weights and of its moving statistics."""
    names, values = model.weight_names(), model.get_weights()
    moving = {n: v for n, v in zip(names, values) if "moving_" in n}
    other = {n: v for n, v in zip(names, values) if "moving_" not in n}
    return other, moving


def changed(before, after):
    return sorted(n for n in before if not np.array_equal(before[n], after[n]))


def test_frozen_base_then_fine_tuning(base, data):
    x, y = data
    base.trainable = False
    assert all(not layer.trainable for layer in base.layers)  # recursively, as Keras
    model = head_model(base)
    compile_at(model, 1e-3)
    counts = summary_counts(model)
    assert counts["Trainable params"] == 2048 * 5 + 5
    assert counts["Non-trainable params"] == base.count_params()
    before_w, before_m = by_kind(base)
    head_before = model.layers[-1].get_weights()
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    after_w, after_m = by_kind(base)
    assert changed(before_w, after_w) == [] and changed(before_m, after_m) == []  # the base did not move
    assert not np.array_equal(head_before[0], model.layers[-1].get_weights()[0])

    base.trainable = True
    compile_at(model, 1e-5)
    counts = summary_counts(model)
    assert counts["Non-trainable params"] == 53120  # ResNet50's moving statistics (Keras says the same)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    tuned_w, tuned_m = by_kind(base)
    assert "conv1_conv/kernel" in changed(after_w, tuned_w)
    assert changed(after_m, tuned_m) == []  # training=False: BatchNormalization stays in inference mode


def test_fine_tuning_the_top_layers_only(base, data):
    x, y = data
    base.trainable = True
    for layer in base.layers[:-33]:  # conv5 (32 layers) and conv4's last ReLU stay trainable
        layer.trainable = False
    model = head_model(base)
    compile_at(model, 1e-5)
    trainable_base = sum(int(np.prod(w.shape)) for layer in base.layers[-33:] for w in layer.trainable_weights)
    assert summary_counts(model)["Trainable params"] == trainable_base + 2048 * 5 + 5
    before, _ = by_kind(base)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    after, _ = by_kind(base)
    moved = changed(before, after)
    top = {layer.name for layer in base.layers[-33:]}
    assert moved and all(n.split("/")[0] in top for n in moved)
    base.trainable = True


def test_summary_counts_as_keras(base):
    """Keras 3.15's counts of the same model (ResNet50 without its top at 32x32, GAP, Dropout, Dense(5)),
    read from keras.Model.trainable_weights / non_trainable_weights with the base frozen and unfrozen
    (building Keras' ResNet50 here would cost this suite 20 s)."""
    base.trainable = False
    model = head_model(base)
    counts = summary_counts(model)
    assert (counts["Trainable params"], counts["Non-trainable params"]) == (10245, 23587712)
    base.trainable = True
    compile_at(model, 1e-5)
    counts = summary_counts(model)
    assert (counts["Trainable params"], counts["Non-trainable params"]) == (23544837, 53120)
