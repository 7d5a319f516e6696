"""The dataset image_dataset_from_directory returns: it trains, evaluates and predicts through the
native loader, its decoded images' file is reused while the folder is unchanged and rebuilt when a
file changes, and the tf.data idioms of the tutorials work or are refused with advice."""
import os
import time

import numpy as np
import pytest

from tests.support import image_folders as support

import hpcnn
from hpcnn.data import AUTOTUNE, image_dataset_from_directory
from hpcnn.keras import layers


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return support.make_folder(tmp_path_factory.mktemp("ds") / "imgs", {"a": 6, "b": 6, "c": 5})


def load(folder, cache, **kw):
    kw.setdefault("image_size", (12, 10))
    return image_dataset_from_directory(str(folder), verbose=False, cache_dir=str(cache), **kw)


def model(classes=3, units=None):
    m = hpcnn.Sequential([layers.Input((12, 10, 3)), layers.Rescaling(1 / 255), layers.RandomFlip("horizontal"),
                          layers.Flatten(), layers.Dense(units or classes)])
    return m


def test_fit_evaluate_predict_natively(folder, tmp_path):
    train, val = load(folder, tmp_path, seed=1, validation_split=0.3, subset="both", batch_size=4)
    assert hasattr(train, "model_batches") and train.x_shape == (12, 10, 3)
    m = model()
    m.compile("adam", hpcnn.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    h = m.fit(train, validation_data=val, epochs=2, verbose=0)
    assert len(h.history["val_accuracy"]) == 2
    assert len(m.evaluate(val, verbose=0)) == 2
    assert m.predict(val, verbose=0).shape == (len(val.file_paths), 3)


def test_label_modes(folder, tmp_path):
    x, y = next(iter(load(folder, tmp_path, label_mode="categorical", shuffle=False, batch_size=5)))
    assert x.dtype == np.float32 and 0 <= x.min() and x.max() <= 255 and x.max() > 1  # 0-255, as Keras
    assert y.dtype == np.float32 and y.shape == (5, 3) and y.sum(axis=1).tolist() == [1] * 5
    two = load(folder, tmp_path, class_names=["a", "b"], label_mode="binary", shuffle=False, batch_size=4)
    _, y = next(iter(two))
    assert y.dtype == np.float32 and y.shape == (4, 1)
    m = model(units=1)
    m.compile("adam", "binary_crossentropy")
    m.fit(two, epochs=1, verbose=0)


def test_cache_reused_then_rebuilt_when_a_file_changes(folder, tmp_path):
    first = load(folder, tmp_path, shuffle=False)
    stamp = os.stat(first.cache_file).st_mtime_ns
    again = load(folder, tmp_path, shuffle=False)
    assert again.cache_file == first.cache_file and os.stat(again.cache_file).st_mtime_ns == stamp
    target = folder / "c" / "img_000.png"
    before = np.concatenate([x for x, _ in again])
    support.PIL.fromarray(np.full((20, 20, 3), 7, np.uint8)).save(target)
    os.utime(target, ns=(time.time_ns(), time.time_ns() + 10**9))
    rebuilt = load(folder, tmp_path, shuffle=False)
    after = np.concatenate([x for x, _ in rebuilt])
    row = rebuilt.file_paths.index(str(target))
    assert (after[row] == 7).all() and not (before[row] == 7).all()
    other = load(folder, tmp_path, shuffle=False, image_size=(6, 6))  # other arguments: another file
    assert other.cache_file != rebuilt.cache_file and other.x_shape == (6, 6, 3)


def test_tf_data_idioms(folder, tmp_path):
    ds = load(folder, tmp_path, seed=3, batch_size=4)
    assert len(ds) == 5 and ds.cardinality() == 5
    tuned = ds.cache().shuffle(1000).prefetch(buffer_size=AUTOTUNE)
    assert len(tuned) == 5 and tuned.shuffle
    firsts = list(ds.take(2))
    assert len(firsts) == 2 and firsts[0][0].shape == (4, 12, 10, 3)
    assert firsts[0][0][0].numpy().astype("uint8").dtype == np.uint8  # the tutorial's images[i].numpy()
    assert len(ds.take(2)) == 2 and len(ds.skip(4)) == 1
    norm = ds.map(lambda x, y: (layers.Rescaling(1.0 / 255)(x), y))
    xb, yb = next(iter(norm))
    assert 0 <= xb.min() and xb.max() <= 1 and len(yb) == 4
    assert sum(1 for _ in ds.unbatch()) == 17 and len(ds.unbatch()) == 17
    m = model()
    m.compile("adam", hpcnn.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(ds.take(2), epochs=1, verbose=0)
    scaled = hpcnn.Sequential([layers.Input((12, 10, 3)), layers.Flatten(), layers.Dense(3)])
    scaled.compile("adam", hpcnn.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert len(scaled.fit(norm, epochs=1, verbose=0).history["loss"]) == 1  # the mapped batches, in Python
    augment = hpcnn.keras.Sequential([layers.RandomFlip("horizontal", input_shape=(12, 10, 3)),
                                      layers.RandomRotation(0.2)])
    plain, _ = next(iter(ds.take(1)))
    augmented = ds.take(1).map(lambda x, y: (augment(x), y))  # Keras' "from scratch" tutorial's idiom
    assert np.abs(next(iter(augmented))[0] - plain).max() > 0
    unb = load(folder, tmp_path, seed=3, batch_size=None)
    x, y = next(iter(unb))
    assert x.shape == (12, 10, 3) and len(unb.batch(8)) == 3
    with pytest.raises(ValueError, match=r"one image at a time.*\.batch\(32\)"):
        m.fit(unb, epochs=1, verbose=0)


def test_tf_data_experimental_cardinality_as_the_transfer_learning_tutorial(folder, tmp_path):
    """`import hpcnn as tf`: tf.data.experimental.cardinality, a fifth of the batches taken as a test
    set and skipped from the validation set, and as_numpy_iterator().next()."""
    import hpcnn as tf
    from hpcnn.data.experimental import cardinality   # importable as a module too
    validation_dataset = load(folder, tmp_path, seed=3, batch_size=3)
    val_batches = tf.data.experimental.cardinality(validation_dataset)
    assert val_batches == 6 and cardinality is tf.data.experimental.cardinality and val_batches.numpy() == 6
    test_dataset = validation_dataset.take(val_batches // 5)
    validation_dataset = validation_dataset.skip(val_batches // 5)
    assert 'Number of validation batches: %d' % tf.data.experimental.cardinality(validation_dataset) == \
        "Number of validation batches: 5"
    assert tf.data.experimental.cardinality(test_dataset) == 1
    assert tf.data.experimental.cardinality(validation_dataset.map(lambda x, y: (x, y))) == 5
    assert tf.data.experimental.cardinality(validation_dataset.unbatch()) == 14
    image_batch, label_batch = test_dataset.as_numpy_iterator().next()
    assert image_batch.shape == (3, 12, 10, 3) and label_batch.shape == (3,)
    assert tf.data.experimental.cardinality(x for x in range(3)) == tf.data.experimental.UNKNOWN_CARDINALITY == -2
    assert tf.data.experimental.INFINITE_CARDINALITY == -1
    with pytest.raises(TypeError, match="cardinality: expected a dataset .*got int"):
        tf.data.experimental.cardinality(3)
    with pytest.raises(TypeError, match="got ndarray"):
        tf.data.experimental.cardinality(np.zeros(3))


@pytest.mark.parametrize("call, message", [
    (lambda d: d.repeat(), r"repeat\(\) \(tf.data\) is not supported: fit runs the epochs itself"),
    (lambda d: d.filter(lambda x, y: True), "move the files you do not want"),
    (lambda d: d.shard(2, 0), "shard an image dataset by themselves"),
    (lambda d: d.cache("/tmp/x"), "cached in .* already"),
    (lambda d: d.batch(8), "would batch its batches"),
    (lambda d: d.shuffle(10, reshuffle_each_iteration=False), "draws a new order every epoch"),
])
def test_refused_idioms_say_what_to_do(folder, tmp_path, call, message):
    with pytest.raises((NotImplementedError, ValueError), match=message):
        call(load(folder, tmp_path, seed=3, batch_size=4))


def test_keras_namespace_and_shuffled_predict_message(folder, tmp_path):
    from hpcnn.keras.utils import image_dataset_from_directory as from_keras
    assert from_keras is image_dataset_from_directory
    ds = load(folder, tmp_path, seed=1)
    m = model()
    with pytest.raises(ValueError, match="shuffles its rows"):
        m.predict(ds, verbose=0)


def small(seed=5):
    m = hpcnn.Sequential([layers.Input((12, 10, 3)), layers.Rescaling(1 / 255), layers.RandomFlip("horizontal"),
                          layers.Conv2D(4, 3, activation="relu"), layers.Dropout(0.1), layers.Flatten(),
                          layers.Dense(3)], seed=seed)
    m.compile(hpcnn.optimizers.Adam(0.01), hpcnn.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def test_backup_and_restore_resumes_an_image_dataset_to_the_batch(folder, tmp_path, default_sigint):
    """Interrupted mid-epoch and resumed in a new dataset (another drawn seed): the backup restores
    the shuffle seed, and the weights end bitwise those of the uninterrupted run."""
    from hpcnn.callbacks import BackupAndRestore
    from tests.support.checkpoint_runs import SignalAt, same_weights, train
    first_ds = load(folder, tmp_path, batch_size=3)   # seed=None: Keras draws one
    ref = small()
    train(ref, load(folder, tmp_path, batch_size=3, seed=first_ds.seed))
    first = small()
    h = train(first, first_ds, backup=BackupAndRestore(tmp_path / "b", save_freq=2), extra=[SignalAt(8)])
    assert h.interrupted
    resumed_ds = load(folder, tmp_path, batch_size=3)  # another drawn seed; the same decoded file
    second = small()
    train(second, resumed_ds, backup=BackupAndRestore(tmp_path / "b", save_freq=2))
    assert resumed_ds.seed == first_ds.seed and same_weights(second, ref)


def test_mirrored_strategy_shards_an_image_dataset(folder, tmp_path):
    from hpcnn.distribute import MirroredStrategy
    ds = load(folder, tmp_path, batch_size=4, seed=2)
    with MirroredStrategy(["cpu", "cpu"]).scope():
        m = small()
    h = m.fit(ds, epochs=2, verbose=0)
    single = small()
    h1 = single.fit(load(folder, tmp_path, batch_size=4, seed=2), epochs=2, verbose=0)
    np.testing.assert_allclose(h.history["loss"], h1.history["loss"], rtol=1e-4)  # same global batches
