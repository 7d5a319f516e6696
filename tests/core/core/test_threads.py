"""hpcnn's thread pool: resizing, regions right after a resize, determinism across sizes."""
import threading

import numpy as np

import hpcnn
from hpcnn import _core


def _conv_backward_once():
    rng = np.random.default_rng(0)
    x = rng.random((8, 9, 9, 5), dtype=np.float32)
    w = rng.random((3, 3, 5, 7), dtype=np.float32)
    dy = rng.random((8, 9, 9, 7), dtype=np.float32)
    return _core.ops.conv2d_backward(x, w, None, dy, strides=1, padding="same", relu=False)


def test_regions_right_after_resizing_never_hang():
    """A region started right after set_num_threads used to be missed by a new worker (deadlock).
    Run it in a thread with a timeout so a regression fails instead of hanging the suite."""
    original = hpcnn.get_num_threads()
    done = threading.Event()

    def body():
        for n in (3, 1, 4, 2, 3, 2) * 5:
            hpcnn.set_num_threads(n)
            _conv_backward_once()
        done.set()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(timeout=120)
    hpcnn.set_num_threads(original) if done.is_set() else None
    assert done.is_set(), "parallel region after set_num_threads did not finish (thread-pool deadlock)"


def test_same_thread_count_bitwise_identical():
    original = hpcnn.get_num_threads()
    try:
        for n in (1, 2, 3):
            hpcnn.set_num_threads(n)
            a, b = _conv_backward_once(), _conv_backward_once()
            for u, v in zip(a, b):
                np.testing.assert_array_equal(u, v)
    finally:
        hpcnn.set_num_threads(original)


# ------------------------------------------------------------------ resizing at any moment (issue 12, item 1)
# Each scenario runs in a fresh interpreter with a timeout: a deadlock fails the test instead of
# hanging the suite (and CI's allocation).
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import pytest  # noqa: E402

HANG_TIMEOUT_S = 240


def _run_isolated(script, *args):
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                              capture_output=True, text=True, timeout=HANG_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not finish in {HANG_TIMEOUT_S} s: a thread-pool deadlock")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


_CONTENTION = """
    import sys, threading
    import numpy as np
    import hpcnn
    from hpcnn import _core

    rng = np.random.default_rng(0)
    x = rng.random((8, 9, 9, 5), dtype=np.float32)
    w = rng.random((3, 3, 5, 7), dtype=np.float32)
    dy = rng.random((8, 9, 9, 7), dtype=np.float32)
    logits = rng.standard_normal((64, 10)).astype(np.float32)
    labels = rng.integers(0, 10, 64).astype(np.int32)

    def conv():
        return _core.ops.conv2d_backward(x, w, None, dy, strides=1, padding="same", relu=False)

    def xent():
        return _core.ops.softmax_cross_entropy(logits, labels)

    # References: the sums depend on the thread count only in their last bits.
    hpcnn.set_num_threads(1)
    ref_conv, ref_xent = conv(), xent()
    stop = threading.Event()
    errors = []

    def work(fn, ref):
        try:
            while not stop.is_set():
                for got, want in zip(fn(), ref):
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        except BaseException as e:  # reported by the main thread
            errors.append(e)
            stop.set()

    workers = [threading.Thread(target=work, args=a) for a in [(conv, ref_conv), (conv, ref_conv), (xent, ref_xent)]]
    for t in workers:
        t.start()
    for i in range(int(sys.argv[1])):
        hpcnn.set_num_threads(1 + (i * 7) % 5)  # shrinks and grows while regions start and run
    stop.set()
    for t in workers:
        t.join()
    assert not errors, errors
    print("ok")
"""


def test_set_num_threads_while_other_threads_run_regions():
    """Resizing while other threads start and run parallel regions hung (a region read the size,
    the pool shrank, the region waited for a worker that was gone) or wrote per-thread partials
    past their buffer (the pool grew in between); results stay correct."""
    assert _run_isolated(_CONTENTION, 5000).strip() == "ok"


_WARM_UP = """
    import sys
    import numpy as np
    import hpcnn

    path = sys.argv[1]
    rng = np.random.default_rng(0)
    hpcnn.data.write_hdf5(path, {"x": rng.integers(0, 255, (600, 8, 8, 3), dtype=np.uint8),
                                 "y": rng.integers(0, 10, 600)}, chunk_rows=16)
    for i in range(40):
        ds = hpcnn.data.HDF5Dataset(path, x="x", y="y", batch_size=50, one_hot=10)  # starts loading epoch 0
        hpcnn.set_num_threads(1 + i % 4)  # while that warm-up runs on the pool
        rows = sum(len(xb) for xb, _ in ds.epoch_batches(0))
        assert rows == 600, rows
    print("ok")
"""


def test_set_num_threads_during_an_hdf5_dataset_warm_up(tmp_path):
    assert _run_isolated(_WARM_UP, tmp_path / "d.h5").strip() == "ok"


_FAILED_RESIZE = """
    import resource
    import numpy as np
    import hpcnn
    from hpcnn import _core

    hpcnn.set_num_threads(2)

    def vm_bytes():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    # Too little address space for 63 more thread stacks: the resize fails part-way.
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + (48 << 20), hard))
    try:
        hpcnn.set_num_threads(64)
        raise SystemExit("set_num_threads(64) did not fail under RLIMIT_AS")
    except RuntimeError as e:
        assert "could not start thread" in str(e) and "keeps its 2 threads" in str(e), e
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert hpcnn.get_num_threads() == 2
    rng = np.random.default_rng(0)
    x = rng.random((8, 9, 9, 5), dtype=np.float32)
    w = rng.random((3, 3, 5, 7), dtype=np.float32)
    dy = rng.random((8, 9, 9, 7), dtype=np.float32)
    for n in (2, 3, 1, 4):
        hpcnn.set_num_threads(n)
        _core.ops.conv2d_backward(x, w, None, dy, strides=1, padding="same", relu=False)
    print("ok")
"""


@pytest.mark.skipif("asan" in __import__("os").environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer reserves terabytes of address space: RLIMIT_AS cannot be used to "
                           "make thread creation fail")
def test_a_failed_resize_keeps_the_pool_whole():
    """A resize the OS refuses part-way (no memory for thread stacks) used to leave the pool
    counting threads it did not have: the next region waited for them forever."""
    assert _run_isolated(_FAILED_RESIZE).strip() == "ok"


@pytest.mark.parametrize("bad", [0, -1, 4097, 2.0, 2.5, "4", True, None])
def test_set_num_threads_rejects_bad_counts(bad, threads):
    before = hpcnn.get_num_threads()
    with pytest.raises(ValueError, match=r"set_num_threads: Invalid value for argument `n`"):
        hpcnn.set_num_threads(bad)
    assert hpcnn.get_num_threads() == before
