"""The lock of a backup directory: one training at a time writes backups into it. A second job
pointed at the same ``backup_dir`` (two array tasks given one directory, a job started again by
hand while the requeued one runs) is refused with the directory and the holder named (host, pid,
Slurm job), instead of the two interleaving their backups.

The lock is an OS lock on ``<backup_dir>/backup.lock``, held while ``fit`` runs, so it dies with
the process: a job killed by SIGKILL, by the out-of-memory killer or by a node's reboot never
blocks its restart (a pid file alone would: its process is gone, its file stays). The file holds
the holder's description (JSON), for the message of a refused job only; it is removed when the
lock is released.

Which lock: POSIX record locks (``fcntl.lockf``: fcntl's F_SETLK on the whole file), the locks
that cluster file systems make coherent between nodes: NFS (NLM for v3, in the protocol for v4),
Lustre (mounted with ``-o flock``), GPFS/Spectrum Scale, CephFS, BeeGFS (with global file
locks). ``flock()`` is no better there: Linux's NFS client emulates it with the same POSIX locks,
and on Lustre both kinds need the same mount option. A POSIX lock belongs to the process, and
closing any descriptor of the file releases it: so a process opens the lock file of a directory
once (``_HELD``: a second BackupAndRestore of the same process on the same directory is refused
before the file is opened again). Where the file system has no locks (Lustre mounted without
``flock``: ENOSYS; ENOLCK, EOPNOTSUPP) training goes on unlocked, with a warning that two jobs
on the directory would not be detected. A node that crashed while holding the lock on NFS: the
server releases it when the node's lease ends (NFSv4: about 90 s); a job requeued sooner is
refused with a message that says so.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
import warnings
from typing import Any, Dict, Optional, Tuple

from .config_json import read_config_json

LOCK_FILE = "backup.lock"
# The directories (st_dev, st_ino) whose lock this process holds, and the owner of each lock.
_HELD: Dict[Tuple[int, int], "BackupLock"] = {}
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)  # a file system without locks
_SLURM = ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT")


def holder() -> Dict[str, Any]:
    """This process, as the lock file describes its holder."""
    who: Dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid(),
                           "since": time.strftime("%Y-%m-%d %H:%M:%S")}
    for key in _SLURM:
        if os.environ.get(key):
            who[key] = os.environ[key]
    return who


def describe(who: Dict[str, Any]) -> str:
    """'host n01, pid 1234, Slurm job 5678, since ...' (what is known of a holder)."""
    if not isinstance(who, dict) or not who:
        return "a process that has not written its description yet"
    parts = [f"host {who.get('host', '?')}", f"pid {who.get('pid', '?')}"]
    if who.get("SLURM_JOB_ID"):
        job = str(who["SLURM_JOB_ID"])
        if who.get("SLURM_ARRAY_JOB_ID") and who.get("SLURM_ARRAY_TASK_ID"):
            job += f" (array {who['SLURM_ARRAY_JOB_ID']}_{who['SLURM_ARRAY_TASK_ID']})"
        parts.append(f"Slurm job {job}")
    if who.get("since"):
        parts.append(f"since {who['since']}")
    return ", ".join(str(p) for p in parts)


def _read_holder(fd: int) -> Dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        who = read_config_json(raw, "the lock file's holder") if raw else {}
    except (OSError, ValueError):
        return {}
    return who if isinstance(who, dict) else {}


class BackupLock:
    """The lock of one backup directory, held by this process (``acquire``) until ``release``."""

    def __init__(self, directory: str, key: Tuple[int, int], fd: Optional[int], owner: Any) -> None:
        self.directory, self.key, self.fd, self.owner = directory, key, fd, owner

    @property
    def path(self) -> str:
        return os.path.join(self.directory, LOCK_FILE)

    @classmethod
    def acquire(cls, directory: str, owner: Any, caller: str = "BackupAndRestore") -> "BackupLock":
        """Takes the lock of `directory` (which exists) for `owner` (a callback: taking it again for
        the same owner returns the lock it holds). ValueError naming the directory and the holder
        when another training holds it."""
        st = os.stat(directory)
        key = (st.st_dev, st.st_ino)
        held = _HELD.get(key)
        if held is not None:
            if held.owner is owner:
                return held
            raise ValueError(f"{caller}: backup_dir '{directory}' is in use by another {type(held.owner).__name__} of "
                             f"this process ({describe(holder())}): a fit that is still running, or one in another "
                             "thread. Two trainings writing one backup directory would interleave their backups: "
                             "give each its own backup_dir")
        path = os.path.join(directory, LOCK_FILE)
        for _ in range(10):  # (the file may be removed by its holder between our open and our lock)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EAGAIN):
                    who = _read_holder(fd)
                    os.close(fd)
                    raise ValueError(
                        f"{caller}: backup_dir '{directory}' is in use by another training ({describe(who)}): two "
                        "jobs writing one backup directory would interleave their backups, so this one does not "
                        "start. Give each job its own backup_dir, or wait until that one ends (a job that was "
                        "killed releases the lock at once; one whose node crashed, when the file server notices: "
                        "about 90 s on NFSv4)") from None
                os.close(fd)
                if e.errno in _NO_LOCKS:
                    warnings.warn(f"{caller}: the file system of backup_dir '{directory}' has no file locks "
                                  f"({e.strerror}): a second job pointed at the same directory would not be "
                                  "detected (on Lustre, mount with -o flock)", RuntimeWarning, stacklevel=3)
                    lock = cls(directory, key, None, owner)
                    _HELD[key] = lock
                    return lock
                raise
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # locked a file its holder had just removed: lock the one there now
                os.close(fd)
                continue
            try:  # the description is for a refused job's message only: a full disk does not matter
                data = json.dumps(holder()).encode("utf-8")
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)
            except OSError:
                pass
            lock = cls(directory, key, fd, owner)
            _HELD[key] = lock
            return lock
        raise RuntimeError(f"{caller}: the lock file '{path}' kept being replaced while this job tried to lock it")

    def release(self) -> None:
        """Removes the lock file and releases the lock (idempotent)."""
        if _HELD.get(self.key) is self:
            del _HELD[self.key]
        if self.fd is None:
            return
        try:  # removed while still held: a job that opened it meanwhile sees another file and retries
            if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                os.remove(self.path)
        except OSError:
            pass
        os.close(self.fd)  # releases the lock
        self.fd = None


__all__ = ["LOCK_FILE", "BackupLock", "describe", "holder"]
