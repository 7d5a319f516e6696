"""CallbackList (one call per hook, passed on to every callback in order) and the loop it serves:
the hooks fit calls, in Keras' order, each callback in the list's order, with the logs Keras
passes; the answers the checkpointing hooks gather; and the one EpochIterator loop that fit,
evaluate and predict share (a step's result carries its metric sums: one core call per batch)."""
import numpy as np
import pytest

import hpcnn
from hpcnn import callbacks
from hpcnn.callbacks import Callback, CallbackList, FitRun
from hpcnn.layers import Dense, Flatten, InputLayer
from hpcnn.training import epoch_iterator


def model(seed=3):
    return hpcnn.Sequential([InputLayer(input_shape=[3, 3, 1]), Flatten(), Dense(4, activation="relu"),
                             Dense(2, activation="softmax")], seed=seed)


def data(n=20, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 3, 3, 1)).astype(np.float32), rng.integers(0, 2, n)


def one_hot(y):
    return np.eye(2, dtype=np.float32)[y]


class Recorder(Callback):
    """Every Keras hook fit calls, as (name, this recorder's label, batch or epoch, logs)."""

    def __init__(self, label, calls):
        super().__init__()
        self.label, self.calls = label, calls

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin", self.label, None, logs))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", self.label, epoch, logs))

    def on_train_batch_begin(self, batch, logs=None):
        self.calls.append(("batch_begin", self.label, batch, logs))

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("batch_end", self.label, batch, dict(logs)))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", self.label, epoch, dict(logs)))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end", self.label, None, dict(logs)))


def test_fit_calls_each_hook_once_per_callback_in_keras_order():
    x, y = data()
    y = one_hot(y)
    m = model()
    m.compile("sgd", "categorical_crossentropy", metrics=["accuracy", "mae"])
    calls = []
    h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0, validation_data=(x[:8], y[:8]),
              callbacks=[Recorder("a", calls), Recorder("b", calls)])
    names = [(name, label, at) for name, label, at, _ in calls]
    want = [("train_begin", "a", None), ("train_begin", "b", None)]
    for epoch in range(2):
        want += [("epoch_begin", "a", epoch), ("epoch_begin", "b", epoch)]
        for batch in range(3):  # 20 rows in batches of 8
            want += [("batch_begin", "a", batch), ("batch_begin", "b", batch),
                     ("batch_end", "a", batch), ("batch_end", "b", batch)]
        want += [("epoch_end", "a", epoch), ("epoch_end", "b", epoch)]
    want += [("train_end", "a", None), ("train_end", "b", None)]
    assert names == want
    # The logs Keras passes: {} at the beginnings; running means at a batch's end; the epoch's logs
    # (History's values) at its end, and the last epoch's at train_end.
    assert all(logs == {} for name, _, _, logs in calls if name in ("train_begin", "epoch_begin", "batch_begin"))
    ends = [logs for name, label, _, logs in calls if name == "epoch_end" and label == "a"]
    for k in ("loss", "accuracy", "mae", "val_loss", "val_accuracy", "val_mae"):
        assert [e[k] for e in ends] == pytest.approx(h.history[k], rel=1e-12)
    last_batch = [logs for name, label, at, logs in calls if name == "batch_end" and label == "a" and at == 2][-1]
    assert last_batch["loss"] == pytest.approx(h.history["loss"][-1], rel=1e-12)
    assert last_batch["mae"] == pytest.approx(h.history["mae"][-1], rel=1e-12)
    assert calls[-1][3] == {k: v[-1] for k, v in h.history.items()}


def test_metric_sums_come_with_the_step():
    """One core call per batch: train_step and test_step return (loss_sum, correct, n, metric_sums)
    and fit's and evaluate's metrics are the means of those sums."""
    x, y = data(8)
    y = one_hot(y)
    m = model()
    m.compile("sgd", "categorical_crossentropy", metrics=["accuracy", "mae"])
    before = m.get_weights()
    loss_sum, correct, n, sums = m.core.test_step((x, y))
    assert n == 8 and len(sums) == 1  # accuracy is the correct count; mae is a core metric sum
    res = m.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    assert res["loss"] == pytest.approx(loss_sum / n, rel=1e-6)
    assert res["accuracy"] == pytest.approx(correct / n, rel=1e-6)
    assert res["mae"] == pytest.approx(sums[0] / n, rel=1e-6)
    assert not hasattr(m.core, "last_metric_sums")  # no second call for them
    m.set_weights(before)
    step = m.core.train_step((x, y))
    assert len(step) == 4 and len(step[3]) == 1


class Checkpointer(Callback):
    restores_training = True

    def __init__(self, position=None, note=None):
        super().__init__()
        self.position, self.note, self.seen = position, note, []

    def restore_training(self, run):
        self.seen.append(("restore", run.signature))
        return self.position

    def on_train_position(self, position, epoch_end):
        self.seen.append(("position", epoch_end))

    def on_stop_signal(self, position, logs):
        return self.note


def test_callback_list_gathers_the_checkpointing_answers():
    quiet, answering = Checkpointer(), Checkpointer({"epoch": 1, "batch": 2}, "backup written to d")
    noted = Checkpointer(note="checkpoint saved")
    cbs = CallbackList([quiet, answering, noted, callbacks.History()])
    assert len(cbs) == 4 and list(cbs)[1] is answering
    assert cbs.restorers() == [quiet, answering, noted]
    assert cbs.restore_training(FitRun(cbs.callbacks, {"steps": 3}, None)) == {"epoch": 1, "batch": 2}
    assert quiet.seen == answering.seen == [("restore", {"steps": 3})]
    cbs.on_train_position({"epoch": 1, "batch": 3}, True)
    assert quiet.seen[-1] == ("position", True) and noted.seen[-1] == ("position", True)
    assert cbs.on_stop_signal({}, {}) == "backup written to d. checkpoint saved"
    assert CallbackList([quiet]).on_stop_signal({}, {}) is None
    m = model()
    cbs.set_model(m)
    cbs.set_params({"epochs": 2})
    assert all(cb.model is m and cb.params == {"epochs": 2} for cb in cbs)


def test_the_data_kind_is_asked_once_by_the_epoch_iterator():
    x, y = data()

    def gen():
        while True:
            yield x[:4], y[:4]

    assert epoch_iterator.data_kind(x) == epoch_iterator.ARRAYS
    assert epoch_iterator.data_kind(gen()) == epoch_iterator.GENERATOR

    class Batches:  # a keras.utils.Sequence-style object: len and items
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return x[4 * i:4 * i + 4], y[4 * i:4 * i + 4]

    assert epoch_iterator.data_kind(Batches()) == epoch_iterator.DATASET
    m = model()
    m.compile("sgd", "sparse_categorical_crossentropy")
    it = epoch_iterator.EpochIterator(m, gen(), mode=epoch_iterator.FIT, steps=3)
    assert it.kind == epoch_iterator.GENERATOR and it.is_dataset and it.is_generator
    seen = []
    for step in it.steps_of(0, 0, before=seen.append):
        assert step.run(m.core.train_step)[2] == 4
    assert seen == [0, 1, 2]  # a generator gives no more than the epoch's steps


def test_an_error_preparing_a_batch_is_raised_at_its_turn_with_its_number():
    x, y = data()

    def gen():
        yield x[:4], y[:4]
        yield x[:4], np.full(4, 7)  # class 7 of a 2-class model: refused when prepared

    m = model()
    m.compile("sgd", "sparse_categorical_crossentropy")
    calls = []
    with pytest.raises(ValueError, match=r"epoch 1, batch 2: "):
        m.fit(gen(), steps_per_epoch=2, epochs=1, verbose=0, callbacks=[Recorder("a", calls)])
    # Batch 1 trained (its end was seen) before batch 2's error.
    assert [(name, at) for name, _, at, _ in calls if name.startswith("batch")] == [
        ("batch_begin", 0), ("batch_end", 0), ("batch_begin", 1)]
