"""What hpcnn's messages suggest, in one place: the commands they tell users to run, and the
"did you mean" for a misspelt name.

Every message that suggests a shell command builds it here, so tests/system/test_suggestions.py can run
each one's ``--help`` and check that the options it names exist (a message must never send a user
to a command or an option that is not there).
"""
from __future__ import annotations

import difflib
from typing import Iterable, List

# The kinds `hpcnn convert KIND --download` can fetch (each has an official URL and checksums).
DOWNLOADABLE = ("cifar10", "mnist", "fashion_mnist")


def convert_download(kind: str = "cifar10") -> str:
    """Download (checksum-verified) and convert to the tutorial's HDF5 layout in the data dir."""
    return f"hpcnn convert {kind} --download"


def tutorial_data() -> str:
    return "hpcnn tutorial --data PATH"


def tutorial_synthetic() -> str:
    return "hpcnn tutorial --synthetic"


def convert_info() -> str:
    return "hpcnn convert info FILE"


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """' (did you mean 'adam'?)' for a string close to one of `known`, else ''. Names spelt as
    given are tried first ('MeanSquaredErorr': 'MeanSquaredError'), then with case and underscores
    ignored ('ADAMM': 'adam'); two names that differ only in those are named once."""
    if not isinstance(name, str) or not name:
        return ""
    known = list(known)
    fold = {}
    for k in known:
        fold.setdefault(k.lower().replace("_", ""), k)
    close = difflib.get_close_matches(name, known, n=4, cutoff=0.6) or [
        fold[c] for c in difflib.get_close_matches(name.lower().replace("_", ""), list(fold), n=2, cutoff=0.6)]
    named = {}
    for c in close:
        named.setdefault(c.lower().replace("_", ""), c)
    if not named:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in list(named.values())[:2]) + "?)"


def all_commands() -> List[str]:
    """Every command the messages can suggest (for the test)."""
    return ([convert_download(k) for k in DOWNLOADABLE]
            + [tutorial_data(), tutorial_synthetic(), convert_info()])
