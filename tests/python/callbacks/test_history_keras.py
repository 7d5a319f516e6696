"""History and the logs as Keras 3.15 has them: ``history.history`` (and the logs callbacks and
CSVLogger see) carry Keras' keys only, so ``pd.DataFrame(history.history).plot()`` draws what it
draws on Keras; hpcnn's timings are the History's own lists (``history.seconds``,
``history.images_per_second``), survive a resumed fit, and reach the progress bar. The live Keras
comparisons need the `keras` extra (CI installs it)."""
import csv
import os
import signal

import numpy as np
import pytest

import hpcnn
from hpcnn import optimizers
from hpcnn.callbacks import BackupAndRestore, Callback, CSVLogger, History
from hpcnn.layers import Dense, Flatten, InputLayer
from tests.support.live_keras import REASON, import_keras

keras = import_keras()
needs_keras = pytest.mark.skipif(keras is None, reason=REASON)
TIMINGS = {"seconds", "images_per_second"}


def data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 4, 4, 2), dtype=np.float32), rng.integers(0, 3, n)


def hpcnn_model(metrics, seed=1):
    m = hpcnn.Sequential([InputLayer(input_shape=[4, 4, 2]), Flatten(), Dense(3, activation="softmax")], seed=seed)
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics)
    return m


def keras_model(metrics):
    m = keras.Sequential([keras.Input((4, 4, 2)), keras.layers.Flatten(), keras.layers.Dense(3, activation="softmax")])
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy", metrics=metrics)
    return m


# (metrics, validation, callbacks maker(namespace)) -- the same compile/fit on both.
CASES = [
    (["accuracy"], True, lambda ns: []),
    (["accuracy"], False, lambda ns: []),
    (["sparse_top_k_categorical_accuracy", "accuracy"], True, lambda ns: []),
    ([], True, lambda ns: []),
    (["accuracy"], True, lambda ns: [ns.ReduceLROnPlateau(patience=1)]),
    (["accuracy"], False, lambda ns: [ns.LearningRateScheduler(lambda epoch, lr: lr * 0.5)]),
]


@needs_keras
@pytest.mark.parametrize("metrics, validation, make", CASES, ids=[f"{c[0]}-val{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_history_and_logs_have_keras_keys(metrics, validation, make, tmp_path):
    x, y = data()
    got = {}
    for name, model, ns in (("hpcnn", hpcnn_model(metrics), hpcnn.callbacks), ("keras", keras_model(metrics),
                                                                                keras.callbacks)):
        logs_seen = []
        cbs = make(ns) + [ns.LambdaCallback(on_epoch_end=lambda epoch, logs: logs_seen.append(sorted(logs))),
                          ns.CSVLogger(str(tmp_path / f"{name}.csv"))]
        h = model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=cbs,
                      validation_data=(x[:16], y[:16]) if validation else None)
        header = (tmp_path / f"{name}.csv").read_text().splitlines()[0]
        got[name] = (sorted(h.history), logs_seen, header, [len(v) for v in h.history.values()])
    assert got["hpcnn"] == got["keras"]
    assert not TIMINGS & set(got["hpcnn"][0])


def test_history_keeps_the_timings_beside(tmp_path):
    x, y = data()
    m = hpcnn_model(["accuracy"])
    seen = []

    class Reader(Callback):  # what a callback can read of the epoch just trained
        def on_epoch_end(self, epoch, logs=None):
            seen.append((sorted(logs), self.model.history.seconds[-1], self.model.history.images_per_second[-1]))

    h = m.fit(x, y, batch_size=16, epochs=3, verbose=0, validation_data=(x[:16], y[:16]),
              callbacks=[Reader(), CSVLogger(str(tmp_path / "log.csv"))])
    assert sorted(h.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert len(h.seconds) == len(h.images_per_second) == 3 and m.history is h
    assert all(s > 0 for s in h.seconds) and all(r > 0 for r in h.images_per_second)
    # images/s is the training rows over the epoch's seconds
    np.testing.assert_allclose(np.array(h.images_per_second) * np.array(h.seconds), 64, rtol=1e-9)
    assert [s[0] for s in seen] == [["accuracy", "loss", "val_accuracy", "val_loss"]] * 3
    assert [s[1] for s in seen] == h.seconds and [s[2] for s in seen] == h.images_per_second
    rows = list(csv.reader((tmp_path / "log.csv").read_text().splitlines()))
    assert rows[0] == ["epoch", "accuracy", "loss", "val_accuracy", "val_loss"] and len(rows) == 4


def test_csv_logger_columns_as_keras_without_validation(tmp_path):
    """Keras' CSVLogger adds the val_ columns (NA) to a fit without validation data."""
    x, y = data()
    hpcnn_model(["accuracy"]).fit(x, y, batch_size=16, epochs=2, verbose=0,
                                  callbacks=[CSVLogger(str(tmp_path / "log.csv"))])
    rows = list(csv.reader((tmp_path / "log.csv").read_text().splitlines()))
    assert rows[0] == ["epoch", "accuracy", "loss", "val_accuracy", "val_loss"]
    assert [r[0] for r in rows[1:]] == ["0", "1"] and rows[1][3:] == ["NA", "NA"]


def test_the_progress_bar_still_shows_the_speed(capsys):
    x, y = data()
    hpcnn_model(["accuracy"]).fit(x, y, batch_size=16, epochs=1, verbose=2)
    out = capsys.readouterr().out
    assert "img/s" in out and "loss: " in out and "seconds" not in out and "images_per_second" not in out


def test_a_resumed_fit_has_the_timings_of_both_runs(tmp_path):
    x, y = data(100)
    m = hpcnn_model(["accuracy"])

    class SignalAt(Callback):
        def on_train_batch_end(self, batch, logs=None):
            if self.model.core.step == 9:  # epoch 2 of 7 batches each, mid-way
                os.kill(os.getpid(), signal.SIGTERM)

    first = m.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[BackupAndRestore(str(tmp_path / "b")),
                                                                          SignalAt()])
    assert first.interrupted and len(first.seconds) == 1
    again = hpcnn_model(["accuracy"])
    h = again.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[BackupAndRestore(str(tmp_path / "b"))])
    assert h.epoch == [0, 1, 2] and len(h.seconds) == len(h.images_per_second) == 3
    assert h.seconds[0] == first.seconds[0] and h.images_per_second[0] == first.images_per_second[0]
    assert sorted(h.history) == ["accuracy", "loss"]


def test_a_backup_with_timings_in_the_history_still_loads():
    """Backups written when the timings were in .history: set_state moves them to their lists."""
    h = History()
    h.set_state({"epoch": [0, 1], "history": {"loss": [1.0, 0.5], "seconds": [2.0, 3.0],
                                              "images_per_second": [50.0, 40.0]}})
    assert h.history == {"loss": [1.0, 0.5]} and h.seconds == [2.0, 3.0] and h.images_per_second == [50.0, 40.0]
    assert History().get_state()["seconds"] == []


def test_pandas_plots_only_keras_columns():
    pd = pytest.importorskip("pandas", reason="pandas comes with the `jupyter` extra")
    x, y = data()
    h = hpcnn_model(["accuracy"]).fit(x, y, batch_size=16, epochs=2, verbose=0, validation_data=(x[:16], y[:16]))
    assert sorted(pd.DataFrame(h.history).columns) == ["accuracy", "loss", "val_accuracy", "val_loss"]
