"""Optimizers with Keras' names, defaults and update rules (``keras.optimizers``): ``SGD``,
``Adam``, ``AdamW`` and ``RMSprop``, each with Keras' common arguments ``weight_decay``,
``clipnorm``, ``global_clipnorm`` and ``clipvalue``. The update runs in C++ over the model's one
parameter buffer: one call updates every trainable weight.

Keras' order within a step: the gradients are clipped (``clipnorm``: each weight's gradient to a
norm of at most clipnorm; ``global_clipnorm``: all of them together; ``clipvalue``: each element
to [-clipvalue, clipvalue]; at most one of the three), the weights decay (``weight_decay``:
``w -= learning_rate * weight_decay * w``, decoupled from the gradient, on every trainable weight
unless excluded with ``exclude_from_weight_decay``), then the optimizer's rule updates them.

``learning_rate`` is a positive float or a schedule from ``hpcnn.optimizers.schedules``, which the
core evaluates at every step from ``iterations``. Reading ``optimizer.learning_rate`` gives the rate
of the next step (the schedule's value then); a float rate may be set at any time (callbacks do),
and takes effect at the next step.
"""
from __future__ import annotations

import re
import weakref
from typing import Any, Dict, List, Optional, Sequence, Union

from .. import _core, suggestions, validation
from . import schedules
from .schedules import LearningRateSchedule

LearningRate = Union[float, LearningRateSchedule]

# Keras' BaseOptimizer arguments hpcnn takes only at their default value (anything else is a
# ValueError naming it, never ignored).
_KERAS_DEFAULTS_ONLY = {"use_ema": False, "ema_overwrite_frequency": None, "loss_scale_factor": None,
                        "gradient_accumulation_steps": None}


def _optional_positive(value: Any, name: str, caller: str) -> Optional[float]:
    if value is None:
        return None
    return validation.number(value, name, caller, low=0.0, low_open=True, expected="a positive finite float or None")


class Optimizer:
    """Base class of hpcnn's optimizers: the learning rate (a float or a schedule), Keras' common
    arguments, the step count, and the link to the model that was compiled with it."""

    _default_name = "optimizer"

    def __init__(self, learning_rate: LearningRate, weight_decay: Optional[float] = None,
                 clipnorm: Optional[float] = None, clipvalue: Optional[float] = None,
                 global_clipnorm: Optional[float] = None, use_ema: bool = False, ema_momentum: float = 0.99,
                 ema_overwrite_frequency: Optional[int] = None, loss_scale_factor: Optional[float] = None,
                 gradient_accumulation_steps: Optional[int] = None, name: Optional[str] = None,
                 **kwargs: Any) -> None:
        caller = type(self).__name__
        validation.no_other_arguments(kwargs, caller)
        given = dict(use_ema=use_ema, ema_overwrite_frequency=ema_overwrite_frequency,
                     loss_scale_factor=loss_scale_factor, gradient_accumulation_steps=gradient_accumulation_steps)
        for key, default in _KERAS_DEFAULTS_ONLY.items():
            if given[key] is not default and given[key] != default:
                raise ValueError(f"{caller}: {key}={given[key]!r} is not supported (hpcnn supports only Keras' default)")
        validation.number(ema_momentum, "ema_momentum", caller, low=0.0, high=1.0)  # unused without EMA; checked
        self.name = validation.name(name, caller) or self._default_name
        self.weight_decay = (None if weight_decay is None else
                             validation.number(weight_decay, "weight_decay", caller, low=0.0,
                                               expected="a non-negative finite float or None"))
        self.clipnorm = _optional_positive(clipnorm, "clipnorm", caller)
        self.clipvalue = _optional_positive(clipvalue, "clipvalue", caller)
        self.global_clipnorm = _optional_positive(global_clipnorm, "global_clipnorm", caller)
        if sum(v is not None for v in (self.clipnorm, self.clipvalue, self.global_clipnorm)) > 1:
            raise ValueError(f"{caller}: Only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set. "
                             f"Received: clipnorm={clipnorm}, clipvalue={clipvalue}, global_clipnorm={global_clipnorm}")
        self._learning_rate: LearningRate = 0.0
        self._exclude_names: Optional[List[str]] = None
        self._model_ref: Optional[weakref.ReferenceType] = None
        self._set_learning_rate(learning_rate, initial=True)

    # ------------------------------------------------------------------ learning rate and steps
    @property
    def learning_rate(self) -> float:
        """The learning rate of the next step: the float rate, or the schedule's value at ``iterations``."""
        if isinstance(self._learning_rate, LearningRateSchedule):
            core = self._live_core()
            if core is not None:
                return float(core.learning_rate)
            return float(self._learning_rate(self.iterations))
        return float(self._learning_rate)

    @learning_rate.setter
    def learning_rate(self, value: LearningRate) -> None:
        self._set_learning_rate(value, initial=False)

    def _set_learning_rate(self, value: LearningRate, initial: bool) -> None:
        caller = type(self).__name__
        core = None if initial else self._live_core()
        if isinstance(value, LearningRateSchedule):
            if not schedules.is_builtin(value):
                raise ValueError(f"{caller}: learning_rate={value!r} is a schedule the C++ core cannot evaluate: use "
                                 f"one of hpcnn.optimizers.schedules ({', '.join(sorted(schedules.REGISTRY))}), or a "
                                 "float rate with the LearningRateScheduler callback for a rule of your own")
            if core is not None:
                core.set_learning_rate_schedule(value.core_config())
            self._learning_rate = value
            return
        if callable(value) and not isinstance(value, (int, float)):
            raise ValueError(f"{caller}: a callable learning_rate is not supported (the rate is computed in C++ at "
                             "every step): use a float or a schedule from hpcnn.optimizers.schedules")
        if isinstance(self._learning_rate, LearningRateSchedule) and not initial:
            raise TypeError("This optimizer was created with a `LearningRateSchedule` object as its `learning_rate` "
                            "constructor argument, hence its learning rate is not settable. If you need the learning "
                            "rate to be settable, you should instantiate the optimizer with a float `learning_rate` "
                            "argument.")
        # Checked on every assignment: callbacks and users change it during training.
        lr = validation.number(value, "learning_rate", caller, low=0.0, low_open=True,
                               expected="a positive finite float or a LearningRateSchedule")
        if core is not None:
            core.learning_rate = lr
        self._learning_rate = lr

    @property
    def iterations(self) -> int:
        """The optimizer steps taken by the model it is compiled into (Keras' ``iterations``)."""
        core = self._live_core()
        return int(core.iterations) if core is not None else 0

    @property
    def schedule(self) -> Optional[LearningRateSchedule]:
        """The schedule the learning rate follows, or None for a fixed (settable) rate."""
        return self._learning_rate if isinstance(self._learning_rate, LearningRateSchedule) else None

    @property
    def fixed_learning_rate(self) -> Optional[float]:
        """The fixed learning rate as set (a float), or None when a schedule drives the rate (which
        is a function of the step count, and so needs nothing restored when training resumes)."""
        return None if self.schedule is not None else float(self._learning_rate)

    @property
    def excluded_weight_names(self) -> Optional[List[str]]:
        """The names given to exclude_from_weight_decay (None: none)."""
        return None if self._exclude_names is None else list(self._exclude_names)

    def attach(self, model: Any) -> None:
        """Called by compile(): the model whose core this optimizer drives from now on (its
        ``learning_rate`` and ``iterations`` read that model's core)."""
        self._model_ref = weakref.ref(model)

    def _live_core(self) -> Any:
        """The core model this optimizer drives, or None when it is not compiled into one (anymore)."""
        model = self._model_ref() if self._model_ref is not None else None
        if model is None or getattr(model, "optimizer", None) is not self or not getattr(model, "compile_settings", None):
            return None
        return model.core if model.built else None

    # ------------------------------------------------------------------ weight decay exclusions
    def exclude_from_weight_decay(self, var_list: Any = None, var_names: Optional[Sequence[str]] = None) -> None:
        """Weights that ``weight_decay`` skips: those whose name (``'<layer>/<weight>'``, e.g.
        ``'dense/bias'``) contains one of ``var_names`` (a regular expression search, as Keras),
        e.g. ``var_names=['bias']``. Must be called before ``compile()``. ``var_list`` (Keras'
        variable objects) has no hpcnn equivalent: pass names."""
        caller = f"{type(self).__name__}.exclude_from_weight_decay"
        if var_list is not None:
            raise ValueError(f"{caller}: var_list is not supported (hpcnn has no variable objects); pass var_names, "
                             "e.g. var_names=['bias']")
        if self._model_ref is not None:
            raise ValueError(f"{caller}() can only be configured before the optimizer is built (before compile())")
        if var_names is None:
            self._exclude_names = None
            return
        if isinstance(var_names, (str, bytes)) or not all(isinstance(n, str) and n for n in var_names):
            raise ValueError(f"{caller}: var_names must be a list of non-empty strings, got {var_names!r}")
        for n in var_names:
            try:
                re.compile(n)
            except re.error as e:
                raise ValueError(f"{caller}: {n!r} is not a valid regular expression ({e})") from None
        self._exclude_names = list(var_names)

    def _no_decay_indices(self, weight_names: Sequence[str]) -> List[int]:
        if not self._exclude_names:
            return []
        pattern = re.compile("|".join(self._exclude_names))
        return [i for i, n in enumerate(weight_names) if pattern.search(n)]

    # ------------------------------------------------------------------ config
    def _specific_config(self) -> Dict[str, Any]:
        raise NotImplementedError

    def get_config(self) -> Dict[str, Any]:
        """Keras' keys: name, learning_rate (a float, or a serialized schedule), weight_decay,
        clipnorm, global_clipnorm, clipvalue, and the optimizer's own arguments."""
        lr = self._learning_rate
        cfg: Dict[str, Any] = {
            "name": self.name,
            "learning_rate": schedules.serialize(lr) if isinstance(lr, LearningRateSchedule) else float(lr),
            "weight_decay": self.weight_decay, "clipnorm": self.clipnorm, "global_clipnorm": self.global_clipnorm,
            "clipvalue": self.clipvalue}
        cfg.update(self._specific_config())
        return cfg

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Optimizer":
        """The optimizer get_config() described (a serialized schedule as learning_rate too)."""
        if not isinstance(config, dict):
            raise ValueError(f"{cls.__name__}.from_config: expected a dict, got {config!r:.200}")
        config = dict(config)
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = schedules.deserialize(config["learning_rate"])
        return cls(**config)

    def core_config(self, weight_names: Sequence[str] = ()) -> Dict[str, Any]:
        """What the core's factory reads (nn/factory.cpp make_optimizer)."""
        cfg: Dict[str, Any] = dict(self._specific_config())
        cfg["name"] = type(self).__name__
        lr = self._learning_rate
        if isinstance(lr, LearningRateSchedule):
            cfg.update({f"schedule_{k}": v for k, v in lr.core_config().items()})
        else:
            cfg["learning_rate"] = float(lr)
        for key in ("weight_decay", "clipnorm", "global_clipnorm", "clipvalue"):
            if getattr(self, key) is not None:
                cfg[key] = getattr(self, key)
        no_decay = self._no_decay_indices(weight_names)
        if no_decay:
            cfg["no_decay"] = no_decay
        return cfg

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.get_config().items() if k != "name" and v is not None}
        if isinstance(self._learning_rate, LearningRateSchedule):
            shown["learning_rate"] = self._learning_rate
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


class SGD(Optimizer):
    """SGD as Keras: ``v = momentum * v - lr * g``; ``w += v`` (Nesterov: ``w += momentum * v - lr * g``);
    without momentum ``w -= lr * g`` and no velocity is kept."""

    _default_name = "SGD"

    def __init__(self, learning_rate: LearningRate = 0.01, momentum: float = 0.0, nesterov: bool = False,
                 weight_decay: Optional[float] = None, clipnorm: Optional[float] = None,
                 clipvalue: Optional[float] = None, global_clipnorm: Optional[float] = None, **kwargs: Any) -> None:
        self.momentum = validation.number(momentum, "momentum", "SGD", low=0.0, high=1.0, high_open=True,
                                          expected="a float in [0, 1)")
        self.nesterov = validation.boolean(nesterov, "nesterov", "SGD")
        super().__init__(learning_rate, weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue,
                         global_clipnorm=global_clipnorm, **kwargs)

    def _specific_config(self) -> Dict[str, Any]:
        return {"momentum": self.momentum, "nesterov": self.nesterov}


class Adam(Optimizer):
    """Adam as Keras: beta_1=0.9, beta_2=0.999, epsilon=1e-7 added to sqrt(v), bias correction
    folded into the step size ``lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)``."""

    _default_name = "adam"

    def __init__(self, learning_rate: LearningRate = 0.001, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, amsgrad: bool = False, weight_decay: Optional[float] = None,
                 clipnorm: Optional[float] = None, clipvalue: Optional[float] = None,
                 global_clipnorm: Optional[float] = None, **kwargs: Any) -> None:
        caller = type(self).__name__
        if validation.boolean(amsgrad, "amsgrad", caller):
            raise ValueError(f"{caller}(amsgrad=True) is not supported")
        self.beta_1 = validation.number(beta_1, "beta_1", caller, low=0.0, high=1.0, high_open=True)
        self.beta_2 = validation.number(beta_2, "beta_2", caller, low=0.0, high=1.0, high_open=True)
        self.epsilon = validation.number(epsilon, "epsilon", caller, low=0.0, low_open=True,
                                         expected="a positive finite float")
        self.amsgrad = False
        super().__init__(learning_rate, weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue,
                         global_clipnorm=global_clipnorm, **kwargs)

    def _specific_config(self) -> Dict[str, Any]:
        return {"beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon, "amsgrad": self.amsgrad}


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as Keras 3: ``weight_decay=0.004`` by
    default; each step ``w -= learning_rate * weight_decay * w`` before Adam's update."""

    _default_name = "adamw"

    def __init__(self, learning_rate: LearningRate = 0.001, weight_decay: Optional[float] = 0.004,
                 beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-7, amsgrad: bool = False,
                 clipnorm: Optional[float] = None, clipvalue: Optional[float] = None,
                 global_clipnorm: Optional[float] = None, **kwargs: Any) -> None:
        if weight_decay is None:
            raise ValueError("AdamW: Argument `weight_decay` must be a float. Received: weight_decay=None")
        super().__init__(learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, amsgrad=amsgrad,
                         weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue,
                         global_clipnorm=global_clipnorm, **kwargs)


class RMSprop(Optimizer):
    """RMSprop as Keras 3: ``v = rho * v + (1 - rho) * g^2``; the step ``lr * g / sqrt(v + epsilon)``
    (epsilon inside the root); ``centered`` divides by the estimated variance ``v - mean(g)^2`` instead;
    ``momentum`` > 0 accumulates the steps (plain momentum). Keras' ``compile()`` default."""

    _default_name = "rmsprop"

    def __init__(self, learning_rate: LearningRate = 0.001, rho: float = 0.9, momentum: float = 0.0,
                 epsilon: float = 1e-7, centered: bool = False, weight_decay: Optional[float] = None,
                 clipnorm: Optional[float] = None, clipvalue: Optional[float] = None,
                 global_clipnorm: Optional[float] = None, **kwargs: Any) -> None:
        self.rho = validation.number(rho, "rho", "RMSprop", low=0.0, high=1.0, high_open=True,
                                     expected="a float in [0, 1)")
        self.momentum = validation.number(momentum, "momentum", "RMSprop", low=0.0, high=1.0, high_open=True,
                                          expected="a float in [0, 1)")
        self.epsilon = validation.number(epsilon, "epsilon", "RMSprop", low=0.0, low_open=True,
                                         expected="a positive finite float")
        self.centered = validation.boolean(centered, "centered", "RMSprop")
        super().__init__(learning_rate, weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue,
                         global_clipnorm=global_clipnorm, **kwargs)

    def _specific_config(self) -> Dict[str, Any]:
        return {"rho": self.rho, "momentum": self.momentum, "epsilon": self.epsilon, "centered": self.centered}


# The optimizers a saved model may name (load_model looks names up here, never with getattr).
REGISTRY = {"Adam": Adam, "AdamW": AdamW, "RMSprop": RMSprop, "SGD": SGD}
_BY_STRING = {"adam": Adam, "adamw": AdamW, "rmsprop": RMSprop, "sgd": SGD}


def get(identifier: Union[str, Dict[str, Any], Optimizer]) -> Optimizer:
    """An optimizer from Keras' identifiers: a name (``'rmsprop'``, ``'adam'``, ``'adamw'``,
    ``'sgd'``: Keras' defaults), a serialized ``{'class_name': ..., 'config': {...}}``, or an
    Optimizer instance."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_STRING:
        return _BY_STRING[identifier.lower()]()
    if isinstance(identifier, dict) and isinstance(identifier.get("class_name"), str):
        cls = REGISTRY.get(identifier["class_name"])
        if cls is not None:
            return cls.from_config(identifier.get("config", {}))
    hint = suggestions.did_you_mean(identifier if isinstance(identifier, str) else
                                    identifier.get("class_name") if isinstance(identifier, dict) else None,
                                    list(_BY_STRING) + list(REGISTRY))
    raise ValueError(f"unknown optimizer {identifier!r:.200}{hint}: use 'rmsprop', 'adam', 'adamw', 'sgd' or an instance "
                     "of hpcnn.optimizers.RMSprop, Adam, AdamW, SGD")


def serialize(optimizer: Optimizer) -> Dict[str, Any]:
    """``{'class_name': ..., 'config': {...}}``, Keras' serialized shape."""
    return {"class_name": type(optimizer).__name__, "config": optimizer.get_config()}


def deserialize(config: Dict[str, Any]) -> Optimizer:
    return get(config)


__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "LearningRateSchedule", "schedules", "get", "serialize",
           "deserialize"]
