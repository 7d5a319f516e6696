"""A float64 NumPy training step of a Sequential, built from the per-operator references in
ops_reference.py (tests only)."""
from __future__ import annotations

import numpy as np

from tests.support import ops_reference as op


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


# ------------------------------------------------------------------ graphs (the functional API)
# A graph is a list of (layer, inputs): `layer` a spec as above (a conv spec may add a fifth item,
# use_bias, default True), or ('relu',) | ('add',) | ('concat', axis) | ('bn', epsilon) (batch
# normalization with gamma, beta, moving_mean, moving_variance) | ('gap',) (global average
# pooling); `inputs` the indices of earlier nodes (-1: the model's input), in the order of the
# core's node_inputs. Weights are taken in node order (conv and dense: kernel, bias).
def _conv_bias(layer):
    return len(layer) < 5 or layer[4]


def _weight_count(layer):
    if layer[0] == "conv":
        return 2 if _conv_bias(layer) else 1
    return {"dense": 2, "bn": 4}.get(layer[0], 0)


def _weight_starts(graph):
    starts, wi = [], 0
    for layer, _ in graph:
        starts.append(wi)
        wi += _weight_count(layer)
    return starts


def _conv_b(layer, weights, wi):
    return weights[wi + 1] if _conv_bias(layer) else np.zeros(np.shape(weights[wi])[-1])


def graph_forward(graph, weights, x, training=True, bn_stats=None):
    """Every node's output (the last one the logits when it is ('softmax',): fused into the loss).
    Batch normalization uses the batch's statistics when `training` (each BN node's (mean, biased
    variance) then goes into the dict `bn_stats`, if given), else the moving ones."""
    vals = []
    for i, ((layer, inputs), wi) in enumerate(zip(graph, _weight_starts(graph))):
        xs = [x if p < 0 else vals[p] for p in inputs]
        kind, a = layer[0], xs[0]
        if kind == "conv":
            y = op.conv2d_forward(a, weights[wi], _conv_b(layer, weights, wi), (layer[1],) * 2, layer[2], layer[3])
        elif kind == "bn" and training:
            y, mean, var = op.batchnorm_training(a, weights[wi], weights[wi + 1], eps=layer[1])
            if bn_stats is not None:
                bn_stats[i] = (mean, var)
        elif kind == "bn":
            y = op.batchnorm_inference(a, *weights[wi:wi + 4], eps=layer[1])
        elif kind == "gap":
            y = np.asarray(a, np.float64).mean(axis=(1, 2))
        elif kind == "pool":
            y = op.maxpool2d_forward(a, (layer[1],) * 2, (layer[2],) * 2, layer[3])
        elif kind == "flatten":
            y = a.reshape(len(a), -1)
        elif kind == "dense":
            y = op.dense_forward(a, weights[wi], weights[wi + 1], layer[1])
        elif kind == "relu":
            y = np.maximum(a, 0.0)
        elif kind == "add":
            y = sum(np.asarray(v, np.float64) for v in xs)
        elif kind == "concat":
            y = np.concatenate(xs, axis=layer[1])
        elif kind == "softmax":
            y = a
        else:
            raise ValueError(kind)
        vals.append(np.asarray(y, np.float64))
    return vals


def graph_loss(graph, weights, x, onehot):
    """The mean cross-entropy of the graph's softmax output (for finite differences)."""
    loss_sum, _, _ = op.softmax_xent(graph_forward(graph, weights, x)[-1], onehot)
    return loss_sum / len(x)


def graph_train_step(graph, weights, x, onehot):
    """(mean loss, weight gradients): backward in reverse node order, a node's output gradient the
    sum of what every node that reads it gives back. Batch normalization in training mode; its
    moving statistics get no gradient (zeros)."""
    vals = graph_forward(graph, weights, x)
    n = len(x)
    loss_sum, _, g = op.softmax_xent(vals[-1], onehot)
    dvals = [None] * len(graph)
    dvals[-1] = g / n
    grads = [None] * len(weights)

    def give(p, d):
        if p >= 0:
            dvals[p] = d if dvals[p] is None else dvals[p] + d

    for i in range(len(graph) - 1, -1, -1):
        (layer, inputs), g, wi = graph[i], dvals[i], _weight_starts(graph)[i]
        if g is None:
            continue
        xs = [x if p < 0 else vals[p] for p in inputs]
        kind, a, y = layer[0], xs[0], vals[i]
        if kind == "conv":
            dx, dw, db = op.conv2d_backward(a, weights[wi], y, g, (layer[1],) * 2, layer[2], layer[3])
            grads[wi] = dw
            if _conv_bias(layer):
                grads[wi + 1] = db
            give(inputs[0], dx)
        elif kind == "bn":
            dx, grads[wi], grads[wi + 1] = op.batchnorm_training_backward(a, weights[wi], g, eps=layer[1])
            grads[wi + 2], grads[wi + 3] = np.zeros_like(weights[wi + 2]), np.zeros_like(weights[wi + 3])
            give(inputs[0], dx)
        elif kind == "gap":
            h, w = np.shape(a)[1:3]
            give(inputs[0], np.broadcast_to(g[:, None, None, :] / (h * w), np.shape(a)).copy())
        elif kind == "pool":
            give(inputs[0], op.maxpool2d_backward(a, g, (layer[1],) * 2, (layer[2],) * 2, layer[3]))
        elif kind == "flatten":
            give(inputs[0], g.reshape(a.shape))
        elif kind == "dense":
            dx, grads[wi], grads[wi + 1] = op.dense_backward(a, weights[wi], y, g, layer[1])
            give(inputs[0], dx)
        elif kind == "relu":
            give(inputs[0], g * (y > 0))
        elif kind == "add":
            for p in inputs:
                give(p, g)
        elif kind == "concat":
            cuts = np.cumsum([np.shape(v)[layer[1]] for v in xs])[:-1]
            for p, part in zip(inputs, np.split(g, cuts, axis=layer[1])):
                give(p, part)
        elif kind == "softmax":
            give(inputs[0], g)
    return loss_sum / n, grads


def graph_adam_steps(graph, weights, batches, lr=1e-3):
    """Keras' Adam over the batches [(x, onehot), ...]: (losses, weights after each step)."""
    w = [np.asarray(v, np.float64) for v in weights]
    m = [np.zeros_like(v) for v in w]
    v = [np.zeros_like(a) for a in w]
    losses, history = [], []
    for t, (x, onehot) in enumerate(batches, start=1):
        loss, grads = graph_train_step(graph, w, x, onehot)
        losses.append(loss)
        for k in range(len(w)):
            w[k], m[k], v[k] = op.adam(w[k], grads[k], m[k], v[k], lr, 0.9, 0.999, 1e-7, t)
        history.append([a.copy() for a in w])
    return losses, history
