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


def layout_model(seed=11, classes=6):
    """Conv kernels with every dimension different (3x2 and 2x3 kernels, 3 -> 5 -> 4 channels), so a
    kernel read in the wrong layout (HWIO vs the GPU's OHWI) cannot pass for the right one."""
    return hpcnn.Sequential([
        InputLayer(input_shape=[7, 6, 3]),
        Conv2D(5, (3, 2), padding="same", activation="relu"),
        MaxPooling2D(2),
        Conv2D(4, (2, 3), strides=(1, 2), padding="valid", activation="relu"),
        Flatten(),
        Dense(classes, activation="softmax"),
    ], seed=seed)
