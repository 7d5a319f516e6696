"""Commands that hpcnn's messages tell users to run, in one place.

Every message that suggests a shell command builds it here, so tests/system/test_suggestions.py can run
each one's ``--help`` and check that the options it names exist (a message must never send a user
to a command or an option that is not there).
"""
from __future__ import annotations

from typing import List

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


def all_commands() -> List[str]:
    """Every command the messages can suggest (for the test)."""
    return ([convert_download(k) for k in DOWNLOADABLE]
            + [tutorial_data(), tutorial_synthetic(), convert_info()])
