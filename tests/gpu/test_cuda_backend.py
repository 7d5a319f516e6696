"""The CUDA backend's switches and its behaviour where no GPU is usable. Runs on every machine
(CI has the CUDA toolkit but no GPU): a GPU request must fail with a clear reason, never crash."""
import os

import numpy as np
import pytest

from hpcnn import _core


def test_build_has_cuda_when_expected():
    if os.environ.get("HPCNN_EXPECT_CUDA") == "1":
        assert _core.build_info()["cuda"], "HPCNN_EXPECT_CUDA=1 but the CUDA backend was not built"


def test_tf32_switch_round_trip():
    before = _core.cuda_get_tf32()
    try:
        _core.cuda_set_tf32(False)
        assert _core.cuda_get_tf32() is False
        _core.cuda_set_tf32(True)
        assert _core.cuda_get_tf32() is True
    finally:
        _core.cuda_set_tf32(before)


def test_gpu_request_without_gpu_names_the_reason():
    reason = _core.cuda_unavailable_reason()
    if not reason:
        pytest.skip("a GPU is usable here: this test covers machines without one")
    with pytest.raises(RuntimeError, match="no usable GPU|built without the CUDA backend"):
        _core.ops.conv2d_forward(np.ones((1, 4, 4, 1), np.float32), np.ones((3, 3, 1, 2), np.float32),
                                 np.zeros(2, np.float32), 1, "same", True, device="gpu")
    with pytest.raises(RuntimeError):
        _core.bench_dense((4, 4), (4, 4), device="gpu:0")


def test_cuda_kernel_arithmetic_on_the_host():
    """The GPU kernels' index arithmetic and the cuBLAS/cuDNN call layouts, run on the host
    against the CPU ops (see csrc/diagnostics/cuda_kernel_selftest.h): needs no GPU."""
    results = _core.cuda_kernel_selftest()
    assert len(results) >= 10
    failed = [(name, err, tol) for name, err, tol in results if not err <= tol]
    assert not failed, failed


def test_cudnn_not_supported_subcodes_fall_back_from_the_fused_call():
    """cuDNN 9 says "not supported" with sub-codes (CUDNN_STATUS_NOT_SUPPORTED_SHAPE, ...): the fused
    convolution+bias+ReLU call must fall back on all of them, not raise (host check, no GPU)."""
    if not _core.build_info()["cuda"]:
        pytest.skip("built without the CUDA backend")
    checks = [(n, e, t) for n, e, t in _core.cuda_kernel_selftest() if "not supported" in n]
    assert checks, "the cuDNN status self-check is missing"
    assert all(e <= t for _, e, t in checks), checks
