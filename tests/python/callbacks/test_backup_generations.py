"""BackupAndRestore's two generations and its lock (issue 26).

A damaged newest backup (truncated, bytes flipped in a weight or in the description, a dataset
removed, zeroed: a node that died while copying it to a shared file system) is detected by its
checksums before any weight changes; fit resumes from the previous generation, bitwise as an
uninterrupted run, with a RuntimeWarning naming the skipped file and why; when no generation is
good, a ValueError names both files and nothing trains. A backup of another training is refused,
never skipped. Two jobs pointed at one backup directory: the second is refused naming the holder
(host, pid, Slurm job); a SIGKILLed holder's lock dies with it, so a requeued job restarts.
"""
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest

from hpcnn.callbacks import BackupAndRestore, Callback
from hpcnn.data import read_dataset, write_hdf5
from hpcnn.formats import backup_lock
from hpcnn.formats.backup_lock import BackupLock
from tests.support.mpi_runs import mpi_missing, mpirun
from tests.support import paths
from tests.support.checkpoint_runs import SignalAt, compiled, data, same_weights, train



def two_generations(tmp_path, x, y):
    """A run stopped after step 8 with backups every 3 steps: backup.h5 (step 8), backup-previous.h5 (6)."""
    d = tmp_path / "b"
    train(compiled(), x, y, BackupAndRestore(d, save_freq=3), [SignalAt(8)])
    assert sorted(os.listdir(d)) == ["backup-previous.h5", "backup.h5"]
    return d


def flip_inside(path, needle, at=None):
    """Flips the lowest bit of one byte inside the first occurrence of `needle` in the file."""
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    i = raw.find(needle)
    assert i >= 0
    raw[i + (len(needle) // 2 if at is None else at)] ^= 1
    with open(path, "wb") as f:
        f.write(bytes(raw))


def damage(path, kind):
    size = os.path.getsize(path)
    if kind == "truncated to half":
        with open(path, "r+b") as f:
            f.truncate(size // 2)
    elif kind == "truncated by 1 byte":
        with open(path, "r+b") as f:
            f.truncate(size - 1)
    elif kind == "zeroed tail":
        with open(path, "r+b") as f:
            f.seek(size - 2048)
            f.write(b"\0" * 2048)
    elif kind == "weight bit flipped":  # a finite float still: only the checksum sees it
        flip_inside(path, read_dataset(path, "weight_003").tobytes(), at=0)
    elif kind == "optimizer bit flipped":
        flip_inside(path, read_dataset(path, "optimizer_001").tobytes()[:64], at=0)
    elif kind == "description byte changed":  # still valid JSON: only the checksum sees it
        raw = bytes(read_dataset(path, "hpcnn_backup_json"))
        written = raw.find(b'"written": "') + len(b'"written": "')
        flip_inside(path, raw[written:written + 19], at=18)  # the timestamp's last digit
    elif kind == "dataset removed":
        with h5py.File(path, "r+") as f:
            del f["optimizer_000"]
    elif kind == "checksum removed":
        with h5py.File(path, "r+") as f:
            del f["hpcnn_backup_json_sha256"]
    else:
        raise AssertionError(kind)


KINDS = {"truncated to half": "not an hpcnn backup file", "truncated by 1 byte": "",
         "zeroed tail": "", "weight bit flipped": "checksum of its dataset 'weight_003' does not match",
         "optimizer bit flipped": "checksum of its dataset 'optimizer_001' does not match",
         "description byte changed": "checksum of its description does not match",
         "dataset removed": "optimizer_000 are missing", "checksum removed": "hpcnn_backup_json_sha256"}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_damaged_newest_backup_resumes_from_the_previous_one_with_a_warning(tmp_path, kind):
    x, y = data()
    ref = compiled()
    train(ref, x, y)
    d = two_generations(tmp_path, x, y)
    good = (d / "backup-previous.h5").read_bytes()
    damage(str(d / "backup.h5"), kind)
    m = compiled(seed=99)
    cb = BackupAndRestore(d, save_freq=3, delete_checkpoint=False)
    with pytest.warns(RuntimeWarning) as caught:
        train(m, x, y, cb, [SignalAt(12)])  # resumes at step 6, writes step 9, stops at 12
    text = " ".join(str(w.message) for w in caught if "BackupAndRestore" in str(w.message))
    assert f"skipped '{d / 'backup.h5'}' (" in text and KINDS[kind] in text, text
    assert f"Resuming from the previous backup '{d / 'backup-previous.h5'}'" in text, text
    assert "continuing from epoch 1 after batch 6" in text, text
    assert cb.resumed_from == {"epoch": 0, "batch": 6}
    # The damaged file is never kept as a generation: the good one stays the previous one until the
    # next backup (step 9) is there, then that one; never the damaged file.
    assert sorted(os.listdir(d)) == ["backup-previous.h5", "backup.h5"]
    assert (d / "backup-previous.h5").read_bytes() != good  # step 9's backup, then step 12's: rotated
    m2 = compiled(seed=7)
    cb2 = BackupAndRestore(d, save_freq=3)
    train(m2, x, y, cb2)
    assert cb2.resumed_from == {"epoch": 0, "batch": 12} and same_weights(m2, ref)  # bitwise


def test_the_damaged_newest_is_dropped_at_the_next_backup_and_the_good_one_kept(tmp_path):
    x, y = data()
    d = two_generations(tmp_path, x, y)
    good = (d / "backup-previous.h5").read_bytes()
    damage(str(d / "backup.h5"), "weight bit flipped")
    with pytest.warns(RuntimeWarning, match="skipped"):
        train(compiled(), x, y, BackupAndRestore(d, save_freq=3), [SignalAt(9)])  # one new backup: step 9
    assert sorted(os.listdir(d)) == ["backup-previous.h5", "backup.h5"]
    assert (d / "backup-previous.h5").read_bytes() == good  # the good one, not the damaged newest
    cb = BackupAndRestore(d, save_freq=3)
    train(compiled(), x, y, cb)
    assert cb.resumed_from == {"epoch": 0, "batch": 9}


@pytest.mark.parametrize("previous", ["damaged", "missing"])
def test_no_good_generation_is_a_value_error_naming_both_files(tmp_path, previous):
    x, y = data()
    d = two_generations(tmp_path, x, y)
    damage(str(d / "backup.h5"), "weight bit flipped")
    if previous == "damaged":
        damage(str(d / "backup-previous.h5"), "truncated to half")
    else:
        os.remove(d / "backup-previous.h5")
    m = compiled()
    before = m.get_weights()
    pattern = rf"cannot resume: no backup in '{d}' is usable: '{d / 'backup.h5'}' \(damaged: the checksum"
    if previous == "damaged":
        pattern += rf".*; '{d / 'backup-previous.h5'}' \(.*not an hpcnn backup file"
    with pytest.raises(ValueError, match=pattern + r".*Nothing was changed.*delete '.*b' to do that"):
        train(m, x, y, BackupAndRestore(d))
    assert m.core.step == 0 and all(np.array_equal(a, b) for a, b in zip(before, m.get_weights()))
    assert not (d / "backup.lock").exists()  # released when fit raised


def test_a_newest_backup_of_another_training_is_refused_not_skipped(tmp_path):
    x, y = data()
    d = two_generations(tmp_path, x, y)
    digests = {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in os.listdir(d)}
    with pytest.raises(ValueError, match="written training with Adam, this model is compiled with SGD"):
        train(compiled("sgd"), x, y, BackupAndRestore(d))
    assert {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in os.listdir(d)} == digests


def test_a_new_backup_left_before_its_rename_is_the_newest(tmp_path):
    # Killed between the write of backup-next.h5 and its renames: it is complete and the newest.
    x, y = data()
    ref = compiled()
    train(ref, x, y)
    d = two_generations(tmp_path, x, y)
    os.replace(d / "backup.h5", d / "backup-next.h5")  # (as if backup.h5 were the one before it)
    cb = BackupAndRestore(d, save_freq=3, delete_checkpoint=False)
    m = compiled(seed=1)
    train(m, x, y, cb)
    assert cb.resumed_from == {"epoch": 0, "batch": 8} and same_weights(m, ref)
    assert sorted(os.listdir(d)) == ["backup-previous.h5", "backup.h5"]


def test_a_backup_of_format_version_1_without_checksums_still_resumes(tmp_path):
    x, y = data()
    ref = compiled()
    train(ref, x, y)
    d = two_generations(tmp_path, x, y)
    os.remove(d / "backup-previous.h5")
    path = str(d / "backup.h5")
    with h5py.File(path, "r") as f:
        arrays = {k: f[k][()] for k in f.keys() if k != "hpcnn_backup_json_sha256"}
    meta = json.loads(bytes(arrays["hpcnn_backup_json"]).decode())
    meta["format_version"] = 1
    del meta["checksums"]
    arrays["hpcnn_backup_json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    os.remove(path)
    write_hdf5(path, arrays, compression=None)
    cb = BackupAndRestore(d)
    m = compiled(seed=3)
    train(m, x, y, cb)
    assert cb.resumed_from == {"epoch": 0, "batch": 8} and same_weights(m, ref)


def test_double_checkpoint_false_keeps_one_file(tmp_path):
    x, y = data()
    d = tmp_path / "b"
    train(compiled(), x, y, BackupAndRestore(d, save_freq=3, double_checkpoint=False), [SignalAt(8)])
    assert os.listdir(d) == ["backup.h5"]
    damage(str(d / "backup.h5"), "weight bit flipped")
    with pytest.raises(ValueError, match=r"no backup in .* is usable: .*backup.h5' \(damaged"):
        train(compiled(), x, y, BackupAndRestore(d, double_checkpoint=False))


# ------------------------------------------------------------------ the lock
HOLDER = textwrap.dedent("""
    import os, sys, time
    from hpcnn.callbacks import BackupAndRestore, Callback
    from tests.support.checkpoint_runs import compiled, data

    class Pause(Callback):
        def on_train_batch_end(self, batch, logs=None):
            if self.model.core.step == 4:
                print("paused", flush=True)
                time.sleep(600)

    x, y = data()
    compiled().fit(x, y, batch_size=8, epochs=3, verbose=0,
                   callbacks=[BackupAndRestore({d!r}, save_freq=3), Pause()])
""")


def start_holder(d, **env):
    # In the repository root: `python -c` finds the tests package in the current folder.
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(d=str(d))], stdout=subprocess.PIPE, cwd=paths.ROOT,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, **env))
    line = proc.stdout.readline()
    assert line.strip() == "paused", line + proc.stdout.read()[-3000:]
    return proc


def test_a_second_job_on_the_same_backup_dir_is_refused_and_a_killed_holder_blocks_nothing(tmp_path):
    x, y = data()
    d = tmp_path / "b"
    holder = start_holder(d, SLURM_JOB_ID="4242", SLURM_ARRAY_JOB_ID="4240", SLURM_ARRAY_TASK_ID="2")
    try:
        m = compiled()
        before = m.get_weights()
        digests = {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in os.listdir(d) if n.endswith(".h5")}
        pattern = (rf"backup_dir '{d}' is in use by another training \(host {socket.gethostname()}, pid {holder.pid}, "
                   r"Slurm job 4242 \(array 4240_2\), since .*\): two jobs writing one backup directory would "
                   r"interleave their backups")
        with pytest.raises(ValueError, match=pattern):
            train(m, x, y, BackupAndRestore(d, save_freq=3))
        assert m.core.step == 0 and all(np.array_equal(a, b) for a, b in zip(before, m.get_weights()))
        assert {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in digests} == digests
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    # The killed job's lock file is still there (a pid file would now block); its OS lock died with it.
    assert (d / "backup.lock").exists()
    cb = BackupAndRestore(d, save_freq=3)
    m = compiled()
    train(m, x, y, cb)  # the requeued job
    assert cb.resumed_from == {"epoch": 0, "batch": 3}
    assert not d.exists()  # completed: backups, lock file and directory removed


def test_two_callbacks_of_one_process_on_one_dir_are_refused(tmp_path):
    d = str(tmp_path)
    a, b = object(), object()
    lock = BackupLock.acquire(d, a)
    try:
        assert BackupLock.acquire(d, a) is lock  # the same owner: the lock it holds
        with pytest.raises(ValueError, match=rf"backup_dir '{d}' is in use by another object of this process"):
            BackupLock.acquire(d, b)
        assert json.loads((tmp_path / "backup.lock").read_text())["pid"] == os.getpid()
    finally:
        lock.release()
    assert not (tmp_path / "backup.lock").exists()
    BackupLock.acquire(d, b).release()


def test_the_lock_is_released_when_fit_raises(tmp_path):
    x, y = data()
    d = tmp_path / "b"

    class Boom(Callback):
        def on_train_batch_end(self, batch, logs=None):
            if self.model.core.step == 4:
                raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        train(compiled(), x, y, BackupAndRestore(d, save_freq=3), [Boom()])
    assert sorted(os.listdir(d)) == ["backup.h5"]  # no lock file left
    cb = BackupAndRestore(d, save_freq=3)
    train(compiled(), x, y, cb)  # another callback of this process takes the directory
    assert cb.resumed_from == {"epoch": 0, "batch": 3}


def test_a_file_system_without_locks_trains_with_a_warning(tmp_path, monkeypatch):
    def no_locks(fd, op):
        raise OSError(38, "Function not implemented")  # ENOSYS: Lustre mounted without -o flock

    monkeypatch.setattr(backup_lock.fcntl, "lockf", no_locks)
    x, y = data(40)
    with pytest.warns(RuntimeWarning, match=r"backup_dir '.*' has no file locks .* would not be detected"):
        train(compiled(), x, y, BackupAndRestore(tmp_path / "b"), epochs=1)


@pytest.mark.skipif(bool(mpi_missing()) and os.environ.get("HPCNN_EXPECT_MPI") != "1",
                    reason=mpi_missing() or "MPI")
def test_under_mpi_the_chief_is_refused_and_every_rank_stops(tmp_path):
    d = tmp_path / "backup"
    d.mkdir()
    lock = BackupLock.acquire(str(d), "another job")  # this process stands for the other job
    try:
        proc = mpirun("backup_locked", tmp_path, ranks=2, timeout=120)
    finally:
        lock.release()
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-3000:]
    refusal = f"ValueError: BackupAndRestore: backup_dir '{d}' is in use by another training (host " \
              f"{socket.gethostname()}, pid {os.getpid()}"
    assert refusal in text  # the chief's
    assert re.search(r"rank 1 \(host .*\) stops: rank 0 \(host .*\) failed: " + re.escape(refusal), text), text[-3000:]
    assert "no answer" not in text  # the other rank stopped on the chief's error, not on a timeout
    assert not list(tmp_path.glob("backup_locked_rank*.npz"))  # no rank trained to the end
    assert sorted(os.listdir(d)) == []
