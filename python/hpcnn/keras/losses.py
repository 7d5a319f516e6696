"""``keras.losses`` on hpcnn: categorical and sparse categorical cross-entropy (fused with the last
softmax, ``from_logits`` supported)."""
from __future__ import annotations

from ._compat import install

install(__name__, "losses", sources=["hpcnn.losses"], exclude=["resolve"],
        default_advice="not yet: hpcnn has CategoricalCrossentropy / 'categorical_crossentropy' and "
                       "SparseCategoricalCrossentropy / 'sparse_categorical_crossentropy'")
