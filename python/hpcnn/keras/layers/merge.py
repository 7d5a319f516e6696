"""``keras.layers.merge`` (Keras 2's module, which old tutorials import: ``from keras.layers.merge
import Concatenate``): the merging layers of hpcnn.layers, when hpcnn has them."""
from __future__ import annotations

from .._compat import install

_MERGE = "merging layers need the functional API (hpcnn.Model), which is not in this hpcnn yet"
_ADVICE = {n: _MERGE for n in ("Add", "Concatenate", "Multiply", "Average", "Maximum", "Minimum", "Subtract", "Dot",
                              "add", "concatenate", "multiply", "average", "maximum", "minimum", "subtract", "dot")}
# Importable (the tutorial imports Concatenate without using it); using one raises NotImplementedError.
install(__name__, "layers.merge", sources=["hpcnn.layers"], advice=_ADVICE, keras_only=True, placeholders=list(_ADVICE))
