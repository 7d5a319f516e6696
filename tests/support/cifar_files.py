"""Small CIFAR-10 archives in the official formats (python pickles, binary records), for tests."""
import io
import pickle
import tarfile

import numpy as np

from hpcnn import datasets
from hpcnn.datasets import converters


def fake_cifar(n_per_batch=7, seed=0):
    rng = np.random.default_rng(seed)
    batches = {}
    for name in converters.CIFAR10_TRAIN_BATCHES + [converters.CIFAR10_TEST_BATCH]:
        x = rng.integers(0, 256, (n_per_batch, 32, 32, 3), dtype=np.uint8)
        y = rng.integers(0, 10, n_per_batch)
        batches[name] = (x, y)
    return batches


def add_bytes(tf, name, blob):
    info = tarfile.TarInfo(name)
    info.size = len(blob)
    tf.addfile(info, io.BytesIO(blob))


def cifar_python_tar(path, batches):
    with tarfile.open(path, "w:gz") as tf:
        for name, (x, y) in batches.items():
            d = {b"batch_label": name.encode(), b"labels": [int(v) for v in y],
                 b"data": x.transpose(0, 3, 1, 2).reshape(len(x), 3072), b"filenames": [b"f.png"] * len(x)}
            add_bytes(tf, f"cifar-10-batches-py/{name}", pickle.dumps(d, protocol=2))
        add_bytes(tf, "cifar-10-batches-py/batches.meta",
                  pickle.dumps({b"label_names": [c.encode() for c in datasets.cifar10.class_names]}))
    return str(path)


def cifar_binary_tar(path, batches):
    with tarfile.open(path, "w:gz") as tf:
        for name, (x, y) in batches.items():
            rec = np.concatenate([y.astype(np.uint8)[:, None], x.transpose(0, 3, 1, 2).reshape(len(x), 3072)], axis=1)
            add_bytes(tf, f"cifar-10-batches-bin/{name}.bin", rec.tobytes())
    return str(path)


def expected_cifar(batches):
    tr = [batches[b] for b in converters.CIFAR10_TRAIN_BATCHES]
    xt = np.concatenate([b[0] for b in tr])
    yt = np.concatenate([b[1] for b in tr]).astype(np.uint8).reshape(-1, 1)
    xv, yv = batches["test_batch"]
    return (xt, yt), (xv, yv.astype(np.uint8).reshape(-1, 1))
