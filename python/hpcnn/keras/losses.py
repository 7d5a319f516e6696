"""``keras.losses`` on hpcnn: what ``hpcnn.losses`` has (categorical and sparse categorical
cross-entropy fused with the last softmax, binary cross-entropy fused with the last sigmoid, mean
squared and mean absolute error; ``from_logits``, ``label_smoothing``)."""
from __future__ import annotations

from ._compat import install

install(__name__, "losses", sources=["hpcnn.losses"], exclude=["resolve"],
        default_advice="not yet: hpcnn has CategoricalCrossentropy, SparseCategoricalCrossentropy, "
                       "BinaryCrossentropy, MeanSquaredError and MeanAbsoluteError (and their names)")
