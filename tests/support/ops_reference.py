"""Float64 NumPy references for hpcnn's operators (used by test_ops.py and test_gradcheck.py).

Written from the operators' definitions (Keras semantics), independent of the C++ code:
NHWC activations, kernels (kh, kw, in, out), 'same' padding putting the odd extra row/column at
the bottom/right, max-pool ties going to the first position of the window in row-major order.
"""
from __future__ import annotations

import numpy as np


def keras_padding(size: int, k: int, stride: int, padding: str):
    """(out, pad_before, pad_after) of one spatial axis."""
    if padding == "valid":
        return (size - k) // stride + 1, 0, 0
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def _strided(a, ky, kx, oh, ow, sh, sw):
    return a[:, ky:ky + (oh - 1) * sh + 1:sh, kx:kx + (ow - 1) * sw + 1:sw, :]


def _pad_input(x, kh, kw, strides, padding):
    """x zero-padded by Keras' rule, with the output size and the top/left padding."""
    oh, pt, pb = keras_padding(x.shape[1], kh, strides[0], padding)
    ow, pl, pr = keras_padding(x.shape[2], kw, strides[1], padding)
    return np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0))), oh, ow, pt, pl


def conv2d_forward(x, w, b, strides=(1, 1), padding="valid", relu=False):
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    sh, sw = strides
    xp, oh, ow, pt, pl = _pad_input(x, kh, kw, strides, padding)
    y = np.zeros((n, oh, ow, f))
    for ky in range(kh):
        for kx in range(kw):
            y += np.einsum("nhwc,cf->nhwf", _strided(xp, ky, kx, oh, ow, sh, sw), w[ky, kx])
    y += np.asarray(b, np.float64)
    return np.maximum(y, 0.0) if relu else y


def conv2d_backward(x, w, y, dy, strides=(1, 1), padding="valid", relu=False):
    """(dx, dw, db); y is the forward output (its sign masks dy when relu)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    dy = np.asarray(dy, np.float64)
    if relu:
        dy = dy * (np.asarray(y) > 0)
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    sh, sw = strides
    xp, oh, ow, pt, pl = _pad_input(x, kh, kw, strides, padding)
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for ky in range(kh):
        for kx in range(kw):
            dw[ky, kx] = np.einsum("nhwc,nhwf->cf", _strided(xp, ky, kx, oh, ow, sh, sw), dy)
            _strided(dxp, ky, kx, oh, ow, sh, sw)[...] += np.einsum("nhwf,cf->nhwc", dy, w[ky, kx])
    dx = dxp[:, pt:pt + h, pl:pl + wd, :]
    return dx, dw, dy.sum(axis=(0, 1, 2))


def _pool_windows(x, pool, strides, padding):
    x = np.asarray(x, np.float64)
    n, h, wd, c = x.shape
    ph, pw = pool
    sh, sw = strides
    oh, pt, pb = keras_padding(h, ph, sh, padding)
    ow, pl, pr = keras_padding(wd, pw, sw, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=-np.inf)
    stack = np.stack([_strided(xp, ky, kx, oh, ow, sh, sw) for ky in range(ph) for kx in range(pw)])
    return xp, stack, (oh, ow, pt, pl)


def maxpool2d_forward(x, pool=(2, 2), strides=None, padding="valid"):
    strides = strides or pool
    _, stack, _ = _pool_windows(x, pool, strides, padding)
    return stack.max(axis=0)


def maxpool2d_backward(x, dy, pool=(2, 2), strides=None, padding="valid"):
    strides = strides or pool
    n, h, wd, c = np.shape(x)
    xp, stack, (oh, ow, pt, pl) = _pool_windows(x, pool, strides, padding)
    first = stack.argmax(axis=0)  # the first maximal position in row-major window order
    dxp = np.zeros_like(xp)
    for i, (ky, kx) in enumerate((ky, kx) for ky in range(pool[0]) for kx in range(pool[1])):
        _strided(dxp, ky, kx, oh, ow, strides[0], strides[1])[...] += np.where(first == i, dy, 0.0)
    return dxp[:, pt:pt + h, pl:pl + wd, :]


def dense_forward(x, w, b, relu=False):
    y = np.asarray(x, np.float64) @ np.asarray(w, np.float64) + np.asarray(b, np.float64)
    return np.maximum(y, 0.0) if relu else y


def dense_backward(x, w, y, dy, relu=False):
    dy = np.asarray(dy, np.float64)
    if relu:
        dy = dy * (np.asarray(y) > 0)
    return dy @ np.asarray(w, np.float64).T, np.asarray(x, np.float64).T @ dy, dy.sum(axis=0)


def softmax(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_xent(logits, target_onehot):
    """(loss_sum, correct, dlogits with grad_scale 1)."""
    z = np.asarray(logits, np.float64)
    t = np.asarray(target_onehot, np.float64)
    lse = np.log(np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)) + z.max(axis=1, keepdims=True)
    loss = -(t * (z - lse)).sum()
    correct = float((z.argmax(axis=1) == t.argmax(axis=1)).sum())
    return loss, correct, softmax(z) - t


def adam(p, g, m, v, lr, b1, b2, eps, t):
    """Keras' Adam: alpha = lr*sqrt(1-b2^t)/(1-b1^t), eps added to sqrt(v)."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return p - alpha * m / (np.sqrt(v) + eps), m, v


def sgd(p, g, vel, lr, momentum, nesterov):
    """Keras' SGD: velocity = momentum*velocity - lr*g; p += velocity (Nesterov: momentum*velocity - lr*g)."""
    if momentum == 0:
        return p - lr * g, vel
    vel = momentum * vel - lr * g
    return (p + momentum * vel - lr * g if nesterov else p + vel), vel


def close(got, want, rtol=1e-4):
    """assert_allclose at rtol, with atol scaled to the reference's largest magnitude."""
    want = np.asarray(want, np.float64)
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=rtol * max(scale, 1e-30))


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------ the layers of issue 13
def _erfc(x):
    import math
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(x):
    return np.logaddexp(0.0, x)


SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805

# Keras' definitions (keras.activations), float64: name -> f(x, alpha).
ACTIVATIONS = {
    "linear": lambda x, a: x,
    "relu": lambda x, a: np.maximum(x, 0.0),
    "relu6": lambda x, a: np.clip(x, 0.0, 6.0),
    "leaky_relu": lambda x, a: np.where(x > 0, x, a * x),
    "elu": lambda x, a: np.where(x > 0, x, a * np.expm1(np.minimum(x, 0.0))),
    "selu": lambda x, a: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0.0))),
    # (1 + erf(x / sqrt 2)) / 2 as erfc(-x / sqrt 2) / 2, and (1 + tanh u) / 2 as sigmoid(2u): the
    # same functions, accurate in float64 also where they are tiny (x << 0).
    "gelu": lambda x, a: 0.5 * x * _erfc(-x / np.sqrt(2.0)),
    "gelu_approximate": lambda x, a: x * _sigmoid(2.0 * np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)),
    "tanh": lambda x, a: np.tanh(x),
    "sigmoid": lambda x, a: _sigmoid(x),
    "hard_sigmoid": lambda x, a: np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    "swish": lambda x, a: x * _sigmoid(x),
    "silu": lambda x, a: x * _sigmoid(x),
    "softplus": lambda x, a: _softplus(x),
    "softsign": lambda x, a: x / (1.0 + np.abs(x)),
    "mish": lambda x, a: x * np.tanh(_softplus(x)),
    "hard_silu": lambda x, a: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    "hard_swish": lambda x, a: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
}


def activation(name, x, alpha=0.0):
    return ACTIVATIONS[name](np.asarray(x, np.float64), alpha)


def batchnorm_training(x, gamma, beta, eps=1e-3, relu=False):
    """(y, mean, biased var) over all axes but the last, Keras' ops.moments."""
    x = np.asarray(x, np.float64)
    axes = tuple(range(x.ndim - 1))
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    g = np.ones_like(mean) if gamma is None else np.asarray(gamma, np.float64)
    b = np.zeros_like(mean) if beta is None else np.asarray(beta, np.float64)
    y = g * (x - mean) / np.sqrt(var + eps) + b
    return (np.maximum(y, 0.0) if relu else y), mean, var


def batchnorm_training_backward(x, gamma, dy, eps=1e-3):
    """(dx, dgamma, dbeta) of batchnorm_training (no ReLU): the batch statistics depend on x too."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    axes = tuple(range(x.ndim - 1))
    m = x.size // x.shape[-1]
    inv = 1.0 / np.sqrt(x.var(axis=axes) + eps)
    xhat = (x - x.mean(axis=axes)) * inv
    dbeta, dgamma = dy.sum(axis=axes), (dy * xhat).sum(axis=axes)
    g = np.ones_like(inv) if gamma is None else np.asarray(gamma, np.float64)
    dx = g * inv / m * (m * dy - dbeta - xhat * dgamma)
    return dx, dgamma, dbeta


def batchnorm_inference(x, gamma, beta, moving_mean, moving_var, eps=1e-3, relu=False):
    x = np.asarray(x, np.float64)
    g = 1.0 if gamma is None else np.asarray(gamma, np.float64)
    b = 0.0 if beta is None else np.asarray(beta, np.float64)
    y = g * (x - np.asarray(moving_mean, np.float64)) / np.sqrt(np.asarray(moving_var, np.float64) + eps) + b
    return np.maximum(y, 0.0) if relu else y


def avgpool2d_forward(x, pool=(2, 2), strides=None, padding="valid"):
    """Each window's mean over its in-bounds positions (Keras/TensorFlow: padding not counted)."""
    strides = strides or pool
    x = np.asarray(x, np.float64)
    n, h, wd, c = x.shape
    oh, pt, pb = keras_padding(h, pool[0], strides[0], padding)
    ow, pl, pr = keras_padding(wd, pool[1], strides[1], padding)
    y = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            y0, x0 = max(i * strides[0] - pt, 0), max(j * strides[1] - pl, 0)
            y1, x1 = min(i * strides[0] - pt + pool[0], h), min(j * strides[1] - pl + pool[1], wd)
            y[:, i, j, :] = x[:, y0:y1, x0:x1, :].mean(axis=(1, 2))
    return y


def global_pool2d(x, mode):
    x = np.asarray(x, np.float64)
    return x.mean(axis=(1, 2)) if mode == "avg" else x.max(axis=(1, 2))


def zero_pad2d(x, top, bottom, left, right):
    return np.pad(np.asarray(x, np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))


def depthwise_conv2d_forward(x, w, b, strides=(1, 1), padding="valid", dilation=(1, 1)):
    """Keras' DepthwiseConv2D in float64: w (kh, kw, c, m), output channel c*m + j."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    n, h, wd, c = x.shape
    kh, kw, _, m = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    oh, pt, pb = keras_padding(h, (kh - 1) * dh + 1, sh, padding)
    ow, pl, pr = keras_padding(wd, (kw - 1) * dw + 1, sw, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    y = np.zeros((n, oh, ow, c, m))
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, ky * dh:ky * dh + (oh - 1) * sh + 1:sh, kx * dw:kx * dw + (ow - 1) * sw + 1:sw, :]
            y += patch[..., None] * w[ky, kx]
    y = y.reshape(n, oh, ow, c * m)
    return y + np.asarray(b, np.float64) if b is not None else y
