"""One writer of hpcnn on a disk that fills up, in a process of its own (tests/python/formats/test_full_disk.py runs
it): the file is written once normally (the previous file), then again at several levels of
"fullness", each of which must be an OSError that leaves the previous file as it was, loadable, with
no temporary file behind. Prints one line "RESULT <json>" and exits 0; a crash (HDF5 1.10 crashes
at exit after a failed close) is a non-zero exit the test sees.

    python -m tests.support.full_disk_child fsize|tmpfs <case> <directory>

fsize: the file size limit (RLIMIT_FSIZE, soft) is set below the file's size, SIGXFSZ ignored, so
that write() fails with EFBIG; tmpfs: <directory> is a small file system filled with a filler file
until only part of the file's size is free (ENOSPC).
"""
import hashlib
import json
import os
import resource
import signal
import sys

import numpy as np

import hpcnn
from hpcnn.callbacks import BackupAndRestore, ModelCheckpoint
from hpcnn.data import read_dataset, write_hdf5
from tests.support.small_models import small_model

FRACTIONS = (0.0, 0.25, 0.5, 0.75)  # of the file's size that the disk (or the limit) still allows


def model():
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    return m


def data():
    rng = np.random.default_rng(0)
    return rng.random((24, 8, 8, 2), dtype=np.float32), rng.integers(0, 3, 24)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Limit:
    """The disk allows only `room` more bytes: a file size limit, or a filler file."""

    def __init__(self, mode, directory, room):
        self.mode, self.directory, self.room = mode, directory, int(room)
        self.filler = os.path.join(directory, "filler")  # (tmpfs: on the small file system itself)

    def __enter__(self):
        if self.mode == "fsize":
            self.before = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.setrlimit(resource.RLIMIT_FSIZE, (max(self.room, 1), self.before[1]))
        else:
            st = os.statvfs(self.directory)
            free = st.f_bavail * st.f_frsize
            with open(self.filler, "wb") as f:
                f.write(b"\0" * max(free - self.room, 0))
        return self

    def __exit__(self, *exc):
        if self.mode == "fsize":
            resource.setrlimit(resource.RLIMIT_FSIZE, self.before)
        else:
            os.remove(self.filler)


def refused(mode, directory, size, write):
    """Runs write() at each level of fullness; returns [(errno, message, filename)]."""
    out = []
    for fraction in FRACTIONS:
        with Limit(mode, directory, fraction * size):
            try:
                write()
                out.append((None, "written", None))
            except OSError as e:
                out.append((e.errno, str(e), e.filename))
    return out


def main():
    mode, case, directory = sys.argv[1], sys.argv[2], sys.argv[3]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (Python ignores it already: write() then fails with EFBIG)
    x, y = data()
    m = model()
    m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    result = {}
    if case in ("save.h5", "save.keras", "save_weights.weights.h5", "save_weights.h5"):
        what, ext = case.split(".", 1)
        path = os.path.join(directory, "model." + ext)
        write = (lambda: m.save(path)) if what == "save" else (lambda: m.save_weights(path))
        write()
        before = digest(path)
        m.fit(x, y, batch_size=8, epochs=1, verbose=0)  # other weights: a file written now would differ
        result["attempts"] = refused(mode, directory, os.path.getsize(path), write)
        result["unchanged"] = digest(path) == before
        if what == "save":
            hpcnn.models.load_model(path)
        else:
            model().load_weights(path)
        result["targets"] = [path]
    elif case in ("write_hdf5.gzip", "write_hdf5.none"):
        path = os.path.join(directory, "data.h5")
        rng = np.random.default_rng(1)
        arrays = {"x": rng.random((300, 8, 8, 2), dtype=np.float32), "y": rng.integers(0, 9, 300),
                  "small": np.arange(5.0)}
        compression = "gzip" if case.endswith("gzip") else None
        write_hdf5(path, arrays, compression=compression)
        before, x0 = digest(path), arrays["x"]
        arrays["x"] = x0 + 1
        result["attempts"] = refused(mode, directory, os.path.getsize(path),
                                     lambda: write_hdf5(path, arrays, compression=compression))
        result["unchanged"] = digest(path) == before and np.array_equal(read_dataset(path, "x"), x0)
        result["targets"] = [path]
    elif case.startswith("checkpoint"):
        best_only = case == "checkpoint.best_only"
        path = os.path.join(directory, "ckpt.keras")
        m.fit(x, y, batch_size=8, epochs=1, verbose=0,
              callbacks=[ModelCheckpoint(path, monitor="loss", save_best_only=best_only)])
        before = digest(path)
        bests = []

        def write():
            cb = ModelCheckpoint(path, monitor="loss", save_best_only=best_only)
            try:
                m.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[cb])
            finally:
                bests.append(cb.best)

        result["attempts"] = refused(mode, directory, os.path.getsize(path), write)
        result["unchanged"] = digest(path) == before
        result["best_kept"] = all(b == float("inf") for b in bests) if best_only else True
        hpcnn.models.load_model(path)
        result["targets"] = [path]
    elif case == "backup":
        d = os.path.join(directory, "backup")
        m.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[BackupAndRestore(d, delete_checkpoint=False)])
        files = sorted(os.listdir(d))
        before = {n: digest(os.path.join(d, n)) for n in files}

        def write():  # resumes (a read), trains the third epoch and fails to back it up
            m2 = model()
            m2.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[BackupAndRestore(d, delete_checkpoint=False)])

        result["attempts"] = refused(mode, directory, os.path.getsize(os.path.join(d, "backup.h5")), write)
        result["unchanged"] = sorted(os.listdir(d)) == files and all(
            digest(os.path.join(d, n)) == h for n, h in before.items())
        m3 = model()
        cb = BackupAndRestore(d)
        m3.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[cb])
        result["resumed_from"] = cb.resumed_from
        result["files"] = files
        result["targets"] = [os.path.join(d, "backup-next.h5")]
        result["backup_dir"] = d
    else:
        raise SystemExit(f"unknown case {case}")
    result["left"] = sorted(os.listdir(directory))
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
