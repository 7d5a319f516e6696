"""``keras.metrics`` on hpcnn: what ``hpcnn.metrics`` has (the accuracies, top-k, mse, mae; by name
in compile or as objects)."""
from __future__ import annotations

from ._compat import install

install(__name__, "metrics", sources=["hpcnn.metrics"], exclude=["resolve"],
        default_advice="not yet: hpcnn has accuracy, categorical/sparse/binary accuracy, (sparse) top-k "
                       "categorical accuracy, mean squared and mean absolute error")
