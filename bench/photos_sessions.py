"""TensorFlow's "Image classification" tutorial models at 180x180 (photos, photos_aug), timed by
bench/bench_photos.py, as builders for hpcnn's bench worker (hpcnn/bench_workers.py loads this
file with --sessions: plain Python, the frameworks imported inside the functions, so each worker
process loads only the framework it times). The worker's own sessions time them as they time the
tutorial CNN (training and inference steps, single-image latency), so this file gives per
framework only the model, its optimizer and its loss (PyTorch: the net, its optimizer and the
per-image augmentation of its training batch): BUILDERS, where bench/backbone_sessions.py, timing
other ways, gives whole sessions.

The same model in each framework, fresh weights, random data in memory: Rescaling 1/255, Conv
16/32/64 3x3 'same' + ReLU each followed by a 2x2 'valid' MaxPooling2D (180 -> 90 -> 45 -> 22),
Flatten, Dense 128 ReLU, Dense 5 logits; Adam 1e-3. photos_aug adds the tutorial's RandomFlip,
RandomRotation 0.1 and RandomZoom 0.1 in front and Dropout 0.2 before Flatten.
"""
from __future__ import annotations

import sys

# Direct-convolution multiply-adds per image: forward; training adds the backward filter pass of
# every layer and the backward data pass of all but conv1 (nothing needs the input's gradient).
_MACS = (180 * 180 * 27 * 16, 90 * 90 * 144 * 32, 45 * 45 * 288 * 64, 22 * 22 * 64 * 128, 128 * 5)
FWD_MFLOP = 2 * sum(_MACS) / 1e6
TRAIN_MFLOP = 3 * FWD_MFLOP - 2 * _MACS[0] / 1e6
SHAPE = (180, 180, 3)
CLASSES = 5
_WHAT = ("TensorFlow's Image classification tutorial model at 180x180, 5 classes (Rescaling 1/255, "
         "3x Conv 16/32/64-ReLU-MaxPool, Flatten, Dense 128 ReLU, Dense 5 logits; Adam 1e-3")


def photos_layers(L, model: str) -> list:
    """The photos models' layers, from a Keras-like layers module `L` (hpcnn.layers, tf.keras.layers)."""
    aug = model == "photos_aug"
    out = [L.RandomFlip("horizontal"), L.RandomRotation(0.1), L.RandomZoom(0.1)] if aug else []
    out.append(L.Rescaling(1.0 / 255))
    for f in (16, 32, 64):
        out += [L.Conv2D(f, 3, padding="same", activation="relu"), L.MaxPooling2D()]
    return out + [L.Dropout(0.2)] * aug + [L.Flatten(), L.Dense(128, activation="relu"), L.Dense(CLASSES)]


def build_hpcnn(model: str):
    """(the hpcnn model, fresh weights from seed 0, its optimizer, its loss: from logits)."""
    from hpcnn import layers as L
    from hpcnn.losses import SparseCategoricalCrossentropy
    from hpcnn.models import Sequential
    net = Sequential([L.InputLayer(input_shape=list(SHAPE))] + photos_layers(L, model), seed=0)
    return net, "adam", SparseCategoricalCrossentropy(from_logits=True)


def _torch_augmentation():
    """The Keras model's RandomFlip('horizontal'), RandomRotation(0.1) (+-36 degrees) and RandomZoom(0.1)
    in torchvision, bilinear, drawn per image (as a DataLoader's transform: torchvision draws once per
    call, so a batch tensor would share one draw)."""
    from torchvision.transforms import InterpolationMode, v2
    bilinear = InterpolationMode.BILINEAR
    return v2.Compose([v2.RandomHorizontalFlip(), v2.RandomRotation(36, interpolation=bilinear),
                       v2.RandomAffine(0, scale=(0.9, 1.1), interpolation=bilinear)])


def build_torch(model: str):
    """(the net, its optimizer, the per-image augmentation of photos_aug's training batch or None):
    PyTorch has no augmentation layers, so its worker draws the same transforms per image."""
    import torch
    from torch import nn
    # Rescaling as the forward's first op, as in the Keras model
    rescaling = type("Rescaling", (nn.Module,), {"forward": lambda self, x: x * (1.0 / 255)})
    convs = [m for c, f in ((3, 16), (16, 32), (32, 64)) for m in (nn.Conv2d(c, f, 3, padding=1), nn.ReLU(),
                                                                     nn.MaxPool2d(2))]
    aug = model == "photos_aug"
    net = nn.Sequential(rescaling(), *convs, *[nn.Dropout(0.2)] * aug, nn.Flatten(),
                        nn.Linear(64 * 22 * 22, 128), nn.ReLU(), nn.Linear(128, CLASSES))
    return net, torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7), _torch_augmentation() if aug else None


def build_tensorflow(model: str):
    """(the Keras model, its optimizer, its loss: from logits)."""
    import tensorflow as tf
    net = tf.keras.Sequential([tf.keras.Input(shape=SHAPE)] + photos_layers(tf.keras.layers, model))
    return net, tf.keras.optimizers.Adam(1e-3), tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


#: per model: (training MFLOP, inference MFLOP) per image, the input shape, what it is, the classes
#: (the rows of hpcnn.bench_workers.MODELS).
MODELS = {
    "photos": (TRAIN_MFLOP, FWD_MFLOP, SHAPE, _WHAT + ")", CLASSES),
    "photos_aug": (TRAIN_MFLOP, FWD_MFLOP, SHAPE, _WHAT + "; with RandomFlip, RandomRotation 0.1, RandomZoom 0.1 "
                   "and Dropout 0.2 before Flatten)", CLASSES),
}
BUILDERS = {"hpcnn": build_hpcnn, "torch": build_torch, "tensorflow": build_tensorflow}

if __name__ == "__main__":
    sys.exit("this file is loaded by hpcnn's bench worker (bench/bench_photos.py starts it)")
