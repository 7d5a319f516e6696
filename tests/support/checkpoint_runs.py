"""Small training runs for the checkpoint tests (test_checkpoints.py, test_backup_generations.py and
the processes they start): data, a compiled small model, a fit with callbacks, a signal at a step."""
import os
import signal

import numpy as np

from hpcnn import optimizers
from hpcnn.callbacks import Callback
from tests.support.small_models import small_model


def data(n=100, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 8, 8, 2), dtype=np.float32), rng.integers(0, 3, n)


def compiled(optimizer="adam", seed=5):
    m = small_model(seed=seed)  # Conv2D, MaxPooling2D, Dense, ReLU, Dropout(0.1), Dense softmax
    opt = optimizers.Adam(0.01) if optimizer == "adam" else optimizers.SGD(0.05, momentum=0.9, nesterov=True)
    m.compile(opt, "sparse_categorical_crossentropy", ["accuracy"])
    return m


def same_weights(a, b):
    return all(np.array_equal(p, q) for p, q in zip(a.get_weights(), b.get_weights()))


class SignalAt(Callback):
    """Sends `signum` to this process after the training step `step` (counted by the model): the
    handler runs at once, as for a signal from outside arriving during that step."""

    def __init__(self, step, signum=signal.SIGTERM, times=1):
        super().__init__()
        self.step, self.signum, self.times = step, signum, times

    def on_train_batch_end(self, batch, logs=None):
        if self.model.core.step == self.step:
            for _ in range(self.times):
                os.kill(os.getpid(), self.signum)


def train(model, x, y=None, backup=None, extra=(), epochs=3, **kw):
    cbs = ([backup] if backup else []) + list(extra)
    kw.setdefault("verbose", 0)
    if y is not None:
        kw.setdefault("batch_size", 8)
        return model.fit(x, y, epochs=epochs, callbacks=cbs, **kw)
    return model.fit(x, epochs=epochs, callbacks=cbs, **kw)
