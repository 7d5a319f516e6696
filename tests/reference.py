"""Float64 NumPy references for the layers and a training step (used by the tests only)."""
from __future__ import annotations

import numpy as np


def keras_pad(size: int, k: int, s: int, padding: str):
    if padding == "valid":
        return (size - k) // s + 1, 0, 0
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2, total - total // 2


def conv_forward(x, w, b, s=1, padding="same"):
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    oh, pt, pb = keras_pad(h, kh, s, padding)
    ow, pl, pr = keras_pad(wd, kw, s, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    y = np.zeros((n, oh, ow, f))
    for a in range(kh):
        for bb in range(kw):
            patch = xp[:, a:a + s * (oh - 1) + 1:s, bb:bb + s * (ow - 1) + 1:s, :]
            y += np.einsum("nijc,cf->nijf", patch, w[a, bb])
    return y + b


def conv_backward(x, w, dy, s=1, padding="same"):
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    oh, pt, pb = keras_pad(h, kh, s, padding)
    ow, pl, pr = keras_pad(wd, kw, s, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for a in range(kh):
        for bb in range(kw):
            sl = (slice(None), slice(a, a + s * (oh - 1) + 1, s), slice(bb, bb + s * (ow - 1) + 1, s), slice(None))
            dw[a, bb] = np.einsum("nijc,nijf->cf", xp[sl], dy)
            dxp[sl] += np.einsum("nijf,cf->nijc", dy, w[a, bb])
    dx = dxp[:, pt:pt + h, pl:pl + wd, :]
    return dx, dw, dy.sum(axis=(0, 1, 2))


def pool_forward(x, k=2, s=2, padding="same"):
    n, h, wd, c = x.shape
    oh, pt, pb = keras_pad(h, k, s, padding)
    ow, pl, pr = keras_pad(wd, k, s, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=-np.inf)
    y = np.full((n, oh, ow, c), -np.inf)
    for i in range(oh):
        for j in range(ow):
            y[:, i, j] = xp[:, i * s:i * s + k, j * s:j * s + k].reshape(n, -1, c).max(axis=1)
    return y


def pool_backward(x, dy, k=2, s=2, padding="same"):
    n, h, wd, c = x.shape
    oh, pt, pb = keras_pad(h, k, s, padding)
    ow, pl, pr = keras_pad(wd, k, s, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=-np.inf)
    dxp = np.zeros_like(xp)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, i * s:i * s + k, j * s:j * s + k].reshape(n, -1, c)
            arg = win.argmax(axis=1)  # first max, row-major in the window
            for ni in range(n):
                for ci in range(c):
                    a, bb = divmod(arg[ni, ci], k)
                    dxp[ni, i * s + a, j * s + bb, ci] += dy[ni, i, j, ci]
    return dxp[:, pt:pt + h, pl:pl + wd, :]


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def adam(p, g, m, v, t, lr=1e-3, b1=0.9, b2=0.999, eps=1e-7):
    m = m + (g - m) * (1 - b1)
    v = v + (g * g - v) * (1 - b2)
    alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return p - alpha * m / (np.sqrt(v) + eps), m, v


def train_step(spec, weights, x, onehot, dropout_masks):
    """One step of a Sequential given as a spec list:
    ('conv', stride, padding, relu) | ('pool', k, s, padding) | ('flatten',) | ('dense', relu) |
    ('dropout', key) | ('softmax',). Returns (mean loss, grads in weight order)."""
    acts = [x]
    wi = 0
    params = []
    for layer in spec:
        kind, a = layer[0], acts[-1]
        if kind == "conv":
            w, b = weights[wi], weights[wi + 1]
            params.append(wi)
            wi += 2
            z = conv_forward(a, w, b, layer[1], layer[2])
            acts.append(np.maximum(z, 0) if layer[3] else z)
        elif kind == "pool":
            acts.append(pool_forward(a, layer[1], layer[2], layer[3]))
        elif kind == "flatten":
            acts.append(a.reshape(len(a), -1))
        elif kind == "dense":
            w, b = weights[wi], weights[wi + 1]
            params.append(wi)
            wi += 2
            z = a @ w + b
            acts.append(np.maximum(z, 0) if layer[1] else z)
        elif kind == "dropout":
            acts.append(a * dropout_masks[layer[1]])
        elif kind == "softmax":
            acts.append(a)  # logits; softmax is fused into the loss
    logits = acts[-1]
    n = len(x)
    p = softmax(logits)
    loss = -np.sum(onehot * np.log(p)) / n
    g = (p - onehot) / n
    grads = [None] * len(weights)
    wi = len(weights)
    for li in range(len(spec) - 1, -1, -1):
        layer, a_in, a_out = spec[li], acts[li], acts[li + 1]
        kind = layer[0]
        if kind == "softmax":
            continue
        if kind == "conv":
            wi -= 2
            if layer[3]:
                g = g * (a_out > 0)
            dx, dw, db = conv_backward(a_in, weights[wi], g, layer[1], layer[2])
            grads[wi], grads[wi + 1] = dw, db
            g = dx
        elif kind == "pool":
            g = pool_backward(a_in, g, layer[1], layer[2], layer[3])
        elif kind == "flatten":
            g = g.reshape(a_in.shape)
        elif kind == "dense":
            wi -= 2
            if layer[1]:
                g = g * (a_out > 0)
            grads[wi], grads[wi + 1] = a_in.T @ g, g.sum(axis=0)
            g = g @ weights[wi].T
        elif kind == "dropout":
            g = g * dropout_masks[layer[1]]
    return loss, grads


TUTORIAL_SPEC = [
    ("conv", 1, "same", True), ("pool", 2, 2, "same"),
    ("conv", 1, "same", True), ("pool", 2, 2, "same"),
    ("conv", 1, "same", True), ("pool", 2, 2, "same"),
    ("conv", 1, "same", True), ("pool", 2, 2, "same"),
    ("flatten",), ("dense", True), ("dropout", 10), ("dense", True), ("dropout", 12), ("dense", False), ("softmax",)]

DEEP_MNIST_SPEC = [
    ("conv", 1, "same", True), ("pool", 2, 2, "valid"),
    ("conv", 1, "same", True), ("pool", 2, 2, "valid"),
    ("flatten",), ("dense", True), ("dropout", 6), ("dense", False), ("softmax",)]
