"""The timed side of hpcnn.bench: the models (the tutorial CNN, the CIFAR ResNet-20; a bench
script's own come from a sessions file: add_sessions) in hpcnn, PyTorch and TensorFlow, each
framework's worker (training and inference step times, the trainable parameter count, the versions
it ran, single-image latency) and worker_main, what a worker process runs. hpcnn.bench starts the
workers and reports.

This module imports only the standard library at module level: a worker process loads it as a
plain file, without the hpcnn package, so the framework it times runs alone (hpcnn's extension
pins OpenBLAS to one thread when it loads, which would slow a PyTorch that uses the same
OpenBLAS). It is also the file a worker of an older hpcnn (bench_train.py --baseline-python) runs.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
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


class Session:
    """One framework's model, built and ready to time: run(way, count, warmup) returns the seconds
    of each of `count` timed calls after `warmup` untimed ones. Ways: 'train' and 'infer' (a step
    on a batch each) and, where asked for, 'latency-call' / 'latency-predict' (one image each).
    A worker process keeps one for a whole run (hpcnn.bench.compare with interleave='steps') or
    times every way once and exits."""

    def __init__(self, timers: Dict[str, Callable[[int, int], List[float]]], params: int, versions: Dict[str, str]):
        self.timers, self.params, self.versions = timers, params, versions

    def run(self, way: str, count: int, warmup: int) -> List[float]:
        return self.timers[way](count, warmup)


def stepper(step: Callable[[], object], before: Callable[[], object] = lambda: None):
    """A Session timer: `before()` (a mode switch, untimed), then time_steps of `step`."""
    def timer(count: int, warmup: int) -> List[float]:
        before()
        return time_steps(step, count, warmup)
    return timer


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


#: per model: (training MFLOP, inference MFLOP) per image, the input shape, what it is, the classes.
MODELS = {
    "tutorial": (TUTORIAL_TRAIN_MFLOP, TUTORIAL_FWD_MFLOP, (32, 32, 3),
                 "the tutorial CNN (4x Conv-ReLU-MaxPool, Dense 256/512/10, dropout; Adam 1e-3)", 10),
    "resnet20": (RESNET20_TRAIN_MFLOP, RESNET20_FWD_MFLOP, (32, 32, 3),
                 "ResNet-20 for CIFAR (He et al. 2016; option B: 1x1 stride-2 projection shortcuts with BN; "
                 "convolutions without bias; SGD 0.1, momentum 0.9, weight decay 1e-4)", 10),
}
#: per model of a sessions file that gives BUILDERS (add_sessions): {framework: build(model)}, what
#: _hpcnn_model, _torch_model and _keras_model return for it.
BUILDERS: Dict[str, Dict[str, Callable[[str], tuple]]] = {}


def _hpcnn_model(model: str):
    """(the compiled-ready hpcnn model, its optimizer, its loss) for `model`, fresh weights from seed 0."""
    if model in BUILDERS:
        return BUILDERS[model]["hpcnn"](model)
    loss = "sparse_categorical_crossentropy"
    if model == "resnet20":
        import hpcnn
        from hpcnn.applications import resnet20_cifar
        return resnet20_cifar(weight_decay=1e-4, shortcut="B", seed=0), hpcnn.optimizers.SGD(0.1, momentum=0.9), loss
    try:  # absolute: this file may run without its package (see top)
        from hpcnn.applications import tutorial_cnn
    except ImportError:  # an older hpcnn timed as the baseline (bench_train.py --baseline-python)
        from hpcnn.models import tutorial_cnn
    return tutorial_cnn(seed=0), "adam", loss


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


def _hpcnn_steps(model: str, device: str, batch_size: int, strategy=None):
    """(training step, inference step, trainable parameters) of `model` on random data already in
    memory: the model's own steps, exactly as fit and predict call them per batch."""
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.random((batch_size,) + MODELS[model][2], dtype=np.float32)
    y = rng.integers(0, MODELS[model][4], batch_size).astype(np.int32)
    m, opt, loss = _hpcnn_model(model)
    if strategy is not None:
        with strategy.scope():
            m.compile(opt, loss, ["accuracy"])
    else:
        m.compile(opt, loss, ["accuracy"], device=device)
    core = m.core if hasattr(m, "core") else m._model()  # _model(): an older hpcnn timed as the baseline
    if hasattr(core, "train_step"):
        return (lambda: core.train_step((x, y))), (lambda: core.predict_step((x,))), trainable_params_hpcnn(m)
    # the step API before train_step (hpcnn 0.1 as first released): the same work per call
    return (lambda: core.train_batch(x, y)), (lambda: core.predict_batch(x)), trainable_params_hpcnn(m)


def model_step_times(model: str = "tutorial", device: str = "cpu", batch_size: int = 250, steps: int = 20,
                     warmup: int = 3, strategy=None):
    """(training seconds per step, inference seconds per step, trainable parameters) of `model`
    (a key of MODELS) on `device`, on random data already in memory (the model's own step,
    exactly as fit calls it per batch). `strategy` (hpcnn.distribute): compiled in its scope, the
    model trains on its replicas instead, batch_size the global batch."""
    train, infer, params = _hpcnn_steps(model, device, batch_size, strategy)
    return time_steps(train, steps, warmup), time_steps(infer, steps, warmup), params


# ---------------------------------------------------------------------- peers: PyTorch, TensorFlow
# The same model in each framework, random data in memory, batch `batch`, each framework in its own
# process with `threads` threads. Each worker returns (training step seconds, inference step
# seconds, trainable parameters): the parameter counts are printed and must agree.
#   tutorial: Conv 32/64/128/256 3x3 'same' + ReLU + 2x2 max-pool each, Flatten, Dense 256,
#             Dropout 0.2, Dense 512, Dropout 0.2, Dense 10; Adam 1e-3.
#   resnet20: see resnet_cifar_mflop / hpcnn.applications.resnet_cifar (shortcut 'B'); SGD 0.1,
#             momentum 0.9, weight decay 1e-4 on the kernels (Keras: l2(5e-5), its gradient 1e-4 w;
#             PyTorch: SGD's weight_decay, which also decays BN's gamma/beta: the same work).
def session_hpcnn(batch: int, threads: int, model: str = "tutorial", latency: bool = False) -> Session:
    import hpcnn
    hpcnn.set_num_threads(threads)
    train, infer, params = _hpcnn_steps(model, "cpu", batch)
    info = hpcnn.build_info() if hasattr(hpcnn, "build_info") else {}
    versions = {"hpcnn": getattr(hpcnn, "__version__", "?"), "blas": info.get("blas_config", "?")}
    timers = {"train": stepper(train), "infer": stepper(infer)}
    if latency:
        import numpy as np
        m, opt, loss = _hpcnn_model(model)
        m.compile(opt, loss, ["accuracy"], device="cpu")
        x1 = np.random.default_rng(1).random((1,) + MODELS[model][2], dtype=np.float32)
        timers["latency-predict"] = stepper(lambda: m.predict(x1, verbose=0))
        timers["latency-call"] = stepper(lambda: m(x1))
    return Session(timers, params, versions)


def _torch_model(model: str):
    """(the net, its optimizer, a per-image transform of the training batch or None) for `model`."""
    if model in BUILDERS:
        return BUILDERS[model]["torch"](model)
    import torch
    from torch import nn
    if model == "tutorial":
        layers, c = [], 3
        for f in (32, 64, 128, 256):
            layers += [nn.Conv2d(c, f, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2)]
            c = f
        net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(1024, 256), nn.ReLU(), nn.Dropout(0.2),
                            nn.Linear(256, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
        return net, torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7), None

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
    return net, torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4), None


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


def session_torch(batch: int, threads: int, model: str = "tutorial", latency: bool = False) -> Session:
    import torch
    from torch import nn
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net, opt, augment = _torch_model(model)
    net = net.to(memory_format=torch.channels_last)
    lossf = nn.CrossEntropyLoss()
    h, w, c = MODELS[model][2]
    x = torch.rand(batch, c, h, w).to(memory_format=torch.channels_last)
    y = torch.randint(0, MODELS[model][4], (batch,))

    def train_step():
        opt.zero_grad(set_to_none=True)
        xb = x if augment is None else torch.stack([augment(img) for img in x]).to(memory_format=torch.channels_last)
        loss = lossf(net(xb), y)
        loss.backward()
        opt.step()
        return loss.item()

    def infer_step():
        with torch.no_grad():
            return torch.softmax(net(x), 1)

    timers = {"train": stepper(train_step, net.train), "infer": stepper(infer_step, net.eval)}
    if latency:  # eager, as a notebook calls it: one image, no_grad, the model in eval mode
        x1 = torch.rand(1, c, h, w).to(memory_format=torch.channels_last)

        def call():
            with torch.no_grad():
                return torch.softmax(net(x1), 1).numpy()

        timers["latency-call"] = stepper(call, net.eval)
    return Session(timers, int(sum(p.numel() for p in net.parameters() if p.requires_grad)), torch_versions())


def _keras_model(model: str):
    """(the Keras model, its optimizer, its loss) for `model`."""
    if model in BUILDERS:
        return BUILDERS[model]["tensorflow"](model)
    import tensorflow as tf
    L = tf.keras.layers
    loss = "sparse_categorical_crossentropy"
    if model == "tutorial":
        m = tf.keras.Sequential([tf.keras.Input(shape=(32, 32, 3))])
        for f in (32, 64, 128, 256):
            m.add(L.Conv2D(f, 3, padding="same", activation="relu"))
            m.add(L.MaxPooling2D(2, 2, padding="same"))
        for layer in (L.Flatten(), L.Dense(256, activation="relu"), L.Dropout(0.2), L.Dense(512, activation="relu"),
                      L.Dropout(0.2), L.Dense(10, activation="softmax")):
            m.add(layer)
        return m, tf.keras.optimizers.Adam(1e-3), loss
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
    return tf.keras.Model(inp, out), tf.keras.optimizers.SGD(0.1, momentum=0.9), loss


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


def session_tensorflow(batch: int, threads: int, model: str = "tutorial", latency: bool = False) -> Session:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)
    net, opt, loss = _keras_model(model)
    net.compile(optimizer=opt, loss=loss, metrics=["accuracy"])
    rng = np.random.default_rng(0)
    data: Dict[str, object] = {"rows": 0}

    def batches(k: int):
        if data["rows"] < k * batch:  # grown as needed, then sliced
            data["x"] = rng.random((k * batch,) + MODELS[model][2], dtype=np.float32)
            data["y"] = rng.integers(0, MODELS[model][4], k * batch)
            data["rows"] = k * batch
        return data["x"][:k * batch], data["y"][:k * batch]

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

    # Each call of fit or predict runs at least one untimed batch first (the first batch of a call
    # also starts its data pipeline).
    def train(count: int, warmup: int) -> List[float]:
        x, y = batches(count + max(warmup, 1))
        t = Timer()
        net.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False, callbacks=[t])
        return t.times[max(warmup, 1):]

    def infer(count: int, warmup: int) -> List[float]:
        x, _ = batches(count + max(warmup, 1))
        t = Timer()
        net.predict(x, batch_size=batch, verbose=0, callbacks=[t])
        return t.times[max(warmup, 1):]

    timers = {"train": train, "infer": infer}
    if latency:
        x1 = rng.random((1,) + MODELS[model][2], dtype=np.float32)
        timers["latency-predict"] = stepper(lambda: net.predict(x1, verbose=0))
        timers["latency-call"] = stepper(lambda: net(x1, training=False).numpy())
    params = int(sum(int(np.prod(w.shape)) for w in net.trainable_weights))
    return Session(timers, params, tensorflow_versions())


SESSIONS = {"hpcnn": session_hpcnn, "torch": session_torch, "tensorflow": session_tensorflow}


def time_once(framework: str, batch: int, steps: int, warmup: int, threads: int, model: str = "tutorial",
              latency_calls: int = 0):
    """One worker process's measurement: (training step seconds, inference step seconds, trainable
    parameters, versions, {way: single-image call seconds})."""
    s = SESSIONS[framework](batch, threads, model, latency_calls > 0)
    train, infer = s.run("train", steps, warmup), s.run("infer", steps, warmup)
    latency = {way.split("-", 1)[1]: s.run(way, latency_calls, LATENCY_WARMUP)
               for way in s.timers if way.startswith("latency-")}
    return train, infer, s.params, s.versions, latency


#: per framework: worker(batch, steps, warmup, threads, model="tutorial", latency_calls=0), time_once for it.
WORKERS = {name: functools.partial(time_once, name) for name in SESSIONS}
IMPORT_NAME = {"hpcnn": "hpcnn", "torch": "torch", "tensorflow": "tensorflow"}


def add_sessions(path: str) -> None:
    """Adds the models of a plain Python file, a bench script's own (bench/*_sessions.py): its
    MODELS (rows as these) and SESSIONS (sessions of its own, timing other ways: they replace these)
    or BUILDERS ({framework: build(model)}, as _hpcnn_model / _torch_model / _keras_model return:
    these sessions then time its models as the tutorial CNN's), or both. The worker process loads it
    with --sessions; the process that reports (hpcnn.bench.compare) too, for the models' rows."""
    spec = importlib.util.spec_from_file_location("hpcnn_bench_sessions", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"bench worker: cannot load sessions from {path!r}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    models, sessions, builders = (getattr(module, name, None) for name in ("MODELS", "SESSIONS", "BUILDERS"))
    if not models or (sessions is None and builders is None):
        raise ValueError(f"bench worker: {path!r} must define MODELS and SESSIONS or BUILDERS")
    MODELS.update(models)
    SESSIONS.update(sessions or {})
    BUILDERS.update({model: builders for model in models} if builders else {})


def worker_main(argv: Sequence[str]) -> int:
    """A worker process: times one framework and prints {"train": [...], "infer": [...], "params": n}
    as JSON."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--sessions", default=None)
    extra, _ = pre.parse_known_args(list(argv))
    if extra.sessions:
        add_sessions(extra.sessions)
    p = argparse.ArgumentParser()
    p.add_argument("--sessions", default=None, help="a plain Python file of a bench script's own models "
                                                     "(add_sessions: bench/backbone_sessions.py)")
    p.add_argument("--worker", required=True, choices=sorted(WORKERS))
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--model", default="tutorial", choices=sorted(MODELS))
    p.add_argument("--latency", type=int, default=0, help="also time this many single-image predictions")
    p.add_argument("--serve", action="store_true",
                   help="keep the model and time what stdin asks for (serve(); --steps and --warmup unused)")
    a = p.parse_args(list(argv))
    if a.serve:
        return serve(SESSIONS[a.worker](a.batch, a.threads, a.model, a.latency > 0), sys.stdin, sys.stdout)
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


#: Prefix of the served worker's answers: a framework may print lines of its own to stdout.
ANSWER = "@@hpcnn-bench "


def serve(session: Session, commands, out) -> int:
    """A served worker: answers {"params", "versions", "ways"} once, then for each line "run WAY
    COUNT WARMUP" the JSON list of seconds of session.run(WAY, COUNT, WARMUP); "quit" or the end of
    the input ends it. Each answer is one line starting with ANSWER, flushed."""
    def answer(value) -> None:
        out.write(ANSWER + json.dumps(value) + "\n")
        out.flush()

    answer({"params": session.params, "versions": session.versions, "ways": sorted(session.timers)})
    for line in commands:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] != "run" or len(words) != 4 or words[1] not in session.timers:
            raise ValueError(f"bench worker: unknown command {line.strip()!r}")
        answer(session.run(words[1], int(words[2]), int(words[3])))
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
