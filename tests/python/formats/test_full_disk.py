"""Saving on a full or failing disk (issue 26): model.save (.h5, .keras), save_weights (.weights.h5,
.h5), write_hdf5 (the streaming C++ writer, gzip and uncompressed), ModelCheckpoint (save_best_only
too) and BackupAndRestore, on a disk that fills up mid-write, raise an OSError that keeps its errno
(ENOSPC, EFBIG), names the file and says why; the previous file (or backup) is left byte for byte
as it was and loads; no temporary file is left behind; and the process does not crash at exit
(HDF5 1.10 does, after a failed close, unless the writer avoids it).

Two ways to fill a disk, each at four levels (0, 1/4, 1/2, 3/4 of the file's size still free),
each in a child process (tests/support/full_disk_child.py):
  fsize  the file size limit (RLIMIT_FSIZE) below the file's size, SIGXFSZ ignored: write() fails
         with EFBIG. No privileges needed.
  tmpfs  a 2 MiB tmpfs filled up with a filler file: ENOSPC, as on a real full disk. Needs
         mount(2) (root in a container that allows it); skipped with the reason otherwise.
"""
import errno
import json
import os
import subprocess

import pytest
from tests.support import paths

CASES = ["save.h5", "save.keras", "save_weights.weights.h5", "save_weights.h5", "write_hdf5.gzip",
         "write_hdf5.none", "checkpoint", "checkpoint.best_only", "backup"]


def run_child(mode, case, directory):
    proc = subprocess.run(paths.module_command("full_disk_child", mode, case, directory), cwd=paths.ROOT,
                          capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{text[-4000:]}"  # a crash at exit included
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[7:])


@pytest.fixture(scope="module")
def small_tmpfs(tmp_path_factory):
    where = tmp_path_factory.mktemp("tmpfs")
    try:
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot mount a tmpfs to fill up ({e})")
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up (not root, or the container forbids mount: "
                    f"{proc.stderr.strip()[:200]})")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def check(result, mode, directory):
    expected = errno.EFBIG if mode == "fsize" else errno.ENOSPC
    cause = "the file size limit" if mode == "fsize" else "the disk is full"
    for err, message, filename in result["attempts"]:
        assert err == expected, message
        assert cause in message and "Nothing was replaced" in message, message
        assert filename in result["targets"] and f"'{filename}'" in message, message
        if "backup_dir" in result:
            assert message.startswith(f"[Errno {expected}] BackupAndRestore: cannot write a backup (to continue "
                                      f"from the start of epoch 4) in '{result['backup_dir']}'"), message
            assert "backup.h5" in message and "are intact" in message, message
    assert result["unchanged"]  # the previous file(s): the same bytes, loaded after the attempts
    assert result.get("best_kept", True)  # save_best_only: best is the saved file's, not the failed one's
    if "resumed_from" in result:  # the previous backups resume the training
        assert result["files"] == ["backup-previous.h5", "backup.h5"]
        assert result["resumed_from"] == {"epoch": 2, "batch": 0}
        assert result["left"] == []  # training completed: the backup directory removed
    else:
        assert result["left"] == [os.path.basename(result["targets"][0])]  # no temporary file


@pytest.mark.parametrize("case", CASES)
def test_a_file_size_limit_is_a_clear_os_error_and_the_previous_file_stays(tmp_path, case):
    directory = tmp_path / "w"
    directory.mkdir()
    check(run_child("fsize", case, directory), "fsize", directory)


@pytest.mark.parametrize("case", CASES)
def test_a_full_disk_is_a_clear_os_error_and_the_previous_file_stays(small_tmpfs, case):
    directory = small_tmpfs / case
    directory.mkdir()
    try:
        check(run_child("tmpfs", case, directory), "tmpfs", directory)
    finally:
        subprocess.run(["rm", "-rf", str(directory)])
