"""The device the gpu-marked model tests train on: $HPCNN_TEST_GPU, default 'gpu:0'. HPCNN_TEST_GPU=cpu
runs them with the CPU standing in for the GPU (the CPU is then compared with itself): a check of the
tests' own logic on machines without a GPU. Their marks: `gpu`, skipped with the reason where no GPU
is usable, TF32 off (the TF32 rule of tests/conftest.py). Also how a test that runs on both kinds ('cpu' everywhere,
'gpu' where one is usable) compares its results with the CPU's."""
import os

import numpy as np
import pytest

from hpcnn import _core

GPU = os.environ.get("HPCNN_TEST_GPU", "gpu:0")
REASON = "" if GPU == "cpu" else _core.cuda_unavailable_reason()
# TF32 is off for every test these marks mark, also through pytest.param: the gpu mark is what the
# TF32 rule of tests/conftest.py looks for.
MARKS = [
    pytest.mark.gpu,
    pytest.mark.skipif(bool(REASON), reason=f"no usable GPU: {REASON}"),
]
PARAM_MARKS = MARKS
KINDS = [pytest.param("cpu", id="cpu"), pytest.param("gpu", id="gpu", marks=PARAM_MARKS)]

# Tolerances per kind. A CPU run differs from the CPU reference only in the order of float sums; a
# GPU run as the other GPU tests allow (tests/gpu/test_gpu_training_path.py): weight updates to 2e-3 of
# the largest update, losses to 1e-3.
UPDATE_TOL = {"cpu": 1e-4, "gpu": 2e-3}
LOSS_TOL = {"cpu": 1e-5, "gpu": 1e-3}


def assert_updates_close(got, want, before, tol, what):
    """Each weight array's change from `before` agrees to `tol` of the largest change."""
    for i, (g, w, b) in enumerate(zip(got, want, before)):
        d_got, d_want = g.astype(np.float64) - b, w.astype(np.float64) - b
        scale = max(float(np.max(np.abs(d_want))), 1e-8)
        np.testing.assert_allclose(d_got, d_want, rtol=tol, atol=tol * scale, err_msg=f"{what}: weight array {i}")


def assert_loss_and_accuracy_close(got, want, kind, rows, what):
    """[loss, accuracy] (evaluate, test_on_batch): the loss to LOSS_TOL; the accuracy exactly on the
    CPU, and on a GPU up to one row (a near tie between two classes may fall either way)."""
    assert got[0] == pytest.approx(want[0], rel=LOSS_TOL[kind]), f"{what}: loss"
    assert got[1] == pytest.approx(want[1], abs=1e-7 if kind == "cpu" else 1.01 / rows), f"{what}: accuracy"
