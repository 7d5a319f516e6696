"""``keras.saving`` on hpcnn: save_model, load_model, save_weights, load_weights."""
from __future__ import annotations

from typing import Any

from ._compat import install
from ..saving import load_model
from .models import save_model


def save_weights(model: Any, filepath: Any, overwrite: bool = True, **kwargs: Any) -> None:
    """``keras.saving.save_weights(model, filepath)``: ``model.save_weights(filepath)``."""
    model.save_weights(filepath, overwrite=overwrite, **kwargs)


def load_weights(model: Any, filepath: Any, skip_mismatch: bool = False, **kwargs: Any) -> None:
    """``keras.saving.load_weights(model, filepath)``: ``model.load_weights(filepath)``."""
    model.load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)


install(__name__, "saving", advice={"KerasFileEditor": "open the file with h5py or zipfile to look inside; "
                                                        "hpcnn.keras.models.load_model reads it"},
        default_advice="custom objects are not supported: hpcnn's files hold hpcnn's layers only; save and load "
                       "with model.save() and hpcnn.keras.models.load_model()")

__all__ = ["save_model", "load_model", "save_weights", "load_weights"]
