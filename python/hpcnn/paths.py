"""Where hpcnn looks for the files a user names, and what it says when one is not there.

The data directory ($HPCNN_DATA_DIR, else ~/.hpcnn/datasets) is where ``hpcnn convert ...
--download`` and ``hpcnn tutorial`` write datasets; a bare file name such as
``'dataset_cifar10.hdf5'`` that is not in the working directory is looked for there as well, so
README's tour runs as written in any folder.

A missing file raises :class:`MissingFile` (a ``FileNotFoundError``) whose message says where the
name was looked for (the working directory for a relative path, the data directory) and lists the
close matches in those folders (``mydata.hdf5`` for ``mydata.h5``): a typo or a wrong folder is the
usual cause, and both are seen at a glance.
"""
from __future__ import annotations

import difflib
import errno
import os
from typing import Dict, List, Optional

from . import suggestions

#: Folder entries looked at for close matches (a scratch folder may hold very many files).
MAX_ENTRIES = 5000
#: Close matches listed in a message.
MAX_MATCHES = 3

# Files that hpcnn's commands write into the data directory: the line a message adds.
MADE_BY = {
    "dataset_cifar10.hdf5": (f"dataset_cifar10.hdf5 is written into the data directory by "
                             f"`{suggestions.convert_download('cifar10')}` (needs internet); without internet, "
                             f"`{suggestions.tutorial_synthetic()}` writes synthetic_cifar10_seed0.hdf5 there: "
                             "generated images in the same layout"),
    "cifar-10-python.tar.gz": (f"cifar-10-python.tar.gz is downloaded into the data directory by "
                               f"`{suggestions.convert_download('cifar10')}` (needs internet)"),
}


def data_dir() -> str:
    """Where datasets are looked for, downloaded and converted: $HPCNN_DATA_DIR (also accepted:
    $HPCNN_DATA), else ~/.hpcnn/datasets. On clusters, point it at project or scratch space: home
    quotas are small and CIFAR-10 takes about 0.35 GB (archive + HDF5 file)."""
    for var in ("HPCNN_DATA_DIR", "HPCNN_DATA"):
        if os.environ.get(var):
            return os.path.expanduser(os.environ[var])
    return os.path.join(os.path.expanduser("~"), ".hpcnn", "datasets")


def is_bare_name(path: str) -> bool:
    """A file name without a folder ('dataset_cifar10.hdf5', not './x.hdf5' or 'data/x.hdf5')."""
    return bool(path) and os.path.basename(path) == path and path not in (".", "..")


def resolve_data_file(path: "os.PathLike[str] | str") -> str:
    """`path` as given when it exists; a bare name that is not in the working directory but is in
    the data directory: that file; else `path` unchanged (the caller reports it missing)."""
    path = os.fspath(path)
    if os.path.exists(path) or not is_bare_name(path):
        return path
    candidate = os.path.join(data_dir(), path)
    return candidate if os.path.exists(candidate) else path


class MissingFile(FileNotFoundError):
    """A file hpcnn was asked to read is not there. ``errno``, ``filename`` and the first line are
    those of Python's own FileNotFoundError ('[Errno 2] load_model: no such file: 'x.keras''); the
    lines after it say where hpcnn looked and what is there with a similar name."""

    def __init__(self, caller: str, path: str, hints: List[str]) -> None:
        super().__init__(errno.ENOENT, f"{caller}: no such file", path)
        self.hints = hints

    def __str__(self) -> str:
        return "\n".join([super().__str__()] + [f"  {h}" for h in self.hints])


def _names(folder: str) -> List[str]:
    try:
        with os.scandir(folder) as it:
            names = []
            for entry in it:
                if len(names) >= MAX_ENTRIES:
                    break
                names.append(entry.name)
            return names
    except OSError:
        return []


def close_matches(name: str, folders: List[str]) -> List[str]:
    """Paths in `folders` whose names are close to `name` (difflib's ratio >= 0.6), best first."""
    found: Dict[str, str] = {}
    for folder in folders:
        for n in difflib.get_close_matches(name, _names(folder), n=MAX_MATCHES, cutoff=0.6):
            found.setdefault(os.path.join(folder, n), n)
    ranked = sorted(found, key=lambda p: -difflib.SequenceMatcher(None, name, found[p]).ratio())
    return ranked[:MAX_MATCHES]


def missing_file(caller: str, path: "os.PathLike[str] | str", data_too: bool = False) -> MissingFile:
    """The error for a file that is not there. `data_too`: the caller also looked for a bare name in
    the data directory (HDF5Dataset); otherwise the data directory is only searched for close
    matches (a model saved next to the datasets)."""
    path = os.fspath(path)
    folder, name = os.path.split(path)
    hints = []
    if not os.path.isabs(path):
        hints.append(f"relative to the working directory {os.getcwd()}")
        looked = os.path.abspath(folder or ".")
    else:
        looked = folder
    data = data_dir()
    if data_too and is_bare_name(path):
        hints.append(f"not in the data directory either: {data} ($HPCNN_DATA_DIR, default ~/.hpcnn/datasets)")
    else:
        hints.append(f"the data directory is {data} ($HPCNN_DATA_DIR, default ~/.hpcnn/datasets)")
    if folder and not os.path.isdir(looked):
        hints.append(f"the folder {looked} does not exist")
    folders = [f for f in dict.fromkeys([looked, data]) if os.path.isdir(f)]
    matches = [m for m in close_matches(name, folders) if os.path.abspath(m) != os.path.abspath(path)]
    if matches:
        hints.append("close matches: " + ", ".join(matches))
    if name in MADE_BY:
        hints.append(MADE_BY[name])
    return MissingFile(caller, path, hints)


__all__ = ["data_dir", "is_bare_name", "resolve_data_file", "MissingFile", "close_matches", "missing_file",
           "MAX_ENTRIES", "MAX_MATCHES", "MADE_BY"]
