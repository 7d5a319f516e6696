"""hpcnn's one family of file exceptions: what is wrong with the contents of a file it reads (a
model, weights, a backup, a Keras config). Each is a ValueError, so ``except ValueError`` keeps
catching them; the code that opened the file adds its name to the message it raises to the user.

    FileProblem            damaged or malformed contents (truncated JSON, NaN weights, a missing
                           dataset, a member that inflates a thousandfold)
    ├── WeightsMismatch    a sound file whose weights do not fit this model (another architecture)
    ├── UnsupportedConfig  a Keras config that uses what hpcnn does not have (a layer class, an
                           argument value, a loss)
    └── OtherTraining      a sound backup of another training (another model, optimizer or data)
"""
from __future__ import annotations

import contextlib
from typing import Iterator


class FileProblem(ValueError):
    """What is wrong with a file's contents (the caller adds the file's name)."""


class WeightsMismatch(FileProblem):
    """The file is sound but its weights do not fit the model (another architecture, other shapes)."""


class UnsupportedConfig(FileProblem):
    """A Keras config hpcnn cannot build the same way (the message says what and where)."""


class OtherTraining(FileProblem):
    """A readable backup of another training (model, optimizer or data): never silently skipped."""


@contextlib.contextmanager
def reported_as_value_errors(caller: str, path: str, mismatch: str = "does not fit this model") -> Iterator[None]:
    """The file exceptions raised inside, as the ValueError the user sees: the caller and the file
    named, then what is wrong (`mismatch`: how a WeightsMismatch reads; a model file whose weights
    do not fit its own config "is damaged")."""
    try:
        yield
    except UnsupportedConfig as e:
        raise ValueError(f"{caller}: '{path}': {e}") from None
    except WeightsMismatch as e:
        raise ValueError(f"{caller}: '{path}' {mismatch}: {e}") from None
    except FileProblem as e:
        raise ValueError(f"{caller}: '{path}' is damaged: {e}") from None


__all__ = ["FileProblem", "WeightsMismatch", "UnsupportedConfig", "OtherTraining", "reported_as_value_errors"]
