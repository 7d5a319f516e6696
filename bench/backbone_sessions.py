"""The ImageNet backbones timed by bench/bench_backbones.py, as sessions of hpcnn's bench worker
(hpcnn/bench_workers.py loads this file with --sessions: plain Python, the frameworks imported
inside the functions, so each worker process loads only the framework it times).

The same architecture in each framework: hpcnn.applications' ResNet50 / MobileNetV2 (Keras'),
torchvision's resnet50 / mobilenet_v2, tf.keras.applications' ResNet50 / MobileNetV2; weights
fresh (speed does not depend on their values); random data in memory. Ways:
  train   a full training step of the whole network (fine-tuning everything): SGD, momentum 0.9
  infer   a forward pass on a batch (evaluation mode: BatchNormalization on its moving statistics)
  frozen  the transfer-learning guide's first phase: the base frozen (and in inference mode), a
          new head (global average pooling, Dense 5) trained: one step
  memory  the worker's peak resident memory so far (bytes, as [value]): after the steps, it is the
          peak of its training step
"""
from __future__ import annotations

import resource
import sys
import time
from typing import Callable, Dict, List

HEAD_CLASSES = 5


def _times(step: Callable[[], object], count: int, warmup: int) -> List[float]:
    for _ in range(warmup):
        step()
    out = []
    for _ in range(count):
        t = time.perf_counter()
        step()
        out.append(time.perf_counter() - t)
    return out


def _timer(step: Callable[[], object], before: Callable[[], object] = lambda: None):
    def timer(count: int, warmup: int) -> List[float]:
        before()
        return _times(step, count, warmup)
    return timer


def _peak_memory(count: int, warmup: int) -> List[float]:
    return [float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)]  # Linux: KiB


def _session(timers, params: int, versions: Dict[str, str]):
    """An object with what hpcnn.bench_workers.serve asks of a Session."""
    class Session:
        def __init__(self):
            self.timers, self.params, self.versions = timers, params, versions

        def run(self, way: str, count: int, warmup: int) -> List[float]:
            return self.timers[way](count, warmup)
    return Session()


# ---------------------------------------------------------------------- hpcnn
def _hpcnn_base(model: str):
    from hpcnn.keras import applications
    if model == "resnet50":
        return applications.ResNet50
    return applications.MobileNetV2


def session_hpcnn(batch: int, threads: int, model: str = "resnet50", latency: bool = False):
    import numpy as np
    import hpcnn
    hpcnn.set_num_threads(threads)
    rng = np.random.default_rng(0)
    x = rng.random((batch, 224, 224, 3), dtype=np.float32)
    y = rng.integers(0, HEAD_CLASSES, batch).astype(np.int32)
    full = _hpcnn_base(model)(weights=None, input_shape=(224, 224, 3), classes=1000)
    full.compile(hpcnn.optimizers.SGD(0.01, momentum=0.9), "sparse_categorical_crossentropy", device="cpu")
    base = _hpcnn_base(model)(weights=None, include_top=False, input_shape=(224, 224, 3))
    base.trainable = False
    inputs = hpcnn.Input(shape=(224, 224, 3))
    h = hpcnn.layers.GlobalAveragePooling2D()(base(inputs, training=False))
    frozen = hpcnn.Model(inputs, hpcnn.layers.Dense(HEAD_CLASSES)(h))
    frozen.compile(hpcnn.optimizers.SGD(0.01, momentum=0.9),
                   hpcnn.losses.SparseCategoricalCrossentropy(from_logits=True), device="cpu")
    core, fcore = full.core, frozen.core
    timers = {"train": _timer(lambda: core.train_step((x, y))), "infer": _timer(lambda: core.predict_step((x,))),
              "frozen": _timer(lambda: fcore.train_step((x, y))), "memory": _peak_memory}
    params = sum(int(np.prod(w.shape)) for w in full.trainable_weights)
    info = hpcnn.build_info()
    return _session(timers, params, {"hpcnn": hpcnn.__version__, "blas": info.get("blas_config", "?")})


# ---------------------------------------------------------------------- PyTorch + torchvision
def session_torch(batch: int, threads: int, model: str = "resnet50", latency: bool = False):
    import torch
    import torchvision
    from torch import nn
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    build = torchvision.models.resnet50 if model == "resnet50" else torchvision.models.mobilenet_v2
    net = build(weights=None).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    x = torch.rand(batch, 3, 224, 224).to(memory_format=torch.channels_last)
    y = torch.randint(0, HEAD_CLASSES, (batch,))

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    def infer_step():
        with torch.no_grad():
            return torch.softmax(net(x), 1)

    # The frozen phase: the base without its classifier, no gradients, in eval mode; a new head.
    trunk = build(weights=None)
    features = nn.Sequential(*list(trunk.children())[:-2]) if model == "resnet50" else trunk.features
    features = features.to(memory_format=torch.channels_last).eval().requires_grad_(False)
    width = 2048 if model == "resnet50" else 1280
    head = nn.Linear(width, HEAD_CLASSES)
    hopt = torch.optim.SGD(head.parameters(), lr=0.01, momentum=0.9)

    def frozen_step():
        hopt.zero_grad(set_to_none=True)
        f = features(x).mean((2, 3))
        loss = lossf(head(f), y)
        loss.backward()
        hopt.step()
        return loss.item()

    timers = {"train": _timer(train_step, net.train), "infer": _timer(infer_step, net.eval),
              "frozen": _timer(frozen_step), "memory": _peak_memory}
    params = int(sum(p.numel() for p in net.parameters() if p.requires_grad))
    return _session(timers, params, {"torch": torch.__version__, "torchvision": torchvision.__version__})


# ---------------------------------------------------------------------- TensorFlow + Keras
def session_tensorflow(batch: int, threads: int, model: str = "resnet50", latency: bool = False):
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)
    build = tf.keras.applications.ResNet50 if model == "resnet50" else tf.keras.applications.MobileNetV2
    full = build(weights=None, input_shape=(224, 224, 3), classes=1000)
    full.compile(tf.keras.optimizers.SGD(0.01, momentum=0.9), "sparse_categorical_crossentropy", jit_compile=False)
    base = build(weights=None, include_top=False, input_shape=(224, 224, 3))
    base.trainable = False
    inputs = tf.keras.Input(shape=(224, 224, 3))
    h = tf.keras.layers.GlobalAveragePooling2D()(base(inputs, training=False))
    frozen = tf.keras.Model(inputs, tf.keras.layers.Dense(HEAD_CLASSES)(h))
    frozen.compile(tf.keras.optimizers.SGD(0.01, momentum=0.9),
                   tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
    rng = np.random.default_rng(0)
    x = rng.random((batch, 224, 224, 3), dtype=np.float32)
    y = rng.integers(0, HEAD_CLASSES, batch)
    # Keras' own compiled steps, one batch per call (train_on_batch / predict_on_batch run them)
    timers = {"train": _timer(lambda: full.train_on_batch(x, y)), "infer": _timer(lambda: full.predict_on_batch(x)),
              "frozen": _timer(lambda: frozen.train_on_batch(x, y)), "memory": _peak_memory}
    params = int(sum(int(np.prod(w.shape)) for w in full.trainable_weights))
    return _session(timers, params, {"tensorflow": tf.__version__, "keras": getattr(tf.keras, "__version__", "?")})


# Forward GFLOP per 224x224 image are bench_backbones.py's (counted on hpcnn's model); here only
# the input shape the worker's argument check needs.
MODELS = {"resnet50": (0.0, 0.0, (224, 224, 3), "ResNet50 (Keras' applications)"),
          "mobilenetv2": (0.0, 0.0, (224, 224, 3), "MobileNetV2 alpha 1.0 (Keras' applications)")}
SESSIONS = {"hpcnn": session_hpcnn, "torch": session_torch, "tensorflow": session_tensorflow}

if __name__ == "__main__":
    sys.exit("this file is loaded by hpcnn's bench worker (bench/bench_backbones.py starts it)")
