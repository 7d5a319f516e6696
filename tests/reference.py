"""A float64 NumPy training step of a Sequential, built from the per-operator references in
ops_reference.py (tests only)."""
from __future__ import annotations

import numpy as np

import ops_reference as op


def train_step(spec, weights, x, onehot, dropout_masks):
    """One step of a Sequential given as a spec list:
    ('conv', stride, padding, relu) | ('pool', k, s, padding) | ('flatten',) | ('dense', relu) |
    ('dropout', key) | ('softmax',). Returns (mean loss, grads in weight order)."""
    acts = [x]
    wi = 0
    for layer in spec:
        kind, a = layer[0], acts[-1]
        if kind == "conv":
            acts.append(op.conv2d_forward(a, weights[wi], weights[wi + 1], (layer[1],) * 2, layer[2], layer[3]))
            wi += 2
        elif kind == "pool":
            acts.append(op.maxpool2d_forward(a, (layer[1],) * 2, (layer[2],) * 2, layer[3]))
        elif kind == "flatten":
            acts.append(a.reshape(len(a), -1))
        elif kind == "dense":
            acts.append(op.dense_forward(a, weights[wi], weights[wi + 1], layer[1]))
            wi += 2
        elif kind == "dropout":
            acts.append(a * dropout_masks[layer[1]])
        elif kind == "softmax":
            acts.append(a)  # logits; softmax is fused into the loss
    n = len(x)
    loss_sum, _, g = op.softmax_xent(acts[-1], onehot)
    g = g / n
    grads = [None] * len(weights)
    wi = len(weights)
    for li in range(len(spec) - 1, -1, -1):
        layer, a_in, a_out = spec[li], acts[li], acts[li + 1]
        kind = layer[0]
        if kind == "conv":
            wi -= 2
            g, grads[wi], grads[wi + 1] = op.conv2d_backward(a_in, weights[wi], a_out, g, (layer[1],) * 2, layer[2],
                                                             layer[3])
        elif kind == "pool":
            g = op.maxpool2d_backward(a_in, g, (layer[1],) * 2, (layer[2],) * 2, layer[3])
        elif kind == "flatten":
            g = g.reshape(a_in.shape)
        elif kind == "dense":
            wi -= 2
            g, grads[wi], grads[wi + 1] = op.dense_backward(a_in, weights[wi], a_out, g, layer[1])
        elif kind == "dropout":
            g = g * dropout_masks[layer[1]]
    return loss_sum / n, grads


def adam_first_step(w, g, lr=1e-3):
    """Weights after Keras' Adam's first step from zero moments."""
    return op.adam(w, g, np.zeros_like(w), np.zeros_like(w), lr, 0.9, 0.999, 1e-7, 1)[0]


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
