"""``keras.regularizers`` on hpcnn: L1, L2, L1L2 (and l1, l2, l1_l2) on Conv2D and Dense."""
from __future__ import annotations

from ._compat import install

install(__name__, "regularizers", sources=["hpcnn.regularizers"], default_advice="hpcnn has L1, L2 and L1L2")
