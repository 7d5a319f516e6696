"""Where things are, for tests and workers wherever they sit in tests/'s folders: the repository's
root, tests/data, bench/, and the command that runs a support module as its own process.

A worker (a support module with a ``__main__``) runs as ``python -m tests.support.<name>`` in the
repository's root (``cwd=ROOT``): ``python -m`` puts the current folder first on sys.path, so the
worker imports ``tests.support`` as the tests do, with no sys.path or PYTHONPATH edits."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
DATA = TESTS / "data"
KERAS_DATA = DATA / "keras"
BENCH = ROOT / "bench"


def module_command(name, *args):
    """[python, -m, tests.support.<name>, *args]: run it with cwd=ROOT."""
    return [sys.executable, "-m", f"tests.support.{name}", *map(str, args)]
