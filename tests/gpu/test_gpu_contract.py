"""The CUDA path's contract where no other GPU test reaches (issue 16). Each test needs a GPU and is
skipped with the reason without one; the decisions behind several of them also run on the host
(tests/gpu/test_conv_algo_choice.py, the host self-test in test_cuda_backend.py).

  - a cuDNN algorithm that fails at run time: the plan moves to its next candidate and keeps it;
    when none can run, the error names every algorithm tried; the fused conv+bias+ReLU call and
    its fallback (plain convolution, then hpcnn's bias+ReLU kernel), each forced;
  - determinism: deterministic algorithms by default, listed per layer; 'warn' takes a
    non-deterministic one with a warning only when no deterministic one can run; a plan made
    under memory pressure is made again once memory is back;
  - a training step's copies: its batch up, its loss statistics back, nothing else;
  - TF32 on for convolution backward and cuBLAS, and switched off and on during a process;
  - tensors past the launch helper's grid clamp (65535 * 8 blocks of 256 threads);
  - out of memory: a MemoryError naming the sizes, and a model that works once memory is freed;
  - a NaN loss on the GPU; dense_backward without dx; GPU calls from other threads (and no
    context on GPU 0 for a model on GPU 1); destroying models with work queued.
HPCNN_TEST_GPU=cpu runs the tests that make sense on the CPU (the CPU standing in for the GPU);
those about cuDNN, device memory or copies skip then. TF32 is off unless a test turns it on.
"""
import gc
import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import hpcnn
from hpcnn import _core, config
from hpcnn.layers import Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D

from tests.support.gpu_target import GPU, MARKS
from tests.support import paths

pytestmark = MARKS
ops = _core.ops
MiB = 1 << 20
PRECOMP = "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM"
FORWARD_ALGOS = ["CUDNN_CONVOLUTION_FWD_ALGO_" + n for n in (
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED")]


def real_gpu():
    """The index of the GPU under test; skips where the CPU stands in for it."""
    if GPU == "cpu":
        pytest.skip("about cuDNN plans, device memory or copies: needs a real GPU (HPCNN_TEST_GPU=cpu)")
    return int(GPU.split(":")[1])


@pytest.fixture
def fresh_plans():
    """Plans made afresh, no forced failures, the default determinism: before and after."""
    before = _core.cuda_get_determinism()
    _core.cuda_clear_conv_plans()
    _core.cuda_force_conv_failures([], False)
    yield
    _core.cuda_force_conv_failures([], False)
    _core.cuda_clear_conv_plans()
    _core.cuda_set_determinism(before)


def close(got, want, rtol=1e-4, atol_scale=1e-4, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    scale = max(float(np.max(np.abs(want))), 1e-6)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol_scale * scale, err_msg=what)


def rel_err(got, want):
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / max(float(np.max(np.abs(want))), 1e-30))


def conv_case(seed=0, xs=(4, 16, 16, 8), ks=(3, 3, 8, 16)):
    r = np.random.default_rng(seed)
    x = r.standard_normal(xs).astype(np.float32)
    w = (r.standard_normal(ks) * 0.2).astype(np.float32)
    b = r.standard_normal(ks[-1]).astype(np.float32)
    y = ops.conv2d_forward(x, w, b, 1, "same", True, device="cpu")
    dy = r.standard_normal(y.shape).astype(np.float32)
    return x, w, b, y, dy


def run_conv(case, device, need_dx=True):
    x, w, b, y_cpu, dy = case
    y = ops.conv2d_forward(x, w, b, 1, "same", True, device=device)
    dx, dw, db = ops.conv2d_backward(x, w, y_cpu, dy, 1, "same", True, need_dx, device=device)
    return y, dx, dw, db


def check_conv(case, what):
    for got, want, name in zip(run_conv(case, GPU), run_conv(case, "cpu"), ("y", "dx", "dW", "db")):
        close(got, want, what=f"{what}: {name}")


def plans_of(device, case):
    """{pass: plan} of the convolution in `case` (by its input and kernel)."""
    x, w = case[0], case[1]
    return {p["pass"]: p for p in _core.cuda_conv_plans(device)
            if p["input"] == x.shape and p["kernel"] == w.shape}


def model(seed=5):
    return hpcnn.Sequential([
        InputLayer(input_shape=[12, 12, 3]),
        Conv2D(8, 3, padding="same", activation="relu"),
        MaxPooling2D(2),
        Conv2D(16, 3, padding="same", activation="relu"),
        Flatten(),
        Dense(32, activation="relu"),
        Dropout(0.25),
        Dense(5, activation="softmax"),
    ], seed=seed)


def data(n=96, seed=0):
    r = np.random.default_rng(seed)
    labels = r.integers(0, 5, n)
    x = (r.random((n, 12, 12, 3)) * 0.3).astype(np.float32)
    for i, k in enumerate(labels):
        x[i, 2 * k:2 * k + 2] += 0.7
    return x, labels.astype(np.int32)


def compiled(m, device, lr=0.02):
    m.compile(hpcnn.optimizers.SGD(learning_rate=lr), "sparse_categorical_crossentropy", ["accuracy"], device=device)
    return m


def run_python(code, timeout=300):
    """Runs `code` in a fresh interpreter (a fresh CUDA context: nothing cached by earlier tests);
    returns what it printed last, as JSON."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, cwd=paths.ROOT)  # the root: `python -c` finds tests.support there
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ item 2: cuDNN fallback
def test_an_algorithm_that_fails_at_run_time_is_replaced_and_the_replacement_kept(fresh_plans):
    dev = real_gpu()
    config.set_deterministic(False)  # every algorithm cuDNN offers is a candidate: room to fall back
    case = conv_case()
    check_conv(case, "as planned")
    first = plans_of(dev, case)
    assert set(first) == {"forward", "backward_data", "backward_filter"}
    for p in first.values():
        assert p["failed"] == [] and p["algorithm"] == p["candidates"][0], p
        if len(p["candidates"]) < 2:
            pytest.skip(f"cuDNN offers one algorithm only for the {p['pass']} pass here: nothing to fall back to")
    # the chosen algorithms now fail when run (as cuDNN's "not supported" would): each pass moves on
    _core.cuda_force_conv_failures([p["algorithm"] for p in first.values()])
    check_conv(case, "after the planned algorithms failed")
    after = plans_of(dev, case)
    for name, p in after.items():
        assert p["algorithm"] == first[name]["candidates"][1], (name, p)
        assert p["failed"] == [f"{first[name]['algorithm']}: CUDNN_STATUS_NOT_SUPPORTED (3000), forced by a test"]
    # the failures are remembered: with the marks gone, the replacements stay
    _core.cuda_force_conv_failures([])
    check_conv(case, "after the marks were cleared")
    assert {k: p["algorithm"] for k, p in plans_of(dev, case).items()} == {k: p["algorithm"] for k, p in after.items()}
    # when every candidate fails, the error names each one tried and what cuDNN said
    _core.cuda_force_conv_failures(first["forward"]["candidates"])
    with pytest.raises(RuntimeError) as e:
        ops.conv2d_forward(*case[:3], 1, "same", True, device=GPU)
    msg = str(e.value)
    assert "conv2d forward of input 4x16x16x8" in msg and "no cuDNN algorithm could run" in msg
    for name in first["forward"]["candidates"]:
        assert name in msg


def test_a_model_whose_planned_algorithms_fail_keeps_training_as_the_cpu(fresh_plans):
    """The cached plan of every conv layer fails on the next step: training goes on with the next
    candidates, the same as on the CPU (before the fix, every later step raised)."""
    dev = real_gpu()
    config.set_deterministic(False)
    x, y = data()
    cpu, gpu = compiled(model(), "cpu"), compiled(model(), GPU)
    gpu.set_weights(cpu.get_weights())
    w0 = cpu.get_weights()
    for m in (cpu, gpu):
        m.core.train_step((x[:32], y[:32]))
    chosen = [p["algorithm"] for p in _core.cuda_conv_plans(dev)]
    assert chosen
    _core.cuda_force_conv_failures(chosen)
    for m in (cpu, gpu):
        m.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    for p in _core.cuda_conv_plans(dev):
        assert p["failed"] and p["algorithm"] not in chosen, p
    for i, (a, c, w) in enumerate(zip(gpu.get_weights(), cpu.get_weights(), w0)):
        d_cpu = c - w
        np.testing.assert_allclose(a - w, d_cpu, rtol=2e-3, atol=2e-3 * max(float(np.max(np.abs(d_cpu))), 1e-8),
                                   err_msg=f"weight array {i}")


def test_the_fused_conv_bias_relu_call_and_its_fallback_each_match_the_cpu(fresh_plans):
    dev = real_gpu()
    config.set_deterministic(False)
    case = conv_case(seed=1)
    check_conv(case, "as planned")
    offered = plans_of(dev, case)["forward"]["candidates"]
    if PRECOMP not in offered:
        pytest.skip(f"cuDNN offers no {PRECOMP} for this geometry here (offers: {offered}): "
                    "the fused call needs it")
    others = [a for a in FORWARD_ALGOS if a != PRECOMP]
    # the fused path: every other forward algorithm fails, so IMPLICIT_PRECOMP_GEMM runs, fused
    _core.cuda_clear_conv_plans()
    _core.cuda_force_conv_failures(others, False)
    check_conv(case, "fused conv+bias+ReLU")
    p = plans_of(dev, case)["forward"]
    assert p["algorithm"] == PRECOMP, p
    if p["fused"] == "not supported":  # nothing forced it: cuDNN itself declined the fused call
        pytest.skip(f"cuDNN declines the fused conv+bias+ReLU call for this geometry here: {p['fused_status']} "
                    "(the plain convolution and hpcnn's bias+ReLU ran and matched the CPU)")
    assert p["fused"] == "used", p
    # its fallback: the fused call is "not supported", so the plain convolution runs with the same
    # algorithm and hpcnn's kernel adds bias and ReLU
    _core.cuda_clear_conv_plans()
    _core.cuda_force_conv_failures(others, True)
    check_conv(case, "fused call not supported: conv, then bias+ReLU")
    p = plans_of(dev, case)["forward"]
    assert p["algorithm"] == PRECOMP and p["fused"] == "not supported", p
    # remembered for the geometry: not tried again once the library would accept it
    _core.cuda_force_conv_failures(others, False)
    check_conv(case, "fused call remembered as not supported")
    assert plans_of(dev, case)["forward"]["fused"] == "not supported"
    # without ReLU the fused call is not for this op at all
    _core.cuda_clear_conv_plans()
    x, w, b = case[:3]
    close(ops.conv2d_forward(x, w, b, 1, "same", False, device=GPU),
          ops.conv2d_forward(x, w, b, 1, "same", False, device="cpu"), what="no ReLU")
    assert plans_of(dev, case)["forward"]["fused"] in ("not tried", "n/a")


# ------------------------------------------------------------------ item 3: determinism
def test_deterministic_algorithms_by_default_listed_per_layer_and_bitwise_repeatable(fresh_plans):
    dev = real_gpu()
    assert config.deterministic() is True
    x, y = data()
    runs = []
    for _ in range(2):
        m = compiled(model(), GPU)
        m.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
        runs.append(m.get_weights())
    for a, b in zip(*runs):
        assert np.array_equal(a, b), "two identical GPU runs differ: a non-deterministic algorithm ran"
    listed = config.cudnn_algorithms(m)
    convs = [layer.name for layer in m.layers if isinstance(layer, Conv2D)]
    # the first layer computes no dx: no backward_data plan for it
    assert {(p["layer"], p["pass"]) for p in listed} == {
        (convs[0], "forward"), (convs[0], "backward_filter"),
        (convs[1], "forward"), (convs[1], "backward_data"), (convs[1], "backward_filter")}
    for p in listed:
        assert p["deterministic"] and p["determinism"] == "required" and p["algorithm"], p
        assert p["device"] == f"gpu:{dev}" and p["workspace"] <= p["workspace_limit"]
        assert all(p["candidates_deterministic"])


def test_warn_takes_a_non_deterministic_algorithm_with_a_warning_only_when_no_deterministic_one_runs(fresh_plans):
    dev = real_gpu()
    case = conv_case(seed=2)
    config.set_deterministic("warn")
    check_conv(case, "warn, nothing failing")  # deterministic ones available: no warning (warnings are errors)
    p = plans_of(dev, case)["backward_filter"]
    assert p["deterministic"] and p["determinism"] == "warn"
    det = [n for n, d in zip(p["candidates"], p["candidates_deterministic"]) if d]
    if all(p["candidates_deterministic"]):
        pytest.skip("cuDNN offers no non-deterministic backward-filter algorithm here")
    _core.cuda_force_conv_failures(det)  # every deterministic one fails when run
    with pytest.warns(RuntimeWarning, match="non-deterministic CUDNN_CONVOLUTION_BWD_FILTER_ALGO"):
        check_conv(case, "warn, only non-deterministic ones run")
    p = plans_of(dev, case)["backward_filter"]
    assert not p["deterministic"] and len(p["failed"]) == len(det)
    # the default refuses, naming the deterministic algorithms that failed
    config.set_deterministic(True)
    with pytest.raises(RuntimeError, match="no cuDNN algorithm could run") as e:
        run_conv(case, GPU)
    for name in det:
        assert name in str(e.value)


def test_a_model_whose_convolution_cannot_run_names_the_layer_the_shapes_and_what_cudnn_offered(fresh_plans):
    """A refusal raised inside a model's step names the layer (as the core numbers its nodes), the
    pass and its shapes, and every algorithm tried (a model over 3 input channels: where cuDNN has
    no deterministic algorithm for it, the refusal lists what it offered instead)."""
    dev = real_gpu()
    model = hpcnn.Sequential([hpcnn.layers.InputLayer(input_shape=[12, 12, 3]), hpcnn.layers.Conv2D(8, 3),
                              hpcnn.layers.GlobalAveragePooling2D(), hpcnn.layers.Dense(2)])
    model.compile("sgd", "mse", device=GPU)
    x = np.random.default_rng(0).standard_normal((4, 12, 12, 3)).astype(np.float32)
    t = np.zeros((4, 2), np.float32)
    try:
        model.train_on_batch(x, t)
    except RuntimeError as e:  # cuDNN offers no deterministic algorithm for 3 channels here
        msg = str(e)
        assert msg.startswith("layer 0 (Conv2D): conv2d ") and "of input 4x" in msg and "cuDNN offered" in msg, msg
        return
    every = [n for p in _core.cuda_conv_plans(dev) for n in p["candidates"]]
    _core.cuda_force_conv_failures(every)
    _core.cuda_clear_conv_plans()
    with pytest.raises(RuntimeError) as e:
        model.train_on_batch(x, t)
    msg = str(e.value)
    assert msg.startswith("layer 0 (Conv2D): conv2d forward of input 4x12x12x3, kernel 3x3x3x8"), msg
    assert "no cuDNN algorithm could run" in msg and "forced by a test" in msg


def test_a_plan_made_under_memory_pressure_stays_deterministic_and_is_made_again_when_memory_is_back():
    dev = real_gpu()
    out = run_python(f"""
        import json, numpy as np
        from hpcnn import _core
        ops, dev = _core.ops, {dev}
        _core.cuda_set_tf32(False)
        r = np.random.default_rng(0)
        x = r.standard_normal((32, 64, 64, 64), dtype=np.float32)
        w = (r.standard_normal((3, 3, 64, 64)) * 0.1).astype(np.float32)
        dy = r.standard_normal((32, 64, 64, 64), dtype=np.float32)
        def plans():
            return {{p["pass"]: p for p in _core.cuda_conv_plans(dev)}}
        free = next(d.free_memory for d in _core.cuda_devices(with_free_memory=True) if d.index == dev)
        hold = _core.cuda_hold_memory(free - 320 * 2**20, "gpu:{dev}")  # the workspace limit: ~1/4 of the rest
        ops.conv2d_backward(x, w, None, dy, 1, "same", False, True, device="gpu:{dev}")
        before = plans()
        hold.release()
        ops.conv2d_backward(x, w, None, dy, 1, "same", False, True, device="gpu:{dev}")
        print(json.dumps({{"before": before, "after": plans()}}))
    """)
    before, after = out["before"], out["after"]
    assert set(before) == {"backward_data", "backward_filter"}
    for name, p in before.items():
        assert p["deterministic"], f"{name}: a non-deterministic algorithm was chosen under memory pressure: {p}"
        assert after[name]["deterministic"]
    squeezed = {n: p for n, p in before.items() if p["replan_at"]}
    if not squeezed:
        pytest.skip("under this pressure every preferred algorithm still fitted: nothing was made again")
    for name, p in squeezed.items():
        a = after[name]
        assert a["workspace_limit"] >= p["replan_at"], (name, p, a)
        assert a["algorithm"] != p["algorithm"] and a["algorithm"] == a["candidates"][0], (name, p, a)


# ------------------------------------------------------------------ item 5: a step's copies
def test_a_training_step_copies_its_batch_up_and_its_loss_statistics_back_and_nothing_else():
    real_gpu()
    x, y = data()
    x8 = (x * 255).astype(np.uint8)
    core = compiled(model(), GPU).core
    core.train_step((x8[:32], y[:32]))  # the step's buffers are made: what follows is one step's copies

    def copies(call):
        _core.reset_transfer_stats()
        call()
        s = _core.transfer_stats()
        return s["h2d_count"], s["h2d_bytes"], s["d2h_count"], s["d2h_bytes"]
    batch = x8[32:64].nbytes + 32 * 4  # uint8 images and int32 labels
    # loss sum, correct count, penalty and one sum per other metric, as doubles: the model says how many
    stats = core.memory_report(32)["statistics"]
    assert copies(lambda: core.train_step((x8[32:64], y[32:64]))) == (2, batch, 1, stats)
    assert copies(lambda: core.test_step((x8[32:64], y[32:64]))) == (2, batch, 1, stats)
    # the next batch staged by this step: its uploads are the only other copies
    assert copies(lambda: core.train_step((x8[:32], y[:32]), (x8[32:64], y[32:64]))) == (4, 2 * batch, 1, stats)
    assert copies(lambda: core.train_step(None)) == (0, 0, 1, stats)


# ------------------------------------------------------------------ TF32
def test_tf32_for_convolution_backward_and_cublas_switched_during_the_process(fresh_plans):
    dev = real_gpu()
    if not _core.cuda_tf32_supported(dev):
        pytest.skip("compute capability < 8.0: this GPU has no TF32")
    r = np.random.default_rng(4)
    case = conv_case(seed=4, xs=(8, 32, 32, 64), ks=(3, 3, 64, 64))
    xd = r.standard_normal((256, 4096)).astype(np.float32)
    wd = (r.standard_normal((4096, 256)) * 0.02).astype(np.float32)
    bd = np.zeros(256, np.float32)
    yd = ops.dense_forward(xd, wd, bd, False, device="cpu")
    dyd = r.standard_normal(yd.shape).astype(np.float32)
    conv_cpu = run_conv(case, "cpu")
    dense_cpu = (yd,) + ops.dense_backward(xd, wd, yd, dyd, False, True, device="cpu")

    def dense_gpu():
        return (ops.dense_forward(xd, wd, bd, False, device=GPU),) + \
            ops.dense_backward(xd, wd, yd, dyd, False, True, device=GPU)
    results = {}
    for tf32 in (True, False, True):  # on, off, and on again in one process
        _core.cuda_set_tf32(tf32)
        results.setdefault(tf32, []).append((run_conv(case, GPU), dense_gpu()))
    (conv_on, dense_on), (conv_on2, dense_on2) = results[True]
    ((conv_off, dense_off),) = results[False]
    for got, want in zip(conv_off + dense_off, conv_cpu + dense_cpu):
        close(got, want)  # TF32 off: IEEE float32, as the CPU
    for got, want in zip(conv_on + dense_on, conv_cpu + dense_cpu):
        close(got, want, rtol=2e-2, atol_scale=2e-2)  # TF32: a 10-bit mantissa in the products
    # cuBLAS really used TF32: a 4096-long dot product shows it
    assert rel_err(dense_on[0], yd) > 10 * rel_err(dense_off[0], yd)
    assert rel_err(dense_on[2], dense_cpu[2]) > 10 * rel_err(dense_off[2], dense_cpu[2])
    # switched back on: the TF32 plans and math again, bit for bit the first TF32 results
    for a, b in zip(conv_on + dense_on, conv_on2 + dense_on2):
        assert np.array_equal(a, b)
    plans = [p for p in _core.cuda_conv_plans(dev) if p["input"] == case[0].shape]
    assert {(p["pass"], p["tf32"]) for p in plans} == {(n, t) for n in ("forward", "backward_data", "backward_filter")
                                                       for t in (True, False)}
    for p in plans:
        if not p["tf32"]:
            assert p["math"] == "CUDNN_FMA_MATH", p
    backward_tf32 = [p for p in plans if p["tf32"] and p["pass"] != "forward"]
    if not any(p["math"] != "CUDNN_FMA_MATH" for p in backward_tf32):
        # Skipped only when cuDNN itself declines: it offered no TF32 (non-FMA) candidate for either
        # backward pass under the determinism setting, or each one it offered failed when run.
        failed = {f.split(":")[0] for p in backward_tf32 for f in p["failed"]}
        runnable = [n for p in backward_tf32 for n, m in zip(p["candidates"], p["candidates_math"])
                    if m != "CUDNN_FMA_MATH" and n not in failed]
        assert not runnable, ("a TF32 candidate was offered but an FMA one runs", backward_tf32)
        answer = "; ".join(f"{p['pass']}: offers {p['offers']}, failed {p['failed']}" for p in backward_tf32)
        pytest.skip(f"cuDNN offers no TF32 (non-FMA) backward algorithm that runs for this geometry here: {answer}")


# ------------------------------------------------------------------ big tensors
def test_tensors_past_the_launch_helpers_grid_clamp():
    """blocks_for() clamps the grid at 65535 * 8 blocks of 256 threads = 134,215,680 elements; the
    grid-stride loops must cover the rest."""
    dev = real_gpu()
    n = 65535 * 8 * 256 + 5_000_003
    need = 6 * 4 * n  # sgd_step: params (twice), grads, velocity (twice) on the device, with slack
    info = next(d for d in _core.cuda_devices(with_free_memory=True) if d.index == dev)
    if info.free_memory < need:
        pytest.skip(f"needs {need / 2**30:.1f} GiB of free GPU memory, {info.free_memory / 2**30:.1f} GiB free")
    r = np.random.default_rng(5)
    x = r.standard_normal(n, dtype=np.float32)
    y = ops.relu_forward(x, device=GPU)
    assert np.array_equal(y, np.maximum(x, 0)) and y[-1] == max(x[-1], 0)
    dy = r.standard_normal(n, dtype=np.float32)
    assert np.array_equal(ops.relu_backward(y, dy, device=GPU), np.where(y > 0, dy, 0))
    assert np.array_equal(ops.dropout_forward(x, 0.5, 7, 1, device=GPU), ops.dropout_forward(x, 0.5, 7, 1, device="cpu"))
    del y
    g = r.standard_normal(n, dtype=np.float32)
    v = np.zeros(n, np.float32)
    for got, want in zip(ops.sgd_step(x, g, v, 0.1, 0.9, True, device=GPU), ops.sgd_step(x, g, v, 0.1, 0.9, True)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    del g, v, dy
    x8 = (x > 0).astype(np.uint8) * 200 + 7
    assert np.array_equal(ops.decode_u8(x8[:, None], [0.5], [-1.0], device=GPU),
                          ops.decode_u8(x8[:, None], [0.5], [-1.0], device="cpu"))


# ------------------------------------------------------------------ out of memory
def test_out_of_memory_is_a_memory_error_naming_sizes_and_the_model_works_after_freeing():
    dev = real_gpu()

    def make():
        return hpcnn.Sequential([InputLayer(input_shape=[64, 64, 3]), Conv2D(64, 3, padding="same", activation="relu"),
                                 Flatten(), Dense(5, activation="softmax")], seed=3)
    big = compiled(make(), GPU)  # activations: 1 MiB per image in the first layer
    r = np.random.default_rng(6)
    x = r.random((1024, 64, 64, 3), dtype=np.float32)
    y = r.integers(0, 5, 1024).astype(np.int32)
    w0 = big.get_weights()
    free = next(d.free_memory for d in _core.cuda_devices(with_free_memory=True) if d.index == dev)
    hold = _core.cuda_hold_memory(free - 64 * MiB, GPU)  # most of the device, as another job would
    try:
        with pytest.raises(MemoryError) as e:
            big.fit(x, y, batch_size=1024, epochs=1, verbose=0)
        msg = str(e.value)
        assert f"GPU {dev} out of memory" in msg and "asked for" in msg and "MiB free of" in msg, msg
        assert "batch_size" in msg
    finally:
        hold.release()
    for a, b in zip(big.get_weights(), w0):  # the failed step changed nothing
        assert np.array_equal(a, b)
    # the memory is back: the same model trains, as on the CPU
    cpu = compiled(make(), "cpu")
    cpu.set_weights(w0)
    h_g = big.fit(x[:64], y[:64], batch_size=32, epochs=1, shuffle=False, verbose=0).history
    h_c = cpu.fit(x[:64], y[:64], batch_size=32, epochs=1, shuffle=False, verbose=0).history
    assert h_g["loss"][0] == pytest.approx(h_c["loss"][0], rel=1e-3)


# ------------------------------------------------------------------ NaN loss
def test_a_nan_loss_on_the_gpu_is_refused_as_on_the_cpu_and_the_weights_stay():
    x, y = data(32)
    huge = np.full_like(x, 3e38)  # finite, but the convolution overflows to +-inf, the dense layer to NaN

    def linear():  # no ReLU: it would turn NaN into 0 (as Keras' does)
        return hpcnn.Sequential([InputLayer(input_shape=[12, 12, 3]), Conv2D(4, 3), Flatten(),
                                 Dense(5, activation="softmax")], seed=4)
    cpu, gpu = compiled(linear(), "cpu"), compiled(linear(), GPU)
    gpu.set_weights(cpu.get_weights())
    w0 = cpu.get_weights()
    for m in (cpu, gpu):
        with pytest.raises(ValueError, match="the loss is (NaN|inf).*the weights were not updated"):
            m.core.train_step((huge, y))
        for a, b in zip(m.get_weights(), w0):
            assert np.array_equal(a, b)
    # and training goes on from there
    losses = [m.core.train_step((x, y))[0] for m in (cpu, gpu)]
    assert np.isfinite(losses[1]) and losses[1] == pytest.approx(losses[0], rel=1e-3)


# ------------------------------------------------------------------ dense_backward without dx
def test_dense_backward_without_dx():
    r = np.random.default_rng(7)
    x = r.standard_normal((50, 300)).astype(np.float32)
    w = (r.standard_normal((300, 20)) * 0.1).astype(np.float32)
    b = r.standard_normal(20).astype(np.float32)
    y = ops.dense_forward(x, w, b, True, device="cpu")
    dy = r.standard_normal(y.shape).astype(np.float32)
    _, dw_c, db_c = ops.dense_backward(x, w, y, dy, True, True, device="cpu")
    dx, dw, db = ops.dense_backward(x, w, y, dy, True, False, device=GPU)
    assert dx is None
    close(dw, dw_c, what="dW")
    close(db, db_c, what="db")
    # a model whose first layer with weights is a Dense computes no dx for it: trains as the CPU
    xs, ys = data(64)
    mk = lambda: hpcnn.Sequential([InputLayer(input_shape=[12, 12, 3]), Flatten(),  # noqa: E731
                                   Dense(16, activation="relu"), Dense(5, activation="softmax")], seed=8)
    cpu, gpu = compiled(mk(), "cpu"), compiled(mk(), GPU)
    gpu.set_weights(cpu.get_weights())
    h_c = cpu.fit(xs, ys, batch_size=32, epochs=1, shuffle=False, verbose=0).history
    h_g = gpu.fit(xs, ys, batch_size=32, epochs=1, shuffle=False, verbose=0).history
    assert h_g["loss"][0] == pytest.approx(h_c["loss"][0], rel=1e-3)


# ------------------------------------------------------------------ threads
def test_gpu_calls_from_threads_other_than_the_creating_one():
    x, y = data()
    reference = compiled(model(9), GPU)
    reference.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    want_w, want_p = reference.get_weights(), reference.predict(x[:40])

    # a model made in this thread, trained and read in another; and one made in another thread,
    # trained there while a third model trains here at the same time
    here = compiled(model(9), GPU)
    results, errors = {}, []

    def train(name, m):
        try:
            m = m() if callable(m) else m
            m.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
            results[name] = (m.get_weights(), m.predict(x[:40]))
        except Exception as e:  # noqa: BLE001 -- reported by the assertion below
            errors.append(f"{name}: {e!r}")
    threads = [threading.Thread(target=train, args=("made here", here)),
               threading.Thread(target=train, args=("made there", lambda: compiled(model(9), GPU)))]
    for t in threads:
        t.start()
    concurrent = compiled(model(9), GPU)
    train("concurrent in the main thread", concurrent)
    for t in threads:
        t.join()
    assert not errors, errors
    for name, (w, p) in results.items():
        for a, b in zip(w, want_w):
            assert np.array_equal(a, b), name  # deterministic: the thread changes nothing
        assert np.array_equal(p, want_p), name


@pytest.mark.multi_gpu
def test_a_thread_reading_a_model_on_gpu_1_makes_no_context_on_gpu_0():
    real_gpu()
    n = len(_core.cuda_devices(with_free_memory=False))
    if n < 2:
        pytest.skip(f"only {n} GPU visible: needs 2 (slurm/gpu-selftest-2gpu.sbatch)")
    out = run_python("""
        import json, threading, numpy as np
        import hpcnn
        from hpcnn import _core
        from hpcnn.layers import Conv2D, Dense, Flatten, InputLayer
        assert not _core.cuda_primary_context_active(0), "a context on GPU 0 before anything ran"
        m = hpcnn.Sequential([InputLayer(input_shape=[8, 8, 3]), Conv2D(4, 3, activation="relu"), Flatten(),
                              Dense(3, activation="softmax")], seed=1)
        m.compile("adam", "sparse_categorical_crossentropy", device="gpu:1")
        x = np.random.default_rng(0).random((64, 8, 8, 3), dtype=np.float32)
        y = (np.arange(64) % 3).astype(np.int32)
        m.fit(x, y, batch_size=16, epochs=1, verbose=0)
        main_thread = _core.cuda_primary_context_active(0)
        got = {}
        def read():
            got["w"] = [w.tolist() for w in m.get_weights()]
            got["p"] = m.predict(x[:8]).tolist()
            got["fit"] = m.fit(x, y, batch_size=16, epochs=1, verbose=0).history["loss"][0]
        t = threading.Thread(target=read)
        t.start()
        t.join()
        print(json.dumps({"main_thread": main_thread, "other_thread": _core.cuda_primary_context_active(0),
                          "gpu1": _core.cuda_primary_context_active(1), "read": sorted(got)}))
    """)
    assert out["gpu1"] and out["read"] == ["fit", "p", "w"]
    assert not out["main_thread"], "the main thread's calls made a context on GPU 0"
    assert not out["other_thread"], "a thread using a model on gpu:1 made a context on GPU 0"


# ------------------------------------------------------------------ destroying with work queued
def test_destroying_models_with_work_queued_and_reusing_their_memory_at_once():
    """A training step returns with its backward pass and optimizer step queued. Dropping the model
    right then frees device memory those kernels use: the model (and every device free) waits for
    them first. The next model gets the same memory at once and must compute what the CPU does."""
    x, y = data(256, seed=3)
    cpu = compiled(model(13), "cpu")
    w0 = cpu.get_weights()
    cpu.core.train_step((x, y))
    want = cpu.get_weights()
    for _ in range(4):
        m = compiled(model(13), GPU)
        m.core.train_step((x, y))
        m.core.train_step((x, y), (x[:64], y[:64]))  # and a batch staged, uploading
        del m
        gc.collect()
        fresh = compiled(model(13), GPU)
        fresh.set_weights(w0)
        fresh.core.train_step((x, y))
        for i, (a, c, w) in enumerate(zip(fresh.get_weights(), want, w0)):
            d_cpu = c - w
            np.testing.assert_allclose(a - w, d_cpu, rtol=2e-3, atol=2e-3 * max(float(np.max(np.abs(d_cpu))), 1e-8),
                                       err_msg=f"weight array {i}")
        del fresh


def test_a_new_optimizer_right_after_a_step_frees_the_old_ones_state_safely():
    """compile() with a new optimizer drops the old one's moments while its last update may still be
    queued on the GPU: the memory goes only after that update, and training goes on as on the CPU."""
    x, y = data(128, seed=4)
    out = []
    for device in ("cpu", GPU):
        m = model(17)
        m.compile(hpcnn.optimizers.Adam(learning_rate=1e-3), "sparse_categorical_crossentropy", device=device)
        if out:
            m.set_weights(out[0][0])
        w0 = m.get_weights()
        core = m.core
        core.train_step((x, y))  # Adam's moments are read and written by kernels still queued
        m.compile(hpcnn.optimizers.SGD(learning_rate=0.05), "sparse_categorical_crossentropy", device=device)
        core = m.core
        core.train_step((x, y))
        out.append((w0, m.get_weights()))
    (w0, cpu_w), (_, gpu_w) = out
    for i, (a, c, w) in enumerate(zip(gpu_w, cpu_w, w0)):
        d_cpu = c - w
        np.testing.assert_allclose(a - w, d_cpu, rtol=2e-3, atol=2e-3 * max(float(np.max(np.abs(d_cpu))), 1e-8),
                                   err_msg=f"weight array {i}")
