"""``keras.metrics`` on hpcnn: what ``hpcnn.metrics`` has (the accuracies, top-k, mse, mae; by name
in compile or as objects)."""
from __future__ import annotations

from ._compat import install

install(__name__, "metrics", sources=["hpcnn.metrics"], exclude=["resolve"],
        default_advice="hpcnn's metrics (computed in C++) are 'accuracy', CategoricalAccuracy, "
                       "SparseCategoricalAccuracy, BinaryAccuracy, TopKCategoricalAccuracy, "
                       "SparseTopKCategoricalAccuracy, MeanSquaredError and MeanAbsoluteError (the loss is logged "
                       "as 'loss'); compute others with NumPy on what model.predict() returns")
