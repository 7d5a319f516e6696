"""The real Keras 3 for the live comparisons: the `keras` extra, on its JAX backend (CPU). CI sets
HPCNN_EXPECT_KERAS=1, and then a missing Keras is an ImportError, not a skip."""
import os

import pytest

os.environ.setdefault("KERAS_BACKEND", "jax")
REASON = "the live Keras comparisons need `pip install --no-build-isolation '.[keras]'`"


def import_keras():
    """The keras module, or None when it is not installed (and not expected)."""
    if os.environ.get("HPCNN_EXPECT_KERAS") == "1":
        import keras
        return keras
    try:
        import keras
    except ImportError:
        return None
    return keras


def keras_or_skip():
    """The keras module, or a skip with the reason."""
    keras = import_keras()
    if keras is None:
        pytest.skip(REASON)
    return keras
