"""Models that the Keras-file tests save, load and compare with real Keras (test_keras_files_state.py,
test_keras_functional.py, test_keras_interop.py)."""
import numpy as np

import hpcnn
from hpcnn.layers import (AveragePooling2D, BatchNormalization, Conv2D, Dense, ELU, GlobalAveragePooling2D, InputLayer,
                          LeakyReLU, ReLU, Rescaling, Softmax, ZeroPadding2D)
from tests.support import keras_api_models


def bn_model(seed=4):
    """tests/data/keras/make_fixtures.py's bn_cnn, in hpcnn."""
    return hpcnn.Sequential([
        InputLayer(input_shape=[8, 8, 3]), Rescaling(2.0, offset=-1.0), ZeroPadding2D(1),
        Conv2D(6, 3, strides=2, use_bias=False), BatchNormalization(momentum=0.5), ReLU(),
        AveragePooling2D(2, padding="same"), Conv2D(5, 3, padding="same"),
        BatchNormalization(center=False, momentum=0.5), LeakyReLU(0.1), GlobalAveragePooling2D(), Dense(6), ELU(),
        Dense(3), Softmax()], seed=seed)


OPTIMIZERS = {
    "RMSprop": lambda: hpcnn.optimizers.RMSprop(learning_rate=0.005, rho=0.8, momentum=0.9, centered=True),
    "AdamW": lambda: hpcnn.optimizers.AdamW(learning_rate=hpcnn.optimizers.schedules.ExponentialDecay(0.01, 10, 0.9),
                                            weight_decay=0.02),
    "SGD": lambda: hpcnn.optimizers.SGD(learning_rate=hpcnn.optimizers.schedules.CosineDecay(0.1, 100, warmup_target=0.2,
                                                                                               warmup_steps=5),
                                        momentum=0.9, nesterov=True, clipnorm=1.0),
}


def resnet_block(seed=1):
    """The fixture's architecture, built with hpcnn: a ResNet basic block with a projection
    shortcut (Add), a Concatenate of two branches, global pooling, softmax."""
    return keras_api_models.resnet_block(hpcnn, seed=seed)


def trained_block():
    """Compiled and trained two epochs: BatchNormalization's moving statistics away from 0 and 1,
    an optimizer state to save."""
    m = resnet_block()
    m.compile(optimizer=hpcnn.optimizers.Adam(learning_rate=0.002), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    rng = np.random.default_rng(3)
    m.fit(rng.random((16, 8, 8, 3), dtype=np.float32), rng.integers(0, 3, 16), epochs=2, batch_size=8, verbose=0)
    return m
