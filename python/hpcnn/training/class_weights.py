"""fit's and train_on_batch's ``class_weight``: a per-class loss weight table, in the core while
the training steps run (never during validation or evaluate, as in Keras)."""
from __future__ import annotations

from typing import Any, List

from .. import validation


def class_weight_table(model: Any, class_weight: Any, caller: str = "fit") -> List[float]:
    """fit's class_weight {class index: weight} as the core's per-class table (classes without an
    entry weigh 1, as in Keras); [] for None."""
    if class_weight is None:
        return []
    if not isinstance(class_weight, dict):
        raise ValueError(f"{caller}: class_weight must be a dict {{class index: weight}}, got "
                         f"{type(class_weight).__name__}")
    comp = model.require_compiled(caller)
    units = int(model.core.output_shapes[-1][-1])
    classes = 2 if units == 1 else units
    if comp["loss"] in ("mean_squared_error", "mean_absolute_error") and units > 1:
        raise ValueError(f"{caller}: class_weight needs class targets (a cross-entropy loss or a one-unit output)")
    table = [1.0] * classes
    for k, v in class_weight.items():
        if not validation.is_integer(k) or not 0 <= int(k) < classes:
            raise ValueError(f"{caller}: class_weight has the key {k!r}; expected class indices in [0, {classes})")
        table[int(k)] = validation.number(v, f"class_weight[{int(k)}]", caller, low=0.0,
                                          expected="a finite number >= 0")
    return table


class ClassWeights:
    """fit's class_weight: a per-class table in the core while fit runs, applied by training steps
    only (never by validation or evaluate, as in Keras); removed when fit returns."""

    def __init__(self, core: Any, table: List[float]) -> None:
        self.core, self.table = core, table

    def __enter__(self) -> "ClassWeights":
        if self.table:
            self.core.set_class_weights(self.table)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.table:
            self.core.set_class_weights([])
