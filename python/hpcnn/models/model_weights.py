"""A model's weights as Keras lists them: ``model.weights``, ``trainable_weights``,
``non_trainable_weights`` (and the ``*_variables`` names), each the layers' ``Variable`` objects
in ``model.layers`` order (a nested model contributes its own in its order). The values live in
the model's core and are shared with every other model holding the same layers
(hpcnn.layers.weight_home)."""
from __future__ import annotations

from typing import Any, List

from ..layers.variable import Variable


class ModelWeights:
    """The weight lists of ``Model`` (mixed into it)."""

    layers: List[Any]

    def built_for_weights(self) -> bool:
        """Builds the core when the input shape is known (Keras' model is built then); False when
        it is not (a Sequential without an input shape: no weights yet, as in Keras)."""
        if getattr(self, "sample_shape", None) is None:
            return False
        self.core  # type: ignore[attr-defined]
        return True

    @property
    def weights(self) -> List[Variable]:
        if not self.built_for_weights():
            return []
        return [v for layer in self.layers for v in layer.weights]

    @property
    def trainable_weights(self) -> List[Variable]:
        if not self.trainable or not self.built_for_weights():  # type: ignore[attr-defined]
            return []
        return [v for layer in self.layers for v in layer.trainable_weights]

    @property
    def non_trainable_weights(self) -> List[Variable]:
        if not self.trainable:  # type: ignore[attr-defined]
            return self.weights
        if not self.built_for_weights():
            return []
        return [v for layer in self.layers for v in layer.non_trainable_weights]

    @property
    def variables(self) -> List[Variable]:
        return self.weights

    @property
    def trainable_variables(self) -> List[Variable]:
        return self.trainable_weights

    @property
    def non_trainable_variables(self) -> List[Variable]:
        return self.non_trainable_weights
