"""Downloads with checksum verification and a progress bar, the data directory, and the error for
a dataset that is neither here nor downloadable. The tests download only from file:// URLs."""
from __future__ import annotations

import hashlib
import os
import sys
import time
import urllib.request
from typing import Optional

from .. import progress as _progress
from .. import suggestions
from ..paths import data_dir  # one definition: HDF5Dataset looks for bare names there too


def source_url(dataset_var: str, default: str) -> str:
    """The URL to download from: $HPCNN_<DATASET>_URL (a mirror, or a file:// URL) or `default`.
    Checksums are verified either way."""
    return os.environ.get(f"HPCNN_{dataset_var}_URL") or default


class DatasetUnavailable(FileNotFoundError):
    """A dataset is not on this machine and could not be downloaded. ``str()`` is written for the
    Python API; the command line builds its own message from the attributes."""

    def __init__(self, name: str, where: str, reason: str, kind: str) -> None:
        self.name, self.where, self.reason, self.kind = name, where, reason, kind
        super().__init__(
            f"{name} is not in '{where}' and cannot be downloaded ({reason}). On a node without internet: "
            f"download it on a login node with `{suggestions.convert_download(kind)}` (or call this function "
            f"there), or copy the official files to '{where}', or pass path=... with a local copy")


def file_digest(path: str, algorithm: str = "md5") -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: str, md5: Optional[str] = None, sha256: Optional[str] = None) -> None:
    """ValueError naming the file and both digests when a checksum does not match."""
    for algo, want in (("md5", md5), ("sha256", sha256)):
        if want:
            got = file_digest(path, algo)
            if got.lower() != want.lower():
                raise ValueError(f"checksum mismatch for '{path}': {algo} {got}, expected {want} "
                                 "(incomplete download or a different file)")


class _Progress:
    """A download's progress: redrawn in place on a terminal or in Jupyter, one line at the end
    in a log file (see hpcnn.progress)."""

    def __init__(self, name: str, total: int, stream=None):
        self.name, self.total, self.done = name, total, 0
        self.live = _progress.LiveText(stream or sys.stderr)
        self.stream = self.live.stream
        self.t0 = self.last = time.monotonic()

    def _text(self) -> str:
        rate = self.done / max(time.monotonic() - self.t0, 1e-9) / 1e6
        if self.total > 0:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(30 * frac)
            return (f"{self.name}: [{bar:<30}] {100 * frac:5.1f}% {self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB "
                    f"{rate:.1f} MB/s")
        return f"{self.name}: {self.done / 1e6:.1f} MB {rate:.1f} MB/s"

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last < 0.2 and self.done != self.total:
            return
        self.last = now
        self.live.show(self._text())

    def close(self) -> None:
        self.live.close(self._text())


def download(url: str, dest: str, md5: Optional[str] = None, sha256: Optional[str] = None,
             progress: bool = True, timeout: float = 60.0) -> str:
    """Download `url` to `dest` (a file path) unless a verified copy is already there.

    The bytes go to `dest + '.part'` and are renamed only after the checksum matches, so an
    interrupted or corrupted download never leaves a file that looks complete.
    """
    if os.path.exists(dest):
        verify(dest, md5, sha256)
        return dest
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    part = dest + ".part"
    try:
        try:
            r = urllib.request.urlopen(url, timeout=timeout)
        except (OSError, ValueError) as e:  # URLError, timeouts, DNS (compute nodes without internet)
            raise OSError(f"cannot download {url}: {getattr(e, 'reason', None) or e}") from None
        with r, open(part, "wb") as out:
            total = int(r.headers.get("Content-Length") or 0)
            if progress:
                print(f"downloading {url} -> {dest}", file=sys.stderr, flush=True)
            bar = _Progress(os.path.basename(dest), total) if progress else None
            while True:
                block = r.read(1 << 20)
                if not block:
                    break
                out.write(block)
                if bar:
                    bar.update(len(block))
            if bar:
                bar.close()
        verify(part, md5, sha256)
        os.replace(part, dest)
    except BaseException:
        if os.path.exists(part):
            os.remove(part)
        raise
    return dest
