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


class FileProblem(ValueError):
    """What is wrong with a file's contents (the caller adds the file's name)."""


class WeightsMismatch(FileProblem):
    """The file is sound but its weights do not fit the model (another architecture, other shapes)."""


class UnsupportedConfig(FileProblem):
    """A Keras config hpcnn cannot build the same way (the message says what and where)."""


class OtherTraining(FileProblem):
    """A readable backup of another training (model, optimizer or data): never silently skipped."""


__all__ = ["FileProblem", "WeightsMismatch", "UnsupportedConfig", "OtherTraining"]
