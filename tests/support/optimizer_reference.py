"""float64 NumPy models of Keras 3's optimizers, schedules and regularizers (tests only), written
from Keras' formulas: keras/src/optimizers/base_optimizer.py (apply: clip the gradients, decay
the weights, update, iterations + 1), sgd.py, adam.py, adamw.py, rmsprop.py,
schedules/learning_rate_schedule.py and regularizers/regularizers.py."""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence

import numpy as np


class KerasOptimizer:
    """One of 'sgd', 'adam', 'rmsprop' over a list of variables (float64 arrays), with Keras'
    weight_decay, clipnorm, global_clipnorm and clipvalue. `learning_rate` is a float or a
    function of iterations (a schedule); `exclude[i]` True skips weight decay for variable i."""

    def __init__(self, kind: str, learning_rate, weight_decay: Optional[float] = None,
                 clipnorm: Optional[float] = None, global_clipnorm: Optional[float] = None,
                 clipvalue: Optional[float] = None, exclude: Sequence[bool] = (), **hyper) -> None:
        self.kind, self.lr, self.hyper = kind, learning_rate, hyper
        self.weight_decay, self.clipnorm, self.global_clipnorm, self.clipvalue = (weight_decay, clipnorm,
                                                                                  global_clipnorm, clipvalue)
        self.exclude = list(exclude)
        self.iterations = 0
        self.state: Optional[List[dict]] = None

    def learning_rate(self) -> float:
        return self.lr(self.iterations) if callable(self.lr) else self.lr

    def clip(self, grads: List[np.ndarray]) -> List[np.ndarray]:
        if self.clipnorm:
            out = []
            for g in grads:
                norm = math.sqrt(float((g * g).sum()))
                out.append(g * self.clipnorm / max(norm, self.clipnorm))
            return out
        if self.global_clipnorm:
            norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
            scale = self.global_clipnorm * min(1.0 / norm if norm else math.inf, 1.0 / self.global_clipnorm)
            return [g * scale for g in grads]
        if self.clipvalue:
            return [np.clip(g, -self.clipvalue, self.clipvalue) for g in grads]
        return grads

    def apply(self, params: List[np.ndarray], grads: List[np.ndarray]) -> List[np.ndarray]:
        params = [np.asarray(p, np.float64) for p in params]
        grads = self.clip([np.asarray(g, np.float64) for g in grads])
        if self.state is None:
            self.state = [dict(m=np.zeros_like(p), v=np.zeros_like(p), mom=np.zeros_like(p), avg=np.zeros_like(p))
                          for p in params]
        lr = self.learning_rate()
        if self.weight_decay:
            params = [p if (i < len(self.exclude) and self.exclude[i]) else p - p * self.weight_decay * lr
                      for i, p in enumerate(params)]
        out = [self._update(p, g, s, lr) for p, g, s in zip(params, grads, self.state)]
        self.iterations += 1
        return out

    def _update(self, p, g, s, lr):
        h = self.hyper
        if self.kind == "sgd":
            momentum = h.get("momentum", 0.0)
            if momentum == 0:
                return p - lr * g
            s["m"] = momentum * s["m"] - lr * g
            return p + momentum * s["m"] - lr * g if h.get("nesterov") else p + s["m"]
        if self.kind == "adam":
            b1, b2, eps = h.get("beta_1", 0.9), h.get("beta_2", 0.999), h.get("epsilon", 1e-7)
            t = self.iterations + 1
            alpha = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
            s["m"] = s["m"] + (g - s["m"]) * (1 - b1)
            s["v"] = s["v"] + (g * g - s["v"]) * (1 - b2)
            return p - alpha * s["m"] / (np.sqrt(s["v"]) + eps)
        if self.kind == "rmsprop":
            rho, momentum, eps = h.get("rho", 0.9), h.get("momentum", 0.0), h.get("epsilon", 1e-7)
            s["v"] = rho * s["v"] + (1 - rho) * g * g
            if h.get("centered"):
                s["avg"] = rho * s["avg"] + (1 - rho) * g
                denom = s["v"] - s["avg"] ** 2 + eps
            else:
                denom = s["v"] + eps
            increment = lr * g / np.sqrt(denom)
            if momentum > 0:
                s["mom"] = momentum * s["mom"] + increment
                return p - s["mom"]
            return p - increment
        raise ValueError(self.kind)


# ------------------------------------------------------------------ schedules (closed forms)
def exponential_decay(step, initial, decay_steps, rate, staircase=False):
    p = step / decay_steps
    return initial * rate ** (math.floor(p) if staircase else p)


def piecewise_constant(step, boundaries, values):
    for b, v in zip(boundaries, values):
        if step <= b:
            return v
    return values[-1]


def polynomial_decay(step, initial, decay_steps, end=0.0001, power=1.0, cycle=False):
    if cycle:
        d = decay_steps * (1.0 if step == 0 else math.ceil(step / decay_steps))
        s = step
    else:
        d, s = decay_steps, min(step, decay_steps)
    return (initial - end) * (1 - s / d) ** power + end


def inverse_time_decay(step, initial, decay_steps, rate, staircase=False):
    p = step / decay_steps
    return initial / (1 + rate * (math.floor(p) if staircase else p))


def cosine_decay(step, initial, decay_steps, alpha=0.0, warmup_target=None, warmup_steps=0):
    def decayed(s, start):
        return start * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * s / decay_steps)) + alpha)
    if warmup_target is None:
        return decayed(min(step, decay_steps), initial)
    s = min(step, decay_steps + warmup_steps)
    if s < warmup_steps:
        return initial + (warmup_target - initial) * s / warmup_steps
    return decayed(s - warmup_steps, warmup_target)


def cosine_decay_restarts(step, initial, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0):
    """SGDR written as periods: find the period that holds `step` by walking them."""
    start, length, i = 0.0, float(first_decay_steps), 0
    while step >= start + length:
        start += length
        length *= t_mul
        i += 1
    fraction = (step - start) / length
    cosine = 0.5 * m_mul ** i * (1 + math.cos(math.pi * fraction))
    return initial * ((1 - alpha) * cosine + alpha)


# ------------------------------------------------------------------ regularizers
def penalty(weights: Sequence[np.ndarray], factors: Sequence[tuple]) -> float:
    """sum over variables of l1 * sum|w| + l2 * sum w^2; factors: (l1, l2) per variable."""
    return sum(l1 * float(np.abs(np.asarray(w, np.float64)).sum()) + l2 * float(np.square(np.asarray(w, np.float64)).sum())
               for w, (l1, l2) in zip(weights, factors))


def penalty_gradient(w: np.ndarray, l1: float, l2: float) -> np.ndarray:
    w = np.asarray(w, np.float64)
    return l1 * np.sign(w) + 2 * l2 * w


def split(flat: np.ndarray, shapes: Sequence[tuple]) -> List[np.ndarray]:
    """A flat buffer (get_weights order) as one array per weight."""
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(np.asarray(flat[at:at + n], np.float64).reshape(s))
        at += n
    return out


Schedule = Callable[[int], float]


def state_buffers(core) -> List[np.ndarray]:
    """The core model's optimizer state buffers in their fixed order (optimizer_state() gives a
    list, or a dict by name in builds where checkpoints name them)."""
    state = core.optimizer_state()
    return list(state.values()) if isinstance(state, dict) else list(state)
