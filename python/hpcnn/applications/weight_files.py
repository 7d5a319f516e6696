"""The files Keras' applications download, found where Keras keeps them and fetched the way it
does: the same file names, URLs and checksums (Keras' ``file_utils.get_file(fname, origin,
cache_subdir='models', file_hash=...)``), in the same cache folder, ``$KERAS_HOME/models`` or
``~/.keras/models`` (``/tmp/.keras/models`` when that is not writable, as Keras falls back). A
student who ran Keras once on a login node has the files already, and hpcnn's downloads serve
Keras too.

A file in the cache is used when its checksum matches (md5 or sha256 by the length of the hash,
Keras' 'auto'); one that does not match is downloaded again (an interrupted copy). Downloads go to
``<file>.part`` and are renamed only after the checksum matched, so no half-written file ever
looks complete. Where there is no internet (a compute node) the error, :class:`WeightsUnavailable`
(a ``FileNotFoundError``), names the file, its URL and the folder to put it in.

``$HPCNN_KERAS_WEIGHTS_URL``, when set, is the base URL downloaded from instead of Keras' (a mirror
on the cluster, or a ``file://`` folder): ``<base>/<file name>``; the checksums are checked either way.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import urllib.request
from typing import Optional

#: The environment variable naming a mirror of the files (a base URL).
MIRROR_VARIABLE = "HPCNN_KERAS_WEIGHTS_URL"
#: Seconds a download waits for the server before it gives up (a compute node's firewall drops).
TIMEOUT_S = 30.0


class WeightsUnavailable(FileNotFoundError):
    """A file Keras' applications use is neither in the cache nor downloadable here. Its message
    says what to do; ``fname``, ``url`` and ``folder`` say it to programs."""

    def __init__(self, fname: str, url: str, folder: str, reason: str) -> None:
        self.fname, self.url, self.folder, self.reason = fname, url, folder, reason
        super().__init__(
            f"{fname} is not in '{folder}' and cannot be downloaded from {url} ({reason}). On a node without "
            f"internet, download it where there is (a login node: run the same call there, or `wget {url}`) "
            f"and put it into '{folder}' (Keras uses the same folder and file, so a copy Keras downloaded "
            f"serves too); or pass weights='/path/to/{fname}'")


def keras_home() -> str:
    """Keras' folder: $KERAS_HOME, else ~/.keras (keras.config.keras_home's rule)."""
    return os.path.expanduser(os.environ.get("KERAS_HOME") or os.path.join("~", ".keras"))


def cache_folder(subdir: str = "models") -> str:
    """Where the files are kept: <keras_home>/models, or /tmp/.keras/models when Keras' home is
    not writable (Keras' get_file falls back there too)."""
    base = keras_home()
    probe = base if os.path.isdir(base) else os.path.dirname(base.rstrip(os.sep)) or "."
    if not os.access(probe, os.W_OK):
        base = os.path.join("/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir(), ".keras")
    return os.path.join(base, subdir)


def hash_algorithm(file_hash: str) -> str:
    """Keras' 'auto': a 64-digit hash is sha256, any other md5."""
    return "sha256" if len(file_hash) == 64 else "md5"


def file_hash_of(path: str, algorithm: str) -> str:
    """The hex digest of a file, read in blocks."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def matches(path: str, file_hash: Optional[str]) -> bool:
    """Whether the file has the checksum (any file does when no checksum is given)."""
    if not file_hash:
        return True
    return file_hash_of(path, hash_algorithm(file_hash)) == file_hash.lower()


def source_url(fname: str, origin: str) -> str:
    """The URL a file is downloaded from: Keras' `origin`, or the mirror's when one is set."""
    mirror = os.environ.get(MIRROR_VARIABLE)
    return f"{mirror.rstrip('/')}/{fname}" if mirror else origin


def _download(url: str, dest: str, file_hash: Optional[str], progress: bool) -> None:
    """`url` into `dest` through `dest.part`, renamed once the checksum matched. OSError when it
    cannot be fetched; ValueError when the bytes do not have the checksum."""
    part = dest + ".part"
    try:
        try:
            response = urllib.request.urlopen(url, timeout=TIMEOUT_S)
        except (OSError, ValueError) as e:  # URLError, timeouts, DNS (compute nodes without internet)
            raise OSError(str(getattr(e, "reason", None) or e)) from None
        if progress:
            print(f"Downloading data from {url}", file=sys.stderr, flush=True)
        with response, open(part, "wb") as out:
            for block in iter(lambda: response.read(1 << 20), b""):
                out.write(block)
        if not matches(part, file_hash):
            algorithm = hash_algorithm(file_hash or "")
            raise ValueError(f"the file downloaded from {url} has {algorithm} {file_hash_of(part, algorithm)}, "
                             f"expected {file_hash} (an incomplete download or a changed file); nothing was kept")
        os.replace(part, dest)
    except BaseException:
        if os.path.exists(part):
            os.remove(part)
        raise


def get_file(fname: str, origin: str, file_hash: Optional[str] = None, cache_subdir: str = "models",
             progress: bool = True) -> str:
    """The path of `fname` in Keras' cache folder, downloaded from `origin` first when it is not
    there (or its checksum does not match). WeightsUnavailable when it cannot be downloaded."""
    if not fname or os.sep in fname or (os.altsep and os.altsep in fname):
        raise ValueError(f"get_file: fname must be a file name without a folder, got {fname!r}")
    folder = cache_folder(cache_subdir)
    dest = os.path.join(folder, fname)
    stale = os.path.exists(dest)
    if stale and matches(dest, file_hash):
        return dest
    url = source_url(fname, origin)
    try:
        os.makedirs(folder, exist_ok=True)
        _download(url, dest, file_hash, progress)
    except OSError as e:
        reason = e.strerror if isinstance(e, PermissionError) and e.strerror else str(e)
        if stale:
            reason += f"; the copy in the folder does not have Keras' checksum {file_hash} (damaged or incomplete)"
        raise WeightsUnavailable(fname, url, folder, reason) from None
    return dest


__all__ = ["get_file", "cache_folder", "keras_home", "WeightsUnavailable", "MIRROR_VARIABLE", "matches",
           "file_hash_of", "hash_algorithm", "source_url"]
