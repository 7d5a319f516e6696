"""``Dropout``."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .. import validation
from .arguments import is_none, keras_defaults_only
from .layer import Layer


class Dropout(Layer):
    """Inverted dropout while training; identity at inference. The masks are counter-based draws
    from the model's seed (``Sequential(seed=...)`` or ``hpcnn.utils.set_random_seed``), the same
    on every thread count and on the GPU, so there is no per-layer ``seed``."""

    name_prefix = "dropout"
    config_keys = ("rate",)

    def __init__(self, rate: float, name: Optional[str] = None, seed: Optional[int] = None,
                 input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        if seed is not None:
            raise ValueError("Dropout: seed= is not supported: dropout masks are drawn from the model's seed "
                             "(Sequential(..., seed=N) or hpcnn.utils.set_random_seed(N))")
        keras_defaults_only(kwargs, "Dropout", {"noise_shape": is_none})
        validation.number(rate, "rate", low=0.0, high=1.0, high_open=True,
                          expected="a float value between 0 and 1 (1 excluded)")
        self.rate = float(rate)
        super().__init__(name=name, input_shape=input_shape, **kwargs)
