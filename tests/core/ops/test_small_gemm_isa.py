"""The CPU's small products (Winograd convolutions, few-row layers) and the depthwise forward pass
run AVX-512 where the CPU has it and AVX2 otherwise, chosen once per process
(ops/small_gemm_cpu.h; HPCNN_AVX512=0 keeps AVX2). Both compute each element as the same chain of fused multiply-adds, so a model's outputs
and gradients are the same bits either way: checked by running the same computations in a child
process with AVX-512 switched off."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import hpcnn

# Convolutions through Winograd (tile and channel split, channel counts with masked tails) and
# im2col's few-row product, a Dense layer at batch 1 and 3, forward and backward; depthwise
# convolutions (strides 1 and 2, 3x3 and 5x5, edges and channel tails); printed as hex digests of
# the raw bits.
CHILD = r"""
import hashlib, json, sys
import numpy as np
from hpcnn import _core
ops = _core.ops
_core.set_num_threads(2)
rng = np.random.default_rng(0)
out = {"isa": _core.build_info()["cpu_kernels"]}
def r(*s):
    return rng.standard_normal(s).astype(np.float32)
def digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()
for n, hw, c, f in [(1, 8, 64, 128), (1, 16, 32, 64), (4, 8, 24, 40), (2, 9, 17, 33), (1, 4, 128, 256), (3, 12, 16, 16)]:
    x, w, b = r(n, hw, hw, c), r(3, 3, c, f), r(f)
    y = ops.conv2d_forward(x, w, b, padding="same", relu=True)
    dx, dw, db = ops.conv2d_backward(x, w, y, r(*y.shape), padding="same", relu=True)
    out[f"conv {n} {hw} {c} {f}"] = digest(y, dx, dw, db)
for n, hw, c, k, s, pad in [(1, 14, 96, 3, 1, "same"), (2, 15, 40, 3, 2, "same"), (1, 9, 17, 5, 1, "valid"),
                            (3, 10, 144, 3, 2, "valid"), (1, 12, 70, 3, 1, "same")]:
    x, w, b = r(n, hw, hw + 1, c), r(k, k, c, 1), r(c)
    out[f"depthwise {n} {hw} {c} {k} {s}"] = digest(ops.depthwise_conv2d_forward(x, w, b, strides=s, padding=pad))
for n, i, o in [(1, 1024, 256), (3, 256, 72), (1, 512, 10)]:
    x, w, b = r(n, i), r(i, o), r(o)
    out[f"dense {n} {i} {o}"] = digest(ops.dense_forward(x, w, b, relu=True))
print(json.dumps(out))
"""


def run_child(avx512: str):
    env = dict(os.environ, HPCNN_AVX512=avx512)
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_build_info_names_the_kernels():
    assert hpcnn.build_info()["cpu_kernels"] in ("avx512", "avx2", "scalar")


def test_avx512_and_avx2_give_the_same_bits():
    wide = run_child("1")
    if wide["isa"] != "avx512":
        pytest.skip(f"this CPU runs the {wide['isa']} kernels (no AVX-512F): nothing to compare")
    narrow = run_child("0")
    assert narrow["isa"] == "avx2"
    differ = [k for k in wide if k != "isa" and wide[k] != narrow[k]]
    assert not differ, f"AVX-512 and AVX2 results differ for {differ}"
