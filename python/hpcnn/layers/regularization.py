"""``Dropout``."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

from .. import validation
from .layer import Layer


class Dropout(Layer):
    """Inverted dropout while training; identity at inference. The masks are counter-based draws
    from the model's seed (``Sequential(seed=...)`` or ``hpcnn.utils.set_random_seed``), the same
    on every thread count and on the GPU, so there is no per-layer ``seed``."""

    name_prefix = "dropout"
    config_keys = ("rate", "noise_shape")

    def __init__(self, rate: float, noise_shape: Optional[Sequence[Optional[int]]] = None, name: Optional[str] = None,
                 seed: Optional[int] = None, input_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        if seed is not None:
            raise ValueError("Dropout: seed= is not supported: dropout masks are drawn from the model's seed "
                             "(Sequential(..., seed=N) or hpcnn.utils.set_random_seed(N))")
        validation.number(rate, "rate", low=0.0, high=1.0, high_open=True,
                          expected="a float value between 0 and 1 (1 excluded)")
        self.rate = float(rate)
        self.noise_shape = _noise_shape(noise_shape)
        super().__init__(name=name, input_shape=input_shape, **kwargs)

    def get_config(self) -> Dict[str, Any]:
        cfg = super().get_config()
        if cfg["noise_shape"] is None:
            del cfg["noise_shape"]  # as before noise_shape existed: configs of older files compare equal
        return cfg

    def core_config(self) -> Dict[str, Any]:
        cfg: Dict[str, Any] = {"class_name": "Dropout", "rate": self.rate}
        if self.noise_shape is not None:  # per sample (the batch entry dropped), None as 0: the input's size
            cfg["noise_shape"] = [0 if d is None else d for d in self.noise_shape[1:]]
        return cfg


def _noise_shape(value: Any) -> Optional[Tuple[Optional[int], ...]]:
    """Keras' noise_shape: None, or one entry per axis of the input batch (the batch's first), each
    None (the input's size) or a positive integer; the batch entry must be None."""
    if value is None:
        return None
    msg = ("Dropout: noise_shape must be None or a tuple with one entry per axis of the input (the batch's first, "
           f"None), each None or a positive integer; received noise_shape={value!r}")
    try:
        shape = tuple(value)
    except TypeError:
        raise ValueError(msg) from None
    if len(shape) < 2 or shape[0] is not None or not all(
            d is None or (validation.is_integer(d) and 0 < int(d) <= validation.INT32_MAX) for d in shape[1:]):
        raise ValueError(msg)
    return tuple(None if d is None else int(d) for d in shape)
