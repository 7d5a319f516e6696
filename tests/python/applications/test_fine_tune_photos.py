"""Fine-tuning MobileNetV2 as the transfer-learning guide does it, on a generated folder of photos:
5 classes, PNG files written with Pillow into one folder per class, read back into arrays. Nothing
is downloaded in CI, so the base starts from weights=None and a short training on the photos
themselves stands in for ImageNet's (a random base's features carry nothing to freeze); then the
guide's two phases: the base frozen (called with training=False) under a new head, then its top
layers unfrozen and the model recompiled at a low learning rate. Held-out accuracy beats chance
(20 %) clearly in both."""
import numpy as np
import pytest

import hpcnn
from hpcnn.keras import applications

Image = pytest.importorskip("PIL.Image", reason="the photo folder is written with Pillow (the `images` extra)")

SIZE = 48
CLASSES = ("red", "green", "blue", "stripes", "dots")


def photo(kind: str, rng: np.random.Generator) -> np.ndarray:
    """A 48x48 RGB picture of its class: a color cast, or a pattern, under noise and a random offset."""
    img = rng.uniform(60, 140, (SIZE, SIZE, 3))
    if kind in ("red", "green", "blue"):
        img[..., CLASSES.index(kind)] += rng.uniform(70, 110)
    elif kind == "stripes":
        period = int(rng.integers(5, 9))
        img[(np.arange(SIZE) + int(rng.integers(0, period))) % period < period // 2] += 90
    else:
        yy, xx = np.mgrid[:SIZE, :SIZE]
        for _ in range(6):
            cy, cx = rng.integers(4, SIZE - 4, 2)
            img[(yy - cy) ** 2 + (xx - cx) ** 2 < 9] -= 60
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    for kind in CLASSES:
        (root / kind).mkdir()
        for i in range(24):
            Image.fromarray(photo(kind, rng)).save(root / kind / f"{kind}_{i:02d}.png")
    return root


def load_folder(root):
    """(images, labels, class names) from one folder per class, classes in sorted order (as
    image_dataset_from_directory names them)."""
    names = sorted(p.name for p in root.iterdir() if p.is_dir())
    xs, ys = [], []
    for label, name in enumerate(names):
        for path in sorted((root / name).glob("*.png")):
            with Image.open(path) as im:
                xs.append(np.asarray(im.convert("RGB"), dtype=np.float32))
            ys.append(label)
    return np.stack(xs), np.asarray(ys, np.int32), names


def pretrained_weights(base, x, y):
    """Weights for the base, trained on the photos (what ImageNet's would be in class): the same
    architecture with BatchNormalization's momentum at 0.9 instead of MobileNetV2's 0.999, so that
    its moving statistics (what a frozen base normalizes with) settle within these few steps."""
    config = base.get_config()
    for layer in config["layers"]:
        if layer["class_name"] == "BatchNormalization":
            layer["config"]["momentum"] = 0.9
    twin = hpcnn.Model.from_config(config)
    inputs = hpcnn.Input(shape=(SIZE, SIZE, 3))
    model = hpcnn.Model(inputs, hpcnn.layers.Dense(len(CLASSES))(hpcnn.layers.GlobalAveragePooling2D()(twin(inputs))))
    model.compile(optimizer=hpcnn.optimizers.Adam(2e-3),
                  loss=hpcnn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=15, epochs=25, verbose=0)
    return twin.get_weights()


def test_mobilenetv2_fine_tunes_on_a_folder_of_photos(folder):
    x, y, names = load_folder(folder)
    assert names == sorted(CLASSES) and x.shape == (120, SIZE, SIZE, 3)
    order = np.random.default_rng(1).permutation(len(x))
    x, y = applications.mobilenet_v2.preprocess_input(x[order]), y[order]
    train, valid = slice(0, 90), slice(90, None)

    hpcnn.utils.set_random_seed(0)
    base = applications.MobileNetV2(input_shape=(SIZE, SIZE, 3), alpha=0.35, include_top=False, weights=None)
    base.set_weights(pretrained_weights(base, x[train], y[train]))
    loss = hpcnn.losses.SparseCategoricalCrossentropy(from_logits=True)

    base.trainable = False
    moving = [w.copy() for n, w in zip(base.weight_names(), base.get_weights()) if "moving_" in n]
    inputs = hpcnn.Input(shape=(SIZE, SIZE, 3))
    h = base(inputs, training=False)
    h = hpcnn.layers.GlobalAveragePooling2D()(h)
    h = hpcnn.layers.Dropout(0.2)(h)
    model = hpcnn.Model(inputs, hpcnn.layers.Dense(len(CLASSES))(h))
    model.compile(optimizer=hpcnn.optimizers.Adam(1e-2), loss=loss, metrics=["accuracy"])
    model.fit(x[train], y[train], batch_size=15, epochs=8, verbose=0)
    frozen_acc = model.evaluate(x[valid], y[valid], verbose=0)[1]

    base.trainable = True
    for layer in base.layers[:-20]:
        layer.trainable = False
    model.compile(optimizer=hpcnn.optimizers.Adam(1e-4), loss=loss, metrics=["accuracy"])
    model.fit(x[train], y[train], batch_size=15, epochs=4, verbose=0)
    tuned_acc = model.evaluate(x[valid], y[valid], verbose=0)[1]
    assert frozen_acc >= 0.5, f"frozen phase: held-out accuracy {frozen_acc:.2f} (chance 0.20)"
    assert tuned_acc >= 0.5, f"after fine-tuning: held-out accuracy {tuned_acc:.2f} (chance 0.20)"
    after = [w for n, w in zip(base.weight_names(), base.get_weights()) if "moving_" in n]
    assert all(np.array_equal(a, b) for a, b in zip(moving, after))  # training=False: statistics kept
