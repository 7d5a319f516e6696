"""The double-scaling trap (issue 37, item 8): HDF5Dataset divides uint8 images by 255 by default,
while the image tutorials' models begin with Rescaling(1./255). Fed both, TensorFlow's model trains
at chance without a word; fit now warns, naming both scalings and the fix. The warning's promise is
checked too: the same model and file train with scale=1.0 and stay at chance without it."""
import warnings

import numpy as np
import pytest

import hpcnn
from hpcnn import layers as L
from hpcnn.data import HDF5Dataset, write_hdf5
from hpcnn.models import Sequential

S = 24  # small photos: the trap does not depend on the size


def photos(n: int, seed: int = 0):
    """3 classes of photo-like uint8 images: a grey-brown background with noise and a bright blob
    whose colour (red, green, blue) is the class."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n).astype(np.int32)
    yy, xx = np.mgrid[0:S, 0:S]
    x = np.empty((n, S, S, 3), np.uint8)
    for i, c in enumerate(y):
        img = np.zeros((S, S, 3)) + rng.normal(110, 20, 3)
        cy, cx = rng.integers(6, S - 6, 2)
        img[..., c] += 140 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 40.0)
        x[i] = np.clip(img + rng.normal(0, 10, img.shape), 0, 255)
    return x, y


@pytest.fixture(scope="module")
def photo_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("photos") / "photos.h5"
    x, y = photos(192)
    write_hdf5(path, {"x_train": x, "y_train": y})
    return str(path), x, y


def tf_model(augment: bool = False, scale: float = 1 / 255):
    """TensorFlow's Image classification model (smaller input), logits out."""
    aug = [L.RandomFlip("horizontal"), L.RandomZoom(0.1)] if augment else []
    m = Sequential([L.InputLayer(input_shape=[S, S, 3])] + aug + [L.Rescaling(scale)], seed=1)
    for f in (8, 16):
        m.add(L.Conv2D(f, 3, padding="same", activation="relu"))
        m.add(L.MaxPooling2D())
    for layer in (L.Flatten(), L.Dense(32, activation="relu"), L.Dense(3)):
        m.add(layer)
    m.compile("adam", hpcnn.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"])
    return m


def test_hdf5dataset_says_the_range_it_delivers(photo_file):
    path = photo_file[0]
    assert HDF5Dataset(path).value_range == pytest.approx((0.0, 1.0))
    assert HDF5Dataset(path, scale=1.0).value_range == (0.0, 255.0)
    lo, hi = HDF5Dataset(path, scale=([0.5, 0.5, 0.5], [0.25, 0.5, 0.5])).value_range
    assert (lo, hi) == pytest.approx((-2.0, 2.0))


def test_fit_warns_naming_both_scalings_and_the_fix_and_the_fix_trains(photo_file):
    path = photo_file[0]
    with pytest.warns(UserWarning) as seen:
        trapped = tf_model().fit(HDF5Dataset(path, batch_size=32, seed=0), epochs=12, verbose=0)
    text = " ".join(str(w.message) for w in seen)
    assert "scaled twice" in text and "HDF5Dataset delivers values in [0, 1]" in text
    assert "'rescaling" in text and "Rescaling(1./255)" in text
    assert "HDF5Dataset(..., scale=1.0)" in text and "remove the Rescaling layer" in text
    assert len(seen) == 1  # once per fit, not per epoch
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fix is silent
        fixed = tf_model().fit(HDF5Dataset(path, batch_size=32, seed=0, scale=1.0), epochs=12, verbose=0)
    # What the warning says: at chance (loss ln 3) scaled twice, learning once scaled once.
    assert trapped.history["loss"][-1] == pytest.approx(np.log(3), abs=0.02)
    assert fixed.history["accuracy"][-1] > 0.8 and fixed.history["loss"][-1] < 0.6, fixed.history


def test_numpy_data_already_divided_by_255_is_caught_on_its_first_batch(photo_file):
    _, x, y = photo_file
    with pytest.warns(UserWarning, match=r"first batch lies in \[0(\.\d+)?, 1\]: already divided by 255.*"
                                         r"pass the 0-255 values \(drop your own / 255\), or remove the Rescaling"):
        tf_model().fit(x.astype(np.float32) / 255, y, batch_size=32, epochs=1, verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tf_model().fit(x.astype(np.float32), y, batch_size=32, epochs=1, verbose=0)  # 0-255 floats: right
        tf_model().fit(x, y, batch_size=32, epochs=1, verbose=0)                     # uint8: right


def test_augmentation_before_the_rescaling_is_looked_through(photo_file):
    """The tutorial's second model: RandomFlip, RandomRotation, RandomZoom, then Rescaling."""
    with pytest.warns(UserWarning, match="scaled twice"):
        tf_model(augment=True).fit(HDF5Dataset(photo_file[0], batch_size=32, seed=0), epochs=1, verbose=0)


def test_no_warning_where_the_scalings_do_not_meet(photo_file):
    path = photo_file[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tf_model(scale=1.0).fit(HDF5Dataset(path, batch_size=32), epochs=1, verbose=0)        # not 1/255
        tf_model(scale=2 / 255).fit(HDF5Dataset(path, batch_size=32), epochs=1, verbose=0)    # another scale
        m = Sequential([L.InputLayer(input_shape=[S, S, 3]), L.Flatten(), L.Dense(3, activation="softmax")],
                       seed=1)  # no Rescaling
        m.compile("adam", "sparse_categorical_crossentropy")
        m.fit(HDF5Dataset(path, batch_size=32), epochs=1, verbose=0)
