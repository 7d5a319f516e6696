"""Finite-difference gradient checks against the float64 references (test_gradcheck.py,
test_layer_gradcheck.py): an op's analytic backward against central differences of its float64
forward, on a sample of coordinates of one input."""
import numpy as np


EPS = 1e-5


def numeric_grad(loss, arrays, which, rng, samples=12):
    """(indices, d loss / d arrays[which][index]) by central differences in float64."""
    a = arrays[which]
    flat = rng.choice(a.size, size=min(samples, a.size), replace=False)
    grads = []
    for i in flat:
        idx = np.unravel_index(i, a.shape)
        args = [np.asarray(v, np.float64).copy() for v in arrays]
        args[which][idx] += EPS
        up = loss(*args)
        args[which][idx] -= 2 * EPS
        down = loss(*args)
        grads.append((up - down) / (2 * EPS))
    return [np.unravel_index(i, a.shape) for i in flat], np.array(grads)


def check(analytic, loss, arrays, which, rng):
    idx, num = numeric_grad(loss, arrays, which, rng)
    got = np.array([analytic[i] for i in idx], np.float64)
    scale = max(np.abs(num).max(), 1e-3)
    np.testing.assert_allclose(got, num, rtol=1e-3, atol=1e-3 * scale)


def away_from_zero(a, margin=0.05):
    return np.where(np.abs(a) < margin, np.sign(a + 1e-12) * margin, a)
