"""The device the gpu-marked model tests train on: $HPCNN_TEST_GPU, default 'gpu:0'. HPCNN_TEST_GPU=cpu
runs them with the CPU standing in for the GPU (the CPU is then compared with itself): a check of the
tests' own logic on machines without a GPU. Their marks: `gpu`, skipped with the reason where no GPU
is usable, TF32 off (tests/conftest.py)."""
import os

import pytest

from hpcnn import _core

GPU = os.environ.get("HPCNN_TEST_GPU", "gpu:0")
REASON = "" if GPU == "cpu" else _core.cuda_unavailable_reason()
MARKS = [
    pytest.mark.gpu,
    pytest.mark.skipif(bool(REASON), reason=f"no usable GPU: {REASON}"),
    pytest.mark.usefixtures("tf32_off"),
]
