"""The timed side of hpcnn.bench: the models (the tutorial CNN, the CIFAR ResNet-20) in hpcnn,
PyTorch and TensorFlow, each framework's worker (training and inference step times, the trainable
parameter count, the versions it ran, single-image latency) and worker_main, what a worker process
runs. hpcnn.bench starts the workers and reports.

This module imports only the standard library at module level: a worker process loads it as a
plain file, without the hpcnn package, so the framework it times runs alone (hpcnn's extension
pins OpenBLAS to one thread when it loads, which would slow a PyTorch that uses the same
OpenBLAS). It is also the file a worker of an older hpcnn (bench_train.py --baseline-python) runs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable, Dict, List, Sequence, Tuple

def time_steps(step: Callable[[], object], steps: int, warmup: int = 2) -> List[float]:
    """Wall-clock seconds of each of `steps` calls of `step`, after `warmup` untimed calls."""
    for _ in range(warmup):
        step()
    out = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        out.append(time.perf_counter() - t)
    return out


LATENCY_WARMUP = 20  # untimed single-image calls before the timed ones


TUTORIAL_FWD_MFLOP = 30.9     # tutorial CNN, forward, per image
TUTORIAL_TRAIN_MFLOP = 92.6   # forward + backward-data + backward-filter, per image (the first
                              # conv's backward-data is not needed)


def resnet_cifar_mflop(depth: int = 20, shortcut: str = "B", size: int = 32) -> Tuple[float, float]:
    """(training, inference) MFLOP per image of the CIFAR ResNet (hpcnn.applications.resnet_cifar)
    by the direct-convolution count, 2 FLOP per multiply-add: forward; training adds the backward
    data pass of every convolution but the first and the backward filter pass of all."""
    n = (depth - 2) // 6
    convs = [(size, 3, 16, 3)]  # (output size, input channels, filters, kernel)
    c, h = 16, size
    for stage, f in enumerate((16, 32, 64)):
        for block in range(n):
            stride = 2 if stage and not block else 1
            h = -(-h // stride)
            convs += [(h, c, f, 3), (h, f, f, 3)]
            if shortcut == "B" and stride != 1:
                convs.append((h, c, f, 1))
            c = f
    macs = [o * o * f * k * k * ci for o, ci, f, k in convs]
    fwd = 2 * (sum(macs) + 64 * 10) / 1e6
    train = fwd + 2 * (sum(macs[1:]) + sum(macs) + 2 * 64 * 10) / 1e6
    return train, fwd


RESNET20_TRAIN_MFLOP, RESNET20_FWD_MFLOP = resnet_cifar_mflop(20, "B")

#: per model: (training MFLOP, inference MFLOP) per image, the input shape, and what it is.
MODELS = {
    "tutorial": (TUTORIAL_TRAIN_MFLOP, TUTORIAL_FWD_MFLOP, (32, 32, 3),
                 "the tutorial CNN (4x Conv-ReLU-MaxPool, Dense 256/512/10, dropout; Adam 1e-3)"),
    "resnet20": (RESNET20_TRAIN_MFLOP, RESNET20_FWD_MFLOP, (32, 32, 3),
                 "ResNet-20 for CIFAR (He et al. 2016; option B: 1x1 stride-2 projection shortcuts with BN; "
                 "convolutions without bias; SGD 0.1, momentum 0.9, weight decay 1e-4)"),
}

def _hpcnn_model(model: str):
    """(the compiled-ready hpcnn model, its optimizer) for `model`, fresh weights from seed 0."""
    if model == "resnet20":
        import hpcnn
        from hpcnn.applications import resnet20_cifar
        return resnet20_cifar(weight_decay=1e-4, shortcut="B", seed=0), hpcnn.optimizers.SGD(0.1, momentum=0.9)
    try:  # absolute: this file may run without its package (see top)
        from hpcnn.applications import tutorial_cnn
    except ImportError:  # an older hpcnn timed as the baseline (bench_train.py --baseline-python)
        from hpcnn.models import tutorial_cnn
    return tutorial_cnn(seed=0), "adam"


def trainable_params_hpcnn(m) -> int:
    """Trainable parameters of an hpcnn model (the BN moving statistics are not), as its summary
    counts them."""
    lines: List[str] = []
    m.summary(print_fn=lines.append)
    for line in lines:
        if line.startswith("Trainable params:"):
            return int(line.split(":", 1)[1].split("(")[0].replace(",", "").strip())
    return int(m.count_params())  # an older hpcnn's summary: every weight is trainable


def tutorial_cnn_step_times(device: str = "cpu", batch_size: int = 250, steps: int = 20, warmup: int = 3,
                            strategy=None):
    """Per-step seconds of training and of inference for the tutorial CNN on `device`, on random
    data already in memory (the model's own step, exactly as fit calls it per batch). `strategy`
    (hpcnn.distribute): the model trains on its replicas instead, batch_size the global batch."""
    train, infer, _ = model_step_times("tutorial", device, batch_size, steps, warmup, strategy=strategy)
    return train, infer


def model_step_times(model: str = "tutorial", device: str = "cpu", batch_size: int = 250, steps: int = 20,
                     warmup: int = 3, strategy=None):
    """(training seconds per step, inference seconds per step, trainable parameters) of `model`
    (a key of MODELS) on `device`, on random data already in memory (the model's own step,
    exactly as fit calls it per batch). `strategy` (hpcnn.distribute): compiled in its scope, the
    model trains on its replicas instead, batch_size the global batch."""
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.random((batch_size,) + MODELS[model][2], dtype=np.float32)
    y = rng.integers(0, 10, batch_size).astype(np.int32)
    m, opt = _hpcnn_model(model)
    if strategy is not None:
        with strategy.scope():
            m.compile(opt, "sparse_categorical_crossentropy", ["accuracy"])
    else:
        m.compile(opt, "sparse_categorical_crossentropy", ["accuracy"], device=device)
    core = m.core if hasattr(m, "core") else m._model()  # _model(): an older hpcnn timed as the baseline
    if hasattr(core, "train_step"):
        train = time_steps(lambda: core.train_step((x, y)), steps, warmup)
        infer = time_steps(lambda: core.predict_step((x,)), steps, warmup)
    else:  # the step API before train_step (hpcnn 0.1 as first released): the same work per call
        train = time_steps(lambda: core.train_batch(x, y), steps, warmup)
        infer = time_steps(lambda: core.predict_batch(x), steps, warmup)
    return train, infer, trainable_params_hpcnn(m)


# ---------------------------------------------------------------------- peers: PyTorch, TensorFlow
# The same model in each framework, random data in memory, batch `batch`, each framework in its own
# process with `threads` threads. Each worker returns (training step seconds, inference step
# seconds, trainable parameters): the parameter counts are printed and must agree.
#   tutorial: Conv 32/64/128/256 3x3 'same' + ReLU + 2x2 max-pool each, Flatten, Dense 256,
#             Dropout 0.2, Dense 512, Dropout 0.2, Dense 10; Adam 1e-3.
#   resnet20: see resnet_cifar_mflop / hpcnn.applications.resnet_cifar (shortcut 'B'); SGD 0.1,
#             momentum 0.9, weight decay 1e-4 on the kernels (Keras: l2(5e-5), its gradient 1e-4 w;
#             PyTorch: SGD's weight_decay, which also decays BN's gamma/beta: the same work).
def worker_hpcnn(batch: int, steps: int, warmup: int, threads: int, model: str = "tutorial", latency_calls: int = 0):
    import hpcnn
    hpcnn.set_num_threads(threads)
    train, infer, params = model_step_times(model, "cpu", batch, steps, warmup)
    info = hpcnn.build_info() if hasattr(hpcnn, "build_info") else {}
    versions = {"hpcnn": getattr(hpcnn, "__version__", "?"), "blas": info.get("blas_config", "?")}
    latency = {}
    if latency_calls:
        import numpy as np
        m, opt = _hpcnn_model(model)
        m.compile(opt, "sparse_categorical_crossentropy", ["accuracy"], device="cpu")
        x1 = np.random.default_rng(1).random((1,) + MODELS[model][2], dtype=np.float32)
        latency = {"predict": time_steps(lambda: m.predict(x1, verbose=0), latency_calls, LATENCY_WARMUP),
                   "call": time_steps(lambda: m(x1), latency_calls, LATENCY_WARMUP)}
    return train, infer, params, versions, latency


def _torch_model(model: str):
    import torch
    from torch import nn
    if model == "tutorial":
        layers, c = [], 3
        for f in (32, 64, 128, 256):
            layers += [nn.Conv2d(c, f, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2)]
            c = f
        net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(1024, 256), nn.ReLU(), nn.Dropout(0.2),
                            nn.Linear(256, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
        return net, torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7)

    def bn(f):  # Keras' BatchNormalization defaults: epsilon 1e-3, momentum 0.99 (PyTorch counts 1 - it)
        return nn.BatchNorm2d(f, eps=1e-3, momentum=0.01)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), bn(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), bn(cout)
            self.proj = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), bn(cout))
                         if stride != 1 or cin != cout else None)

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.proj is None else self.proj(x)))

    n = 3  # ResNet-20
    layers, c = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), bn(16), nn.ReLU()], 16
    for stage, f in enumerate((16, 32, 64)):
        for block in range(n):
            layers.append(Block(c, f, 2 if stage and not block else 1))
            c = f
    net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    return net, torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)


def torch_versions() -> Dict[str, str]:
    """torch's version and the oneDNN (MKL-DNN) and BLAS it was built with, as it reports them."""
    import torch
    v = {"torch": torch.__version__, "onednn": "not available"}
    if torch.backends.mkldnn.is_available():
        v["onednn"] = "available"
        for line in torch.__config__.show().splitlines():
            line = line.strip(" -")
            if line.startswith(("Intel(R) MKL-DNN", "oneDNN")):
                v["onednn"] = line
            elif "Math Kernel Library" in line or line.startswith("OpenBLAS"):
                v["blas"] = line
    return v


def worker_torch(batch: int, steps: int, warmup: int, threads: int, model: str = "tutorial", latency_calls: int = 0):
    import torch
    from torch import nn
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net, opt = _torch_model(model)
    net = net.to(memory_format=torch.channels_last)
    lossf = nn.CrossEntropyLoss()
    h, w, c = MODELS[model][2]
    x = torch.rand(batch, c, h, w).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,))

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    def infer_step():
        with torch.no_grad():
            return torch.softmax(net(x), 1)

    net.train()
    train = time_steps(train_step, steps, warmup)
    net.eval()
    infer = time_steps(infer_step, steps, warmup)
    latency = {}
    if latency_calls:  # eager, as a notebook calls it: one image, no_grad, the model in eval mode
        x1 = torch.rand(1, c, h, w).to(memory_format=torch.channels_last)

        def call():
            with torch.no_grad():
                return torch.softmax(net(x1), 1).numpy()

        latency = {"call": time_steps(call, latency_calls, LATENCY_WARMUP)}
    return (train, infer, int(sum(p.numel() for p in net.parameters() if p.requires_grad)), torch_versions(),
            latency)


def _keras_model(model: str):
    import tensorflow as tf
    L = tf.keras.layers
    if model == "tutorial":
        m = tf.keras.Sequential([tf.keras.Input(shape=(32, 32, 3))])
        for f in (32, 64, 128, 256):
            m.add(L.Conv2D(f, 3, padding="same", activation="relu"))
            m.add(L.MaxPooling2D(2, 2, padding="same"))
        for layer in (L.Flatten(), L.Dense(256, activation="relu"), L.Dropout(0.2), L.Dense(512, activation="relu"),
                      L.Dropout(0.2), L.Dense(10, activation="softmax")):
            m.add(layer)
        return m, tf.keras.optimizers.Adam(1e-3)
    reg = tf.keras.regularizers.l2(5e-5)

    def conv(f, k, stride=1):
        return L.Conv2D(f, k, strides=stride, padding="same", use_bias=False, kernel_regularizer=reg)

    x = inp = tf.keras.Input(shape=(32, 32, 3))
    x = L.ReLU()(L.BatchNormalization()(conv(16, 3)(x)))
    for stage, f in enumerate((16, 32, 64)):
        for block in range(3):
            stride = 2 if stage and not block else 1
            y = L.ReLU()(L.BatchNormalization()(conv(f, 3, stride)(x)))
            y = L.BatchNormalization()(conv(f, 3)(y))
            if stride != 1 or x.shape[-1] != f:
                x = L.BatchNormalization()(conv(f, 1, stride)(x))
            x = L.ReLU()(L.Add()([y, x]))
    out = L.Dense(10, activation="softmax", kernel_regularizer=reg)(L.GlobalAveragePooling2D()(x))
    return tf.keras.Model(inp, out), tf.keras.optimizers.SGD(0.1, momentum=0.9)


def tensorflow_versions() -> Dict[str, str]:
    """TensorFlow's and Keras' versions, and whether TensorFlow's oneDNN ops are on (its default on
    x86 Linux unless TF_ENABLE_ONEDNN_OPTS=0)."""
    import tensorflow as tf
    v = {"tensorflow": tf.__version__, "keras": getattr(tf.keras, "__version__", None) or "?"}
    try:
        import keras
        v["keras"] = keras.__version__
    except ImportError:
        pass
    v["onednn"] = "off (TF_ENABLE_ONEDNN_OPTS=0)" if os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0" else "on (default)"
    return v


def worker_tensorflow(batch: int, steps: int, warmup: int, threads: int, model: str = "tutorial",
                      latency_calls: int = 0):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)
    net, opt = _keras_model(model)
    net.compile(optimizer=opt, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(0)
    n = batch * (steps + warmup)
    x = rng.random((n,) + MODELS[model][2], dtype=np.float32)
    y = rng.integers(0, 10, n)

    class Timer(tf.keras.callbacks.Callback):  # Keras' own fit, timed per batch
        def __init__(self):
            super().__init__()
            self.t, self.times = 0.0, []

        def on_train_batch_begin(self, b, logs=None):
            self.t = time.perf_counter()

        def on_train_batch_end(self, b, logs=None):
            self.times.append(time.perf_counter() - self.t)

        on_predict_batch_begin = on_train_batch_begin
        on_predict_batch_end = on_train_batch_end

    tt = Timer()
    net.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False, callbacks=[tt])
    ti = Timer()
    net.predict(x, batch_size=batch, verbose=0, callbacks=[ti])
    params = int(sum(int(np.prod(w.shape)) for w in net.trainable_weights))
    latency = {}
    if latency_calls:
        x1 = rng.random((1,) + MODELS[model][2], dtype=np.float32)
        latency = {"predict": time_steps(lambda: net.predict(x1, verbose=0), latency_calls, LATENCY_WARMUP),
                   "call": time_steps(lambda: net(x1, training=False).numpy(), latency_calls, LATENCY_WARMUP)}
    return tt.times[warmup:], ti.times[warmup:], params, tensorflow_versions(), latency


WORKERS = {"hpcnn": worker_hpcnn, "torch": worker_torch, "tensorflow": worker_tensorflow}
IMPORT_NAME = {"hpcnn": "hpcnn", "torch": "torch", "tensorflow": "tensorflow"}

def worker_main(argv: Sequence[str]) -> int:
    """A worker process: times one framework and prints {"train": [...], "infer": [...], "params": n}
    as JSON."""
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True, choices=sorted(WORKERS))
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--model", default="tutorial", choices=sorted(MODELS))
    p.add_argument("--latency", type=int, default=0, help="also time this many single-image predictions")
    a = p.parse_args(list(argv))
    if a.latency:
        res = WORKERS[a.worker](a.batch, a.steps, a.warmup, a.threads, a.model, a.latency)
    elif a.model == "tutorial":  # the call an older bench.py's hpcnn worker understands too
        res = WORKERS[a.worker](a.batch, a.steps, a.warmup, a.threads)
    else:
        res = WORKERS[a.worker](a.batch, a.steps, a.warmup, a.threads, a.model)
    train, infer = res[0], res[1]
    print(json.dumps({"train": list(train), "infer": list(infer), "params": res[2] if len(res) > 2 else None,
                      "versions": res[3] if len(res) > 3 else {}, "latency": res[4] if len(res) > 4 else {}}))
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
