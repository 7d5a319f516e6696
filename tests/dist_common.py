"""Data and model shared by the data-parallel tests and their MPI worker (tests/dist_worker.py)."""
import numpy as np

import hpcnn
from hpcnn.layers import Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D

ROWS = 80   # 5 global batches of 16
BATCH = 16  # the global batch


def make_arrays(rows=ROWS, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 8, 8, 2)).astype(np.float32)
    y = rng.integers(0, 4, rows).astype(np.int32)
    return x, y


def make_model(seed=21, dropout=0.25, optimizer="adam"):
    """A small CNN with dropout (its masks must be keyed by the sample's global row)."""
    model = hpcnn.Sequential([
        InputLayer(input_shape=[8, 8, 2]),
        Conv2D(6, 3, padding="same", activation="relu"),
        MaxPooling2D(2),
        Flatten(),
        Dense(16, activation="relu"),
        Dropout(dropout),
        Dense(4, activation="softmax"),
    ], seed=seed)
    model.compile(optimizer, "sparse_categorical_crossentropy", ["accuracy"])
    return model


def write_h5(path, x, y):
    hpcnn.data.write_hdf5(path, {"x_train": x, "y_train": y}, chunk_rows=8)


def flat(weights):
    return np.concatenate([np.asarray(w, dtype=np.float64).ravel() for w in weights])


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))
