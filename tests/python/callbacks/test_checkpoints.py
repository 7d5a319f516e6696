"""Training that survives the scheduler (issue 11), in this process: BackupAndRestore resumes to the
batch and ends bitwise equal to an uninterrupted run (arrays, HDF5Dataset, Sequence; shuffle and
dropout on), stop signals during fit (SIGTERM, SIGUSR1, SIGINT; handlers restored), model files
with the optimizer state, ModelCheckpoint, damaged or foreign backups. The same with real signals
sent from outside to a training process: test_checkpoint_signals.py."""
import hashlib
import json
import os
import shutil
import signal
import socket

import numpy as np
import pytest

import hpcnn
from hpcnn import _core, interrupts, optimizers
from hpcnn.formats import hpcnn_files
from hpcnn.formats.backup_file import dataset_checksum
from hpcnn.callbacks import BackupAndRestore, Callback, EarlyStopping, LambdaCallback, ModelCheckpoint
from hpcnn.data import HDF5Dataset, read_dataset, write_hdf5
from tests.support.gpu_target import GPU, MARKS as GPU_MARKS
from tests.support.small_models import small_model
from tests.support.checkpoint_runs import SignalAt, compiled, data, same_weights, train


VALIDATION = None  # set per test: validation data shared by the reference and the resumed runs


# ------------------------------------------------------------------ exact resume, in process
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1, signal.SIGINT])
@pytest.mark.parametrize("save_freq", ["epoch", 3, False])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_resume_mid_epoch_with_arrays_is_bitwise_the_uninterrupted_run(tmp_path, signum, save_freq, optimizer,
                                                                      default_sigint):
    x, y = data()
    val = (x[:20], y[:20])
    ref = compiled(optimizer)
    ref_h = train(ref, x, y, validation_data=val)
    d = tmp_path / "backup"
    first = compiled(optimizer)
    h1 = train(first, x, y, BackupAndRestore(d, save_freq=save_freq), [SignalAt(17, signum)], validation_data=val)
    assert h1.interrupted and h1.interrupted_by == signal.Signals(signum).name
    assert first.core.step == 17 and len(h1.epoch) == 1  # 13 batches per epoch: stopped in epoch 2
    # The newest backup and (after more than one) the one before it; the lock is gone with the fit.
    assert sorted(os.listdir(d)) in (["backup.h5"], ["backup-previous.h5", "backup.h5"])
    second = compiled(optimizer, seed=99)  # another seed: the backup's random state replaces it
    cb = BackupAndRestore(d, save_freq=save_freq)
    h2 = train(second, x, y, cb, validation_data=val)
    assert cb.resumed_from == {"epoch": 1, "batch": 4}
    assert not h2.interrupted
    assert same_weights(second, ref)
    assert second.core.iterations == ref.core.iterations == 39
    for name in ("momentum", "velocity"):
        if name in ref.core.optimizer_state():
            np.testing.assert_array_equal(second.core.optimizer_state()[name], ref.core.optimizer_state()[name])
    # The History of the whole training: the resumed epoch's loss too (its running sums were saved).
    assert h2.epoch == [0, 1, 2]
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        assert h2.history[key] == ref_h.history[key], key
    assert not d.exists()  # delete_checkpoint=True: removed once training completed


OPTIMIZERS = {
    "rmsprop centered, momentum, clipnorm": lambda: optimizers.RMSprop(0.01, momentum=0.5, centered=True, clipnorm=0.5),
    "adamw": lambda: optimizers.AdamW(0.01, weight_decay=0.1),
    "sgd without momentum, weight decay": lambda: optimizers.SGD(0.05, weight_decay=0.01),
    "adam, cosine decay with warmup": lambda: optimizers.Adam(optimizers.schedules.CosineDecay(
        0.0, 30, warmup_target=0.01, warmup_steps=10)),
    "sgd, piecewise constant": lambda: optimizers.SGD(optimizers.schedules.PiecewiseConstantDecay(
        [10, 20], [0.1, 0.05, 0.01]), momentum=0.9),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_resume_is_exact_with_every_optimizer_and_schedule(tmp_path, name):
    """The optimizer state is generic (named buffers, step count, rate): every optimizer and
    schedule resumes exactly, with no code of its own."""
    x, y = data()

    def make():
        m = small_model(seed=5)
        m.compile(OPTIMIZERS[name](), "sparse_categorical_crossentropy", ["accuracy"])
        return m

    ref = make()
    train(ref, x, y)
    assert train(make(), x, y, BackupAndRestore(tmp_path / "b", save_freq=4), [SignalAt(18)]).interrupted
    second = make()
    train(second, x, y, BackupAndRestore(tmp_path / "b", save_freq=4))
    assert same_weights(second, ref) and second.core.learning_rate == ref.core.learning_rate


def test_learning_rate_callbacks_resume_exactly(tmp_path):
    """LearningRateScheduler (a rule of the current rate, applied at on_epoch_begin: not applied twice
    when the resumed epoch begins again) and ReduceLROnPlateau (its counters in the backup)."""
    x, y = data()
    val = (x[:20], y[:20])

    def cbs():
        return [hpcnn.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5),
                hpcnn.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=0, min_delta=10.0)]

    ref = compiled("sgd")
    ref_h = train(ref, x, y, extra=cbs(), epochs=4, validation_data=val)
    first = compiled("sgd")
    assert train(first, x, y, BackupAndRestore(tmp_path / "b"), cbs() + [SignalAt(30)], epochs=4,
                 validation_data=val).interrupted
    second = compiled("sgd")
    h = train(second, x, y, BackupAndRestore(tmp_path / "b"), cbs(), epochs=4, validation_data=val)
    assert h.history["learning_rate"] == ref_h.history["learning_rate"]
    assert same_weights(second, ref)


def test_resume_with_an_hdf5_dataset_repeats_its_shuffle_order(tmp_path):
    """shuffle on, seed=None in both runs: the backup holds the first run's shuffle seed."""
    x, y = data(90)
    path = str(tmp_path / "d.h5")
    write_hdf5(path, {"x": (x * 255).astype(np.uint8), "y": y})
    first_ds = HDF5Dataset(path, x="x", y="y", batch_size=8)
    ref = compiled()
    train(ref, HDF5Dataset(path, x="x", y="y", batch_size=8, seed=first_ds.seed))
    d = tmp_path / "b"
    first = compiled()
    h = train(first, first_ds, backup=BackupAndRestore(d, save_freq=5), extra=[SignalAt(19)])
    assert h.interrupted
    resumed_ds = HDF5Dataset(path, x="x", y="y", batch_size=8)
    assert resumed_ds.seed != first_ds.seed
    second = compiled()
    train(second, resumed_ds, backup=BackupAndRestore(d, save_freq=5))
    assert resumed_ds.seed == first_ds.seed
    assert same_weights(second, ref)


@pytest.mark.parametrize("cache", ["memory", "none"])
def test_an_hdf5_epoch_from_a_given_batch_and_a_restored_seed(tmp_path, cache):
    """What resuming relies on: batches first_batch.. of an epoch are those of the whole epoch (in
    memory and streaming through small windows), and a restored seed gives the original order."""
    x = np.arange(203 * 4, dtype=np.float32).reshape(203, 2, 2, 1)
    path = str(tmp_path / "d.h5")
    write_hdf5(path, {"x": x, "y": np.arange(203) % 3}, chunk_rows=16)
    kw = dict(x="x", y="y", batch_size=10, cache=cache, memory_budget=3 * 16 * 16 if cache == "none" else 1 << 30)
    ds = HDF5Dataset(path, seed=5, **kw)
    for epoch in (0, 3):
        whole = [(a.copy(), b.copy()) for a, b, _ in ds.model_batches(epoch, "cpu")]
        assert len(whole) == 21
        for first in (1, 7, 20, 21):
            part = [(a.copy(), b.copy()) for a, b, _ in ds.model_batches(epoch, "cpu", first_batch=first)]
            assert len(part) == 21 - first
            for (a, b), (c, d) in zip(part, whole[first:]):
                np.testing.assert_array_equal(a, c)
                np.testing.assert_array_equal(b, d)
    other = HDF5Dataset(path, seed=6, **kw)
    drawn = HDF5Dataset(path, **kw)  # seed=None: drawn at construction
    assert other.seed == 6 and drawn.seed != 5
    for restored in (other, drawn):
        restored.set_seed(5)
        assert restored.seed == 5
        for (a, _, _), (c, _, _) in zip(restored.model_batches(2, "cpu"), ds.model_batches(2, "cpu")):
            np.testing.assert_array_equal(a, c)
    with pytest.raises(ValueError, match=r"first batch 22 is outside \[0, 21\]"):
        next(ds.model_batches(0, "cpu", first_batch=22))


def test_resume_with_a_sequence(tmp_path):
    x, y = data(60)

    class Batches(hpcnn.utils.Sequence):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return x[10 * i:10 * i + 10], y[10 * i:10 * i + 10]

    ref = compiled()
    train(ref, Batches())
    first = compiled()
    assert train(first, Batches(), backup=BackupAndRestore(tmp_path / "b", save_freq=2), extra=[SignalAt(8)]).interrupted
    second = compiled()
    train(second, Batches(), backup=BackupAndRestore(tmp_path / "b", save_freq=2))
    assert same_weights(second, ref)


def test_a_stop_during_validation_resumes_with_the_validation(tmp_path, monkeypatch):
    x, y = data()
    val = (x[:40], y[:40])
    ref = compiled()
    ref_h = train(ref, x, y, validation_data=val, validation_batch_size=8)
    calls = {"n": 0}
    real = hpcnn.training.evaluation.evaluate_loss_metrics

    def evaluate_and_signal(*args, **kw):  # a SIGTERM arriving in the middle of epoch 2's validation
        calls["n"] += 1
        if calls["n"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kw)

    d = tmp_path / "b"
    first = compiled()
    monkeypatch.setattr(hpcnn.training.evaluation, "evaluate_loss_metrics", evaluate_and_signal)
    h = train(first, x, y, BackupAndRestore(d), validation_data=val, validation_batch_size=8)
    monkeypatch.undo()
    assert h.interrupted and len(h.epoch) == 1
    second = compiled()
    cb = BackupAndRestore(d)
    h2 = train(second, x, y, cb, validation_data=val, validation_batch_size=8)
    assert cb.resumed_from == {"epoch": 1, "batch": 13}  # epoch 2 trained, not yet validated
    assert same_weights(second, ref) and h2.history["val_loss"] == ref_h.history["val_loss"]


def test_early_stopping_state_survives_the_interruption(tmp_path):
    """EarlyStopping's counters are in the backup: the resumed run stops at the same epoch."""
    x, y = data()
    val = (x[:20], y[:20])

    def stopper():
        return EarlyStopping(monitor="val_accuracy", patience=1, restore_best_weights=True)

    ref = compiled()
    ref_h = train(ref, x, y, extra=[stopper()], epochs=30, validation_data=val)
    assert len(ref_h.epoch) < 30
    stop_epoch = len(ref_h.epoch)
    first = compiled()
    h = train(first, x, y, BackupAndRestore(tmp_path / "b"), [stopper(), SignalAt(13 * (stop_epoch - 1) + 3)],
              epochs=30, validation_data=val)
    assert h.interrupted
    second = compiled()
    es = stopper()
    h2 = train(second, x, y, BackupAndRestore(tmp_path / "b"), [es], epochs=30, validation_data=val)
    assert len(h2.epoch) == stop_epoch and es.stopped_epoch == ref_h.epoch[-1]
    assert same_weights(second, ref)  # restore_best_weights: the best weights were in the backup too


def test_a_state_set_before_fit_survives_on_train_begin_once(tmp_path):
    """set_state before fit (by hand) is kept through that fit's on_train_begin; the next fit resets
    as Keras does (the flag does not outlive the fit)."""
    x, y = data(40)
    es = EarlyStopping(monitor="loss", patience=5)
    es.set_state({"best": -1.0, "wait": 2, "stopped_epoch": None, "best_weights": None})
    compiled().fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[es])
    assert es.best == -1.0 and es.wait == 3  # kept, then one more epoch without improvement
    compiled().fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[es])
    assert es.best > 0 and es.wait == 0  # a new fit: reset, then the first epoch is the best


def test_keep_the_backup_of_a_completed_training(tmp_path):
    x, y = data(40)
    m = compiled()
    h = train(m, x, y, BackupAndRestore(tmp_path / "b", delete_checkpoint=False), epochs=2)
    assert sorted(os.listdir(tmp_path / "b")) == ["backup-previous.h5", "backup.h5"]
    again = compiled()
    h2 = train(again, x, y, BackupAndRestore(tmp_path / "b", delete_checkpoint=False), epochs=2)
    assert again.core.step == m.core.step == 10 and same_weights(again, m)
    assert h2.history["loss"] == h.history["loss"]  # nothing trained: the History came from the backup
    h3 = train(again, x, y, BackupAndRestore(tmp_path / "b", delete_checkpoint=False), epochs=3)
    assert len(h3.epoch) == 3 and again.core.step == 15  # more epochs than first planned


def test_a_second_signal_during_the_backup_write_is_only_recorded(tmp_path, default_sigint):
    """Two SIGINTs and a SIGTERM while a backup is written: the write completes, fit stops at that
    boundary, and the resumed run is still exact."""
    x, y = data()

    class NoisyState(Callback):  # get_state runs while the backup is written
        def get_state(self):
            if self.model.core.step == 9:
                for s in (signal.SIGINT, signal.SIGINT, signal.SIGTERM):
                    os.kill(os.getpid(), s)
            return {"n": 1}

        def set_state(self, state):
            assert state == {"n": 1}

    ref = compiled()
    train(ref, x, y)
    first = compiled()
    h = train(first, x, y, BackupAndRestore(tmp_path / "b", save_freq=3), [NoisyState()])
    assert h.interrupted and h.interrupted_by == "SIGINT" and first.core.step == 9
    second = compiled()
    train(second, x, y, BackupAndRestore(tmp_path / "b", save_freq=3), [NoisyState()])
    assert same_weights(second, ref)


def test_a_second_ctrl_c_stops_at_once_and_keeps_the_last_backup(tmp_path, capsys, default_sigint):
    x, y = data()
    m = compiled()
    h = train(m, x, y, BackupAndRestore(tmp_path / "b", save_freq=4), [SignalAt(10, signal.SIGINT, times=2)])
    assert h.interrupted and h.interrupted_by == "SIGINT"
    assert "Training interrupted (Ctrl-C)" in capsys.readouterr().out
    cb = BackupAndRestore(tmp_path / "b", save_freq=4)
    train(compiled(), x, y, cb, epochs=1)
    assert cb.resumed_from == {"epoch": 0, "batch": 8}  # the periodic backup; no final one was written


def test_signal_handlers_are_installed_only_during_fit(tmp_path, default_sigint):
    x, y = data(16)
    seen = []

    def mine(signum, frame):
        seen.append(signum)

    before = {s: signal.signal(s, mine) for s in (signal.SIGTERM, signal.SIGUSR1)}
    try:
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        during = {}
        probe = LambdaCallback(on_epoch_begin=lambda e, logs: during.update(
            {s: signal.getsignal(s) for s in interrupts.STOP_SIGNALS}))
        m = compiled()
        for cbs in ([probe], [probe, SignalAt(1)]):
            m.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=cbs)
            assert all(h not in (mine, signal.default_int_handler) for h in during.values())
            assert signal.getsignal(signal.SIGTERM) is mine and signal.getsignal(signal.SIGUSR1) is mine
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert seen == []  # the SIGTERM during fit was fit's
        os.kill(os.getpid(), signal.SIGUSR1)
        assert seen == [signal.SIGUSR1]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # Python's own handler again
    finally:
        for s, h in before.items():
            signal.signal(s, h)


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGINT], ids=["SIGUSR1", "SIGINT"])
def test_a_signal_ignored_before_fit_stays_ignored(signum):
    """SIG_IGN (a background job's SIGINT, nohup) is someone's choice: fit leaves it alone, and a
    SIGINT then neither stops training nor raises KeyboardInterrupt (a second one neither)."""
    x, y = data(40)
    before = signal.signal(signum, signal.SIG_IGN)
    try:
        m = compiled()
        h = m.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[SignalAt(3, signum, times=2)])
        assert not h.interrupted and m.core.step == 10
        assert signal.getsignal(signum) == signal.SIG_IGN
    finally:
        signal.signal(signum, before)


def test_csv_logger_continues_its_file_when_resumed(tmp_path):
    """CSVLogger with BackupAndRestore: the resumed run's file has each epoch once, as an
    uninterrupted run's, even when rows were written after the backup it resumes from (a process
    killed before its final backup)."""
    x, y = data(40)
    ref_csv, csv_path = tmp_path / "ref.csv", tmp_path / "log.csv"
    compiled().fit(x, y, batch_size=8, epochs=4, verbose=0, callbacks=[hpcnn.callbacks.CSVLogger(str(ref_csv))])
    csv_path.write_text("an older run's rows\n")  # append=False: replaced by this training's rows
    d, kept = tmp_path / "b", tmp_path / "backup-of-step-14.h5"
    keep = LambdaCallback(on_train_batch_end=lambda b, logs: (
        first.core.step == 15 and shutil.copy(d / "backup.h5", kept)))
    first = compiled()
    # Backups every 7 batches (steps 7, 14); epoch 3's row is written at step 15; stopped at step 17.
    h = train(first, x, y, BackupAndRestore(d, save_freq=7), [hpcnn.callbacks.CSVLogger(str(csv_path)), keep,
                                                              SignalAt(17)], epochs=4)
    assert h.interrupted and len(csv_path.read_text().splitlines()) == 4  # header + epochs 1-3
    shutil.copy(kept, d / "backup.h5")  # as if killed before the final backup: step 14's is the last
    cb = BackupAndRestore(d, save_freq=7)
    train(compiled(), x, y, cb, [hpcnn.callbacks.CSVLogger(str(csv_path))], epochs=4)
    assert cb.resumed_from == {"epoch": 2, "batch": 4}
    got = [line.split(",")[0] for line in csv_path.read_text().splitlines()]
    want = [line.split(",")[0] for line in ref_csv.read_text().splitlines()]
    assert got == want == ["epoch", "0", "1", "2", "3"]


def test_stop_requested_is_visible_to_callbacks(tmp_path):
    x, y = data(40)
    looked = []
    m = compiled()
    m.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[
        SignalAt(2, signal.SIGUSR1),
        LambdaCallback(on_train_batch_end=lambda b, logs: looked.append(interrupts.stop_requested()))])
    assert looked == [None, "SIGUSR1"]
    assert interrupts.stop_requested() is None


def test_stop_message_names_the_signal_and_the_backup(tmp_path, capsys):
    x, y = data(40)
    h = train(compiled(), x, y, BackupAndRestore(tmp_path / "b"), [SignalAt(7, signal.SIGUSR1)], epochs=2)
    out = capsys.readouterr().out
    assert h.interrupted_by == "SIGUSR1"
    assert "Training stopped by SIGUSR1 after batch 2 of 5 of epoch 2" in out
    assert f"Backup written to '{tmp_path / 'b'}'" in out


# ------------------------------------------------------------------ damaged or foreign backups
def interrupted_backup(tmp_path, x, y):
    d = tmp_path / "b"
    train(compiled(), x, y, BackupAndRestore(d, save_freq=3), [SignalAt(5)])
    return d


def refuses(d, x, y, pattern, model=None, **fit_kw):
    m = model or compiled()
    before = m.get_weights()
    with pytest.raises(ValueError, match=pattern):
        train(m, x, y, BackupAndRestore(d), **fit_kw)
    assert m.core.step == 0 and all(np.array_equal(a, b) for a, b in zip(before, m.get_weights()))


def test_foreign_files_in_the_backup_dir_are_an_error(tmp_path):
    x, y = data(40)
    d = tmp_path / "b"
    d.mkdir()
    (d / "training_metadata.json").write_text("{}")  # e.g. a Keras backup directory
    refuses(d, x, y, r"holds files that are not hpcnn backups \(training_metadata.json\)")


def test_a_backup_dir_that_is_a_file_is_an_error(tmp_path):
    x, y = data(40)
    (tmp_path / "b").write_text("x")
    refuses(tmp_path / "b", x, y, r"backup_dir '.*b' exists and is not a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_backup_dir_is_an_error_before_training(tmp_path):
    x, y = data(40)
    d = tmp_path / "b"
    d.mkdir()
    d.chmod(0o555)
    try:
        refuses(d, x, y, r"is not writable")
    finally:
        d.chmod(0o755)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "model file", "bad json", "newer version",
                                    "no position", "NaN weight", "missing optimizer buffer", "missing weight"])
def test_a_damaged_backup_is_an_error_never_a_fresh_start(tmp_path, damage):
    """The checks behind the checksums: a damaged backup whose checksums were made to match (as
    its writer would have), the only generation there, is refused."""
    x, y = data(40)
    d = interrupted_backup(tmp_path, x, y)
    os.remove(d / "backup-previous.h5")  # one generation: nothing to fall back to
    path = str(d / "backup.h5")
    meta = json.loads(bytes(read_dataset(path, "hpcnn_backup_json")).decode())
    arrays = {name: read_dataset(path, name) for name in
              [f"weight_{i:03d}" for i in range(6)] + ["optimizer_000", "optimizer_001"]}

    def rewrite():
        meta["checksums"] = {name: dataset_checksum(name, a) for name, a in arrays.items()
                             if not name.startswith("hpcnn_backup_json")}
        raw = json.dumps(meta).encode()
        arrays["hpcnn_backup_json"] = np.frombuffer(raw, np.uint8)
        arrays["hpcnn_backup_json_sha256"] = np.frombuffer(hashlib.sha256(raw).hexdigest().encode(), np.uint8)
        os.remove(path)
        write_hdf5(path, arrays)

    if damage == "garbage":
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
    elif damage == "truncated":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    elif damage == "model file":
        os.remove(path)
        compiled().save(path)
    elif damage == "bad json":
        arrays["hpcnn_backup_json"] = np.frombuffer(b'{"format": ', np.uint8)
        os.remove(path)
        write_hdf5(path, arrays)
    elif damage == "newer version":
        meta["format_version"] = 7
        rewrite()
    elif damage == "no position":
        del meta["position"]
        rewrite()
    elif damage == "NaN weight":
        arrays["weight_002"] = np.full_like(arrays["weight_002"], np.nan)
        rewrite()
    elif damage == "missing optimizer buffer":
        del arrays["optimizer_001"]
        rewrite()
    elif damage == "missing weight":
        del arrays["weight_004"]
        rewrite()
    expect = {"garbage": "is not an hpcnn backup file", "truncated": "is not an hpcnn backup file",
              "model file": "is not an hpcnn backup file", "bad json": "not valid JSON",
              "newer version": "format_version 7", "no position": "no valid 'position'",
              "NaN weight": "NaN/inf", "missing optimizer buffer": "optimizer_001.*is missing",
              "missing weight": "weight_004.*is missing"}[damage]
    refuses(d, x, y, rf"cannot resume: .*{expect}.*delete '.*b' to do that")


@pytest.mark.parametrize("change", ["model", "optimizer", "batch size", "rows", "steps_per_epoch"])
def test_a_backup_of_another_training_is_an_error(tmp_path, change):
    x, y = data(40)
    d = interrupted_backup(tmp_path, x, y)
    model, kw, xx, yy = None, {}, x, y
    if change == "model":
        model = hpcnn.models.clone_model(compiled())
        model.layers[3] = hpcnn.layers.Dense(9, name="dense")
        model._core = None
        model.compile("adam", "sparse_categorical_crossentropy")
        pattern = r"was written for another model \(layer \d+: "
    elif change == "optimizer":
        model = compiled("sgd")
        pattern = r"written training with Adam, this model is compiled with SGD"
    elif change == "batch size":
        kw = {"batch_size": 10}
        pattern = r"batches per epoch 5, this fit has 4"
    elif change == "rows":
        xx, yy = x[:39], y[:39]
        pattern = r"training rows 40, this fit has 39"
    else:
        kw = {"steps_per_epoch": 4}
        pattern = r"batches per epoch 5, this fit has 4"
    refuses(d, xx, yy, pattern, model=model, **kw)
    assert os.path.exists(d / "backup.h5")  # left as it was


def test_double_checkpoint_falls_back_to_the_previous_backup_and_says_so(tmp_path, capsys):
    x, y = data()
    ref = compiled()
    train(ref, x, y)
    d = tmp_path / "b"
    train(compiled(), x, y, BackupAndRestore(d, save_freq=3, double_checkpoint=True), [SignalAt(8)])
    assert sorted(os.listdir(d)) == ["backup-previous.h5", "backup.h5"]
    with open(d / "backup.h5", "r+b") as f:  # the latest is damaged (8 steps); the previous has 6
        f.truncate(100)
    m = compiled()
    cb = BackupAndRestore(d, save_freq=3, double_checkpoint=True)
    with pytest.warns(RuntimeWarning, match=r"skipped '.*backup.h5' \(.*\)\. Resuming from the previous backup "
                      r"'.*backup-previous.h5' \(written .*, continuing from epoch 1 after batch 6\)"):
        train(m, x, y, cb)
    assert cb.resumed_from == {"epoch": 0, "batch": 6} and same_weights(m, ref)


def test_a_killed_writers_temporary_file_is_removed_by_the_next_backup(tmp_path):
    x, y = data(40)
    d = interrupted_backup(tmp_path, x, y)
    stale = d / f"backup-next.h5.tmp-{socket.gethostname()}-{2**22 + 12345}-dead"  # no such process
    stale.write_bytes(b"half a backup")
    cb = BackupAndRestore(d, save_freq=1, delete_checkpoint=False)
    train(compiled(), x, y, cb, epochs=2)
    assert cb.resumed_from is not None and not stale.exists()
    assert sorted(os.listdir(d)) == ["backup-previous.h5", "backup.h5"]


def test_backup_and_restore_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"Invalid value for argument `save_freq`.*Received: save_freq=0"):
        BackupAndRestore(tmp_path, save_freq=0)
    with pytest.raises(ValueError, match=r"backup_dir must be a directory name"):
        BackupAndRestore(None)
    with pytest.raises(TypeError, match=r"Unrecognized keyword arguments passed to BackupAndRestore"):
        BackupAndRestore(tmp_path, save_before_preemption=True)
    x, y = data(16)
    with pytest.raises(ValueError, match=r"at most one BackupAndRestore"):
        compiled().fit(x, y, verbose=0, callbacks=[BackupAndRestore(tmp_path / "a"), BackupAndRestore(tmp_path / "b")])


def test_callback_states_must_be_plain_data(tmp_path):
    x, y = data(16)

    class Odd(Callback):
        def get_state(self):
            return {"s": {1, 2}}

    with pytest.raises(ValueError, match=r"Odd.get_state\(\)\['s'\] is a set"):
        train(compiled(), x, y, BackupAndRestore(tmp_path / "b", save_freq=1), [Odd()])


# ------------------------------------------------------------------ model files with the optimizer state
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_save_load_model_then_fit_continues_exactly(tmp_path, optimizer):
    """save + load_model + fit(epochs=2, initial_epoch=1) == two epochs uninterrupted, bitwise
    (shuffle by (seed, epoch), dropout by (seed, step), optimizer state and step count restored)."""
    x, y = data()
    ref = compiled(optimizer)
    ref.fit(x, y, batch_size=8, epochs=2, verbose=0)
    m = compiled(optimizer)
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    m.save(tmp_path / "m.h5")
    loaded = hpcnn.models.load_model(tmp_path / "m.h5")
    assert loaded.core.iterations == 13 and loaded.core.step == 13 and loaded.seed == m.seed
    loaded.fit(x, y, batch_size=8, epochs=2, initial_epoch=1, verbose=0)
    assert same_weights(loaded, ref)


def test_save_without_the_optimizer_starts_it_fresh(tmp_path):
    x, y = data(40)
    m = compiled()
    m.fit(x, y, batch_size=8, verbose=0)
    m.save(tmp_path / "m.h5", include_optimizer=False)
    loaded = hpcnn.models.load_model(tmp_path / "m.h5")
    assert loaded.core.iterations == 0 and loaded.core.optimizer_state() == {}
    assert loaded.core.step == 5  # the random state is the model's, saved either way
    with pytest.raises(ValueError, match=r"Invalid value for argument `include_optimizer`"):
        m.save(tmp_path / "m.h5", include_optimizer="no")


def test_a_format_version_1_file_still_loads(tmp_path):
    """A file as hpcnn wrote them before the optimizer state was saved."""
    x, y = data(40)
    m = compiled()
    m.fit(x, y, batch_size=8, verbose=0)
    meta = {"format": "hpcnn-model", "format_version": 1, "hpcnn_version": "0.1.0", "config": m.get_config(),
            "seed": m.seed, "weight_names": m.weight_names(),
            "compile": {"optimizer": "Adam", "optimizer_config": m.optimizer.get_config(),
                        "loss": "sparse_categorical_crossentropy", "from_logits": False, "metrics": ["accuracy"]}}
    arrays = {"hpcnn_model_json": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    for i, w in enumerate(m.get_weights()):
        arrays[f"weight_{i:03d}"] = w
    write_hdf5(tmp_path / "old.h5", arrays, compression="gzip", level=1)
    old = hpcnn.models.load_model(tmp_path / "old.h5")
    assert same_weights(old, m) and old.core.iterations == 0 and old.core.step == 0
    old.fit(x, y, batch_size=8, verbose=0)  # trains with a fresh optimizer state
    assert old.core.iterations == 5


@pytest.mark.parametrize("damage", ["optimizer buffer of another size", "NaN in the optimizer state",
                                    "unknown buffer name", "negative iterations", "step not a number"])
def test_a_damaged_optimizer_state_is_a_clear_error(tmp_path, damage):
    x, y = data(40)
    m = compiled()
    m.fit(x, y, batch_size=8, verbose=0)
    path = str(tmp_path / "m.h5")
    m.save(path)
    meta = json.loads(bytes(read_dataset(path, hpcnn_files.META_DATASET)).decode())
    # Rewritten with hpcnn's own weight layout (weight_000, ...: format_version 2's, which loads too),
    # so that write_hdf5 can write the file; the optimizer state is read the same way in either layout.
    del meta["weights"]
    arrays = {f"weight_{i:03d}": w for i, w in enumerate(m.get_weights())}
    arrays.update({n: read_dataset(path, n) for n in ["optimizer_000", "optimizer_001"]})
    if damage == "optimizer buffer of another size":
        arrays["optimizer_001"] = arrays["optimizer_001"][:-1]
        expect = r"optimizer state 'velocity' has shape .* \(dataset '/optimizer_001'\)"
    elif damage == "NaN in the optimizer state":
        arrays["optimizer_000"] = np.full_like(arrays["optimizer_000"], np.nan)
        expect = r"optimizer state 'momentum' \('/optimizer_000'\) holds .* NaN/inf"
    elif damage == "unknown buffer name":
        meta["optimizer_state"]["buffers"] = ["m", "v"]
        expect = r"optimizer state buffers are \['m', 'v'\]; Adam keeps \['momentum', 'velocity'\]"
    elif damage == "negative iterations":
        meta["optimizer_state"]["iterations"] = -3
        expect = r"optimizer iterations -3 are not a step count"
    else:
        meta["rng"]["step"] = "many"
        expect = r"random state's step 'many' is not"
    arrays[hpcnn_files.META_DATASET] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    os.remove(path)
    write_hdf5(path, arrays)
    with pytest.raises(ValueError, match=rf"load_model: '.*m.h5' is damaged: .*{expect}"):
        hpcnn.models.load_model(path)


def test_the_optimizer_state_api_of_the_core():
    x, y = data(16)
    m = compiled()
    core = m.core
    assert core.optimizer_state_names == ["momentum", "velocity"] and core.optimizer_state() == {}
    m.fit(x, y, batch_size=8, verbose=0)
    state = core.optimizer_state(keras_layout=True)
    assert list(state) == ["momentum", "velocity"] and all(a.shape == (core.num_params,) for a in state.values())
    other = compiled(seed=1)
    other.core.set_optimizer_state(state, 2)
    assert other.core.iterations == 2
    for k in state:
        np.testing.assert_array_equal(other.core.optimizer_state()[k], state[k])
    with pytest.raises(ValueError, match=r"Adam has no state buffer 'm'"):
        other.core.set_optimizer_state({"m": state["momentum"], "velocity": state["velocity"]}, 2)
    with pytest.raises(ValueError, match=r"Adam keeps the state buffers \[momentum, velocity\], got 1"):
        other.core.set_optimizer_state({"momentum": state["momentum"]}, 2)
    with pytest.raises(ValueError, match=r"must be float32 with \d+ elements"):
        other.core.set_optimizer_state({"momentum": state["momentum"][:5], "velocity": state["velocity"]}, 2)
    other.core.set_optimizer_state({}, 0)  # a fresh state
    assert other.core.optimizer_state() == {} and other.core.iterations == 0
    sgd = compiled("sgd").core
    assert sgd.optimizer_state_names == ["momentum"]
    other.core.set_rng_state(123, 45)
    assert other.core.seed == 123 and other.core.step == 45


# ------------------------------------------------------------------ ModelCheckpoint
def test_model_checkpoint_names_files_by_epoch_and_metrics(tmp_path):
    x, y = data(40)
    m = compiled()
    pattern = str(tmp_path / "ckpt" / "m-{epoch:02d}-{val_loss:.3f}.h5")
    h = m.fit(x, y, batch_size=8, epochs=3, verbose=0, validation_data=(x[:8], y[:8]),
              callbacks=[ModelCheckpoint(pattern)])
    names = sorted(os.listdir(tmp_path / "ckpt"))
    assert names == [f"m-{e + 1:02d}-{v:.3f}.h5" for e, v in enumerate(h.history["val_loss"])]
    last = hpcnn.models.load_model(tmp_path / "ckpt" / names[-1])
    assert same_weights(last, m) and last.core.iterations == 15  # a full model, optimizer included


@pytest.mark.parametrize("mode,monitor", [("min", "val_loss"), ("max", "val_accuracy"), ("auto", "val_accuracy")])
def test_model_checkpoint_save_best_only(tmp_path, mode, monitor):
    x, y = data(40)
    m = compiled()
    saved = []

    class Spy(ModelCheckpoint):
        def _write(self, path):
            saved.append((self.model.core.step, path))
            super()._write(path)

    cb = Spy(str(tmp_path / "best.h5"), monitor=monitor, mode=mode, save_best_only=True)
    h = m.fit(x, y, batch_size=8, epochs=6, verbose=0, validation_data=(x[:20], y[:20]), callbacks=[cb])
    values = h.history[monitor]
    better = (lambda a, b: a < b) if monitor == "val_loss" else (lambda a, b: a > b)
    expect, best = [], None
    for e, v in enumerate(values):
        if best is None or better(v, best):
            best = v
            expect.append(5 * (e + 1))
    assert [s for s, _ in saved] == expect and cb.best == best


def test_model_checkpoint_initial_value_threshold(tmp_path):
    x, y = data(40)
    cb = ModelCheckpoint(str(tmp_path / "best.h5"), monitor="val_loss", save_best_only=True,
                         initial_value_threshold=-1.0)  # a loss is never below -1: nothing is saved
    compiled().fit(x, y, batch_size=8, epochs=2, verbose=0, validation_data=(x[:8], y[:8]), callbacks=[cb])
    assert not (tmp_path / "best.h5").exists() and cb.best == -1.0


def test_model_checkpoint_weights_only_every_n_batches(tmp_path):
    x, y = data(40)
    m = compiled()
    at_step_8 = []
    cb = ModelCheckpoint(str(tmp_path / "w-{epoch}-{batch}.weights.h5"), save_weights_only=True, save_freq=4)
    grab = LambdaCallback(on_train_batch_end=lambda b, logs: m.core.step == 8 and at_step_8.append(m.get_weights()))
    m.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[cb, grab])
    assert sorted(os.listdir(tmp_path)) == ["w-1-4.weights.h5", "w-2-3.weights.h5"]  # steps 4 and 8
    fresh = compiled(seed=77)
    fresh.load_weights(tmp_path / "w-2-3.weights.h5")
    assert all(np.array_equal(a, b) for a, b in zip(fresh.get_weights(), at_step_8[0]))
    with pytest.raises(ValueError, match=r"load_model: .* is not an hpcnn model file"):
        hpcnn.models.load_model(tmp_path / "w-2-3.weights.h5")  # weights only: no architecture


def test_weights_files_round_trip_and_refuse_other_models(tmp_path):
    x, y = data(40)
    m = compiled()
    m.fit(x, y, batch_size=8, verbose=0)
    m.save_weights(tmp_path / "w.h5")
    m.save(tmp_path / "m.h5")
    for path in ("w.h5", "m.h5"):  # load_weights reads weights files and model files
        other = compiled(seed=8)
        other.load_weights(tmp_path / path)
        assert same_weights(other, m)
    wrong = hpcnn.Sequential([hpcnn.layers.InputLayer(input_shape=[8, 8, 2]), hpcnn.layers.Flatten(),
                              hpcnn.layers.Dense(3, activation="softmax")])
    before = wrong.get_weights()
    # (weights files are in Keras' legacy layout: matched layer by layer, as Keras matches them)
    with pytest.raises(ValueError, match=r"load_weights: '.*w.h5' does not fit this model: the file holds weights for "
                                         r"3 layer\(s\), the model has 1"):
        wrong.load_weights(tmp_path / "w.h5")
    assert all(np.array_equal(a, b) for a, b in zip(before, wrong.get_weights()))
    (tmp_path / "junk.h5").write_bytes(b"junk")
    with pytest.raises(ValueError, match=r"neither an hpcnn weights file"):
        m.load_weights(tmp_path / "junk.h5")
    with pytest.raises(FileExistsError):
        m.save_weights(tmp_path / "w.h5", overwrite=False)


def test_model_checkpoint_saves_on_a_stop_signal(tmp_path, capsys):
    x, y = data(40)
    m = compiled()
    cb = ModelCheckpoint(str(tmp_path / "m-{epoch}.h5"))
    h = m.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[cb, SignalAt(7)])
    assert h.interrupted
    assert sorted(os.listdir(tmp_path)) == ["m-1.h5", "m-2.h5"]  # epoch 1's end, then the stop in epoch 2
    stopped = hpcnn.models.load_model(tmp_path / "m-2.h5")
    assert same_weights(stopped, m) and stopped.core.step == 7
    assert "ModelCheckpoint: model saved to" in capsys.readouterr().out
    # A name that needs a validation metric cannot be written mid-epoch: said, not a crash.
    cb = ModelCheckpoint(str(tmp_path / "v-{val_loss:.2f}.h5"))
    h = compiled().fit(x, y, batch_size=8, epochs=3, verbose=0, validation_data=(x[:8], y[:8]),
                       callbacks=[cb, SignalAt(3)])
    assert h.interrupted and "ModelCheckpoint: nothing written" in capsys.readouterr().out
    # Between two epochs: the epoch's own file is the checkpoint; nothing more is written.
    between = LambdaCallback(on_epoch_end=lambda e, logs: e == 0 and os.kill(os.getpid(), signal.SIGTERM))
    h = compiled().fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[
        ModelCheckpoint(str(tmp_path / "between-{epoch}.h5")), between])
    out = capsys.readouterr().out
    assert h.interrupted and len(h.epoch) == 1 and "before epoch 2" in out
    assert "ModelCheckpoint: nothing trained since the end of the last epoch" in out
    assert sorted(p.name for p in tmp_path.glob("between-*")) == ["between-1.h5"]


def test_model_checkpoint_state_is_in_the_backup(tmp_path):
    x, y = data(40)
    val = (x[:20], y[:20])

    def ckpt():
        return ModelCheckpoint(str(tmp_path / "best.h5"), save_best_only=True)

    ref_cb = ckpt()
    compiled().fit(x, y, batch_size=8, epochs=4, verbose=0, validation_data=val, callbacks=[ref_cb])
    best = ref_cb.best
    os.remove(tmp_path / "best.h5")
    train(compiled(), x, y, BackupAndRestore(tmp_path / "b"), [ckpt(), SignalAt(12)], epochs=4, validation_data=val)
    resumed = ckpt()
    train(compiled(), x, y, BackupAndRestore(tmp_path / "b"), [resumed], epochs=4, validation_data=val)
    assert resumed.best == best


def test_model_checkpoint_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"Invalid value for argument `save_freq`.*Received: save_freq='batch'"):
        ModelCheckpoint("x.h5", save_freq="batch")
    with pytest.raises(ValueError, match=r"Unknown value for `mode` argument of ModelCheckpoint"):
        ModelCheckpoint("x.h5", mode="up")
    with pytest.raises(ValueError, match=r"filepath must be a file name"):
        ModelCheckpoint(3)
    with pytest.raises(ValueError, match=r"Invalid value for argument `save_best_only`"):
        ModelCheckpoint("x.h5", save_best_only="yes")
    with pytest.raises(TypeError, match=r"Unrecognized keyword arguments passed to ModelCheckpoint"):
        ModelCheckpoint("x.h5", period=2)
    x, y = data(16)
    with pytest.raises(ValueError, match=r"save_best_only needs 'val_loss'.*only the training metrics of the batch"):
        compiled().fit(x, y, batch_size=8, verbose=0,
                       callbacks=[ModelCheckpoint(str(tmp_path / "x.h5"), save_best_only=True, save_freq=1)])
    with pytest.raises(KeyError, match=r"failed to format the filepath"):
        compiled().fit(x, y, batch_size=8, verbose=0, callbacks=[ModelCheckpoint(str(tmp_path / "{nope}.h5"))])


# ------------------------------------------------------------------ on a GPU (same device kind)
def on_the_gpu(test):
    """gpu_target's marks: `gpu`, skipped with the reason without a usable GPU, TF32 off."""
    for mark in reversed(GPU_MARKS):
        test = mark(test)
    return test


@on_the_gpu
@pytest.mark.parametrize("source", ["arrays", "hdf5"])
def test_resume_on_the_gpu_is_bitwise_the_uninterrupted_gpu_run(tmp_path, source):
    """Backups and model files written from a GPU model (conv kernels, their moments in the GPU's
    layout) resume on the GPU exactly; an HDF5Dataset's uint8 batches are decoded there."""
    x, y = data()
    path = str(tmp_path / "d.h5")
    write_hdf5(path, {"x": (x * 255).astype(np.uint8), "y": y})

    def source_data():
        return (HDF5Dataset(path, x="x", y="y", batch_size=8, seed=3),) if source == "hdf5" else (x, y)

    def on_gpu(optimizer="adam"):
        m = compiled(optimizer)
        m.to(GPU)
        return m

    ref, again = on_gpu(), on_gpu()
    train(ref, *source_data())
    train(again, *source_data())
    assert same_weights(ref, again), "two uninterrupted runs differ: the GPU step is not deterministic run to run"
    first = on_gpu()
    assert train(first, *source_data(), backup=BackupAndRestore(tmp_path / "b", save_freq=3),
                 extra=[SignalAt(17)]).interrupted
    second = on_gpu()
    train(second, *source_data(), backup=BackupAndRestore(tmp_path / "b", save_freq=3))
    assert same_weights(second, ref)
    # A model file written from the GPU, loaded (on the CPU) and moved back: fit continues exactly.
    ref2 = on_gpu()
    train(ref2, *source_data(), epochs=2)
    half = on_gpu()
    train(half, *source_data(), epochs=1)
    half.save(tmp_path / "m.h5")
    loaded = hpcnn.models.load_model(tmp_path / "m.h5").to(GPU)
    train(loaded, *source_data(), epochs=2, initial_epoch=1)
    assert same_weights(loaded, ref2)
