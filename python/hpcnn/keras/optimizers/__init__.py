"""``keras.optimizers`` on hpcnn: SGD, Adam, AdamW, RMSprop (Keras 3's formulas and defaults),
``schedules``, get / serialize / deserialize."""
from __future__ import annotations

from .._compat import install
from . import schedules

_USE = "hpcnn has SGD, Adam, AdamW and RMSprop"
_ADVICE = {n: _USE for n in ("Adadelta", "Adafactor", "Adagrad", "Adamax", "Ftrl", "Lion", "Nadam", "Lamb", "Muon",
                            "ScheduleFreeAdamW")}
_ADVICE["LossScaleOptimizer"] = "hpcnn computes in float32: no loss scaling is needed; use the optimizer itself (" + \
    _USE[len("hpcnn has "):] + ")"
_ADVICE["legacy"] = "Keras 2's legacy optimizers: " + _USE
install(__name__, "optimizers", sources=["hpcnn.optimizers"], advice=_ADVICE, exclude=["schedules"],
        default_advice=_USE)
