"""``keras.optimizers.schedules`` on hpcnn: every Keras 3 learning-rate schedule (evaluated in C++
at each step)."""
from __future__ import annotations

from .._compat import install

install(__name__, "optimizers.schedules", sources=["hpcnn.optimizers.schedules"])
