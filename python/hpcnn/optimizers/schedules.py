"""Learning-rate schedules with Keras' names, arguments and formulas (``keras.optimizers.schedules``).

Pass one as an optimizer's ``learning_rate``::

    lr = hpcnn.optimizers.schedules.CosineDecay(0.0, decay_steps=10_000, warmup_target=0.1, warmup_steps=500)
    model.compile(hpcnn.optimizers.SGD(learning_rate=lr, momentum=0.9), "sparse_categorical_crossentropy")

The rate of each training step is a pure function of the optimizer's step count
(``optimizer.iterations``, the steps already taken), computed by the C++ core at every step: no
Python code runs per batch, and a run resumed with the same step count gets the same rate.
Calling a schedule (``schedule(step)``, or ``schedule(np.arange(n))`` for a plot) evaluates the
very C++ code a step runs.

Only these classes are evaluated by the core: a subclass with its own ``__call__`` cannot be
(use the ``LearningRateScheduler`` callback for a Python rule per epoch).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from .. import config_objects, _core, validation
from ..config_objects import ConfigObject


class LearningRateSchedule(ConfigObject):
    """Base class of the schedules. ``schedule(step)`` is the learning rate of the step taken after
    ``step`` steps; ``get_config`` / ``from_config`` round-trip the arguments (Keras' keys)."""

    name: str

    def __call__(self, step: Any) -> Union[float, np.ndarray]:
        cfg = self.core_config()
        if np.ndim(step) == 0:
            s = validation.integer(step.item() if isinstance(step, np.ndarray) else step, "step",
                                   type(self).__name__, minimum=0, maximum=None)
            return float(_core.learning_rate_schedule_value(cfg, s))
        steps = np.asarray(step)
        out = np.empty(steps.shape, dtype=np.float64)
        for idx, s in np.ndenumerate(steps):
            out[idx] = _core.learning_rate_schedule_value(
                cfg, validation.integer(s, "step", type(self).__name__, minimum=0, maximum=None))
        return out

    def core_config(self) -> Dict[str, Any]:
        """What the core's factory reads (nn/factory.cpp make_schedule): the class name and the
        arguments, None (Keras' "not given") left out."""
        cfg = {k: v for k, v in self.get_config().items() if k != "name" and v is not None}
        cfg["class_name"] = type(self).__name__
        return cfg

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({args})"


def _rate(value: Any, name: str, caller: str) -> float:
    return validation.number(value, name, caller, low=0.0, expected="a non-negative finite float")


def _steps(value: Any, name: str, caller: str) -> Union[int, float]:
    """decay_steps and friends: > 0 (Keras' "Argument `decay_steps` must be > 0"), kept as given."""
    ok = (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
          and np.isfinite(value) and value > 0)
    if not ok:
        raise ValueError(f"{caller}: Argument `{name}` must be > 0. Received: {name}={value!r}")
    return int(value) if validation.is_integer(value) else float(value)


def _name(value: Any, default: str, caller: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValueError(f"{caller}: Argument `name` must be a string. Received: name={value!r}")
    return value


class _StepDecay(LearningRateSchedule):
    """ExponentialDecay and InverseTimeDecay: the same arguments, checks and config (the core
    evaluates both with the exponent ``step / decay_steps``, floored when ``staircase``)."""

    def __init__(self, caller: str, initial_learning_rate: float, decay_steps: Union[int, float],
                 decay_rate: float, staircase: bool, name: str) -> None:
        self.initial_learning_rate = _rate(initial_learning_rate, "initial_learning_rate", caller)
        self.decay_steps = _steps(decay_steps, "decay_steps", caller)
        self.decay_rate = _rate(decay_rate, "decay_rate", caller)
        self.staircase = validation.boolean(staircase, "staircase", caller)
        self.name = _name(name, caller, caller)

    def get_config(self) -> Dict[str, Any]:
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "decay_rate": self.decay_rate, "staircase": self.staircase, "name": self.name}


class ExponentialDecay(_StepDecay):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)`` (an integer exponent when
    ``staircase``)."""

    def __init__(self, initial_learning_rate: float, decay_steps: Union[int, float], decay_rate: float,
                 staircase: bool = False, name: str = "ExponentialDecay") -> None:
        super().__init__("ExponentialDecay", initial_learning_rate, decay_steps, decay_rate, staircase, name)


class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[0]`` while ``step <= boundaries[0]``, ``values[i]`` while
    ``boundaries[i-1] < step <= boundaries[i]``, ``values[-1]`` after the last boundary."""

    def __init__(self, boundaries: Sequence[Union[int, float]], values: Sequence[float],
                 name: str = "PiecewiseConstant") -> None:
        c = "PiecewiseConstantDecay"
        for arg, what in ((boundaries, "boundaries"), (values, "values")):
            if isinstance(arg, (str, bytes)) or not isinstance(arg, (list, tuple, np.ndarray)):
                raise ValueError(f"{c}: `{what}` must be a list of numbers. Received: {what}={arg!r}")
        if len(boundaries) != len(values) - 1:
            raise ValueError(f"{c}: The length of boundaries should be 1 less than the length of values. Received: "
                             f"boundaries={list(boundaries)} of length {len(boundaries)}, and values={list(values)} "
                             f"of length {len(values)}.")
        b = [validation.number(x, "boundaries", c) for x in boundaries]
        if any(b2 <= b1 for b1, b2 in zip(b, b[1:])):
            raise ValueError(f"{c}: `boundaries` must be strictly increasing. Received: boundaries={list(boundaries)}")
        self.boundaries = [int(x) if validation.is_integer(x) else float(x) for x in boundaries]
        self.values = [_rate(v, "values", c) for v in values]
        self.name = _name(name, "PiecewiseConstant", c)

    def get_config(self) -> Dict[str, Any]:
        return {"boundaries": list(self.boundaries), "values": list(self.values), "name": self.name}


class PolynomialDecay(LearningRateSchedule):
    """``(initial - end) * (1 - step / decay_steps) ** power + end`` with the step capped at
    ``decay_steps`` (``cycle``: decay_steps grows to the next multiple instead)."""

    def __init__(self, initial_learning_rate: float, decay_steps: Union[int, float],
                 end_learning_rate: float = 0.0001, power: float = 1.0, cycle: bool = False,
                 name: str = "PolynomialDecay") -> None:
        c = "PolynomialDecay"
        self.initial_learning_rate = _rate(initial_learning_rate, "initial_learning_rate", c)
        self.decay_steps = _steps(decay_steps, "decay_steps", c)
        self.end_learning_rate = _rate(end_learning_rate, "end_learning_rate", c)
        self.power = _rate(power, "power", c)
        self.cycle = validation.boolean(cycle, "cycle", c)
        self.name = _name(name, "PolynomialDecay", c)

    def get_config(self) -> Dict[str, Any]:
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "end_learning_rate": self.end_learning_rate, "power": self.power, "cycle": self.cycle,
                "name": self.name}


class InverseTimeDecay(_StepDecay):
    """``initial_learning_rate / (1 + decay_rate * step / decay_steps)`` (an integer quotient when
    ``staircase``)."""

    def __init__(self, initial_learning_rate: float, decay_steps: Union[int, float], decay_rate: float,
                 staircase: bool = False, name: str = "InverseTimeDecay") -> None:
        super().__init__("InverseTimeDecay", initial_learning_rate, decay_steps, decay_rate, staircase, name)


class CosineDecay(LearningRateSchedule):
    """Cosine decay with optional linear warmup (Keras 3).

    Without ``warmup_target``: ``initial * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) + alpha)``,
    ``s = min(step, decay_steps)``. With ``warmup_target``: the rate rises linearly from
    ``initial_learning_rate`` to ``warmup_target`` over ``warmup_steps`` steps, then decays from
    ``warmup_target`` by the cosine over ``decay_steps`` more steps (and stays at
    ``alpha * warmup_target``)."""

    def __init__(self, initial_learning_rate: float, decay_steps: Union[int, float], alpha: float = 0.0,
                 name: str = "CosineDecay", warmup_target: Optional[float] = None,
                 warmup_steps: Union[int, float] = 0) -> None:
        c = "CosineDecay"
        self.initial_learning_rate = _rate(initial_learning_rate, "initial_learning_rate", c)
        self.decay_steps = _steps(decay_steps, "decay_steps", c)
        self.alpha = _rate(alpha, "alpha", c)
        self.name = _name(name, "CosineDecay", c)
        self.warmup_target = None if warmup_target is None else _rate(warmup_target, "warmup_target", c)
        steps = validation.number(warmup_steps, "warmup_steps", c, low=0.0, expected="a non-negative number")
        self.warmup_steps = int(warmup_steps) if validation.is_integer(warmup_steps) else steps

    def get_config(self) -> Dict[str, Any]:
        return {"initial_learning_rate": self.initial_learning_rate, "decay_steps": self.decay_steps,
                "alpha": self.alpha, "name": self.name, "warmup_target": self.warmup_target,
                "warmup_steps": self.warmup_steps}


class CosineDecayRestarts(LearningRateSchedule):
    """Cosine decay with warm restarts (SGDR): the first period lasts ``first_decay_steps``, each
    next one ``t_mul`` times longer, starting ``m_mul`` times lower; ``alpha`` is the floor as a
    fraction of the initial rate."""

    def __init__(self, initial_learning_rate: float, first_decay_steps: Union[int, float], t_mul: float = 2.0,
                 m_mul: float = 1.0, alpha: float = 0.0, name: str = "SGDRDecay") -> None:
        c = "CosineDecayRestarts"
        self.initial_learning_rate = _rate(initial_learning_rate, "initial_learning_rate", c)
        self.first_decay_steps = _steps(first_decay_steps, "first_decay_steps", c)
        self._t_mul = validation.number(t_mul, "t_mul", c, low=0.0, low_open=True, expected="a positive float")
        self._m_mul = _rate(m_mul, "m_mul", c)
        self.alpha = _rate(alpha, "alpha", c)
        self.name = _name(name, "SGDRDecay", c)

    def get_config(self) -> Dict[str, Any]:
        return {"initial_learning_rate": self.initial_learning_rate, "first_decay_steps": self.first_decay_steps,
                "t_mul": self._t_mul, "m_mul": self._m_mul, "alpha": self.alpha, "name": self.name}


# The schedules the core evaluates, by Keras class name (deserialize looks names up here only).
REGISTRY = {c.__name__: c for c in (ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay, InverseTimeDecay,
                                     CosineDecay, CosineDecayRestarts)}


def is_builtin(schedule: Any) -> bool:
    """Whether `schedule` is one of the classes above exactly (a subclass could override __call__,
    which the core would not run)."""
    return type(schedule) in REGISTRY.values()


def serialize(learning_rate_schedule: LearningRateSchedule) -> Dict[str, Any]:
    """``{'class_name': ..., 'config': {...}}``, Keras' serialized shape."""
    if not isinstance(learning_rate_schedule, LearningRateSchedule):
        raise ValueError(f"serialize: expected a LearningRateSchedule, got {learning_rate_schedule!r}")
    return config_objects.serialize(learning_rate_schedule)


def deserialize(config: Dict[str, Any]) -> LearningRateSchedule:
    """The schedule ``serialize`` (or Keras' ``keras.optimizers.schedules.serialize``) described;
    ValueError for anything else."""
    return config_objects.deserialize(config, REGISTRY, "learning rate schedule", str(sorted(REGISTRY)))


__all__ = ["LearningRateSchedule", "ExponentialDecay", "PiecewiseConstantDecay", "PolynomialDecay", "InverseTimeDecay",
           "CosineDecay", "CosineDecayRestarts", "serialize", "deserialize"]
