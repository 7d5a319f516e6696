"""``keras.metrics`` on hpcnn: metrics are named in compile (``metrics=['accuracy']``); metric
objects come with a later hpcnn."""
from __future__ import annotations

from ._compat import install

install(__name__, "metrics", sources=["hpcnn.metrics"],
        default_advice="not yet: compile(metrics=['accuracy']) reports accuracy (also for sparse labels)")
