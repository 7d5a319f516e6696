"""Prebuilt models (Keras keeps these in ``keras.applications``): the two reference networks.

Both come uncompiled, with fresh weights (from ``seed`` when given); also importable as
``hpcnn.models.tutorial_cnn`` / ``hpcnn.models.deep_mnist``.
"""
from __future__ import annotations

from typing import Optional

from .layers import Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D
from .models import Sequential


def tutorial_cnn(seed: Optional[int] = None) -> Sequential:
    """The CIFAR-10 tutorial CNN (input 32x32x3, 787,530 parameters)."""
    m = Sequential(name="tutorial_cnn", seed=seed)
    m.add(InputLayer(input_shape=[32, 32, 3]))
    for f in (32, 64, 128, 256):
        m.add(Conv2D(filters=f, kernel_size=3, padding="same", activation="relu"))
        m.add(MaxPooling2D(pool_size=[2, 2], strides=[2, 2], padding="same"))
    m.add(Flatten())
    m.add(Dense(256, activation="relu"))
    m.add(Dropout(0.2))
    m.add(Dense(512, activation="relu"))
    m.add(Dropout(0.2))
    m.add(Dense(10, activation="softmax"))
    return m


def deep_mnist(seed: Optional[int] = None) -> Sequential:
    """DeepMNIST (input 28x28x1, 3,274,634 parameters)."""
    m = Sequential(name="deep_mnist", seed=seed)
    m.add(InputLayer(input_shape=[28, 28, 1]))
    m.add(Conv2D(32, 5, padding="same", activation="relu"))
    m.add(MaxPooling2D(2))
    m.add(Conv2D(64, 5, padding="same", activation="relu"))
    m.add(MaxPooling2D(2))
    m.add(Flatten())
    m.add(Dense(1024, activation="relu"))
    m.add(Dropout(0.5))
    m.add(Dense(10, activation="softmax"))
    return m


__all__ = ["tutorial_cnn", "deep_mnist"]
