"""``keras.layers.merge`` (Keras 2's module, which old tutorials import: ``from keras.layers.merge
import Concatenate``): the merging layers of hpcnn.layers (Add, Multiply, Concatenate and their
functional forms add, multiply, concatenate); the others import and, when used, raise NotImplementedError naming the
recipe that works with hpcnn's layers."""
from __future__ import annotations

from .._compat import install

_OTHERS = ("hpcnn's merging layers are Add (the sum), Multiply (the product) and Concatenate (side by side): merge "
           "with one of them and let a following Conv2D or Dense learn the combination")

#: What to use for each merging layer hpcnn lacks (keras.layers says the same).
MERGE_ADVICE = {
    "Maximum": _OTHERS, "maximum": _OTHERS, "Minimum": _OTHERS,
    "minimum": _OTHERS,
    "Average": "use Rescaling(1 / n)(Add()([a, b, ...])): the sum of the n tensors, scaled",
    "average": "use Rescaling(1 / n)(add([a, b, ...])): the sum of the n tensors, scaled",
    "Subtract": "use Add()([a, Rescaling(-1.0)(b)]): a + (-1) * b",
    "subtract": "use add([a, Rescaling(-1.0)(b)]): a + (-1) * b",
    "Dot": "use Concatenate then Dense (a learned combination of the two)",
    "dot": "use concatenate then Dense (a learned combination of the two)",
}
_HPCNN_HAS = ("Add", "add", "Multiply", "multiply", "Concatenate", "concatenate")
# Every merging name imports (the tutorial imports Concatenate without using it).
install(__name__, "layers.merge", sources=["hpcnn.layers"], advice={**MERGE_ADVICE, **{n: "" for n in _HPCNN_HAS}},
        keras_only=True, placeholders=list(MERGE_ADVICE) + list(_HPCNN_HAS))
