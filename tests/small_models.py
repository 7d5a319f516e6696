"""A small Sequential used by several test files (8x8x2 input, every layer kind)."""
import hpcnn
from hpcnn.layers import Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D, ReLU


def small_model(seed=3, classes=3):
    return hpcnn.Sequential([
        InputLayer(input_shape=[8, 8, 2]),
        Conv2D(4, 3, padding="same", activation="relu"),
        MaxPooling2D(2, padding="same"),
        Flatten(),
        Dense(8),
        ReLU(),
        Dropout(0.1),
        Dense(classes, activation="softmax"),
    ], seed=seed)
