"""``BatchNormalization``."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .. import validation
from .arguments import default_initializer, is_none, keras_defaults_only
from .layer import Layer


class BatchNormalization(Layer):
    """Keras' ``BatchNormalization`` over the channels (the last axis, NHWC).

    In ``fit`` the layer normalizes each batch with the batch's mean and (biased) variance and,
    once the step is taken, moves ``moving_mean`` and ``moving_variance`` toward them:
    ``moving = moving * momentum + batch * (1 - momentum)``. In ``evaluate``/``predict`` it
    normalizes with the moving statistics: ``gamma * (x - moving_mean) / sqrt(moving_variance +
    epsilon) + beta``. With ``trainable = False`` it runs in inference mode during ``fit`` too, and
    nothing of it changes (Keras' rule for BatchNormalization). Weights, in Keras' order: gamma
    (``scale=True``), beta (``center=True``), moving_mean, moving_variance; the moving statistics
    are non-trainable weights (never touched by the optimizer, saved and loaded with the model).
    With data-parallel training each replica normalizes with the statistics of its own part of the
    batch, as Keras does without ``synchronized=True`` (which hpcnn does not offer). On a GPU the
    normalization is cuDNN's. A ReLU right after the layer is fused into it.
    """

    name_prefix = "batch_normalization"
    weight_attributes = ("gamma", "beta", "moving_mean", "moving_variance")
    config_keys = ("axis", "momentum", "epsilon", "center", "scale")

    def __init__(self, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3, center: bool = True,
                 scale: bool = True, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None,
                 **kwargs: Any) -> None:
        for key, default in (("beta_initializer", "zeros"), ("gamma_initializer", "ones"),
                             ("moving_mean_initializer", "zeros"), ("moving_variance_initializer", "ones")):
            if key in kwargs and not default_initializer(kwargs.pop(key), default):
                raise ValueError(f"BatchNormalization: only Keras' default {key}='{default}' is supported")
        keras_defaults_only(kwargs, "BatchNormalization", {
            "beta_regularizer": is_none, "gamma_regularizer": is_none, "beta_constraint": is_none,
            "gamma_constraint": is_none, "synchronized": lambda v: v is False,
            # Keras 2's arguments, at their defaults only
            "renorm": lambda v: v is False, "renorm_clipping": is_none, "renorm_momentum": lambda v: v == 0.99,
            "virtual_batch_size": is_none, "adjustment": is_none, "fused": lambda v: v in (None, True, False)})
        if not validation.is_integer(axis) or isinstance(axis, bool):
            raise ValueError(f"BatchNormalization: Invalid value for argument `axis`. Expected an integer. "
                             f"Received: axis={axis!r}")
        self.axis = validation.integer(axis, "axis", "BatchNormalization", minimum=-1)
        if self.axis == 0:
            raise ValueError("BatchNormalization: axis=0 is the batch axis; hpcnn normalizes the channels (axis=-1)")
        self.momentum = validation.number(momentum, "momentum", "BatchNormalization", low=0.0, high=1.0)
        self.epsilon = validation.number(epsilon, "epsilon", "BatchNormalization", low=0.0, low_open=True)
        self.center = validation.boolean(center, "center", "BatchNormalization")
        self.scale = validation.boolean(scale, "scale", "BatchNormalization")
        super().__init__(name=name, input_shape=input_shape, **kwargs)
