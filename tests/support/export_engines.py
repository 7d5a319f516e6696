"""The inference engines an exported model is checked in (hpcnn's `export` extra: onnx, onnxruntime,
openvino), and the comparison with hpcnn's predict. Missing, they skip with the reason; CI installs
the extra and sets HPCNN_EXPECT_EXPORT=1, and then a missing engine is an ImportError, not a skip.

Equality is judged on each output element relative to itself (rtol 1e-5), with an absolute floor
for the elements near zero of 1e-5 times the output's largest magnitude: a logit of 1e-7 beside
logits of 10 cannot be compared relative to itself in float32 (the two sides sum in different
orders), and pretending otherwise would only test the summation order."""
from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Tuple

import numpy as np
import pytest

REASON = "export needs `pip install --no-build-isolation \".[export]\"` (onnx, onnxruntime, openvino)"
RTOL = 1e-5
THREADS = 2


def engine(name: str) -> ModuleType:
    """`onnx`, `onnxruntime` or `openvino`, or a skip with the reason (an error under HPCNN_EXPECT_EXPORT=1)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("HPCNN_EXPECT_EXPORT") == "1":
            raise
        pytest.skip(REASON)


def onnxruntime_predict(path: str, x: np.ndarray) -> np.ndarray:
    """The ONNX file's output for `x` in ONNX Runtime (CPU, 2 threads)."""
    ort = engine("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def openvino_predict(xml: str, x: np.ndarray) -> np.ndarray:
    """The IR's output for `x` in OpenVINO on the CPU, in float32: OpenVINO's default on a CPU with
    bfloat16 units (AMX, AVX512_BF16) is to compute in bfloat16, three digits."""
    ov = engine("openvino")
    compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32",
                                                         "INFERENCE_NUM_THREADS": THREADS})
    return compiled(x)[0]


def differences(got: np.ndarray, want: np.ndarray) -> Tuple[float, float, float]:
    """(largest absolute difference; the largest relative to the output's largest magnitude; the
    largest relative to the element itself, over the elements not near zero: at least 1 % of the
    largest magnitude)."""
    scale = float(np.abs(want).max())
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    big = np.abs(want) >= 0.01 * scale
    return float(diff.max()), float(diff.max() / scale), float((diff[big] / np.abs(want[big])).max())


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} against hpcnn's {want.shape}"
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * float(np.abs(want).max()), err_msg=what)


def randomize(model, seed: int = 0) -> None:
    """Weights that exercise every term: kernels as initialized, biases and BatchNormalization's
    gamma, beta and moving mean random, moving variances random in [0.5, 2] (fresh ones are 0, 1,
    1, 0: a BatchNormalization that does nothing would pass whatever the export wrote)."""
    rng = np.random.default_rng(seed)
    out = []
    for name, w in zip(model.weight_names(), model.get_weights()):
        kind = name.rsplit("/", 1)[-1]
        if kind == "moving_variance":
            w = rng.uniform(0.5, 2.0, w.shape)
        elif kind in ("bias", "beta", "moving_mean"):
            w = rng.normal(0.0, 0.1, w.shape)
        elif kind == "gamma":
            w = rng.uniform(0.5, 1.5, w.shape)
        out.append(np.asarray(w, np.float32))
    model.set_weights(out)


def images(shape, batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, *shape)).astype(np.float32)
