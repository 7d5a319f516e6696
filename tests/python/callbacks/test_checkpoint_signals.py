"""Real signals sent from outside to a training process (issue 11): a process trains with
BackupAndRestore(save_freq=3 batches); the test sends SIGTERM (or SIGUSR1, SIGINT) in the middle of
an epoch, or SIGKILL (then the last complete backup is all there is); a second process resumes; its
final weights are bitwise those of an uninterrupted process. With arrays and with an HDF5Dataset,
shuffle and dropout on. Every process has a timeout, so nothing can hang CI."""
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from hpcnn.data import write_hdf5

TIMEOUT = 180  # seconds for any one training process

CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import hpcnn
    from hpcnn import interrupts
    from hpcnn.callbacks import BackupAndRestore, Callback
    from hpcnn.layers import Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D

    kind, data_dir, backup, out, pause, model_seed, data_seed = sys.argv[1:8]
    pause = int(pause)
    model = hpcnn.Sequential([
        InputLayer(input_shape=[8, 8, 2]),
        Conv2D(4, 3, padding="same", activation="relu"),
        MaxPooling2D(2),
        Flatten(),
        Dense(16, activation="relu"),
        Dropout(0.3),
        Dense(3, activation="softmax"),
    ], seed=None if model_seed == "none" else int(model_seed))
    model.compile(hpcnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])

    class Pause(Callback):
        # Says where training is; at step `pause` waits (up to a minute) for the test's signal.
        def on_train_batch_end(self, batch, logs=None):
            step = self.model.core.step
            print(f"step {step}", flush=True)
            if step == pause:
                print("paused", flush=True)
                deadline = time.monotonic() + 60
                while interrupts.stop_requested() is None and time.monotonic() < deadline:
                    time.sleep(0.01)

    callbacks = [Pause()] + ([] if backup == "none" else [BackupAndRestore(backup, save_freq=3)])
    if kind == "arrays":
        x = np.load(data_dir + "/x.npy")
        y = np.load(data_dir + "/y.npy")
        h = model.fit(x, y, batch_size=8, epochs=3, shuffle=True, verbose=2, callbacks=callbacks,
                      validation_data=(x[:16], y[:16]))
    else:
        ds = hpcnn.data.HDF5Dataset(data_dir + "/d.h5", x="x", y="y", batch_size=8, shuffle=True,
                                    seed=None if data_seed == "none" else int(data_seed))
        h = model.fit(ds, epochs=3, verbose=2, callbacks=callbacks)
    if not h.interrupted:
        np.savez(out, *model.get_weights())
    print("RESULT " + json.dumps({"interrupted": h.interrupted, "by": h.interrupted_by, "epochs": h.epoch,
                                  "loss": h.history.get("loss"), "step": int(model.core.step)}), flush=True)
""")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("signals")
    rng = np.random.default_rng(1)
    x = rng.random((88, 8, 8, 2), dtype=np.float32)  # 11 batches of 8 per epoch
    y = rng.integers(0, 3, 88)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)
    write_hdf5(str(d / "d.h5"), {"x": (x * 255).astype(np.uint8), "y": y})
    (d / "child.py").write_text(CHILD)
    return d


class Child:
    """A training process whose output lines a thread collects (a paused child prints nothing more,
    so reading must not wait on buffered lines)."""

    def __init__(self, workdir, kind, backup, out, pause=0, model_seed="7", data_seed="11", sigint_ignored=False):
        env = dict(os.environ, HPCNN_NUM_THREADS="2", PYTHONUNBUFFERED="1")  # the same threads in every run
        # sigint_ignored: started as a background job is (`cmd &` in a batch script, nohup), with SIGINT
        # ignored from the start.
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
        self.proc = subprocess.Popen([sys.executable, str(workdir / "child.py"), kind, str(workdir), str(backup),
                                      str(out), str(pause), model_seed, data_seed], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env, preexec_fn=ignore)
        self.lines = queue.Queue()
        self.seen = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for_line(self, wanted):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.seen.append(line)
            if line == wanted:
                return
        self.proc.kill()
        raise AssertionError(f"the training process never printed {wanted!r}; it printed:\n" + "\n".join(self.seen[-40:]))

    def finish(self):
        """(exit status, all output, the RESULT dict or None)."""
        try:
            self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the training process did not finish:\n" + "\n".join(self.seen[-40:]))
        self.reader.join(timeout=30)
        while True:
            line = self.lines.get_nowait() if not self.lines.empty() else None
            if line is None:
                break
            self.seen.append(line)
        self.proc.stdout.close()
        results = [line for line in self.seen if line.startswith("RESULT ")]
        return self.proc.returncode, "\n".join(self.seen), (json.loads(results[-1][7:]) if results else None)


def weights(path):
    with np.load(path) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


@pytest.fixture(scope="module")
def reference(workdir):
    """Final weights and losses of uninterrupted runs, one per data kind."""
    refs = {}
    for kind in ("arrays", "hdf5"):
        out = workdir / f"ref-{kind}.npz"
        code, text, result = Child(workdir, kind, "none", out).finish()
        assert code == 0 and result and not result["interrupted"], text[-3000:]
        refs[kind] = (weights(out), result)
    return refs


@pytest.mark.parametrize("kind", ["arrays", "hdf5"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_a_process_stopped_by_a_signal_resumes_exactly_in_the_next_process(workdir, reference, tmp_path, kind, sig):
    backup = tmp_path / "backup"
    pause = 17  # epoch 2, batch 6 of 11; backups every 3 steps: 3, 6, ..., 15
    child = Child(workdir, kind, backup, tmp_path / "unused.npz", pause=pause)
    child.wait_for_line("paused")
    child.proc.send_signal(getattr(signal, sig))
    code, text, result = child.finish()
    if sig == "SIGKILL":
        assert code == -signal.SIGKILL and result is None
        assert [line for line in text.splitlines() if line.startswith("step ")][-1] == f"step {pause}"
        resume_at = 15  # the last complete backup
    else:
        assert code == 0, text[-3000:]
        assert result["interrupted"] and result["by"] == "SIGTERM" and result["step"] == pause
        assert "Training stopped by SIGTERM after batch 6 of 11 of epoch 2" in text
        resume_at = pause  # the final backup, written at the batch boundary after the signal
    # Two generations; after SIGKILL also the lock file of the killed job (its OS lock died with it:
    # the resume below takes the lock again).
    names = sorted(os.listdir(backup))
    assert names == ["backup-previous.h5", "backup.h5"] + (["backup.lock"] if sig == "SIGKILL" else []), names
    out = tmp_path / "resumed.npz"
    # Another process, without the model's seed nor (HDF5) the dataset's: the backup has both.
    code, text, result = Child(workdir, kind, backup, out, model_seed="none", data_seed="none").finish()
    assert code == 0 and not result["interrupted"], text[-3000:]
    assert f"at epoch 2, batch {resume_at - 11 + 1} of 11" in text
    assert sum(line.startswith("step ") for line in text.splitlines()) == 33 - resume_at  # only those not trained
    ref_weights, ref_result = reference[kind]
    for a, b in zip(weights(out), ref_weights):
        np.testing.assert_array_equal(a, b)
    assert result["epochs"] == [0, 1, 2] and result["loss"] == ref_result["loss"]
    assert not backup.exists()  # training completed: the backup was deleted


@pytest.mark.parametrize("sig", ["SIGINT", "SIGUSR1"])
def test_sigint_and_sigusr1_from_outside_stop_at_a_batch_boundary(workdir, reference, tmp_path, sig, default_sigint):
    backup = tmp_path / "backup"
    child = Child(workdir, "arrays", backup, tmp_path / "unused.npz", pause=5)
    child.wait_for_line("paused")
    child.proc.send_signal(getattr(signal, sig))
    code, text, result = child.finish()
    assert code == 0 and result["interrupted"] and result["by"] == sig and result["step"] == 5, text[-3000:]
    assert ("Training interrupted (Ctrl-C)" if sig == "SIGINT" else "Training stopped by SIGUSR1") in text
    out = tmp_path / "resumed.npz"
    code, text, result = Child(workdir, "arrays", backup, out).finish()
    assert code == 0, text[-3000:]
    for a, b in zip(weights(out), reference["arrays"][0]):
        np.testing.assert_array_equal(a, b)


def test_a_background_job_ignores_sigint_and_still_stops_on_sigusr1(workdir, tmp_path):
    """A process started with SIGINT ignored (a batch script's `python train.py &`) keeps it
    ignored during fit: the SIGINT neither stops training nor raises KeyboardInterrupt, and the
    SIGUSR1 that follows is the one that stops it at the batch boundary."""
    child = Child(workdir, "arrays", "none", tmp_path / "unused.npz", pause=5, sigint_ignored=True)
    child.wait_for_line("paused")
    child.proc.send_signal(signal.SIGINT)
    child.proc.send_signal(signal.SIGINT)
    time.sleep(0.2)  # a SIGINT fit had caught would be recorded by now: the pause would end with it
    child.proc.send_signal(signal.SIGUSR1)
    code, text, result = child.finish()
    assert code == 0 and result["interrupted"] and result["by"] == "SIGUSR1" and result["step"] == 5, text[-3000:]
    assert "KeyboardInterrupt" not in text and "Ctrl-C" not in text
