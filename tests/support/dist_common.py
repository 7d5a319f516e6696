"""Data and model shared by the data-parallel tests and their MPI worker (tests/support/dist_worker.py)."""
import numpy as np

import hpcnn
from hpcnn.layers import (Add, Concatenate, Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D, RandomCrop,
                          RandomFlip, RandomRotation, RandomTranslation, RandomZoom, ReLU, Rescaling, ZeroPadding2D)

ROWS = 80   # 5 global batches of 16
BATCH = 16  # the global batch


def make_arrays(rows=ROWS, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 8, 8, 2)).astype(np.float32)
    y = rng.integers(0, 4, rows).astype(np.int32)
    return x, y


def small_cnn(augmentation=(), seed=21, dropout=0.25, optimizer="adam"):
    """A small CNN with dropout (its masks must be keyed by the sample's global row), compiled;
    the `augmentation` layers stand between its input and its first convolution."""
    model = hpcnn.Sequential([
        InputLayer(input_shape=[8, 8, 2]),
        *augmentation,
        Conv2D(6, 3, padding="same", activation="relu"),
        MaxPooling2D(2),
        Flatten(),
        Dense(16, activation="relu"),
        Dropout(dropout),
        Dense(4, activation="softmax"),
    ], seed=seed)
    model.compile(optimizer, "sparse_categorical_crossentropy", ["accuracy"])
    return model


def make_model(seed=21, dropout=0.25, optimizer="adam"):
    """small_cnn without augmentation."""
    return small_cnn((), seed, dropout, optimizer)


def residual_model(seed=21, dropout=0.25, optimizer="adam"):
    """A functional model with a residual block (Conv-ReLU-Conv + the identity, Add, ReLU), a
    Concatenate of two branches and dropout: the gradient of an output read by several layers
    is summed in the backward pass, and dropout's masks are keyed by the sample's global row."""
    x = hpcnn.Input(shape=(8, 8, 2))
    a = Conv2D(6, 3, padding="same", activation="relu")(x)
    b = Conv2D(6, 3, padding="same")(a)
    r = MaxPooling2D(2)(ReLU()(Add()([a, b])))
    f = Flatten()(r)
    h = Concatenate()([Dense(8, activation="relu")(f), Dense(8, activation="relu")(f)])
    out = Dense(4, activation="softmax")(Dropout(dropout)(h))
    model = hpcnn.Model(x, out, seed=seed)
    model.compile(optimizer, "sparse_categorical_crossentropy", ["accuracy"])
    return model


def augmented_model(seed=21, dropout=0.25, optimizer="adam"):
    """small_cnn that augments: leading RandomFlip, ZeroPadding2D + RandomCrop, RandomRotation (run
    by the batch stager, fused into the gather) and a RandomTranslation and a RandomZoom with a seed
    of its own after a Rescaling (run as ops in the model). Every draw is keyed by the sample's
    global row, so replicas must agree with one device."""
    augmentation = [RandomFlip("horizontal"), ZeroPadding2D(2), RandomCrop(8, 8), RandomRotation(0.1), Rescaling(0.5),
                    RandomTranslation(0.25, 0.25, fill_mode="constant"), RandomZoom(0.2, seed=7)]
    return small_cnn(augmentation, seed, dropout, optimizer)


def write_h5(path, x, y):
    hpcnn.data.write_hdf5(path, {"x_train": x, "y_train": y}, chunk_rows=8)


def flat(weights):
    return np.concatenate([np.asarray(w, dtype=np.float64).ravel() for w in weights])


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


# ---- the chunk-group shuffle streamed under MPI (test_distribute_mpi.py, dist_worker.py "groups_*")
GROUPS_ROWS, GROUPS_BATCH, GROUPS_EPOCHS = 1024, 48, 2
GROUPS_BUDGET = 400 * 1024  # 256 blocks of 4 rows x 512 bytes (512 KiB) stream: 64 lanes, windows of 1 block


def groups_fit(model, path, shard_stats=None):
    """GROUPS_EPOCHS of `path` shuffled by chunk groups, streamed; returns the dataset's stats."""
    with hpcnn.data.HDF5Dataset(path, batch_size=GROUPS_BATCH, shuffle="chunk_groups", seed=7,
                                memory_budget=GROUPS_BUDGET) as ds:
        assert not ds.in_memory and ds.stats["lanes"] == 64
        model.fit(ds, epochs=GROUPS_EPOCHS, verbose=0)
        ds.settle()  # the warm-up of the epoch after the last has finished: counters that stand still
        return dict(ds.stats)


def write_groups_h5(path):
    x, y = make_arrays(GROUPS_ROWS)
    hpcnn.data.write_hdf5(path, {"x_train": x, "y_train": y}, chunk_rows=4)


# ---- resuming a backup on another replica count (tests/core/distribute/test_resume_replicas.py, dist_worker.py)
RESUME_BATCH = 12  # divisible by 1, 2 and 3; 80 rows: 6 full batches and a last one of 8 (uneven on 3)
RESUME_EPOCHS = 2
STOP_AFTER = 4     # the interrupted run stops after its 4th batch: mid-epoch 1


def fit_resumable(model, data, backup_dir, stop=False, batch_size=RESUME_BATCH, shuffle=True):
    """fit for RESUME_EPOCHS with a BackupAndRestore in `backup_dir` on `data` ('arrays', or the
    path of an HDF5 file, read with HDF5Dataset(shuffle=shuffle)); `stop`: this process raises
    SIGUSR1 after STOP_AFTER batches, which stops fit (every rank, under MPI) at that batch
    boundary with a backup. Returns (history, backup)."""
    import signal
    calls = [0]

    def maybe_stop(batch, logs):
        calls[0] += 1
        if stop and calls[0] == STOP_AFTER:
            signal.raise_signal(signal.SIGUSR1)

    backup = hpcnn.callbacks.BackupAndRestore(backup_dir, save_freq=False)  # the signal writes it
    cbs = [backup, hpcnn.callbacks.LambdaCallback(on_train_batch_end=maybe_stop)]
    if data == "arrays":
        x, y = make_arrays()
        history = model.fit(x, y, batch_size=batch_size, epochs=RESUME_EPOCHS, shuffle=True, verbose=0, callbacks=cbs)
    else:
        with hpcnn.data.HDF5Dataset(data, batch_size=batch_size, shuffle=shuffle, seed=7) as ds:
            history = model.fit(ds, epochs=RESUME_EPOCHS, verbose=0, callbacks=cbs)
    return history, backup
