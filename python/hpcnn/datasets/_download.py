"""Downloads with checksum verification and a progress bar (never called by the tests)."""
from __future__ import annotations

import hashlib
import os
import sys
import time
import urllib.request
from typing import Optional


def data_dir() -> str:
    """Where datasets are looked for and downloaded: $HPCNN_DATA_DIR, else ~/.hpcnn/datasets."""
    return os.environ.get("HPCNN_DATA_DIR") or os.path.join(os.path.expanduser("~"), ".hpcnn", "datasets")


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
    def __init__(self, name: str, total: int, stream=None):
        self.name, self.total, self.done = name, total, 0
        self.stream = stream or sys.stderr
        self.t0 = self.last = time.monotonic()

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last < 0.2 and self.done != self.total:
            return
        self.last = now
        rate = self.done / max(now - self.t0, 1e-9) / 1e6
        if self.total > 0:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(30 * frac)
            msg = f"\r{self.name}: [{bar:<30}] {100 * frac:5.1f}% {self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB {rate:.1f} MB/s"
        else:
            msg = f"\r{self.name}: {self.done / 1e6:.1f} MB {rate:.1f} MB/s"
        self.stream.write(msg)
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


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
        except OSError as e:  # URLError, timeouts, DNS: typical of compute nodes without internet
            raise OSError(f"cannot download {url} ({e}); on a node without internet, run the download on "
                          f"a login node, or copy the file to '{dest}', or pass path=...") from e
        with r, open(part, "wb") as out:
            total = int(r.headers.get("Content-Length") or 0)
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
