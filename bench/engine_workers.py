"""The timed side of bench/bench_engines.py: one served worker process per engine and model
(hpcnn.bench.ServedWorker), answering "run WAY COUNT WARMUP" with the seconds of each call.

Engines and their ways of calling (WAY = KIND-BATCH, e.g. ``run-1``, ``predict-250``):
  hpcnn        ``predict-B``: model.predict(x, batch_size=B); ``call-B``: model(x) (a serving loop's call)
  onnxruntime  ``run-B``: InferenceSession.run on hpcnn's exported ONNX file (CPU provider,
               intra_op_num_threads=THREADS, inter_op_num_threads=1, sequential execution, all graph
               optimizations)
  openvino     ``run-B``: a synchronous infer request of the same file compiled for the CPU with
               INFERENCE_NUM_THREADS=THREADS, the PERFORMANCE_HINT given (LATENCY by default: one
               stream, the threads on one request) and INFERENCE_PRECISION_HINT=f32 (on a CPU with
               AMX or AVX-512 BF16 OpenVINO would otherwise compute in bfloat16); the model reshaped to
               the static batch B first, as a deployment with a fixed batch does
  torch        ``call-B``: PyTorch eager net(x) under no_grad, eval mode, channels_last, softmax
               (the same architecture, its own random weights: a reference, not the exported file;
               torchvision's resnet50 / mobilenet_v2 for the backbones)

Like hpcnn/bench_workers.py (whose models, Session and serve it reuses, loaded by file path:
--harness) this file imports only the standard library at module level and is run as a plain
file, so that each engine runs alone in its process.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Dict, List, Sequence


def load_harness(path: str):
    """hpcnn/bench_workers.py as a module of its own (without the hpcnn package)."""
    spec = importlib.util.spec_from_file_location("hpcnn_bench_harness", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The ImageNet backbones at 224x224 (hpcnn.keras.applications; torchvision for PyTorch), random weights.
BACKBONES = {"resnet50": "ResNet50", "mobilenetv2": "MobileNetV2"}
BACKBONE_SHAPE = (224, 224, 3)


def input_shape(h, model: str):
    return BACKBONE_SHAPE if model in BACKBONES else h.MODELS[model][2]


def hpcnn_model(h, model: str):
    """The hpcnn model bench_engines times and exports: the harness' tutorial CNN / ResNet-20 (seed
    0), or a backbone of hpcnn.keras.applications with random weights, compiled for the CPU."""
    if model in BACKBONES:
        from hpcnn.keras import applications
        m = getattr(applications, BACKBONES[model])(weights=None, input_shape=BACKBONE_SHAPE, classes=1000)
        m.compile("sgd", "sparse_categorical_crossentropy", device="cpu")
        return m
    m, opt, loss = h._hpcnn_model(model)
    m.compile(opt, loss, device="cpu")
    return m


def _images(hw, batch: int, seed: int = 0):
    import numpy as np
    return np.random.default_rng(seed).random((batch,) + tuple(hw), dtype=np.float32)


def session_hpcnn(h, model: str, batches: Sequence[int], threads: int, onnx_path: str, hint: str):
    import hpcnn
    hpcnn.set_num_threads(threads)
    m = hpcnn_model(h, model)
    timers = {}
    for b in batches:
        x = _images(input_shape(h, model), b)
        timers[f"predict-{b}"] = h.stepper(lambda x=x, b=b: m.predict(x, batch_size=b, verbose=0))
        timers[f"call-{b}"] = h.stepper(lambda x=x: m(x))
    info = hpcnn.build_info()
    versions = {"hpcnn": hpcnn.__version__, "blas": info.get("blas_config", "?")}
    return h.Session(timers, h.trainable_params_hpcnn(m), versions)


def session_onnxruntime(h, model: str, batches: Sequence[int], threads: int, onnx_path: str, hint: str):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    timers = {}
    for b in batches:
        feed = {name: _images(input_shape(h, model), b)}
        timers[f"run-{b}"] = h.stepper(lambda feed=feed: sess.run(None, feed))
    versions = {"onnxruntime": ort.__version__, "threads": f"intra_op {threads}, inter_op 1, sequential"}
    return h.Session(timers, None, versions)


def session_openvino(h, model: str, batches: Sequence[int], threads: int, onnx_path: str, hint: str):
    import openvino as ov
    core = ov.Core()
    timers = {}
    config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": hint, "INFERENCE_PRECISION_HINT": "f32"}
    for b in batches:
        net = core.read_model(onnx_path)
        net.reshape([b] + list(input_shape(h, model)))
        request = core.compile_model(net, "CPU", config).create_infer_request()
        x = _images(input_shape(h, model), b)
        timers[f"run-{b}"] = h.stepper(lambda x=x, request=request: request.infer([x]))
    versions = {"openvino": ov.get_version(),
                "config": f"INFERENCE_NUM_THREADS {threads}, PERFORMANCE_HINT {hint}, INFERENCE_PRECISION_HINT f32, "
                          "one synchronous infer request, static batch"}
    return h.Session(timers, None, versions)


def session_torch(h, model: str, batches: Sequence[int], threads: int, onnx_path: str, hint: str):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if model in BACKBONES:
        import torchvision
        net = (torchvision.models.resnet50 if model == "resnet50" else torchvision.models.mobilenet_v2)(weights=None)
    else:
        net = h._torch_model(model)[0]  # (net, optimizer, transform)
    net = net.to(memory_format=torch.channels_last).eval()
    hh, ww, c = input_shape(h, model)
    timers = {}
    for b in batches:
        x = torch.rand(b, c, hh, ww).to(memory_format=torch.channels_last)

        def call(x=x):
            with torch.no_grad():
                return torch.softmax(net(x), 1).numpy()

        timers[f"call-{b}"] = h.stepper(call)
    params = int(sum(p.numel() for p in net.parameters() if p.requires_grad))
    return h.Session(timers, params, h.torch_versions())


SESSIONS = {"hpcnn": session_hpcnn, "onnxruntime": session_onnxruntime, "openvino": session_openvino,
            "torch": session_torch}
IMPORT_NAME = {"hpcnn": "hpcnn", "onnxruntime": "onnxruntime", "openvino": "openvino", "torch": "torch"}


def worker_main(argv: Sequence[str]) -> int:
    """A served engine worker (hpcnn.bench.ServedWorker's command line plus --harness, --onnx,
    --batches and --hint)."""
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True, choices=sorted(SESSIONS))
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--serve", action="store_true")
    p.add_argument("--latency", type=int, default=0)
    p.add_argument("--harness", required=True, help="the path of hpcnn/bench_workers.py")
    p.add_argument("--onnx", required=True, help="hpcnn's exported ONNX file of --model")
    p.add_argument("--batches", required=True, help="comma-separated batch sizes")
    p.add_argument("--hint", default="LATENCY", help="OpenVINO's PERFORMANCE_HINT")
    a = p.parse_args(list(argv))
    h = load_harness(a.harness)
    batches: List[int] = [int(b) for b in a.batches.split(",")]
    session = SESSIONS[a.worker](h, a.model, batches, a.threads, a.onnx, a.hint)
    return h.serve(session, sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
