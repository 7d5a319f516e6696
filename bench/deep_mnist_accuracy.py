#!/usr/bin/env python3
"""DeepMNIST on Fashion-MNIST (Debian's dataset-fashion-mnist), Adam 1e-4, batch 50: test accuracy
after each epoch, with the time and images/s of each epoch.

    python bench/deep_mnist_accuracy.py --epochs 2

Reference on this machine kind (PyTorch 1.13, same setting): 83.4 % after epoch 1, 86.8 % after 2.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import hpcnn
from hpcnn.datasets.converters import load_idx_folder

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"


def load(directory: str):
    """Debian's Fashion-MNIST IDX files, read by hpcnn's own IDX reader (the one `hpcnn convert`
    uses), as float32 images / 255 and int32 labels."""
    (x, y), (xt, yt) = load_idx_folder(directory)
    return (x[..., None].astype(np.float32) / 255, y.astype(np.int32)), (xt[..., None].astype(np.float32) / 255,
                                                                         yt.astype(np.int32))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DEFAULT_DIR)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    (x, y), (xt, yt) = load(a.data)
    model = hpcnn.models.deep_mnist(seed=a.seed)
    model.compile(hpcnn.optimizers.Adam(a.lr), "sparse_categorical_crossentropy", ["accuracy"])
    print(f"# DeepMNIST on Fashion-MNIST: {len(x)} train / {len(xt)} test, Adam {a.lr}, batch {a.batch}, "
          f"seed {a.seed}, {hpcnn.get_num_threads()} threads")

    def report(epoch, logs):
        loss, acc = model.evaluate(xt, yt, batch_size=500, verbose=0)
        print(f"epoch {epoch + 1}: test accuracy {100 * acc:.1f} % (test loss {loss:.4f}); train loss "
              f"{logs['loss']:.4f}; {model.history.seconds[-1]:.1f} s, {model.history.images_per_second[-1]:.0f} img/s",
              flush=True)  # fit's timings are on the History (model.history), not in the logs

    model.fit(x, y, batch_size=a.batch, epochs=a.epochs, verbose=0,
              callbacks=[hpcnn.callbacks.LambdaCallback(on_epoch_end=report)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
