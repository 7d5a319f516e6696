"""EarlyStopping decides as Keras 3.15's: tables of monitored values go to hpcnn's EarlyStopping and
(where the `keras` extra is installed; CI always has it) to Keras' own, and both give the same
epochs run, stop epoch, best epoch, restore decision and messages; the expected results are also
written in the table, so the rules are checked without Keras too. Then fit end to end: a model
whose val_loss goes up gets the best epoch's weights back, whether or not it stopped early."""
import io
import math
import os
import warnings
from contextlib import redirect_stdout

import numpy as np
import pytest

import hpcnn
from hpcnn.callbacks import EarlyStopping, LambdaCallback
from tests.support.small_models import small_model
from tests.support.live_keras import REASON, import_keras

keras = import_keras()
needs_keras = pytest.mark.skipif(keras is None, reason=REASON)

NAN = float("nan")
# The metric names below, as a model compiled with metrics=['accuracy', 'mae',
# 'top_k_categorical_accuracy'] logs them; mode='auto' goes by them.
METRICS = ["accuracy", "mae", "top_k_categorical_accuracy"]


class FakeModel:
    """What EarlyStopping touches on a model: stop_training and get/set_weights; the weights are
    the number of the epoch that produced them, so a restore says which epoch came back."""

    def __init__(self, metric_source=None):
        self.stop_training = False
        self.epoch = -1
        self.restored = None
        if metric_source is not None:
            if hasattr(metric_source, "metrics"):
                self.metrics = metric_source.metrics  # Keras' mode='auto' reads the compiled metrics
            self.compile_settings = getattr(metric_source, "compile_settings", None)  # hpcnn's

    def get_weights(self):
        return [np.array([self.epoch], dtype=np.float32)]

    def set_weights(self, weights):
        self.restored = int(weights[0][0])


def drive(cb, model, values, monitor):
    """Keras' fit, as far as a callback sees it: on_train_begin, on_epoch_end per epoch until
    stop_training, on_train_end. Returns what happened, and the messages printed and warned."""
    cb.set_model(model)
    out = io.StringIO()
    with redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cb.on_train_begin({})
        run = 0
        for epoch, value in enumerate(values):
            model.epoch = epoch
            cb.on_epoch_end(epoch, {"loss": 0.5} if value is None else {"loss": 0.5, monitor: value})
            run += 1
            if model.stop_training:
                break
        cb.on_train_end({})
    return {"epochs": run, "stopped_epoch": int(cb.stopped_epoch), "best_epoch": int(cb.best_epoch),
            "restored": model.restored, "wait": int(cb.wait),
            "printed": out.getvalue().splitlines(), "warned": len([w for w in caught if "not available" in str(w.message)])}


# (monitor, EarlyStopping arguments, the monitored values per epoch (None: not logged that epoch),
#  expected (epochs run, stopped_epoch, best_epoch, restored epoch or None)) -- the expectations
#  are Keras 3.15.1's results.
TABLE = [
    ("val_loss", {}, [1.0, 0.9, 0.95, 0.8], (3, 2, 1, None)),                      # patience 0: first bad epoch
    ("val_loss", {"patience": 2}, [1.0, 0.9, 0.95, 0.96, 0.5], (4, 3, 1, None)),   # wait >= patience
    ("val_loss", {"patience": 2}, [1.0, 0.9, 0.95, 0.7, 0.71, 0.72, 0.1], (6, 5, 3, None)),
    ("val_loss", {"patience": 1}, [1.0, 1.0, 1.0], (2, 1, 0, None)),               # equal is no improvement
    ("val_loss", {"patience": 2, "min_delta": 0.05}, [1.0, 0.97, 0.96, 0.9, 0.89, 0.88], (3, 2, 0, None)),
    ("val_loss", {"patience": 2, "min_delta": -0.05}, [1.0, 0.97, 0.96, 0.9, 0.89, 0.88], (3, 2, 0, None)),
    ("val_loss", {"patience": 3}, [1.0, 0.9, 0.8], (3, 0, 2, None)),                  # never stops
    ("val_loss", {"patience": 1, "restore_best_weights": True}, [1.0, 0.5, 0.7, 0.6], (3, 2, 1, 1)),
    ("val_loss", {"patience": 9, "restore_best_weights": True}, [1.0, 0.5, 0.7, 0.6], (4, 0, 1, 1)),  # restored without stopping
    ("val_loss", {"patience": 9, "restore_best_weights": True}, [0.5, 0.7, 0.9], (3, 0, 0, 0)),
    ("val_loss", {"restore_best_weights": True, "start_from_epoch": 2, "patience": 1},
     [0.1, 0.2, 1.0, 1.1, 1.2, 0.3], (4, 3, 2, 2)),                                 # warm-up epochs not monitored
    ("val_loss", {"start_from_epoch": 5}, [1.0, 2.0, 3.0], (3, 0, 0, None)),
    ("val_loss", {"patience": 2, "baseline": 0.5}, [1.0, 0.9, 0.8, 0.7, 0.6], (5, 0, 4, None)),  # improving: no stop
    ("val_loss", {"patience": 2, "baseline": 0.5}, [1.0, 1.1, 1.2, 1.3], (2, 1, 0, None)),
    ("val_loss", {"patience": 2, "baseline": 0.5, "restore_best_weights": True}, [1.0, 0.4, 0.45, 0.46, 0.47],
     (4, 3, 1, 1)),
    ("val_loss", {"patience": 0, "baseline": 1.0}, [2.0], (1, 0, 0, None)),          # epoch 0 never stops
    ("val_loss", {"patience": 1}, [None, 1.0, None, 1.1, None, 1.2], (4, 3, 1, None)),  # validation_freq=2
    ("val_loss", {"patience": 1}, [1.0, NAN, NAN], (2, 1, 0, None)),                 # NaN never improves
    ("val_accuracy", {"patience": 1}, [0.1, 0.2, 0.2, 0.3], (3, 2, 1, None)),        # 'auto': accuracy goes up
    ("accuracy", {"patience": 1, "mode": "max"}, [0.1, 0.2, 0.15, 0.3], (3, 2, 1, None)),
    ("val_mae", {"patience": 1}, [0.5, 0.4, 0.45, 0.3], (3, 2, 1, None)),            # 'auto': mae goes down
    ("val_top_k_categorical_accuracy", {"patience": 1}, [0.5, 0.6, 0.55], (3, 2, 1, None)),
    ("val_accuracy", {"patience": 1, "mode": "min"}, [0.5, 0.4, 0.45], (3, 2, 1, None)),
    ("val_accuracy", {"patience": 1, "baseline": 0.9, "restore_best_weights": True}, [0.5, 0.6, 0.55, 0.7],
     (3, 2, 1, 1)),
    # 'max' with a baseline: patience starts again only above it (a baseline compared as in 'min'
    # mode stops these at epoch 4 and 2).
    ("accuracy", {"patience": 2, "mode": "max", "baseline": 0.9}, [0.5, 0.6, 0.55, 0.95, 0.9], (3, 2, 1, None)),
    ("accuracy", {"patience": 2, "mode": "max", "baseline": 0.9}, [0.5, 0.95, 0.93, 0.94, 0.92], (4, 3, 1, None)),
    ("val_loss", {"patience": 2, "verbose": 1, "restore_best_weights": True}, [1.0, 0.5, 0.7, 0.8, 0.9],
     (4, 3, 1, 1)),
]


@pytest.fixture(scope="module")
def hpcnn_metrics():
    m = small_model()
    m.compile("adam", "categorical_crossentropy", METRICS)
    return m


@pytest.fixture(scope="module")
def keras_metrics():
    if keras is None:
        return None
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    m.compile(optimizer="adam", loss="categorical_crossentropy", metrics=METRICS)
    m.evaluate(np.zeros((2, 4), np.float32), np.eye(3, dtype=np.float32)[:2], verbose=0)  # builds the metrics
    return m


@pytest.mark.parametrize("monitor, kwargs, values, expected", TABLE,
                         ids=[f"{i}-{row[0]}-{row[1]}" for i, row in enumerate(TABLE)])
def test_hpcnn_decides_as_keras_table(monitor, kwargs, values, expected, hpcnn_metrics):
    got = drive(EarlyStopping(monitor=monitor, **kwargs), FakeModel(hpcnn_metrics), values, monitor)
    assert (got["epochs"], got["stopped_epoch"], got["best_epoch"], got["restored"]) == expected
    assert got["warned"] == sum(v is None for v in values[:got["epochs"]])
    if kwargs.get("verbose"):
        assert got["printed"] == [f"Epoch {expected[1] + 1}: early stopping",
                                  f"Restoring model weights from the end of the best epoch: {expected[2] + 1}."]


@needs_keras
@pytest.mark.parametrize("monitor, kwargs, values, expected", TABLE,
                         ids=[f"{i}-{row[0]}-{row[1]}" for i, row in enumerate(TABLE)])
def test_the_table_is_keras_own_result(monitor, kwargs, values, expected, hpcnn_metrics, keras_metrics):
    ours = drive(EarlyStopping(monitor=monitor, **kwargs), FakeModel(hpcnn_metrics), values, monitor)
    theirs = drive(keras.callbacks.EarlyStopping(monitor=monitor, **kwargs), FakeModel(keras_metrics), values, monitor)
    assert ours == theirs
    assert (theirs["epochs"], theirs["stopped_epoch"], theirs["best_epoch"], theirs["restored"]) == expected


@needs_keras
def test_random_sequences_decide_as_keras(hpcnn_metrics, keras_metrics):
    """Many random value sequences and settings (ties, plateaus, baselines, warm-ups, gaps)."""
    rng = np.random.default_rng(23)
    for trial in range(150):
        monitor = ["val_loss", "val_accuracy", "loss", "val_mae"][trial % 4]
        kwargs = {"patience": int(rng.integers(0, 4)), "restore_best_weights": bool(rng.integers(0, 2))}
        if rng.random() < 0.4:
            kwargs["min_delta"] = float(rng.choice([0.0, 0.01, 0.05, -0.02]))
        if rng.random() < 0.3:
            kwargs["baseline"] = float(rng.choice([0.3, 0.5, 0.7]))
        if rng.random() < 0.3:
            kwargs["start_from_epoch"] = int(rng.integers(0, 4))
        if rng.random() < 0.3:
            kwargs["mode"] = str(rng.choice(["min", "max"]))
        values = [None if rng.random() < 0.1 else float(np.round(rng.random(), 1)) for _ in range(int(rng.integers(1, 12)))]
        ours = drive(EarlyStopping(monitor=monitor, **kwargs), FakeModel(hpcnn_metrics), values, monitor)
        theirs = drive(keras.callbacks.EarlyStopping(monitor=monitor, **kwargs), FakeModel(keras_metrics), values,
                       monitor)
        assert ours == theirs, (monitor, kwargs, values)


def test_auto_mode_refuses_a_name_it_cannot_direct(hpcnn_metrics):
    """As Keras: 'auto' on a monitor that is neither a loss nor a compiled metric asks for mode=."""
    for monitor in ("val_auc", "val_acc", "foo"):
        es = EarlyStopping(monitor=monitor)
        es.set_model(FakeModel(hpcnn_metrics))
        es.on_train_begin({})
        with pytest.raises(ValueError, match=r"mode='max'.*mode='min'"):
            es.on_epoch_end(0, {monitor: 1.0})
        if keras is not None:
            theirs = keras.callbacks.EarlyStopping(monitor=monitor)
            theirs.set_model(FakeModel())
            with pytest.raises(ValueError, match=r"mode='max'.*mode='min'"):
                theirs.on_epoch_end(0, {monitor: 1.0})


def test_an_acc_metric_is_maximised_by_its_name():
    """compile(metrics=['acc']) logs 'acc': monitor='val_acc' with mode='auto' maximises it."""
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["acc"])
    es = EarlyStopping(monitor="val_acc")
    es.set_model(m)
    es.on_train_begin({})
    es.on_epoch_end(0, {"val_acc": 0.5})
    assert es.direction == "max"


def test_state_round_trip_and_reuse():
    es = EarlyStopping(patience=3, restore_best_weights=True)
    model = FakeModel()
    drive(es, model, [1.0, 0.5, 0.7], "val_loss")
    state = es.get_state()
    assert state["best"] == 0.5 and state["best_epoch"] == 1 and state["wait"] == 1
    other = EarlyStopping(patience=3, restore_best_weights=True)
    other.set_state(state)
    assert (other.best, other.best_epoch, other.wait, other.stopped_epoch) == (0.5, 1, 1, 0)
    # A second fit with the same instance starts afresh, as Keras'.
    model2 = FakeModel()
    got = drive(es, model2, [2.0, 3.0], "val_loss")
    assert got["best_epoch"] == 0 and got["restored"] == 0


def test_arguments_are_keras():
    es = EarlyStopping()
    assert (es.monitor, es.min_delta, es.patience, es.verbose, es.mode, es.baseline, es.restore_best_weights,
            es.start_from_epoch, es.stopped_epoch, es.best_epoch) == ("val_loss", 0, 0, 0, "auto", None, False, 0, 0, 0)
    with pytest.raises(ValueError, match="start_from_epoch"):
        EarlyStopping(start_from_epoch=-1)
    with pytest.raises(ValueError, match="baseline"):
        EarlyStopping(baseline="high")


# ---------------------------------------------------------------------- fit, end to end
def diverging_data(n=96, seed=0):
    """Training rows whose class is the brightest of three rows, and validation rows with the
    same images but the labels shifted: the better the model learns, the worse its val_loss."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 8, 8, 2), dtype=np.float32)
    y = x[:, :3, :, 0].mean(axis=2).argmax(axis=1)
    return x, y, (x[:48], (y[:48] + 1) % 3)


def fit_with(es, epochs):
    x, y, val = diverging_data()
    m = small_model()
    m.compile(hpcnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    seen = []
    record = LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(m.get_weights()))
    h = m.fit(x, y, batch_size=16, epochs=epochs, validation_data=val, verbose=0, callbacks=[record, es])
    return m, h, seen


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(u, v) for u, v in zip(a, b))


def test_fit_stops_and_restores_the_best_epoch():
    es = EarlyStopping(patience=2, restore_best_weights=True)
    m, h, seen = fit_with(es, epochs=30)
    val = h.history["val_loss"]
    assert val[-1] > min(val), val  # it went up
    best = int(np.argmin(val))
    assert es.best_epoch == best and es.stopped_epoch == len(val) - 1 and len(val) < 30
    assert len(val) - 1 - best == 2  # stopped at wait >= patience: two epochs after the best, not three
    assert same(m.get_weights(), seen[best]) and not same(m.get_weights(), seen[-1])


def test_fit_restores_the_best_epoch_without_stopping_early():
    """Keras restores at the end of fit even when patience never ran out."""
    es = EarlyStopping(patience=50, restore_best_weights=True)
    m, h, seen = fit_with(es, epochs=4)
    val = h.history["val_loss"]
    best = int(np.argmin(val))
    assert es.stopped_epoch == 0 and len(val) == 4 and best < 3, val
    assert same(m.get_weights(), seen[best]) and not same(m.get_weights(), seen[-1])


def test_fit_without_restore_keeps_the_last_weights():
    es = EarlyStopping(patience=1)
    m, h, seen = fit_with(es, epochs=30)
    assert len(h.epoch) < 30 and same(m.get_weights(), seen[-1])


def test_fit_verbose_messages(capsys):
    es = EarlyStopping(patience=1, restore_best_weights=True, verbose=1)
    m, h, seen = fit_with(es, epochs=30)
    out = capsys.readouterr().out.splitlines()
    assert f"Epoch {es.stopped_epoch + 1}: early stopping" in out
    assert f"Restoring model weights from the end of the best epoch: {es.best_epoch + 1}." in out


def test_fit_warns_when_the_monitor_is_not_logged():
    x, y, _ = diverging_data()
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    with pytest.warns(UserWarning, match=r"`val_loss` which is not available. Available metrics are: loss,accuracy"):
        h = m.fit(x, y, epochs=2, verbose=0, callbacks=[EarlyStopping()])
    assert len(h.epoch) == 2 and not math.isnan(h.history["loss"][-1])


def test_a_fit_stopped_by_a_signal_keeps_its_last_weights():
    """fit's message after SIGTERM says the model keeps the last batch's weights: no restore then."""
    import signal
    x, y, val = diverging_data()
    m = small_model()
    m.compile(hpcnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    seen = []

    def epoch_end(epoch, logs):
        seen.append(m.get_weights())
        if epoch == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # fit stops before epoch 5

    es = EarlyStopping(patience=50, restore_best_weights=True)
    h = m.fit(x, y, batch_size=16, epochs=30, validation_data=val, verbose=0,
              callbacks=[LambdaCallback(on_epoch_end=epoch_end), es])
    assert h.interrupted and len(h.epoch) == 4 and es.best_epoch < 3
    assert same(m.get_weights(), seen[-1])
